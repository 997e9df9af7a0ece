// v0_builder.cpp -- see v0_builder.h.
#include "metadata/v0/v0_builder.h"

#include <algorithm>

#include "core/error.h"
#include "metadata/metadata.h"
#include "metadata/slot_mapping.h"

namespace vattn {

using ll = long long;

void V0Builder::reset() {
  slot_mapping_.clear();
  prefill_seq_lens_.clear();
  context_lens_.clear();
  curr_seq_lens_.clear();
  block_tables_.clear();
  num_prefills_ = num_prefill_tokens_ = num_decode_tokens_ = 0;
}

vattn_status_t V0Builder::add_seq(const vattn_v0_seq_t &s) {
  VATTN_CHECK_ARG(s.is_prompt == 0 || s.is_prompt == 1, "argument 'seq': is_prompt = %d must be 0 or 1",
                  s.is_prompt);
  VATTN_CHECK_ARG(s.token_len >= 0 && s.token_len <= kMaxTokens, "argument 'seq': token_len = %lld is out of range",
                  (ll)s.token_len);
  VATTN_CHECK_ARG(s.seq_len >= 0 && s.seq_len <= kMaxTokens, "argument 'seq': seq_len = %lld is out of range",
                  (ll)s.seq_len);
  VATTN_CHECK_ARG(s.curr_seq_len >= 0 && s.curr_seq_len <= kMaxTokens,
                  "argument 'seq': curr_seq_len = %lld is out of range", (ll)s.curr_seq_len);
  VATTN_CHECK_ARG(s.query_len >= 0 && s.query_len <= s.seq_len,
                  "argument 'seq': query_len = %lld is outside [0, seq_len = %lld]", (ll)s.query_len, (ll)s.seq_len);
  VATTN_CHECK_ARG(s.context_len >= 0 && s.context_len <= s.seq_len,
                  "argument 'seq': context_len = %lld is outside [0, seq_len = %lld]", (ll)s.context_len,
                  (ll)s.seq_len);
  VATTN_CHECK_ARG(s.is_prompt || s.query_len == 1,
                  "argument 'seq': a decode must have query_len 1 (seq_len %lld, context_len %lld, query_len %lld)",
                  (ll)s.seq_len, (ll)s.context_len, (ll)s.query_len);
  VATTN_CHECK_ARG(!s.is_prompt || (num_decode_tokens_ == 0 && curr_seq_lens_.empty()),
                  "argument 'seq': a prompt cannot follow a decode (prefills come first)");
  VATTN_CHECK_ARG(s.block_table_len >= 0 && s.block_table_len <= kMaxTokens,
                  "argument 'seq': block_table_len = %lld is out of range", (ll)s.block_table_len);
  VATTN_CHECK_ARG(s.block_table != nullptr || s.block_table_len == 0,
                  "argument 'seq': block_table is NULL but block_table_len = %lld", (ll)s.block_table_len);
  VATTN_CHECK_ARG(s.curr_sliding_window_blocks >= 0 && s.curr_sliding_window_blocks <= s.block_table_len,
                  "argument 'seq': curr_sliding_window_blocks = %d is outside [0, block_table_len = %lld]",
                  s.curr_sliding_window_blocks, (ll)s.block_table_len);
  VATTN_CHECK_ARG(s.prefix_cache_hit == 0 || s.prefix_cache_hit == 1,
                  "argument 'seq': prefix_cache_hit = %d must be 0 or 1", s.prefix_cache_hit);
  for (int64_t i = 0; i < s.block_table_len; ++i)
    VATTN_CHECK_ARG(s.block_table[i] >= 0 && (opts_.num_cache_blocks == 0 || s.block_table[i] < opts_.num_cache_blocks),
                    "argument 'seq': block_table[%lld] = %d is outside the cache [0, %lld)", (ll)i, s.block_table[i],
                    (ll)opts_.num_cache_blocks);

  // Block table handed to the kernels: the whole table on a prefix-cache
  // hit; with chunked prefill or for decodes the whole table, or only its
  // last curr_sliding_window_blocks entries; none for a plain prompt.
  const bool have_table = s.block_table != nullptr;
  std::vector<int32_t> table;
  if (s.prefix_cache_hit && have_table) {
    table.assign(s.block_table, s.block_table + s.block_table_len);
  } else if ((opts_.chunked_prefill_enabled || !s.is_prompt) && have_table) {
    int64_t first = s.curr_sliding_window_blocks == 0 ? 0 : s.block_table_len - s.curr_sliding_window_blocks;
    table.assign(s.block_table + first, s.block_table + s.block_table_len);
  }
  // Slots from the full table (a profile run has none).
  const bool profile = !have_table;
  const int64_t start = slot_mapping_v0_start_idx(s.is_prompt != 0, s.query_len, opts_.sliding_window);
  std::vector<int64_t> slots;
  VATTN_TRY(slot_mapping_v0_append(profile, s.seq_len, s.context_len, start, opts_.block_size, s.block_table,
                                   s.block_table_len, opts_.num_cache_blocks, &slots));
  // Commit.
  context_lens_.push_back((int32_t)s.context_len);
  if (s.is_prompt) {
    ++num_prefills_;
    num_prefill_tokens_ += s.token_len;
    prefill_seq_lens_.push_back((int32_t)s.seq_len);
  } else {
    num_decode_tokens_ += s.query_len;
    curr_seq_lens_.push_back((int32_t)s.curr_seq_len);
  }
  block_tables_.push_back(std::move(table));
  slot_mapping_.insert(slot_mapping_.end(), slots.begin(), slots.end());
  return VATTN_OK;
}

vattn_status_t V0Builder::build(const int32_t *seq_lens, const int32_t *query_lens, int64_t num_seqs,
                                int64_t cuda_graph_pad_size, int64_t batch_size, V0Metadata *out) {
  const int64_t added = num_added();
  const bool graph = cuda_graph_pad_size != -1;
  VATTN_CHECK_ARG(cuda_graph_pad_size >= -1 && cuda_graph_pad_size <= kMaxTokens,
                  "argument 'cuda_graph_pad_size' = %lld must be -1 (no CUDA graph) or in [0, 2^31]",
                  (ll)cuda_graph_pad_size);
  VATTN_CHECK_ARG(added > 0, "no sequence was added to the builder (vattn_v0_builder_add_seq)");
  if (graph) {
    // A captured graph's batch is small (vLLM captures up to ~1k); the bound
    // keeps absurd sizes from turning into multi-GB padding allocations.
    constexpr int64_t kMaxGraphBatch = int64_t(1) << 20;
    VATTN_CHECK_ARG(batch_size >= added && batch_size <= kMaxGraphBatch,
                    "argument 'batch_size' = %lld must be >= the %lld sequences added and <= 2^20 for a "
                    "CUDA-graph batch", (ll)batch_size, (ll)added);
    VATTN_CHECK_ARG(cuda_graph_pad_size <= batch_size,
                    "argument 'cuda_graph_pad_size' = %lld exceeds batch_size = %lld (it is the graph batch "
                    "size minus the real tokens)", (ll)cuda_graph_pad_size, (ll)batch_size);
    VATTN_CHECK_ARG(opts_.max_blocks_per_seq > 0,
                    "the builder's max_blocks_per_seq = %d must be positive for a CUDA-graph batch",
                    opts_.max_blocks_per_seq);
    for (size_t i = 0; i < block_tables_.size(); ++i)
      VATTN_CHECK_ARG((int64_t)block_tables_[i].size() <= opts_.max_blocks_per_seq,
                      "sequence %zu's block table (%zu blocks) exceeds max_blocks_per_seq = %d", i,
                      block_tables_[i].size(), opts_.max_blocks_per_seq);
  }
  // seq_lens / query_lens: one per added sequence, or (CUDA graph) already
  // padded to batch_size.
  VATTN_CHECK_ARG(num_seqs == added || (graph && num_seqs == batch_size),
                  "argument 'num_seqs' = %lld must equal the %lld sequences added%s", (ll)num_seqs, (ll)added,
                  graph ? " or batch_size" : "");
  VATTN_CHECK_ARG(seq_lens != nullptr, "argument 'seq_lens' is NULL");
  VATTN_CHECK_ARG(query_lens != nullptr, "argument 'query_lens' is NULL");
  for (int64_t i = 0; i < num_seqs; ++i) {
    VATTN_CHECK_ARG(seq_lens[i] >= 0, "argument 'seq_lens': [%lld] = %d is negative", (ll)i, seq_lens[i]);
    VATTN_CHECK_ARG(query_lens[i] >= 0 && query_lens[i] <= seq_lens[i],
                    "argument 'query_lens': [%lld] = %d is outside [0, seq_lens[%lld] = %d]", (ll)i, query_lens[i],
                    (ll)i, seq_lens[i]);
  }
  const int64_t rows = graph ? batch_size : added;
  std::vector<int32_t> sl(seq_lens, seq_lens + num_seqs), ql(query_lens, query_lens + num_seqs);
  sl.resize(rows, 1);  // CUDA-graph padding sequences: one token each
  ql.resize(rows, 1);
  const int32_t max_query_len = *std::max_element(ql.begin(), ql.end());
  VATTN_CHECK_ARG(max_query_len > 0, "argument 'query_lens': every query length is 0");

  V0Metadata m;
  m.seq_lens = sl;
  m.context_lens = context_lens_;
  m.context_lens.resize(rows, 0);
  m.query_start_loc.assign(1, 0);
  m.seq_start_loc.assign(1, 0);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t q_end = (int64_t)m.query_start_loc.back() + ql[i];
    const int64_t s_end = (int64_t)m.seq_start_loc.back() + sl[i];
    VATTN_CHECK_ARG(q_end <= INT32_MAX && s_end <= INT32_MAX,
                    "arguments 'query_lens' / 'seq_lens': the totals up to sequence %lld overflow int32",
                    (ll)i);
    m.query_start_loc.push_back((int32_t)q_end);
    m.seq_start_loc.push_back((int32_t)s_end);
  }
  m.slot_mapping = slot_mapping_;
  int64_t cols = 0;
  if (graph) {
    m.slot_mapping.insert(m.slot_mapping.end(), (size_t)cuda_graph_pad_size, (int64_t)VATTN_PAD_SLOT_ID);
    cols = opts_.max_blocks_per_seq;
  } else {
    for (const auto &t : block_tables_) cols = std::max<int64_t>(cols, (int64_t)t.size());
  }
  // [rows, cols] zero-padded (the graph table is the persistent
  // [max batch, max blocks] buffer's first batch_size rows).
  VATTN_CHECK_ARG(rows * cols <= kMaxArrayElems,
                  "the block table of %lld rows x %lld columns is too large", (ll)rows, (ll)cols);
  m.block_tables.assign((size_t)(rows * cols), 0);
  for (size_t i = 0; i < block_tables_.size(); ++i)
    std::copy(block_tables_[i].begin(), block_tables_[i].end(), m.block_tables.begin() + i * cols);

