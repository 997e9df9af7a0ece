// slot_mapping_tensors.cpp -- CPU side of vattn_slot_mapping_compute_tensors:
// the host v1 slot mapping (src/metadata/slot_mapping.cpp) over tensor data.
#include "backends/cpu/slot_mapping_tensors.h"

#include <vector>

#include "metadata/slot_mapping.h"

namespace vattn {

vattn_status_t cpu_slot_mapping_tensors(const int32_t *block_table, int64_t rows,
                                        int64_t bt_stride, int64_t bt_cols,
                                        const int32_t *query_start_loc, int64_t num_reqs,
                                        const int64_t *positions, int64_t num_tokens,
                                        int32_t block_size, int64_t num_cache_blocks,
                                        int64_t *slot_mapping, int64_t slot_len) {
  vattn_slot_mapping_args_t a;
  vattn_slot_mapping_args_init(&a);
  a.block_table = block_table;
  a.num_rows = rows;
  a.row_stride = bt_stride;
  // Valid entries per row = the tensor's columns (the row stride may be larger).
  std::vector<int32_t> valid;
  if (bt_cols != bt_stride) {
    valid.assign(static_cast<size_t>(rows), static_cast<int32_t>(bt_cols));
    a.num_blocks_per_row = valid.data();
  }
  a.query_start_loc = query_start_loc;
  a.num_reqs = num_reqs;
  a.positions = positions;
  a.num_tokens = num_tokens;
  a.block_size = block_size;
  a.num_cache_blocks = num_cache_blocks;
  return slot_mapping_v1(a, slot_mapping, slot_len);
}

}  // namespace vattn
