// fast_prefill.cpp -- KV-sharing "fast prefill" metadata (semantics doc
// section 9): only the tokens whose logits are needed (logits_indices) run
// through the layers that share another layer's cache.
#include <algorithm>

#include "core/error.h"
#include "metadata/batch.h"

namespace vattn {

using ll = long long;

vattn_status_t kv_sharing_fast_prefill(const Metadata &m, Metadata *out) {
  if (m.max_query_len == 1) {  // pure decode: every token is needed
    *out = m;
    return VATTN_OK;
  }
  VATTN_CHECK_ARG(m.has_logits_indices,
                  "argument 'md' has no logits_indices_padded (needed when max_query_len = %d > 1)",
                  m.max_query_len);
  const auto &q = m.query_start_loc;
  std::vector<int32_t> count(static_cast<size_t>(m.num_reqs), 0);
  std::vector<int64_t> selected_slots;
  for (int64_t i = 0; i < m.num_logits_indices; ++i) {
    int32_t t = m.logits_indices_padded[i];
    // The selected tokens form the new batch in this order: they must be
    // grouped by request like any batch.
    VATTN_CHECK_ARG(i == 0 || t >= m.logits_indices_padded[i - 1],
                    "argument 'md': logits_indices_padded[%lld] = %d < logits_indices_padded[%lld] = %d "
                    "(indices must be non-decreasing)",
                    (ll)i, t, (ll)(i - 1), m.logits_indices_padded[i - 1]);
    // Owner = number of request ends (qsl[1:]) <= t: right bucketize, so
    // zero-length requests never own a token.
    int64_t r = (int64_t)(std::upper_bound(q.begin() + 1, q.end(), t) - (q.begin() + 1));
    ++count[r];
    if (t < (int64_t)m.slot_mapping.size()) selected_slots.push_back(m.slot_mapping[t]);
  }
  Metadata v = m;
  v.query_start_loc.assign(1, 0);
  int32_t max_q = 0;
  for (int64_t r = 0; r < m.num_reqs; ++r) {
    v.query_start_loc.push_back(v.query_start_loc.back() + count[r]);
    max_q = std::max(max_q, count[r]);
  }
  v.num_actual_tokens = v.query_start_loc.back();
  v.max_query_len = max_q;
  v.num_computed_tokens.clear();  // recomputed as seq_lens - new query lens
  v.causal = true;
  // vLLM keeps the full slot mapping (sharing layers never write the
  // cache); here it is cut to the selected tokens' slots so that its length
  // stays consistent with num_actual_tokens.
  v.slot_mapping = std::move(selected_slots);
  v.has_logits_indices = false;
  v.logits_indices_padded.clear();
  v.num_logits_indices = 0;
  VATTN_TRY(check_metadata(v, "md"));
  *out = std::move(v);
  return VATTN_OK;
}

}  // namespace vattn
