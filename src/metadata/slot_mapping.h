// slot_mapping.h -- token position -> KV cache slot (header section 6).
//
// v1: slot = block_table[r][pos / block_size] * block_size + pos % block_size,
//     generalised to context parallelism (a "virtual block" of
//     block_size * cp_world tokens striped over the ranks in runs of
//     cp_interleave tokens; tokens owned by another rank get -1).
// v0: the per-sequence rule of vLLM's v0 builders (sliding-window padding,
//     profile runs).
#pragma once

#include <cstdint>
#include <vector>

#include "vattn.h"

namespace vattn {

// Validates `a` (message names 'args' fields) and writes out[0, len): real
// tokens first, then -1.  Nothing is written on failure.
vattn_status_t slot_mapping_v1(const vattn_slot_mapping_args_t &a, int64_t *out, int64_t len);

// vLLM compute_slot_mapping_start_idx.
int64_t slot_mapping_v0_start_idx(bool is_prompt, int64_t query_len, int64_t sliding_window);

// vLLM compute_slot_mapping for one sequence, appended to `out`.  Checks
// that every needed block index is inside the table (block_table_len) and
// every id in [0, num_cache_blocks) (when > 0); `out` untouched on failure.
vattn_status_t slot_mapping_v0_append(bool is_profile_run, int64_t seq_len, int64_t context_len,
                                      int64_t start_idx, int32_t block_size,
                                      const int32_t *block_table, int64_t block_table_len,
                                      int64_t num_cache_blocks, std::vector<int64_t> *out);

// Number of entries slot_mapping_v0_append adds.
int64_t slot_mapping_v0_count(bool is_profile_run, int64_t seq_len, int64_t context_len,
                              int64_t start_idx);

}  // namespace vattn
