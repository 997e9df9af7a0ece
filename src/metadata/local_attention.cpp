// local_attention.cpp -- chunked-local attention as virtual batches
// (semantics doc section 7).
//
// A token at absolute position t may see keys in [floor(t/chunk)*chunk, t].
// Each request (q new tokens, s total, ctx = s - q) is cut at chunk
// boundaries into n virtual requests; virtual j has q_j queries and k_j
// keys, all inside one chunk, so a plain causal varlen kernel computes
// chunked-local attention.  The virtual block table row j holds the
// chunk/block_size pages of the original row starting at key_start_j /
// block_size, with column indices clamped to the last column.
#include <algorithm>

#include "core/error.h"
#include "metadata/batch.h"

namespace vattn {

using ll = long long;

constexpr int64_t kMaxLocalPages = INT64_C(1) << 20;
constexpr int64_t kMaxLocalTableElems = INT64_C(1) << 26;

vattn_status_t make_local_attention_virtual_batches(int32_t chunk, const Metadata &m,
                                                    int32_t block_size, Metadata *out) {
  VATTN_CHECK_ARG(chunk > 0, "argument 'attn_chunk_size' = %d must be positive", chunk);
  VATTN_CHECK_ARG(block_size > 0, "argument 'block_size' = %d must be positive", block_size);
  VATTN_CHECK_ARG(chunk % block_size == 0, "argument 'attn_chunk_size': attn_chunk_size %d is not divisible by block_size %d",
                  chunk, block_size);
  VATTN_CHECK_ARG(m.block_size == 0 || m.block_size == block_size,
                  "argument 'block_size' = %d differs from md's block_size %d", block_size, m.block_size);
  VATTN_CHECK_ARG(m.block_table_cols > 0 || m.num_reqs == 0,
                  "argument 'md': block_table_cols = 0, no block table to gather from");
  for (int64_t r = 0; r < m.num_reqs; ++r)
    VATTN_CHECK_ARG(m.query_len(r) > 0, "argument 'md': query_len of request %lld is 0 (every request "
                    "needs at least one query token)", (ll)r);
  const int64_t pages = chunk / block_size;
  const int64_t last_col = m.block_table_cols - 1;
  // Bound the virtual block table (rows x pages int32) before allocating it:
  // a hostile attn_chunk_size / block_size must not exhaust host memory.
  int64_t rows = 0;
  for (int64_t r = 0; r < m.num_reqs; ++r) {
    const int64_t q = m.query_len(r), ctx = m.seq_lens[r] - q;
    rows += 1 + (q - std::min<int64_t>(chunk - ctx % chunk, q) + chunk - 1) / chunk;
  }
  VATTN_CHECK_ARG(pages <= kMaxLocalPages && rows * pages <= kMaxLocalTableElems,
                  "argument 'attn_chunk_size' = %d: %lld virtual batches x %lld pages per local "
                  "batch exceed the limit of %lld pages per batch / %lld block table entries",
                  chunk, (ll)rows, (ll)pages, (ll)kMaxLocalPages, (ll)kMaxLocalTableElems);

  Metadata v;
  v.num_actual_tokens = m.num_actual_tokens;
  v.query_start_loc.assign(1, 0);
  v.block_table_cols = pages;
  v.slot_mapping = m.slot_mapping;
  v.causal = true;
  v.block_size = block_size;
  v.num_cache_blocks = m.num_cache_blocks;
  int32_t max_q = 0, max_k = 0;
  auto &src_col = v.local_src_col.mut();
  auto &table = v.block_table.mut();
  // Exact sizes are known (rows above): no regrowth while appending (the
  // appends were most of fuzz_metadata's time on inputs with many pages).
  v.query_start_loc.reserve(static_cast<size_t>(rows) + 1);
  v.seq_lens.reserve(static_cast<size_t>(rows));
  v.num_computed_tokens.reserve(static_cast<size_t>(rows));
  v.local_src_row.reserve(static_cast<size_t>(rows));
  src_col.reserve(static_cast<size_t>(rows * pages));
  table.reserve(static_cast<size_t>(rows * pages));
  for (int64_t r = 0; r < m.num_reqs; ++r) {
    const int64_t q = m.query_len(r), s = m.seq_lens[r], ctx = s - q;
    const int64_t first = std::min<int64_t>(chunk - ctx % chunk, q);
    const int64_t last_k = s % chunk == 0 ? chunk : s % chunk;
    const int64_t n = 1 + (q - first + chunk - 1) / chunk;
    for (int64_t j = 0; j < n; ++j) {
      int64_t qj = j == 0 ? first : std::min<int64_t>(q - first - chunk * (j - 1), chunk);
      int64_t kj = j == n - 1 ? last_k : chunk;
      int64_t key_start = s - ((n - 1 - j) * chunk + last_k);
      v.query_start_loc.push_back(v.query_start_loc.back() + (int32_t)qj);
      v.seq_lens.push_back((int32_t)kj);
      v.num_computed_tokens.push_back((int32_t)(kj - qj));
      v.local_src_row.push_back((int32_t)r);
      const int32_t *row = m.block_row(r);
      for (int64_t p = 0; p < pages; ++p) {
        int64_t col = std::min<int64_t>(key_start / block_size + p, last_col);
        src_col.push_back((int32_t)col);
        table.push_back(row[col]);
      }
      max_q = std::max<int32_t>(max_q, (int32_t)qj);
      max_k = std::max<int32_t>(max_k, (int32_t)kj);
    }
  }
  v.num_reqs = (int64_t)v.seq_lens.size();
  v.block_table_rows = v.num_reqs;
  v.max_query_len = max_q;
  v.max_seq_len = max_k;
  VATTN_TRY(check_metadata(v, "md"));
  *out = std::move(v);
  return VATTN_OK;
}

}  // namespace vattn
