// slot_mapping_api.cpp -- header section 6: slot mappings (v1 and v0).
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/options.h"
#include "metadata/metadata.h"
#include "metadata/slot_mapping.h"

using ll = long long;

extern "C" {

VATTN_API void vattn_slot_mapping_args_init(vattn_slot_mapping_args_t *a) {
  if (!a) return;
  std::memset(a, 0, sizeof *a);
  a->struct_size = sizeof *a;
  a->block_size = 16;
  a->cp_world_size = 1;
  a->cp_rank = 0;
  a->cp_interleave = 1;
}

VATTN_API vattn_status_t vattn_slot_mapping_compute(const vattn_slot_mapping_args_t *args,
                                                    int64_t *slot_mapping,
                                                    int64_t slot_mapping_len) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(args);
    vattn_slot_mapping_args_t a;
    VATTN_TRY(vattn::read_options(args, &a, vattn_slot_mapping_args_init,
                                  VATTN_STRUCT_MIN_SIZE(vattn_slot_mapping_args_t, cp_interleave),
                                  "args"));
    VATTN_CHECK_ARG(slot_mapping_len >= 0, "argument 'slot_mapping_len' = %lld is negative",
                    (ll)slot_mapping_len);
    VATTN_CHECK_ARG(slot_mapping != nullptr || slot_mapping_len == 0,
                    "argument 'slot_mapping' is NULL");
    return vattn::slot_mapping_v1(a, slot_mapping, slot_mapping_len);
  });
}

VATTN_API vattn_status_t vattn_slot_mapping_v0_start_idx(int32_t is_prompt, int64_t query_len,
                                                         int64_t context_len,
                                                         int64_t sliding_window, int64_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    VATTN_CHECK_ARG(query_len >= 0, "argument 'query_len' = %lld is negative", (ll)query_len);
    VATTN_CHECK_ARG(context_len >= 0, "argument 'context_len' = %lld is negative", (ll)context_len);
    VATTN_CHECK_ARG(sliding_window >= 0, "argument 'sliding_window' = %lld is negative (0 = none)",
                    (ll)sliding_window);
    *out = vattn::slot_mapping_v0_start_idx(is_prompt != 0, query_len, sliding_window);
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_slot_mapping_v0_compute(
    int32_t is_profile_run, int64_t seq_len, int64_t context_len, int64_t start_idx,
    int32_t block_size, const int32_t *block_table, int64_t block_table_len,
    int64_t num_cache_blocks, int64_t *out, int64_t out_capacity, int64_t *out_len) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out_len);
    VATTN_CHECK_ARG(seq_len >= 0 && seq_len <= vattn::kMaxTokens,
                    "argument 'seq_len' = %lld is out of range", (ll)seq_len);
    VATTN_CHECK_ARG(context_len >= 0 && context_len <= seq_len,
                    "argument 'context_len' = %lld is outside [0, seq_len = %lld]", (ll)context_len,
                    (ll)seq_len);
    VATTN_CHECK_ARG(start_idx >= 0 && start_idx <= vattn::kMaxTokens,
                    "argument 'start_idx' = %lld is out of range", (ll)start_idx);
    VATTN_CHECK_ARG(block_size > 0, "argument 'block_size' = %d must be positive", block_size);
    VATTN_CHECK_ARG(block_table_len >= 0, "argument 'block_table_len' = %lld is negative",
                    (ll)block_table_len);
    VATTN_CHECK_ARG(num_cache_blocks >= 0, "argument 'num_cache_blocks' = %lld is negative",
                    (ll)num_cache_blocks);
    VATTN_CHECK_ARG(out_capacity >= 0, "argument 'out_capacity' = %lld is negative", (ll)out_capacity);
    VATTN_CHECK_ARG(out != nullptr || out_capacity == 0, "argument 'out' is NULL");
    const int64_t used = *out_len;
    VATTN_CHECK_ARG(used >= 0 && used <= out_capacity,
                    "argument 'out_len' = %lld is outside [0, out_capacity = %lld]", (ll)used,
                    (ll)out_capacity);
    bool profile = is_profile_run != 0;
    int64_t need = vattn::slot_mapping_v0_count(profile, seq_len, context_len, start_idx);
    if (need > out_capacity - used)
      return vattn::fail(VATTN_ERR_BUFFER_TOO_SMALL,
                         "argument 'out_capacity' = %lld is too small: %lld entries used, %lld more needed",
                         (ll)out_capacity, (ll)used, (ll)need);
    std::vector<int64_t> tmp;
    tmp.reserve(static_cast<size_t>(need));
    VATTN_TRY(vattn::slot_mapping_v0_append(profile, seq_len, context_len, start_idx, block_size,
                                            block_table, block_table_len, num_cache_blocks, &tmp));
    if (!tmp.empty()) std::memcpy(out + used, tmp.data(), tmp.size() * sizeof(int64_t));
    *out_len = used + (int64_t)tmp.size();
    return VATTN_OK;
  });
}

}  // extern "C"
