// v0_api.cpp -- header section 9: v0 builder, v0 metadata, CUDA-graph state.
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/options.h"
#include "metadata/metadata.h"
#include "metadata/v0/graph_state.h"
#include "metadata/v0/v0_builder.h"
#include "metadata/v0/v0_metadata.h"

using ll = long long;

namespace {

constexpr size_t kSeqMin = VATTN_STRUCT_MIN_SIZE(vattn_v0_seq_t, block_table_len);
constexpr size_t kDescMin = VATTN_STRUCT_MIN_SIZE(vattn_v0_metadata_desc_t, cross_block_tables_cols);
constexpr size_t kOptsMin = VATTN_STRUCT_MIN_SIZE(vattn_v0_builder_options_t, max_blocks_per_seq);

vattn_status_t new_handle(vattn::V0Metadata &&m, vattn_v0_metadata_t **out) {
  auto h = std::make_unique<vattn_v0_metadata>();
  h->md = std::move(m);  // vector buffers move with their addresses
  *out = h.release();
  return VATTN_OK;
}

}  // namespace

extern "C" {

VATTN_API void vattn_v0_builder_options_init(vattn_v0_builder_options_t *o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->block_size = 16;
}

VATTN_API vattn_status_t vattn_v0_builder_create(vattn_v0_builder_t **out,
                                                 const vattn_v0_builder_options_t *opts) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    vattn_v0_builder_options_t o;
    VATTN_TRY(vattn::read_options(opts, &o, vattn_v0_builder_options_init, kOptsMin, "opts"));
    VATTN_CHECK_ARG(o.block_size > 0, "argument 'opts': block_size = %d must be positive", o.block_size);
    VATTN_CHECK_ARG(o.sliding_window >= 0, "argument 'opts': sliding_window = %d is negative (0 = none)",
                    o.sliding_window);
    VATTN_CHECK_ARG(o.chunked_prefill_enabled == 0 || o.chunked_prefill_enabled == 1,
                    "argument 'opts': chunked_prefill_enabled = %d must be 0 or 1", o.chunked_prefill_enabled);
    VATTN_CHECK_ARG(o.num_cache_blocks >= 0 && o.num_cache_blocks <= vattn::kMaxArrayElems,
                    "argument 'opts': num_cache_blocks = %lld is out of range", (ll)o.num_cache_blocks);
    VATTN_CHECK_ARG(o.max_blocks_per_seq >= 0, "argument 'opts': max_blocks_per_seq = %d is negative",
                    o.max_blocks_per_seq);
    *out = new vattn_v0_builder(o);
    return VATTN_OK;
  });
}

VATTN_API void vattn_v0_builder_destroy(vattn_v0_builder_t *b) {
  vattn::guard_void([&] { delete b; });
}

VATTN_API void vattn_v0_seq_init(vattn_v0_seq_t *s) {
  if (!s) return;
  std::memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
}

VATTN_API vattn_status_t vattn_v0_builder_add_seq(vattn_v0_builder_t *b, const vattn_v0_seq_t *seq) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(b);
    VATTN_CHECK_NOT_NULL(seq);
    vattn_v0_seq_t s;
    VATTN_TRY(vattn::read_options(seq, &s, vattn_v0_seq_init, kSeqMin, "seq"));
    return b->impl.add_seq(s);
  });
}

VATTN_API vattn_status_t vattn_v0_builder_build(vattn_v0_builder_t *b, const int32_t *seq_lens,
                                                const int32_t *query_lens, int64_t num_seqs,
                                                int64_t cuda_graph_pad_size, int64_t batch_size,
                                                vattn_v0_metadata_t **out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(b);
    vattn::V0Metadata m;
    VATTN_TRY(b->impl.build(seq_lens, query_lens, num_seqs, cuda_graph_pad_size, batch_size, &m));
    return new_handle(std::move(m), out);
  });
}

VATTN_API void vattn_v0_metadata_desc_init(vattn_v0_metadata_desc_t *d) {
  if (!d) return;
  std::memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
}

VATTN_API vattn_status_t vattn_v0_metadata_create(vattn_v0_metadata_t **out,
                                                  const vattn_v0_metadata_desc_t *desc) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(desc);
    vattn_v0_metadata_desc_t d;
    VATTN_TRY(vattn::read_options(desc, &d, vattn_v0_metadata_desc_init, kDescMin, "desc"));
    VATTN_TRY(vattn::v0_metadata_check(d, "desc"));
    vattn::V0Metadata m;
    vattn::v0_metadata_own(d, &m);
    return new_handle(std::move(m), out);
  });
}

VATTN_API vattn_status_t vattn_v0_metadata_describe(const vattn_v0_metadata_t *md,
                                                    vattn_v0_metadata_desc_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(md);
    VATTN_TRY(vattn::check_out_struct(out, kDescMin, "out"));
    vattn::write_out(out, md->md.view);
    return VATTN_OK;
  });
}

