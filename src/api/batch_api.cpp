// batch_api.cpp -- header section 8: batch utilities over metadata handles.
// Logic lives in src/metadata/{batch_split,local_attention,ubatch,
// fast_prefill,batch_misc}.cpp; these shims check pointers and sizes and
// write outputs only on success.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "metadata/batch.h"
#include "metadata/batch_misc.h"
#include "metadata/metadata.h"

using ll = long long;

namespace {

vattn_status_t new_handle(vattn::Metadata &&m, vattn_metadata_t **out) {
  auto h = std::make_unique<vattn_metadata>();
  h->md = std::move(m);
  *out = h.release();
  return VATTN_OK;
}

}  // namespace

extern "C" {

VATTN_API vattn_status_t vattn_split_decodes_and_prefills(const vattn_metadata_t *md,
                                                          int32_t decode_threshold,
                                                          int32_t require_uniform,
                                                          vattn_decode_prefill_split_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(md);
    VATTN_CHECK_NOT_NULL(out);
    vattn_decode_prefill_split_t r{};
    VATTN_TRY(vattn::split_decodes_and_prefills(md->md, decode_threshold, require_uniform != 0, &r));
    *out = r;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_split_decodes_prefills_and_extends(
    const vattn_metadata_t *md, int32_t decode_threshold, vattn_decode_extend_prefill_split_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(md);
    VATTN_CHECK_NOT_NULL(out);
    vattn_decode_extend_prefill_split_t r{};
    VATTN_TRY(vattn::split_decodes_prefills_and_extends(md->md, decode_threshold, &r));
    *out = r;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_reorder_batch_to_split_decodes_and_prefills(
    const int32_t *num_scheduled_tokens, const int32_t *num_computed_tokens, int64_t num_reqs,
    int32_t decode_threshold, int64_t *swaps, int64_t *num_swaps, int64_t *order,
    int32_t *modified) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    vattn::ReorderResult r;
    VATTN_TRY(vattn::reorder_batch(num_scheduled_tokens, num_computed_tokens, num_reqs,
                                   decode_threshold, &r));
    // At most num_reqs - 1 swaps (one per element of each cycle but the
    // last): the 2 * num_reqs capacity always suffices.
    if (swaps && !r.swaps.empty()) std::copy(r.swaps.begin(), r.swaps.end(), swaps);
    if (num_swaps) *num_swaps = (int64_t)r.swaps.size() / 2;
    if (order && !r.order.empty()) std::copy(r.order.begin(), r.order.end(), order);
    if (modified) *modified = r.modified ? 1 : 0;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_make_local_attention_virtual_batches(int32_t attn_chunk_size,
                                                                   const vattn_metadata_t *md,
                                                                   int32_t block_size,
                                                                   vattn_metadata_t **out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(md);
    vattn::Metadata v;
    VATTN_TRY(vattn::make_local_attention_virtual_batches(attn_chunk_size, md->md, block_size, &v));
    return new_handle(std::move(v), out);
  });
}

VATTN_API vattn_status_t vattn_local_attention_update_block_table(const vattn_metadata_t *local_md,
                                                                  const int32_t *block_table,
                                                                  int64_t num_rows, int64_t num_cols,
                                                                  int32_t *out, int64_t out_len) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(local_md);
    const vattn::Metadata &m = local_md->md;
    VATTN_CHECK_ARG((int64_t)m.local_src_row.size() == m.num_reqs &&
                        (int64_t)m.local_src_col.size() == m.num_reqs * m.block_table_cols,
                    "argument 'local_md' was not made by vattn_make_local_attention_virtual_batches");
    VATTN_CHECK_ARG(num_rows >= 0 && num_cols >= 0 && num_rows <= vattn::kMaxArrayElems &&
                        num_cols <= vattn::kMaxArrayElems,
                    "argument 'num_rows' / 'num_cols' = %lld / %lld is out of range", (ll)num_rows,
                    (ll)num_cols);
    const int64_t need = m.num_reqs * m.block_table_cols;
    VATTN_CHECK_ARG(out_len >= need, "argument 'out_len' = %lld < %lld entries (num_reqs x block_table_cols)",
                    (ll)out_len, (ll)need);
    VATTN_CHECK_ARG(out != nullptr || need == 0, "argument 'out' is NULL");
    int32_t max_row = -1, max_col = -1;
    for (auto r : m.local_src_row) max_row = std::max(max_row, r);
    for (auto c : m.local_src_col) max_col = std::max(max_col, c);
    VATTN_CHECK_ARG(num_rows > max_row, "argument 'num_rows' = %lld but row %d is gathered", (ll)num_rows,
                    max_row);
    VATTN_CHECK_ARG(num_cols > max_col, "argument 'num_cols' = %lld but column %d is gathered",
                    (ll)num_cols, max_col);
    VATTN_CHECK_ARG(block_table != nullptr || need == 0, "argument 'block_table' is NULL");
    for (int64_t v = 0; v < m.num_reqs; ++v)
      for (int64_t p = 0; p < m.block_table_cols; ++p)
        out[v * m.block_table_cols + p] =
            block_table[(int64_t)m.local_src_row[v] * num_cols + m.local_src_col[v * m.block_table_cols + p]];
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_slice_query_start_locs(const int32_t *query_start_loc, int64_t len,
                                                      int64_t request_start, int64_t request_stop,
                                                      int32_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(query_start_loc);
    VATTN_CHECK_NOT_NULL(out);
    VATTN_CHECK_ARG(len >= 1, "argument 'len' = %lld must be >= 1", (ll)len);
    VATTN_CHECK_ARG(request_start >= 0 && request_start <= request_stop,
                    "argument 'request_start' = %lld is outside [0, request_stop = %lld]",
                    (ll)request_start, (ll)request_stop);
    VATTN_CHECK_ARG(request_stop < len, "argument 'request_stop' = %lld must be < len = %lld",
                    (ll)request_stop, (ll)len);
    const int32_t base = query_start_loc[request_start];
    for (int64_t i = request_start; i <= request_stop; ++i) out[i - request_start] = query_start_loc[i] - base;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_ubatch_slices_create(const int32_t *num_scheduled_tokens,
                                                    int64_t num_reqs, int64_t num_tokens_padded,
                                                    int64_t num_reqs_padded, int32_t num_ubatches,
                                                    int64_t split_point, vattn_ubatch_slice_t *out,
                                                    vattn_ubatch_slice_t *out_padded) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    std::vector<vattn_ubatch_slice_t> s, p;
    VATTN_TRY(vattn::make_ubatch_slices(num_scheduled_tokens, num_reqs, num_tokens_padded,
                                        num_reqs_padded, num_ubatches, split_point, &s, &p));
    if (out) std::copy(s.begin(), s.end(), out);
    if (out_padded) std::copy(p.begin(), p.end(), out_padded);
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_split_attn_metadata(const vattn_ubatch_slice_t *slices,
                                                   size_t num_slices, const vattn_metadata_t *md,
                                                   vattn_metadata_t **out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    VATTN_CHECK_NOT_NULL(md);
    VATTN_CHECK_ARG(slices != nullptr || num_slices == 0, "argument 'slices' is NULL");
    VATTN_CHECK_ARG(num_slices <= (size_t)vattn::kMaxTokens, "argument 'num_slices' = %zu is too large",
                    num_slices);
    // Build every piece first; hand out handles only when all succeeded.
    std::vector<std::unique_ptr<vattn_metadata>> pieces;
    for (size_t i = 0; i < num_slices; ++i) {
      auto h = std::make_unique<vattn_metadata>();
      std::string what = vattn::format("slices[%zu]", i);
      VATTN_TRY(vattn::metadata_with_slice(slices[i], md->md, what.c_str(), &h->md));
      pieces.push_back(std::move(h));
    }
    for (size_t i = 0; i < num_slices; ++i) out[i] = pieces[i].release();
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_make_kv_sharing_fast_prefill_metadata(const vattn_metadata_t *md,
                                                                     vattn_metadata_t **out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(md);
    vattn::Metadata v;
    VATTN_TRY(vattn::kv_sharing_fast_prefill(md->md, &v));
    return new_handle(std::move(v), out);
  });
}

VATTN_API vattn_status_t vattn_use_cascade_attention(
    int64_t common_prefix_len, const int32_t *query_lens, int64_t num_reqs, int32_t num_q_heads,
    int32_t num_kv_heads, int32_t use_alibi, int32_t use_sliding_window,
    int32_t use_local_attention, int32_t num_sms, int32_t dcp_world_size, int32_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    VATTN_CHECK_ARG(common_prefix_len >= 0, "argument 'common_prefix_len' = %lld is negative",
                    (ll)common_prefix_len);
    VATTN_CHECK_ARG(num_reqs >= 0 && num_reqs < vattn::kMaxTokens,
                    "argument 'num_reqs' = %lld is out of range", (ll)num_reqs);
    VATTN_CHECK_ARG(query_lens != nullptr || num_reqs == 0, "argument 'query_lens' is NULL");
    VATTN_CHECK_ARG(num_q_heads > 0, "argument 'num_q_heads' = %d must be positive", num_q_heads);
    VATTN_CHECK_ARG(num_kv_heads > 0 && num_q_heads % num_kv_heads == 0,
                    "argument 'num_kv_heads' = %d must be positive and divide num_q_heads = %d",
                    num_kv_heads, num_q_heads);
    VATTN_CHECK_ARG(num_sms > 0, "argument 'num_sms' = %d must be positive", num_sms);
    VATTN_CHECK_ARG(dcp_world_size >= 1, "argument 'dcp_world_size' = %d must be >= 1", dcp_world_size);
    for (int64_t r = 0; r < num_reqs; ++r)
      VATTN_CHECK_ARG(query_lens[r] >= 0, "argument 'query_lens': [%lld] = %d is negative", (ll)r,
                      query_lens[r]);
    *out = vattn::use_cascade_attention(common_prefix_len, query_lens, num_reqs, num_q_heads,
                                        num_kv_heads, use_alibi != 0, use_sliding_window != 0,
                                        use_local_attention != 0, num_sms, dcp_world_size)
               ? 1
               : 0;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_split_prefill_chunks(const int32_t *seq_lens, int64_t num_reqs,
                                                    int64_t workspace_size,
                                                    int64_t request_offset, int64_t *out,
                                                    int64_t out_capacity_pairs,
                                                    int64_t *num_chunks) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(num_chunks);
    VATTN_CHECK_ARG(num_reqs >= 0 && num_reqs < vattn::kMaxTokens,
                    "argument 'num_reqs' = %lld is out of range", (ll)num_reqs);
    VATTN_CHECK_ARG(seq_lens != nullptr || num_reqs == 0, "argument 'seq_lens' is NULL");
    VATTN_CHECK_ARG(workspace_size >= 0, "argument 'workspace_size' = %lld is negative",
                    (ll)workspace_size);
    VATTN_CHECK_ARG(request_offset >= 0 && request_offset <= INT64_MAX - num_reqs,
                    "argument 'request_offset' = %lld is out of range", (ll)request_offset);
    VATTN_CHECK_ARG(out_capacity_pairs >= 0, "argument 'out_capacity_pairs' = %lld is negative",
                    (ll)out_capacity_pairs);
    VATTN_CHECK_ARG(out != nullptr || out_capacity_pairs == 0, "argument 'out' is NULL");
    for (int64_t r = 0; r < num_reqs; ++r)
      VATTN_CHECK_ARG(seq_lens[r] >= 0 && seq_lens[r] <= workspace_size,
                      "argument 'seq_lens': [%lld] = %d is negative or exceeds workspace_size = %lld",
                      (ll)r, seq_lens[r], (ll)workspace_size);
    std::vector<int64_t> b = vattn::split_prefill_chunks(seq_lens, num_reqs, workspace_size);
    const int64_t n = (int64_t)b.size() / 2;
    if (n > out_capacity_pairs)
      return vattn::fail(VATTN_ERR_BUFFER_TOO_SMALL,
                         "argument 'out_capacity_pairs' = %lld is too small: %lld chunks",
                         (ll)out_capacity_pairs, (ll)n);
    for (size_t i = 0; i < b.size(); ++i) out[i] = b[i] + request_offset;
    *num_chunks = n;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_get_dcp_local_seq_lens(const int32_t *seq_lens, int64_t num_reqs,
                                                      int32_t dcp_size, int32_t dcp_rank,
                                                      int32_t interleave, int32_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_ARG(num_reqs >= 0 && num_reqs < vattn::kMaxTokens,
                    "argument 'num_reqs' = %lld is out of range", (ll)num_reqs);
    VATTN_CHECK_ARG(seq_lens != nullptr || num_reqs == 0, "argument 'seq_lens' is NULL");
    VATTN_CHECK_ARG(out != nullptr || num_reqs == 0, "argument 'out' is NULL");
    VATTN_CHECK_ARG(dcp_size >= 1, "argument 'dcp_size' = %d must be >= 1", dcp_size);
    VATTN_CHECK_ARG(dcp_rank < dcp_size, "argument 'dcp_rank' = %d must be < dcp_size = %d (or < 0 for all ranks)",
                    dcp_rank, dcp_size);
    VATTN_CHECK_ARG(interleave >= 1, "argument 'interleave' = %d must be >= 1", interleave);
    for (int64_t r = 0; r < num_reqs; ++r)
      VATTN_CHECK_ARG(seq_lens[r] >= 0, "argument 'seq_lens': [%lld] = %d is negative", (ll)r, seq_lens[r]);
    for (int64_t r = 0; r < num_reqs; ++r) {
      if (dcp_rank >= 0) {
        out[r] = vattn::dcp_local_seq_len(seq_lens[r], dcp_size, dcp_rank, interleave);
      } else {
        for (int32_t k = 0; k < dcp_size; ++k)
          out[r * dcp_size + k] = vattn::dcp_local_seq_len(seq_lens[r], dcp_size, k, interleave);
      }
    }
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_infer_global_hyperparameters(const vattn_per_layer_params_t *layers,
                                                            size_t num_layers,
                                                            vattn_global_params_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    VATTN_CHECK_ARG(num_layers > 0, "argument 'num_layers' = 0: no attention layers");
    VATTN_CHECK_NOT_NULL(layers);
    const vattn_per_layer_params_t &p0 = layers[0];
    bool same_window = true, same_all = true;
    for (size_t i = 1; i < num_layers; ++i) {
      const vattn_per_layer_params_t &p = layers[i];
      if (p.window_left != p0.window_left) same_window = false;
      if (p.window_left != p0.window_left || p.logits_soft_cap != p0.logits_soft_cap ||
          p.sm_scale != p0.sm_scale || p.has_sinks != p0.has_sinks)
        same_all = false;
    }
    vattn_global_params_t g;
    std::memset(&g, 0, sizeof g);
    g.params = p0;
    g.has_same_window_lefts = same_window ? 1 : 0;
    g.has_same_all_params = same_all ? 1 : 0;
    *out = g;
    return VATTN_OK;
  });
}

}  // extern "C"
