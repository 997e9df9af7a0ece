// ubatch.cpp -- micro-batch slices and the metadata of one slice
// (semantics doc section 8, era B: a request may straddle two ubatches).
#include <algorithm>

#include "core/error.h"
#include "metadata/batch.h"

namespace vattn {

using ll = long long;

vattn_status_t make_ubatch_slices(const int32_t *num_scheduled, int64_t num_reqs,
                                  int64_t num_tokens_padded, int64_t num_reqs_padded,
                                  int32_t num_ubatches, int64_t split_point,
                                  std::vector<vattn_ubatch_slice_t> *out,
                                  std::vector<vattn_ubatch_slice_t> *out_padded) {
  VATTN_CHECK_ARG(num_reqs >= 0 && num_reqs < kMaxTokens, "argument 'num_reqs' = %lld is out of range",
                  (ll)num_reqs);
  VATTN_CHECK_ARG(num_scheduled != nullptr || num_reqs == 0, "argument 'num_scheduled_tokens' is NULL");
  VATTN_CHECK_ARG(num_ubatches >= 1, "argument 'num_ubatches' = %d must be >= 1", num_ubatches);
  std::vector<int64_t> cu(static_cast<size_t>(num_reqs + 1), 0);
  for (int64_t r = 0; r < num_reqs; ++r) {
    VATTN_CHECK_ARG(num_scheduled[r] >= 0, "argument 'num_scheduled_tokens': [%lld] = %d is negative",
                    (ll)r, num_scheduled[r]);
    cu[r + 1] = cu[r] + num_scheduled[r];
  }
  const int64_t total = cu[num_reqs];
  VATTN_CHECK_ARG(total <= kMaxTokens, "argument 'num_scheduled_tokens': the total %lld is too large",
                  (ll)total);
  VATTN_CHECK_ARG(num_tokens_padded >= total && num_tokens_padded <= kMaxTokens,
                  "argument 'num_tokens_padded' = %lld is outside [total scheduled tokens %lld, 2^31)",
                  (ll)num_tokens_padded, (ll)total);
  VATTN_CHECK_ARG(num_reqs_padded >= num_reqs && num_reqs_padded <= kMaxTokens,
                  "argument 'num_reqs_padded' = %lld is smaller than num_reqs = %lld", (ll)num_reqs_padded,
                  (ll)num_reqs);
  if (split_point <= 0) split_point = num_tokens_padded / num_ubatches;
  VATTN_CHECK_ARG(split_point <= num_tokens_padded &&
                      split_point * (int64_t)(num_ubatches - 1) <= num_tokens_padded,
                  "argument 'split_point' = %lld: %d ubatches do not fit in num_tokens_padded = %lld",
                  (ll)split_point, num_ubatches, (ll)num_tokens_padded);
  std::vector<vattn_ubatch_slice_t> slices;
  int64_t start = 0;
  for (int32_t i = 1; i <= num_ubatches; ++i) {
    int64_t end = i < num_ubatches ? split_point * i : total;
    // Request range: the request holding token `start` (searchsorted right
    // - 1) up to the first request starting at or after `end` (searchsorted
    // left): a request cut by a split point belongs to both ubatches.
    int64_t rs = (int64_t)(std::upper_bound(cu.begin(), cu.end(), start) - cu.begin()) - 1;
    int64_t re = (int64_t)(std::lower_bound(cu.begin(), cu.end(), end) - cu.begin());
    slices.push_back(vattn_ubatch_slice_t{rs, re, start, end});
    start = end;
  }
  std::vector<vattn_ubatch_slice_t> padded = slices;
  padded.back().request_stop = num_reqs_padded;
  padded.back().token_stop = num_tokens_padded;
  *out = std::move(slices);
  *out_padded = std::move(padded);
  return VATTN_OK;
}

vattn_status_t metadata_with_slice(const vattn_ubatch_slice_t &s, const Metadata &m, const char *what,
                                   Metadata *out) {
  const int64_t rs = s.request_start, re = s.request_stop, ts = s.token_start, te = s.token_stop;
  VATTN_CHECK_ARG(rs >= 0 && rs < re && re <= m.num_reqs,
                  "argument '%s': request range [%lld, %lld) is empty or outside md's %lld requests", what,
                  (ll)rs, (ll)re, (ll)m.num_reqs);
  VATTN_CHECK_ARG(ts >= 0 && ts < te && te <= m.num_actual_tokens,
                  "argument '%s': token range [%lld, %lld) is empty or outside md's %lld tokens", what,
                  (ll)ts, (ll)te, (ll)m.num_actual_tokens);
  const auto &q = m.query_start_loc;
  const int64_t real = m.num_real_tokens();
  if (ts < real)
    VATTN_CHECK_ARG(q[rs] <= ts && ts < q[rs + 1],
                    "argument '%s': token_start %lld is outside of first request %lld's tokens [%d, %d)",
                    what, (ll)ts, (ll)rs, q[rs], q[rs + 1]);
  VATTN_CHECK_ARG(q[re - 1] <= te && (re == m.num_reqs || te <= q[re]),
                  "argument '%s': token_stop %lld does not end inside last request %lld's tokens [%d, %d]",
                  what, (ll)te, (ll)(re - 1), q[re - 1], q[re]);

  Metadata v;
  v.num_reqs = re - rs;
  v.num_actual_tokens = te - ts;
  // qsl[rs : re + 1] - qsl[rs], then remove the tokens of the first request
  // that an earlier ubatch ran and those of the last request that the next
  // one runs.
  // (A slice starting in the padding past the real tokens skips at most the
  // whole first request.)
  const int64_t skipped_front = std::min<int64_t>(std::max<int64_t>(0, ts - q[rs]), q[rs + 1] - q[rs]);
  const int64_t skipped_back = std::max<int64_t>(0, q[re] - te);
  v.query_start_loc.resize(static_cast<size_t>(v.num_reqs + 1));
  for (int64_t i = 0; i <= v.num_reqs; ++i)
    v.query_start_loc[i] = q[rs + i] - q[rs] - (i > 0 ? (int32_t)skipped_front : 0);
  v.query_start_loc[v.num_reqs] -= (int32_t)skipped_back;
  v.seq_lens.assign(m.seq_lens.begin() + rs, m.seq_lens.begin() + re);
  // The cut-off tail of the last request is not in the cache yet.
  v.seq_lens.back() -= (int32_t)skipped_back;
  int32_t max_q = 0;
  for (int64_t i = 0; i < v.num_reqs; ++i) max_q = std::max(max_q, v.query_len(i));
  v.max_query_len = max_q == 0 ? m.max_query_len : max_q;
  v.max_seq_len = m.max_seq_len;  // era C: the parent's bound is kept
  v.block_table_rows = v.num_reqs;
  v.block_table_cols = m.block_table_cols;
  v.block_table.assign(m.block_table.begin() + rs * m.block_table_cols,
                       m.block_table.begin() + re * m.block_table_cols);
  const int64_t sm_len = (int64_t)m.slot_mapping.size();
  if (ts < sm_len)
    v.slot_mapping.assign(m.slot_mapping.begin() + ts, m.slot_mapping.begin() + std::min(te, sm_len));
  v.causal = m.causal;
  v.block_size = m.block_size;
  v.num_cache_blocks = m.num_cache_blocks;
  if (m.has_encoder_seq_lens) {
    v.has_encoder_seq_lens = true;
    v.encoder_seq_lens.assign(m.encoder_seq_lens.begin() + rs, m.encoder_seq_lens.begin() + re);
  }
  if (m.has_dcp_local_seq_lens) {
    v.has_dcp_local_seq_lens = true;
    v.dcp_local_seq_lens.assign(m.dcp_local_seq_lens.begin() + rs, m.dcp_local_seq_lens.begin() + re);
    v.dcp_local_seq_lens.back() = std::min(v.dcp_local_seq_lens.back(), v.seq_lens.back());
  }
  VATTN_TRY(check_metadata(v, what));
  *out = std::move(v);
  return VATTN_OK;
}

}  // namespace vattn