VATTN_API void vattn_v0_metadata_destroy(vattn_v0_metadata_t *md) {
  vattn::guard_void([&] { delete md; });
}

VATTN_API vattn_status_t vattn_v0_get_num_prefill_decode_query_kv_tokens(const vattn_v0_metadata_t *md,
                                                                         int32_t attn_type, int64_t *out3) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(md);
    VATTN_CHECK_NOT_NULL(out3);
    int64_t r[3];
    VATTN_TRY(vattn::v0_num_prefill_decode_query_kv_tokens(md->md.view, attn_type, r));
    std::memcpy(out3, r, sizeof r);
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_v0_get_seq_len_block_table_args(
    const vattn_v0_metadata_t *md, int32_t is_prompt, int32_t attn_type, const int32_t **seq_lens_out,
    int64_t *num_seqs_out, int32_t *max_seq_len_out, const int32_t **block_table_out,
    int64_t *block_table_cols_out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(md);
    const vattn_v0_metadata_desc_t &d = md->md.view;
    const int32_t *sl = nullptr, *bt = nullptr;
    int32_t mx = 0;
    int64_t cols = 0;
    switch (attn_type) {
      case VATTN_ATTN_DECODER:  // self-attention: prompt or decode maximum
        sl = d.seq_lens;
        mx = is_prompt ? d.max_prefill_seq_len : d.max_decode_seq_len;
        bt = d.block_tables;
        cols = d.block_tables_cols;
        break;
      case VATTN_ATTN_ENCODER_DECODER:  // keys are the encoder's, via the cross tables
        VATTN_CHECK_ARG(d.encoder_seq_lens != nullptr,
                        "argument 'md' has no encoder_seq_lens for ENCODER_DECODER attention");
        sl = d.encoder_seq_lens;
        mx = d.max_encoder_seq_len;
        bt = d.cross_block_tables;
        cols = d.cross_block_tables_cols;
        break;
      case VATTN_ATTN_ENCODER:  // no cache, no block table
        VATTN_CHECK_ARG(d.encoder_seq_lens != nullptr, "argument 'md' has no encoder_seq_lens for ENCODER attention");
        sl = d.encoder_seq_lens;
        mx = d.max_encoder_seq_len;
        break;
      default:
        return vattn::fail(VATTN_ERR_INVALID_ARGUMENT,
                           "argument 'attn_type' = %d: invalid attention type (DECODER, ENCODER or "
                           "ENCODER_DECODER; ENCODER_ONLY has no sequence-length / block-table arguments)",
                           attn_type);
    }
    if (seq_lens_out) *seq_lens_out = sl;
    if (num_seqs_out) *num_seqs_out = d.num_seqs;
    if (max_seq_len_out) *max_seq_len_out = mx;
    if (block_table_out) *block_table_out = bt;
    if (block_table_cols_out) *block_table_cols_out = cols;
    return VATTN_OK;
  });
}

// ---- CUDA-graph state -----------------------------------------------------------

VATTN_API vattn_status_t vattn_graph_state_create(vattn_graph_state_t **out, int64_t max_batch_size,
                                                  int32_t max_blocks_per_seq, int32_t max_seq_len_to_capture) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_ARG(max_batch_size > 0 && max_batch_size <= vattn::kMaxTokens,
                    "argument 'max_batch_size' = %lld is out of range", (ll)max_batch_size);
    VATTN_CHECK_ARG(max_blocks_per_seq > 0, "argument 'max_blocks_per_seq' = %d must be positive",
                    max_blocks_per_seq);
    VATTN_CHECK_ARG(max_batch_size * (int64_t)max_blocks_per_seq <= vattn::kMaxArrayElems,
                    "argument 'max_blocks_per_seq' = %d: the block table is too large", max_blocks_per_seq);
    VATTN_CHECK_ARG(max_seq_len_to_capture > 0, "argument 'max_seq_len_to_capture' = %d must be positive",
                    max_seq_len_to_capture);
    *out = new vattn_graph_state(max_batch_size, max_blocks_per_seq, max_seq_len_to_capture);
    return VATTN_OK;
  });
}

VATTN_API void vattn_graph_state_destroy(vattn_graph_state_t *st) {
  vattn::guard_void([&] { delete st; });
}

VATTN_API vattn_status_t vattn_graph_state_metadata_for_batch(const vattn_graph_state_t *st, int64_t batch_size,
                                                              vattn_v0_metadata_t **out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(st);
    vattn::V0Metadata m;
    VATTN_TRY(st->impl.metadata_for_batch(batch_size, &m));
    return new_handle(std::move(m), out);
  });
}

VATTN_API vattn_status_t vattn_graph_state_prepare_replay(vattn_graph_state_t *st,
                                                          const vattn_v0_metadata_t *md) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(st);
    VATTN_CHECK_NOT_NULL(md);
    return st->impl.prepare_replay(md->md.view);
  });
}

}  // extern "C"
