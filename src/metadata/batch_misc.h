// batch_misc.h -- small batch utilities (semantics doc sections 10-11):
// cascade decision, prefill chunking, DCP local lengths, global layer
// hyper-parameters.  Pure functions over validated inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "vattn.h"

namespace vattn {

// use_cascade_attention (FlashAttention builder's heuristic).
bool use_cascade_attention(int64_t common_prefix_len, const int32_t *query_lens, int64_t num_reqs,
                           int32_t num_q_heads, int32_t num_kv_heads, bool use_alibi,
                           bool use_sliding_window, bool use_local_attention, int32_t num_sms,
                           int32_t dcp_world_size);

// Greedy chunks [start, end) (not yet offset) of consecutive requests.
std::vector<int64_t> split_prefill_chunks(const int32_t *seq_lens, int64_t num_reqs,
                                          int64_t workspace_size);

int32_t dcp_local_seq_len(int32_t seq_len, int32_t dcp_size, int32_t rank, int32_t interleave);

}  // namespace vattn
