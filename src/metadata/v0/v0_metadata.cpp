// v0_metadata.cpp -- checking and owning v0 metadata descriptions.
#include "metadata/v0/v0_metadata.h"

#include <cstring>

#include "core/error.h"
#include "metadata/metadata.h"

namespace vattn {

using ll = long long;

namespace {

// Optional int32 array [n] with non-negative entries.
vattn_status_t check_lens(const int32_t *p, int64_t n, bool required, const char *what, const char *field) {
  if (p == nullptr) {
    VATTN_CHECK_ARG(!required || n == 0, "argument '%s': %s is NULL but %lld entries are needed", what, field,
                    (ll)n);
    return VATTN_OK;
  }
  for (int64_t i = 0; i < n; ++i)
    VATTN_CHECK_ARG(p[i] >= 0, "argument '%s': %s[%lld] = %d is negative", what, field, (ll)i, p[i]);
  return VATTN_OK;
}

// Optional start locations [n + 1]: 0-based, non-decreasing.
vattn_status_t check_starts(const int32_t *p, int64_t n, const char *what, const char *field) {
  if (p == nullptr) return VATTN_OK;
  VATTN_CHECK_ARG(p[0] == 0, "argument '%s': %s[0] = %d must be 0", what, field, p[0]);
  for (int64_t i = 1; i <= n; ++i)
    VATTN_CHECK_ARG(p[i] >= p[i - 1], "argument '%s': %s[%lld] = %d < %s[%lld] = %d", what, field, (ll)i, p[i],
                    field, (ll)(i - 1), p[i - 1]);
  return VATTN_OK;
}

vattn_status_t check_table(const int32_t *p, int64_t rows, int64_t cols, const char *what, const char *field,
                           const char *cols_field) {
  VATTN_CHECK_ARG(cols >= 0 && cols <= kMaxArrayElems, "argument '%s': %s = %lld is out of range", what,
                  cols_field, (ll)cols);
  int64_t n = 0;
  VATTN_CHECK_ARG(!__builtin_mul_overflow(rows, cols, &n) && n <= kMaxArrayElems,
                  "argument '%s': %s is too large (%lld x %lld)", what, field, (ll)rows, (ll)cols);
  if (p == nullptr) return VATTN_OK;  // checked by the caller when required
  for (int64_t i = 0; i < n; ++i)
    VATTN_CHECK_ARG(p[i] >= 0, "argument '%s': %s[%lld][%lld] = %d is negative", what, field, (ll)(i / cols),
                    (ll)(i % cols), p[i]);
  return VATTN_OK;
}

}  // namespace

vattn_status_t v0_metadata_check(const vattn_v0_metadata_desc_t &d, const char *what) {
  VATTN_CHECK_ARG(d.num_seqs >= 0 && d.num_seqs < kMaxTokens, "argument '%s': num_seqs = %lld is out of range",
                  what, (ll)d.num_seqs);
  VATTN_CHECK_ARG(d.num_prefills >= 0 && d.num_prefills <= d.num_seqs,
                  "argument '%s': num_prefills = %lld is outside [0, num_seqs = %lld]", what, (ll)d.num_prefills,
                  (ll)d.num_seqs);
  VATTN_CHECK_ARG(d.num_prefill_tokens >= 0 && d.num_prefill_tokens <= kMaxTokens,
                  "argument '%s': num_prefill_tokens = %lld is out of range", what, (ll)d.num_prefill_tokens);
  VATTN_CHECK_ARG(d.num_decode_tokens >= 0 && d.num_decode_tokens <= kMaxTokens,
                  "argument '%s': num_decode_tokens = %lld is out of range", what, (ll)d.num_decode_tokens);
  VATTN_CHECK_ARG(d.slot_mapping_len >= 0 && d.slot_mapping_len <= kMaxArrayElems,
                  "argument '%s': slot_mapping_len = %lld is out of range", what, (ll)d.slot_mapping_len);
  VATTN_CHECK_ARG(d.slot_mapping != nullptr || d.slot_mapping_len == 0, "argument '%s': slot_mapping is NULL",
                  what);
  for (int64_t i = 0; i < d.slot_mapping_len; ++i)
    VATTN_CHECK_ARG(d.slot_mapping[i] >= VATTN_PAD_SLOT_ID,
                    "argument '%s': slot_mapping[%lld] = %lld is neither -1 nor a slot", what, (ll)i,
                    (ll)d.slot_mapping[i]);
  VATTN_TRY(check_lens(d.seq_lens, d.num_seqs, true, what, "seq_lens"));
  VATTN_TRY(check_lens(d.context_lens, d.num_seqs, false, what, "context_lens"));
  VATTN_TRY(check_starts(d.query_start_loc, d.num_seqs, what, "query_start_loc"));
  VATTN_TRY(check_starts(d.seq_start_loc, d.num_seqs, what, "seq_start_loc"));
  if (d.seq_start_loc)
    for (int64_t i = 0; i < d.num_seqs; ++i)
      VATTN_CHECK_ARG(d.seq_start_loc[i + 1] - d.seq_start_loc[i] == d.seq_lens[i],
                      "argument '%s': seq_start_loc[%lld] - seq_start_loc[%lld] != seq_lens[%lld] = %d", what,
                      (ll)(i + 1), (ll)i, (ll)i, d.seq_lens[i]);
  VATTN_TRY(check_table(d.block_tables, d.num_seqs, d.block_tables_cols, what, "block_tables",
                        "block_tables_cols"));
  VATTN_CHECK_ARG(d.block_tables != nullptr || d.num_seqs * d.block_tables_cols == 0,
                  "argument '%s': block_tables is NULL", what);
  VATTN_CHECK_ARG(d.max_query_len >= 0 && d.max_prefill_seq_len >= 0 && d.max_decode_seq_len >= 0 &&
                      d.max_decode_query_len >= 0,
                  "argument '%s': max_query_len / max_prefill_seq_len / max_decode_seq_len / "
                  "max_decode_query_len must be >= 0",
                  what);
  for (int64_t i = 0; i < d.num_seqs; ++i)
    VATTN_CHECK_ARG(d.seq_lens[i] <= (i < d.num_prefills ? d.max_prefill_seq_len : d.max_decode_seq_len),
                    "argument '%s': seq_lens[%lld] = %d exceeds %s = %d", what, (ll)i, d.seq_lens[i],
                    i < d.num_prefills ? "max_prefill_seq_len" : "max_decode_seq_len",
                    i < d.num_prefills ? d.max_prefill_seq_len : d.max_decode_seq_len);
  VATTN_CHECK_ARG(d.use_cuda_graph == 0 || d.use_cuda_graph == 1,
                  "argument '%s': use_cuda_graph = %d must be 0 or 1", what, d.use_cuda_graph);
  // Encoder-decoder part: present iff encoder_seq_lens is given.
  VATTN_TRY(check_lens(d.encoder_seq_lens, d.num_seqs, false, what, "encoder_seq_lens"));
  if (d.encoder_seq_lens) {
    int64_t sum = 0;
    int32_t mx = 0;
    for (int64_t i = 0; i < d.num_seqs; ++i) {
      sum += d.encoder_seq_lens[i];
      mx = d.encoder_seq_lens[i] > mx ? d.encoder_seq_lens[i] : mx;
    }
    VATTN_CHECK_ARG(d.num_encoder_tokens == sum,
                    "argument '%s': num_encoder_tokens = %lld != sum of encoder_seq_lens = %lld", what,
                    (ll)d.num_encoder_tokens, (ll)sum);
    VATTN_CHECK_ARG(d.max_encoder_seq_len >= mx, "argument '%s': max_encoder_seq_len = %d < encoder_seq_lens max %d",
                    what, d.max_encoder_seq_len, mx);
  } else {
    VATTN_CHECK_ARG(d.num_encoder_tokens == 0 && d.cross_block_tables == nullptr,
                    "argument '%s': num_encoder_tokens / cross_block_tables given without encoder_seq_lens", what);
  }
  VATTN_TRY(check_table(d.cross_block_tables, d.num_seqs, d.cross_block_tables_cols, what, "cross_block_tables",
                        "cross_block_tables_cols"));
  return VATTN_OK;
}

void v0_metadata_own(const vattn_v0_metadata_desc_t &d, V0Metadata *o) {
  auto copy32 = [](const int32_t *p, int64_t n, std::vector<int32_t> *v) {
    if (p) v->assign(p, p + n); else v->clear();
    return p ? v->data() : nullptr;
  };
  vattn_v0_metadata_desc_t v = d;
  v.struct_size = sizeof v;
  o->slot_mapping.assign(d.slot_mapping, d.slot_mapping + d.slot_mapping_len);
  v.slot_mapping = o->slot_mapping.data();
  v.seq_lens = copy32(d.seq_lens, d.num_seqs, &o->seq_lens);
  v.context_lens = copy32(d.context_lens, d.num_seqs, &o->context_lens);
  v.query_start_loc = copy32(d.query_start_loc, d.num_seqs + 1, &o->query_start_loc);
  v.seq_start_loc = copy32(d.seq_start_loc, d.num_seqs + 1, &o->seq_start_loc);
  v.block_tables = copy32(d.block_tables, d.num_seqs * d.block_tables_cols, &o->block_tables);
  v.encoder_seq_lens = copy32(d.encoder_seq_lens, d.num_seqs, &o->encoder_seq_lens);
  v.cross_block_tables = copy32(d.cross_block_tables, d.num_seqs * d.cross_block_tables_cols, &o->cross_block_tables);
  o->view = v;
}

vattn_status_t v0_num_prefill_decode_query_kv_tokens(const vattn_v0_metadata_desc_t &d, int32_t attn_type,
                                                     int64_t out3[3]) {
  switch (attn_type) {
    case VATTN_ATTN_ENCODER:
      // Encoder attention runs only in the prefill phase, on its own input.
      VATTN_CHECK_ARG(d.encoder_seq_lens != nullptr,
                      "argument 'md' has no encoder metadata (num_encoder_tokens) for ENCODER attention");
      out3[0] = d.num_encoder_tokens;
      out3[1] = d.num_encoder_tokens;
      out3[2] = 0;
      return VATTN_OK;
    case VATTN_ATTN_ENCODER_DECODER:
      VATTN_CHECK_ARG(d.encoder_seq_lens != nullptr,
                      "argument 'md' has no encoder metadata (num_encoder_tokens) for ENCODER_DECODER attention");
      out3[0] = d.num_prefill_tokens;
      out3[1] = d.num_encoder_tokens;  // keys are the encoder's
      out3[2] = d.num_decode_tokens;
      return VATTN_OK;
    case VATTN_ATTN_DECODER:
    case VATTN_ATTN_ENCODER_ONLY:
      out3[0] = d.num_prefill_tokens;
      out3[1] = d.num_prefill_tokens;
      out3[2] = d.num_decode_tokens;
      return VATTN_OK;
    default:
      return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'attn_type' = %d is unknown", attn_type);
  }
}

}  // namespace vattn