  vattn_v0_metadata_desc_t &d = m.view;
  vattn_v0_metadata_desc_init(&d);
  d.num_prefills = num_prefills_;
  d.num_prefill_tokens = num_prefill_tokens_;
  d.num_decode_tokens = graph ? batch_size : num_decode_tokens_;
  d.num_seqs = rows;
  d.slot_mapping = m.slot_mapping.data();
  d.slot_mapping_len = (int64_t)m.slot_mapping.size();
  d.seq_lens = m.seq_lens.data();
  d.context_lens = m.context_lens.data();
  d.query_start_loc = m.query_start_loc.data();
  d.seq_start_loc = m.seq_start_loc.data();
  d.block_tables = m.block_tables.data();
  d.block_tables_cols = cols;
  d.max_query_len = max_query_len;
  d.max_prefill_seq_len = prefill_seq_lens_.empty() ? 0 : *std::max_element(prefill_seq_lens_.begin(), prefill_seq_lens_.end());
  d.max_decode_seq_len = curr_seq_lens_.empty() ? 0 : *std::max_element(curr_seq_lens_.begin(), curr_seq_lens_.end());
  d.max_decode_query_len = curr_seq_lens_.empty() && !graph ? 0 : 1;
  d.use_cuda_graph = graph ? 1 : 0;
  VATTN_TRY(v0_metadata_check(d, "seq_lens"));
  *out = std::move(m);
  // Vectors moved: their buffers (and so the view's pointers) are unchanged.
  reset();
  return VATTN_OK;
}

}  // namespace vattn
