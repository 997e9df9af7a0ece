// slot_mapping_tensors.h -- the CPU side of vattn_slot_mapping_compute_tensors
// (header section 6): host tensors, validated by the API layer.
#pragma once

#include <cstdint>

#include "vattn.h"

namespace vattn {

// block_table [rows, bt_stride] (bt_cols valid entries per row), query_start_loc
// [num_reqs + 1], positions [num_tokens] -> slot_mapping [slot_len] with the
// host rule of slot_mapping_v1 (errors for bad positions / ids; nothing
// written then).
vattn_status_t cpu_slot_mapping_tensors(const int32_t *block_table, int64_t rows,
                                        int64_t bt_stride, int64_t bt_cols,
                                        const int32_t *query_start_loc, int64_t num_reqs,
                                        const int64_t *positions, int64_t num_tokens,
                                        int32_t block_size, int64_t num_cache_blocks,
                                        int64_t *slot_mapping, int64_t slot_len);

}  // namespace vattn
