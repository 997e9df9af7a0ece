// metadata_check.cpp -- the invariants of CommonAttentionMetadata
// (metadata.h), reading a caller's description, describing a handle, and
// unpadded().  Every check names the field and, for arrays, the index.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/int_scan.h"
#include "metadata/metadata.h"

namespace vattn {
namespace {

// "argument '<what>': <message>"
#define MD_FAIL(...) return fail(VATTN_ERR_INVALID_ARGUMENT, __VA_ARGS__)
#define MD_CHECK(cond, ...) \
  do {                      \
    if (!(cond)) MD_FAIL(__VA_ARGS__); \
  } while (0)

using ll = long long;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks request r needs in its block-table row: its KV length (the encoder
// length for cross-attention) over the block size.
int64_t needed_blocks(const Metadata &m, int64_t r) {
  int64_t len = m.has_encoder_seq_lens ? m.encoder_seq_lens[r] : m.seq_lens[r];
  return ceil_div(len, m.block_size);
}

vattn_status_t check_query_start_loc(const Metadata &m, const char *what) {
  const auto &q = m.query_start_loc;
  MD_CHECK(q[0] == 0, "argument '%s': query_start_loc[0] = %d must be 0", what, q[0]);
  for (int64_t i = 1; i <= m.num_reqs; ++i)
    MD_CHECK(q[i] >= q[i - 1], "argument '%s': query_start_loc[%lld] = %d < query_start_loc[%lld] = %d",
             what, (ll)i, q[i], (ll)(i - 1), q[i - 1]);
  MD_CHECK(q[m.num_reqs] <= m.num_actual_tokens,
           "argument '%s': query_start_loc[%lld] = %d exceeds num_actual_tokens = %lld", what,
           (ll)m.num_reqs, q[m.num_reqs], (ll)m.num_actual_tokens);
  return VATTN_OK;
}

vattn_status_t check_per_request(Metadata &m, const char *what) {
  for (int64_t r = 0; r < m.num_reqs; ++r) {
    int32_t ql = m.query_len(r);
    MD_CHECK(m.seq_lens[r] >= ql, "argument '%s': seq_lens[%lld] = %d < query_len %d (query_start_loc[%lld] - query_start_loc[%lld])",
             what, (ll)r, m.seq_lens[r], ql, (ll)(r + 1), (ll)r);
  }
  if (m.num_computed_tokens.empty()) {
    m.num_computed_tokens.resize(static_cast<size_t>(m.num_reqs));
    for (int64_t r = 0; r < m.num_reqs; ++r) m.num_computed_tokens[r] = m.seq_lens[r] - m.query_len(r);
  } else {
    MD_CHECK((int64_t)m.num_computed_tokens.size() == m.num_reqs,
             "argument '%s': num_computed_tokens has %zu entries, expected num_reqs = %lld", what,
             m.num_computed_tokens.size(), (ll)m.num_reqs);
    for (int64_t r = 0; r < m.num_reqs; ++r)
      MD_CHECK(m.num_computed_tokens[r] == m.seq_lens[r] - m.query_len(r),
               "argument '%s': num_computed_tokens[%lld] = %d != seq_lens[%lld] - query_len = %d", what,
               (ll)r, m.num_computed_tokens[r], (ll)r, m.seq_lens[r] - m.query_len(r));
  }
  if (m.has_encoder_seq_lens) {
    MD_CHECK((int64_t)m.encoder_seq_lens.size() == m.num_reqs,
             "argument '%s': encoder_seq_lens has %zu entries, expected num_reqs = %lld", what,
             m.encoder_seq_lens.size(), (ll)m.num_reqs);
    for (int64_t r = 0; r < m.num_reqs; ++r)
      MD_CHECK(m.encoder_seq_lens[r] >= 0, "argument '%s': encoder_seq_lens[%lld] = %d is negative",
               what, (ll)r, m.encoder_seq_lens[r]);
  }
  if (m.has_dcp_local_seq_lens) {
    MD_CHECK((int64_t)m.dcp_local_seq_lens.size() == m.num_reqs,
             "argument '%s': dcp_local_seq_lens has %zu entries, expected num_reqs = %lld", what,
             m.dcp_local_seq_lens.size(), (ll)m.num_reqs);
    for (int64_t r = 0; r < m.num_reqs; ++r)
      MD_CHECK(m.dcp_local_seq_lens[r] >= 0 && m.dcp_local_seq_lens[r] <= m.seq_lens[r],
               "argument '%s': dcp_local_seq_lens[%lld] = %d is outside [0, seq_lens[%lld] = %d]", what,
               (ll)r, m.dcp_local_seq_lens[r], (ll)r, m.seq_lens[r]);
  }
  return VATTN_OK;
}

// The per-entry loop: finds and reports the first bad entry in row-major
// order.  Only run when the vectorised scan below found a problem.
vattn_status_t report_block_table(const Metadata &m, const char *what) {
  for (int64_t r = 0; r < m.num_reqs; ++r) {
    // Entries a request uses: its needed blocks when the block size is
    // known, else the whole row (padding entries are 0, a valid id).
    int64_t n = m.block_table_cols;
    if (m.block_size > 0) {
      n = needed_blocks(m, r);
      MD_CHECK(n <= m.block_table_cols,
               "argument '%s': block_table_cols = %lld < %lld blocks needed by request %lld "
               "(%s %d, block_size %d)",
               what, (ll)m.block_table_cols, (ll)n, (ll)r,
               m.has_encoder_seq_lens ? "encoder_seq_lens" : "seq_len",
               m.has_encoder_seq_lens ? m.encoder_seq_lens[r] : m.seq_lens[r], m.block_size);
    }
    if (m.num_cache_blocks <= 0) continue;
    const int32_t *row = m.block_row(r);
    for (int64_t c = 0; c < n; ++c)
      MD_CHECK(row[c] >= 0 && row[c] < m.num_cache_blocks,
               "argument '%s': block_table[%lld][%lld] = %d is outside the cache [0, %lld)", what,
               (ll)r, (ll)c, row[c], (ll)m.num_cache_blocks);
  }
  return fail(VATTN_ERR_INTERNAL, "argument '%s': block table scan and report disagree", what);
}

// Every entry a request uses is checked once, with one vectorised
// min/max pass over exactly those entries; m.scan records the result.
// copy_from != NULL: m.block_table holds uninitialised storage of the
// right size, filled here from copy_from in the same pass.
vattn_status_t check_block_table(Metadata &m, const char *what, const int32_t *copy_from) {
  MD_CHECK(m.block_table_rows >= m.num_reqs,
           "argument '%s': block_table_rows = %lld < num_reqs = %lld", what, (ll)m.block_table_rows,
           (ll)m.num_reqs);
  MD_CHECK((int64_t)m.block_table.size() == m.block_table_rows * m.block_table_cols,
           "argument '%s': block_table has %zu entries, expected %lld x %lld", what,
           m.block_table.size(), (ll)m.block_table_rows, (ll)m.block_table_cols);
  int32_t *dst = copy_from ? m.block_table.mut().data() : nullptr;  // unique: no copy
  auto copy_all = [&] {
    if (copy_from && !m.block_table.empty())
      std::memcpy(dst, copy_from, sizeof(int32_t) * m.block_table.size());
  };
  std::vector<int64_t> need(static_cast<size_t>(m.num_reqs), m.block_table_cols);
  bool bad = false;
  if (m.block_size > 0) {
    // needed_blocks() in 32-bit unsigned arithmetic (lengths are in
    // [0, INT32_MAX] here, checked by check_per_request), a shift for a
    // power-of-two block size: no 64-bit division per request.
    const int32_t *len = m.has_encoder_seq_lens ? m.encoder_seq_lens.data() : m.seq_lens.data();
    const uint32_t bs = static_cast<uint32_t>(m.block_size);
    const bool pow2 = (bs & (bs - 1)) == 0;
    const int shift = __builtin_ctz(bs);
    for (int64_t r = 0; r < m.num_reqs; ++r) {
      const uint32_t l = static_cast<uint32_t>(len[r]) + (bs - 1);
      need[r] = pow2 ? (l >> shift) : (l / bs);
      bad |= need[r] > m.block_table_cols;
    }
  }
  if (bad) {
    copy_all();
    return report_block_table(m, what);
  }
  MinMax32 mm;
  if (copy_from) {
    mm = copy_minmax_i32_rows(dst, copy_from, m.num_reqs, m.block_table_cols, need.data());
    const int64_t done = m.num_reqs * m.block_table_cols;  // rows past num_reqs: plain copy
    if ((int64_t)m.block_table.size() > done)
      std::memcpy(dst + done, copy_from + done, sizeof(int32_t) * (m.block_table.size() - done));
  } else {
    mm = minmax_i32_rows(m.block_table.data(), m.num_reqs, m.block_table_cols, need.data());
  }
  const bool any = mm.min <= mm.max;  // at least one entry is needed
  if (m.num_cache_blocks > 0 && any && (mm.min < 0 || mm.max >= m.num_cache_blocks))
    return report_block_table(m, what);
  // The forward pass needs ceil(seq_lens[r] / block size) entries: what
  // was scanned unless the lengths were encoder lengths.
  m.scan.blocks_valid = (!any || mm.min >= 0) && (m.block_size == 0 || !m.has_encoder_seq_lens);
  m.scan.block_size = m.block_size;
  m.scan.max_block_id = any ? mm.max : -1;
  return VATTN_OK;
}

vattn_status_t check_slot_mapping(Metadata &m, const char *what) {
  int64_t len = (int64_t)m.slot_mapping.size();
  int64_t real = m.num_real_tokens();
  const int64_t *sm = m.slot_mapping.data();
  if (!m.has_encoder_seq_lens) {
    // Self-attention: one slot per real token, optional -1 padding up to
    // num_actual_tokens.
    MD_CHECK(len >= real && len <= m.num_actual_tokens,
             "argument '%s': slot_mapping_len = %lld must be between the real token count %lld "
             "(query_start_loc[num_reqs]) and num_actual_tokens = %lld",
             what, (ll)len, (ll)real, (ll)m.num_actual_tokens);
    const MinMax64 pad = minmax_i64(sm + real, len - real);
    if (len > real && (pad.min != VATTN_PAD_SLOT_ID || pad.max != VATTN_PAD_SLOT_ID)) {
      for (int64_t i = real; i < len; ++i)
        MD_CHECK(sm[i] == VATTN_PAD_SLOT_ID,
                 "argument '%s': slot_mapping[%lld] = %lld is a padding entry (past the %lld real "
                 "tokens) and must be -1",
                 what, (ll)i, (ll)sm[i], (ll)real);
    }
  }
  int64_t num_slots = 0;  // 0 = unknown
  // num_cache_blocks (<= 2^40) * block_size (< 2^31) can pass INT64_MAX:
  // saturate (no slot can reach the bound then).
  if (m.block_size > 0 && m.num_cache_blocks > 0)
    num_slots = m.num_cache_blocks > INT64_MAX / m.block_size ? INT64_MAX : m.num_cache_blocks * m.block_size;
  const MinMax64 all = minmax_i64(sm, len);
  if (len > 0 && (all.min < VATTN_PAD_SLOT_ID || (num_slots != 0 && all.max >= num_slots))) {
    for (int64_t i = 0; i < len; ++i) {
      int64_t s = sm[i];
      MD_CHECK(s >= VATTN_PAD_SLOT_ID && (num_slots == 0 || s < num_slots),
               "argument '%s': slot_mapping[%lld] = %lld is neither -1 nor a slot in [0, %lld)",
               what, (ll)i, (ll)s, (ll)(num_slots ? num_slots : INT64_MAX));
    }
  }
  m.scan.slots_valid = true;
  m.scan.max_slot = len > 0 ? all.max : -1;
  return VATTN_OK;
}

vattn_status_t check_maxima(Metadata &m, const char *what) {
  int32_t mq = 0, ms = 0;
  int64_t argq = -1, args = -1;
  for (int64_t r = 0; r < m.num_reqs; ++r) {
    if (m.query_len(r) > mq) { mq = m.query_len(r); argq = r; }
    if (m.seq_lens[r] > ms) { ms = m.seq_lens[r]; args = r; }
  }
  MD_CHECK(m.max_query_len >= -1, "argument '%s': max_query_len = %d must be -1 (computed) or >= 0",
           what, m.max_query_len);
  MD_CHECK(m.max_seq_len >= -1, "argument '%s': max_seq_len = %d must be -1 (computed) or >= 0",
           what, m.max_seq_len);
  m.scan.max_seq_len = ms;
  if (m.max_query_len == -1) m.max_query_len = mq;
  if (m.max_seq_len == -1) m.max_seq_len = ms;
  MD_CHECK(m.max_query_len >= mq, "argument '%s': max_query_len = %d < query_len %d of request %lld",
           what, m.max_query_len, mq, (ll)argq);
  MD_CHECK(m.max_seq_len >= ms, "argument '%s': max_seq_len = %d < seq_lens[%lld] = %d", what,
           m.max_seq_len, (ll)args, ms);
  return VATTN_OK;
}

vattn_status_t check_logits(const Metadata &m, const char *what) {
  if (!m.has_logits_indices) {
    MD_CHECK(m.num_logits_indices == 0,
             "argument '%s': num_logits_indices = %lld but logits_indices_padded is NULL", what,
             (ll)m.num_logits_indices);
    return VATTN_OK;
  }
  int64_t len = (int64_t)m.logits_indices_padded.size();
  MD_CHECK(m.num_logits_indices >= 0 && m.num_logits_indices <= len,
           "argument '%s': num_logits_indices = %lld is outside [0, logits_indices_len = %lld]", what,
           (ll)m.num_logits_indices, (ll)len);
  int64_t real = m.num_real_tokens();
  for (int64_t i = 0; i < m.num_logits_indices; ++i)
    MD_CHECK(m.logits_indices_padded[i] >= 0 && m.logits_indices_padded[i] < real,
             "argument '%s': logits_indices_padded[%lld] = %d is outside the %lld real tokens", what,
             (ll)i, m.logits_indices_padded[i], (ll)real);
  return VATTN_OK;
}

}  // namespace

namespace {

// check_metadata; block_table_src: see check_block_table.
vattn_status_t check_metadata_impl(Metadata &m, const char *what, const int32_t *block_table_src) {
  m.scan = Metadata::Scan{};  // measured again below
  MD_CHECK(m.num_reqs >= 0 && m.num_reqs < kMaxTokens,
           "argument '%s': num_reqs = %lld is out of range [0, %lld)", what, (ll)m.num_reqs,
           (ll)kMaxTokens);
  MD_CHECK(m.num_actual_tokens >= 0 && m.num_actual_tokens <= kMaxTokens,
           "argument '%s': num_actual_tokens = %lld is out of range [0, %lld]", what,
           (ll)m.num_actual_tokens, (ll)kMaxTokens);
  MD_CHECK((int64_t)m.query_start_loc.size() == m.num_reqs + 1,
           "argument '%s': query_start_loc has %zu entries, expected num_reqs + 1 = %lld", what,
           m.query_start_loc.size(), (ll)(m.num_reqs + 1));
  MD_CHECK((int64_t)m.seq_lens.size() == m.num_reqs,
           "argument '%s': seq_lens has %zu entries, expected num_reqs = %lld", what,
           m.seq_lens.size(), (ll)m.num_reqs);
  MD_CHECK(m.block_size >= 0, "argument '%s': block_size = %d is negative", what, m.block_size);
  MD_CHECK(m.num_cache_blocks >= 0 && m.num_cache_blocks <= kMaxArrayElems,
           "argument '%s': num_cache_blocks = %lld is out of range", what, (ll)m.num_cache_blocks);
  VATTN_TRY(check_query_start_loc(m, what));
  VATTN_TRY(check_per_request(m, what));
  VATTN_TRY(check_block_table(m, what, block_table_src));
  VATTN_TRY(check_slot_mapping(m, what));
  VATTN_TRY(check_maxima(m, what));
  VATTN_TRY(check_logits(m, what));
  return VATTN_OK;
}

}  // namespace

vattn_status_t check_metadata(Metadata &m, const char *what) {
  return check_metadata_impl(m, what, nullptr);
}

namespace {

// Copies n entries of an optional caller array (NULL allowed when n == 0
// or `optional`; then `present` is false).
template <class T>
vattn_status_t copy_array(const T *p, int64_t n, bool optional, const char *what, const char *field,
                          std::vector<T> *out, bool *present = nullptr) {
  if (present) *present = p != nullptr;
  if (p == nullptr) {
    MD_CHECK(optional || n == 0, "argument '%s': %s is NULL but %lld entries are needed", what,
             field, (ll)n);
    out->clear();
    return VATTN_OK;
  }
  out->assign(p, p + n);
  return VATTN_OK;
}

template <class T>
vattn_status_t copy_array(const T *p, int64_t n, bool optional, const char *what, const char *field,
                          CowVector<T> *out) {
  if (p == nullptr) {
    MD_CHECK(optional || n == 0, "argument '%s': %s is NULL but %lld entries are needed", what,
             field, (ll)n);
    out->clear();
    return VATTN_OK;
  }
  out->assign(p, p + n);
  return VATTN_OK;
}

}  // namespace

vattn_status_t metadata_from_desc(const vattn_metadata_desc_t &d, const char *what, Metadata *out) {
  // Sizes first: nothing is read from an array before its length is known
  // to be sane.
  MD_CHECK(d.num_reqs >= 0 && d.num_reqs < kMaxTokens,
           "argument '%s': num_reqs = %lld is out of range [0, %lld)", what, (ll)d.num_reqs,
           (ll)kMaxTokens);
  MD_CHECK(d.num_actual_tokens >= 0 && d.num_actual_tokens <= kMaxTokens,
           "argument '%s': num_actual_tokens = %lld is out of range [0, %lld]", what,
           (ll)d.num_actual_tokens, (ll)kMaxTokens);
  MD_CHECK(d.block_table_rows >= 0 && d.block_table_rows <= kMaxArrayElems,
           "argument '%s': block_table_rows = %lld is out of range", what, (ll)d.block_table_rows);
  MD_CHECK(d.block_table_cols >= 0 && d.block_table_cols <= kMaxArrayElems,
           "argument '%s': block_table_cols = %lld is out of range", what, (ll)d.block_table_cols);
  int64_t bt_elems = 0;
  MD_CHECK(!__builtin_mul_overflow(d.block_table_rows, d.block_table_cols, &bt_elems) &&
               bt_elems <= kMaxArrayElems,
           "argument '%s': block_table_rows * block_table_cols = %lld x %lld overflows", what,
           (ll)d.block_table_rows, (ll)d.block_table_cols);
  MD_CHECK(d.slot_mapping_len >= 0 && d.slot_mapping_len <= kMaxArrayElems,
           "argument '%s': slot_mapping_len = %lld is out of range", what, (ll)d.slot_mapping_len);
  MD_CHECK(d.logits_indices_len >= 0 && d.logits_indices_len <= kMaxTokens,
           "argument '%s': logits_indices_len = %lld is out of range", what,
           (ll)d.logits_indices_len);
  MD_CHECK(d.causal == 0 || d.causal == 1, "argument '%s': causal = %d must be 0 or 1", what,
           d.causal);
  MD_CHECK(d.query_start_loc != nullptr, "argument '%s': query_start_loc is NULL", what);

  Metadata m;
  m.num_reqs = d.num_reqs;
  m.num_actual_tokens = d.num_actual_tokens;
  VATTN_TRY(copy_array(d.query_start_loc, d.num_reqs + 1, false, what, "query_start_loc",
                       &m.query_start_loc));
  VATTN_TRY(copy_array(d.seq_lens, d.num_reqs, false, what, "seq_lens", &m.seq_lens));
  VATTN_TRY(copy_array(d.num_computed_tokens, d.num_reqs, true, what, "num_computed_tokens",
                       &m.num_computed_tokens));
  // The block table is copied by the check itself (one pass that copies
  // and scans the entries requests use).
  MD_CHECK(d.block_table != nullptr || bt_elems == 0,
           "argument '%s': block_table is NULL but %lld entries are needed", what, (ll)bt_elems);
  if (d.block_table != nullptr) m.block_table.resize_for_overwrite(static_cast<size_t>(bt_elems));
  m.block_table_rows = d.block_table_rows;
  m.block_table_cols = d.block_table_cols;
  VATTN_TRY(copy_array(d.slot_mapping, d.slot_mapping_len, false, what, "slot_mapping",
                       &m.slot_mapping));
  m.causal = d.causal != 0;
  m.max_query_len = d.max_query_len;
  m.max_seq_len = d.max_seq_len;
  m.block_size = d.block_size;
  m.num_cache_blocks = d.num_cache_blocks;
  VATTN_TRY(copy_array(d.encoder_seq_lens, d.num_reqs, true, what, "encoder_seq_lens",
                       &m.encoder_seq_lens, &m.has_encoder_seq_lens));
  VATTN_TRY(copy_array(d.logits_indices_padded, d.logits_indices_len, true, what,
                       "logits_indices_padded", &m.logits_indices_padded, &m.has_logits_indices));
  m.num_logits_indices = d.num_logits_indices;
  VATTN_TRY(copy_array(d.dcp_local_seq_lens, d.num_reqs, true, what, "dcp_local_seq_lens",
                       &m.dcp_local_seq_lens, &m.has_dcp_local_seq_lens));
  VATTN_TRY(check_metadata_impl(m, what, d.block_table));
  *out = std::move(m);
  return VATTN_OK;
}

void metadata_to_desc(const Metadata &m, vattn_metadata_desc_t *d) {
  std::memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
  d->num_reqs = m.num_reqs;
  d->num_actual_tokens = m.num_actual_tokens;
  d->query_start_loc = m.query_start_loc.data();
  d->seq_lens = m.seq_lens.data();
  d->num_computed_tokens = m.num_computed_tokens.data();
  d->block_table = m.block_table.data();
  d->block_table_rows = m.block_table_rows;
  d->block_table_cols = m.block_table_cols;
  d->slot_mapping = m.slot_mapping.data();
  d->slot_mapping_len = (int64_t)m.slot_mapping.size();
  d->causal = m.causal ? 1 : 0;
  d->max_query_len = m.max_query_len;
  d->max_seq_len = m.max_seq_len;
  d->block_size = m.block_size;
  d->num_cache_blocks = m.num_cache_blocks;
  d->encoder_seq_lens = m.has_encoder_seq_lens ? m.encoder_seq_lens.data() : nullptr;
  d->logits_indices_padded = m.has_logits_indices ? m.logits_indices_padded.data() : nullptr;
  d->logits_indices_len = (int64_t)m.logits_indices_padded.size();
  d->num_logits_indices = m.num_logits_indices;
  d->dcp_local_seq_lens = m.has_dcp_local_seq_lens ? m.dcp_local_seq_lens.data() : nullptr;
}

vattn_status_t metadata_unpadded(const Metadata &m, int64_t num_tokens, int64_t num_reqs,
                                 Metadata *out) {
  if (num_reqs < 0 || num_reqs > m.num_reqs)
    MD_FAIL("argument 'num_reqs' = %lld is outside [0, md's num_reqs = %lld]", (ll)num_reqs,
            (ll)m.num_reqs);
  if (num_tokens < m.query_start_loc[num_reqs] || num_tokens > m.num_actual_tokens)
    MD_FAIL("argument 'num_tokens' = %lld is outside [query_start_loc[num_reqs] = %d, "
            "num_actual_tokens = %lld]",
            (ll)num_tokens, m.query_start_loc[num_reqs], (ll)m.num_actual_tokens);
  Metadata u = m;
  u.num_reqs = num_reqs;
  u.num_actual_tokens = num_tokens;
  u.query_start_loc.resize(num_reqs + 1);
  u.seq_lens.resize(num_reqs);
  u.num_computed_tokens.resize(num_reqs);
  u.block_table_rows = num_reqs;
  u.block_table.resize(num_reqs * m.block_table_cols);
  if ((int64_t)u.slot_mapping.size() > num_tokens) u.slot_mapping.resize(num_tokens);
  // Tokens of dropped requests kept inside num_tokens become padding, so
  // the result still satisfies "entries past the real tokens are -1".
  if ((size_t)u.query_start_loc[num_reqs] < u.slot_mapping.size()) {
    auto &sm = u.slot_mapping.mut();
    for (size_t i = (size_t)u.query_start_loc[num_reqs]; i < sm.size(); ++i) sm[i] = VATTN_PAD_SLOT_ID;
  }
  if (u.has_encoder_seq_lens) u.encoder_seq_lens.resize(num_reqs);
  if (u.has_dcp_local_seq_lens) u.dcp_local_seq_lens.resize(num_reqs);
  if (!u.local_src_row.empty()) {  // local virtual batches keep their gather map
    u.local_src_row.resize(num_reqs);
    u.local_src_col.resize(num_reqs * m.block_table_cols);
  }
  if (u.has_logits_indices) {
    // Indices past the remaining real tokens no longer select anything.
    int64_t real = u.query_start_loc[num_reqs], keep = 0;
    while (keep < u.num_logits_indices && u.logits_indices_padded[keep] < real) ++keep;
    u.num_logits_indices = keep;
  }
  VATTN_TRY(check_metadata(u, "md"));
  *out = std::move(u);
  return VATTN_OK;
}

}  // namespace vattn
