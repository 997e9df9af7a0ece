// batch_split.cpp -- decode/prefill(/extend) split of a reordered batch and
// the era-B 3-way reorder (semantics doc sections 4-6).
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "metadata/batch.h"

namespace vattn {

using ll = long long;

vattn_status_t split_decodes_and_prefills(const Metadata &m, int32_t threshold,
                                          bool require_uniform, vattn_decode_prefill_split_t *out) {
  VATTN_CHECK_ARG(threshold >= 0, "argument 'decode_threshold' = %d is negative", threshold);
  const int64_t n = m.num_reqs, tokens = m.num_actual_tokens;
  auto all_decode = [&] {
    // Era B counts num_actual_tokens (possibly padded) as decode tokens.
    *out = vattn_decode_prefill_split_t{n, 0, tokens, 0};
    return VATTN_OK;
  };
  if (m.max_query_len <= threshold && (!require_uniform || threshold <= 1)) return all_decode();
  if (n == 0) return all_decode();
  const int32_t q0 = m.query_len(0);
  if (q0 > threshold) {
    *out = vattn_decode_prefill_split_t{0, n, 0, tokens};
    return VATTN_OK;
  }
  int64_t first = -1;
  if (require_uniform) {
    bool uniform = true;
    for (int64_t r = 0; r < n && uniform; ++r) uniform = m.query_len(r) == q0 || m.query_len(r) == 0;
    if (uniform) {
      // Padding requests of a full-CUDA-graph batch have length 0; the
      // token count must then be the padded uniform size.
      VATTN_CHECK_ARG(n * q0 == tokens,
                      "argument 'md': tokens not padded correctly: num_reqs %lld * query_len %d != "
                      "num_actual_tokens %lld",
                      (ll)n, q0, (ll)tokens);
      return all_decode();
    }
    for (int64_t r = 0; r < n && first < 0; ++r)
      if (m.query_len(r) != q0) first = r;
  } else {
    for (int64_t r = 0; r < n && first < 0; ++r)
      if (m.query_len(r) > threshold) first = r;
  }
  if (first < 0) return all_decode();
  for (int64_t r = 0; r < first; ++r)
    VATTN_CHECK_ARG(m.query_len(r) <= threshold,
                    "argument 'md': request %lld (query_len %d > decode_threshold %d) precedes the "
                    "first prefill: reorder the batch first",
                    (ll)r, m.query_len(r), threshold);
  const int64_t dec_tokens = m.query_start_loc[first];
  *out = vattn_decode_prefill_split_t{first, n - first, dec_tokens, tokens - dec_tokens};
  return VATTN_OK;
}

vattn_status_t split_decodes_prefills_and_extends(const Metadata &m, int32_t threshold,
                                                  vattn_decode_extend_prefill_split_t *out) {
  VATTN_CHECK_ARG(threshold >= 0, "argument 'decode_threshold' = %d is negative", threshold);
  const int64_t n = m.num_reqs, tokens = m.num_actual_tokens;
  int64_t first_pe = -1, first_prefill = -1;
  if (m.max_query_len > threshold) {
    for (int64_t r = 0; r < n; ++r) {
      bool pe = m.query_len(r) > threshold;
      if (pe && first_pe < 0) first_pe = r;
      if (pe && m.seq_lens[r] == m.query_len(r) && first_prefill < 0) first_prefill = r;
    }
  }
  if (first_pe < 0) {  // everything decodes (max_query_len may be an upper bound)
    *out = vattn_decode_extend_prefill_split_t{n, 0, 0, tokens, 0, 0};
    return VATTN_OK;
  }
  const int64_t dec = first_pe, dec_tokens = m.query_start_loc[first_pe];
  if (first_prefill < 0) {  // no pure prefill: every non-decode is an extend
    *out = vattn_decode_extend_prefill_split_t{dec, n - dec, 0, dec_tokens, tokens - dec_tokens, 0};
    return VATTN_OK;
  }
  const int64_t pre_tokens = tokens - m.query_start_loc[first_prefill];
  *out = vattn_decode_extend_prefill_split_t{dec,
                                             first_prefill - dec,
                                             n - first_prefill,
                                             dec_tokens,
                                             tokens - dec_tokens - pre_tokens,
                                             pre_tokens};
  return VATTN_OK;
}

vattn_status_t reorder_batch(const int32_t *num_scheduled, const int32_t *num_computed,
                             int64_t num_reqs, int32_t threshold, ReorderResult *out) {
  VATTN_CHECK_ARG(num_reqs >= 0 && num_reqs < kMaxTokens, "argument 'num_reqs' = %lld is out of range",
                  (ll)num_reqs);
  VATTN_CHECK_ARG(num_scheduled != nullptr || num_reqs == 0, "argument 'num_scheduled_tokens' is NULL");
  VATTN_CHECK_ARG(num_computed != nullptr || num_reqs == 0, "argument 'num_computed_tokens' is NULL");
  VATTN_CHECK_ARG(threshold >= 0, "argument 'decode_threshold' = %d is negative", threshold);
  std::vector<int> region(static_cast<size_t>(num_reqs));
  int64_t count[3] = {0, 0, 0};
  for (int64_t i = 0; i < num_reqs; ++i) {
    VATTN_CHECK_ARG(num_scheduled[i] >= 0, "argument 'num_scheduled_tokens': [%lld] = %d is negative",
                    (ll)i, num_scheduled[i]);
    VATTN_CHECK_ARG(num_computed[i] >= 0, "argument 'num_computed_tokens': [%lld] = %d is negative",
                    (ll)i, num_computed[i]);
    // Era B: no context -> prefill (even a 1-token prompt); short with
    // context -> decode; long with context -> extend.
    int reg = num_computed[i] == 0 ? 2 : (num_scheduled[i] <= threshold ? 0 : 1);
    region[i] = reg;
    ++count[reg];
  }
  auto target = [&](int64_t i) { return i < count[0] ? 0 : (i < count[0] + count[1] ? 1 : 2); };
  // Slots holding a request of the wrong region, in index order (= where
  // things go), and the same slots sorted stably by the region of what they
  // hold (= what goes there).
  std::vector<int64_t> dst, src;
  for (int64_t i = 0; i < num_reqs; ++i)
    if (region[i] != target(i)) dst.push_back(i);
  src = dst;
  std::stable_sort(src.begin(), src.end(), [&](int64_t a, int64_t b) { return region[a] < region[b]; });
  std::vector<int64_t> dest_of(static_cast<size_t>(num_reqs), -1);
  for (size_t k = 0; k < src.size(); ++k) dest_of[src[k]] = dst[k];
  ReorderResult res;
  res.order.resize(static_cast<size_t>(num_reqs));
  for (int64_t i = 0; i < num_reqs; ++i) res.order[i] = i;
  // Follow each permutation cycle: swap the request at `s` into its slot,
  // the displaced request lands at `s` and is sent on, until the cycle
  // closes.  A finished slot is marked as its own destination.
  for (int64_t s : src) {
    int64_t d = dest_of[s];
    while (d != s) {
      res.swaps.push_back(s);
      res.swaps.push_back(d);
      std::swap(res.order[s], res.order[d]);
      int64_t next = dest_of[d];
      dest_of[d] = d;
      d = next;
    }
  }
  res.modified = !dst.empty();
  *out = std::move(res);
  return VATTN_OK;
}

}  // namespace vattn
