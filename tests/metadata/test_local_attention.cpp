// Chunked-local attention virtual batches: the docstring example (as the
// code computes it), the last-column clamp, a semantic property check on
// random batches, the block-table re-gather, and bad inputs.
#include "md_util.h"

namespace {

struct Local {
  mdt::MdPtr md;
  vattn_metadata_desc_t d;
};

Local run_local(const mdt::Batch &b, int32_t chunk, int32_t bs) {
  auto m = mdt::create(b.desc());
  vattn_metadata_t *out = nullptr;
  EXPECT_VATTN_OK(vattn_make_local_attention_virtual_batches(chunk, m.get(), bs, &out));
  Local l;
  l.md.reset(out);
  if (out) l.d = mdt::describe(out);
  return l;
}

TEST(LocalAttention, DocstringExample) {
  std::mt19937_64 g(vt::test_seed());
  mdt::Batch b = mdt::make_batch(g, {4, 10, 5}, {6, 17, 9}, 2);
  Local l = run_local(b, 4, 2);
  ASSERT_TRUE(l.md);
  const int64_t n = l.d.num_reqs;
  ASSERT_EQ(n, 8);
  EXPECT_EQ(mdt::vec(l.d.query_start_loc, n + 1), (std::vector<int32_t>{0, 2, 4, 5, 9, 13, 14, 18, 19}));
  EXPECT_EQ(mdt::vec(l.d.seq_lens, n), (std::vector<int32_t>{4, 2, 4, 4, 4, 1, 4, 1}));
  EXPECT_EQ(mdt::vec(l.d.num_computed_tokens, n), (std::vector<int32_t>{2, 0, 3, 0, 0, 0, 0, 0}));
  EXPECT_EQ(l.d.num_actual_tokens, 19);
  EXPECT_EQ(l.d.max_query_len, 4);
  EXPECT_EQ(l.d.max_seq_len, 4);
  EXPECT_EQ(l.d.causal, 1);
  EXPECT_EQ(mdt::vec(l.d.slot_mapping, l.d.slot_mapping_len), b.slots);
  // Key starts [0,4,4,8,12,16,4,8] of requests [0,0,1,1,1,1,2,2]: two pages
  // of the source row from key_start / 2, clamped to the last column.
  const int64_t key_start[8] = {0, 4, 4, 8, 12, 16, 4, 8};
  const int64_t src[8] = {0, 0, 1, 1, 1, 1, 2, 2};
  ASSERT_EQ(l.d.block_table_cols, 2);
  for (int64_t v = 0; v < n; ++v)
    for (int64_t p = 0; p < 2; ++p) {
      int64_t col = std::min<int64_t>(key_start[v] / 2 + p, b.cols - 1);
      EXPECT_EQ(l.d.block_table[v * 2 + p], b.block_table[src[v] * b.cols + col]) << v << "," << p;
    }
}

TEST(LocalAttention, ClampRepeatsLastColumn) {
  // One request with s = 9, q = 1, chunk 8, block 2: key start 8, pages
  // columns 4..7, but the row only has 5 columns -> [c4, c4, c4, c4].
  mdt::Batch b;
  b.num_reqs = 1;
  b.qsl = {0, 1};
  b.seq_lens = {9};
  b.rows = 1;
  b.cols = 5;
  b.block_table = {10, 11, 12, 13, 17};
  b.slots = {17 * 2 + 0};
  b.num_actual_tokens = 1;
  b.block_size = 2;
  b.num_cache_blocks = 20;
  Local l = run_local(b, 8, 2);
  ASSERT_TRUE(l.md);
  ASSERT_EQ(l.d.num_reqs, 1);
  EXPECT_EQ(mdt::vec(l.d.block_table, 4), (std::vector<int32_t>{17, 17, 17, 17}));
  EXPECT_EQ(l.d.seq_lens[0], 1);
}

TEST(LocalAttention, RandomBatchesAttendExactlyTheirChunk) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 40; ++it) {
    int32_t bs = 1 << std::uniform_int_distribution<int>(0, 3)(g);
    int32_t chunk = bs * std::uniform_int_distribution<int32_t>(1, 4)(g);
    int64_t n = std::uniform_int_distribution<int64_t>(1, 6)(g);
    mdt::Batch b = mdt::random_batch(g, n, 1, 30, 40, bs);
    Local l = run_local(b, chunk, bs);
    ASSERT_TRUE(l.md);
    const auto &d = l.d;
    EXPECT_EQ(d.query_start_loc[d.num_reqs], b.real_tokens());
    // Walk the virtual batches in order alongside the original tokens.
    int64_t v = 0, pages = chunk / bs;
    for (int64_t r = 0; r < n; ++r) {
      int64_t ctx = b.seq_lens[r] - b.query_len(r);
      for (int64_t i = 0; i < b.query_len(r);) {
        ASSERT_LT(v, d.num_reqs);
        int64_t qj = d.query_start_loc[v + 1] - d.query_start_loc[v], kj = d.seq_lens[v];
        ASSERT_GT(qj, 0);
        ASSERT_LE(qj, kj);
        ASSERT_LE(kj, chunk);
        EXPECT_EQ(d.query_start_loc[v], b.qsl[r] + i);
        // The virtual request's last query sits at key kj - 1; causal
        // attention then covers exactly [chunk start, position] for every
        // query of it.
        int64_t last_pos = ctx + i + qj - 1;
        int64_t key_start = last_pos - (kj - 1);
        for (int64_t k = 0; k < qj; ++k) {
          int64_t pos = ctx + i + k;
          EXPECT_EQ(key_start, pos / chunk * chunk) << "request " << r << " pos " << pos;
        }
        // Its pages are the source row's from key_start / bs, clamped.
        for (int64_t p = 0; p < pages; ++p) {
          int64_t col = std::min<int64_t>(key_start / bs + p, b.cols - 1);
          EXPECT_EQ(d.block_table[v * pages + p], b.block_table[r * b.cols + col]);
        }
        i += qj;
        ++v;
      }
    }
    EXPECT_EQ(v, d.num_reqs);
  }
}

TEST(LocalAttention, UpdateBlockTableRegathers) {
  std::mt19937_64 g(vt::test_seed());
  mdt::Batch b = mdt::make_batch(g, {4, 10, 5}, {6, 17, 9}, 2);
  Local l = run_local(b, 4, 2);
  ASSERT_TRUE(l.md);
  // A new table of the same shape with fresh ids: the gather must follow
  // the same rows / clamped columns.
  std::vector<int32_t> table2(b.rows * b.cols);
  for (auto &x : table2) x = std::uniform_int_distribution<int32_t>(1000, 2000)(g);
  std::vector<int32_t> out(16, -5);
  ASSERT_VATTN_OK(vattn_local_attention_update_block_table(l.md.get(), table2.data(), b.rows, b.cols,
                                                           out.data(), 16));
  const int64_t key_start[8] = {0, 4, 4, 8, 12, 16, 4, 8};
  const int64_t src[8] = {0, 0, 1, 1, 1, 1, 2, 2};
  for (int64_t v = 0; v < 8; ++v)
    for (int64_t p = 0; p < 2; ++p)
      EXPECT_EQ(out[v * 2 + p], table2[src[v] * b.cols + std::min<int64_t>(key_start[v] / 2 + p, b.cols - 1)]);
  // Bad inputs leave out untouched.
  std::vector<int32_t> poison(16, -5), o2 = poison;
  EXPECT_VATTN_ERR(vattn_local_attention_update_block_table(l.md.get(), table2.data(), b.rows, b.cols,
                                                            o2.data(), 15),
                   VATTN_ERR_INVALID_ARGUMENT, "out_len");
  EXPECT_VATTN_ERR(vattn_local_attention_update_block_table(l.md.get(), table2.data(), 2, b.cols, o2.data(), 16),
                   VATTN_ERR_INVALID_ARGUMENT, "num_rows");
  EXPECT_VATTN_ERR(vattn_local_attention_update_block_table(l.md.get(), table2.data(), b.rows, 3, o2.data(), 16),
                   VATTN_ERR_INVALID_ARGUMENT, "num_cols");
  EXPECT_VATTN_ERR(vattn_local_attention_update_block_table(l.md.get(), nullptr, b.rows, b.cols, o2.data(), 16),
                   VATTN_ERR_INVALID_ARGUMENT, "block_table");
  EXPECT_VATTN_ERR(vattn_local_attention_update_block_table(nullptr, table2.data(), b.rows, b.cols, o2.data(), 16),
                   VATTN_ERR_INVALID_ARGUMENT, "local_md");
  // Metadata that is not a local one.
  auto plain = mdt::create(b.desc());
  EXPECT_VATTN_ERR(vattn_local_attention_update_block_table(plain.get(), table2.data(), b.rows, b.cols,
                                                            o2.data(), 16),
                   VATTN_ERR_INVALID_ARGUMENT, "local_md");
  EXPECT_EQ(o2, poison);
}

TEST(LocalAttention, BadInputs) {
  std::mt19937_64 g(vt::test_seed());
  mdt::Batch b = mdt::make_batch(g, {4, 10, 5}, {6, 17, 9}, 2);
  auto m = mdt::create(b.desc());
  auto sentinel = reinterpret_cast<vattn_metadata_t *>(0x99);
  vattn_metadata_t *out = sentinel;
  EXPECT_VATTN_ERR(vattn_make_local_attention_virtual_batches(6, m.get(), 4, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "attn_chunk_size 6 is not divisible by block_size 4");
  EXPECT_EQ(out, nullptr);
  EXPECT_VATTN_ERR(vattn_make_local_attention_virtual_batches(0, m.get(), 2, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "attn_chunk_size");
  EXPECT_VATTN_ERR(vattn_make_local_attention_virtual_batches(4, m.get(), 0, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "block_size");
  EXPECT_VATTN_ERR(vattn_make_local_attention_virtual_batches(8, m.get(), 4, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "block_size");  // md's block size is 2
  EXPECT_VATTN_ERR(vattn_make_local_attention_virtual_batches(4, nullptr, 2, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "md");
  EXPECT_VATTN_ERR(vattn_make_local_attention_virtual_batches(4, m.get(), 2, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "out");
  mdt::Batch z = mdt::make_batch(g, {2, 0}, {5, 3}, 2);
  auto mz = mdt::create(z.desc());
  out = sentinel;
  EXPECT_VATTN_ERR(vattn_make_local_attention_virtual_batches(4, mz.get(), 2, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "request 1");
  EXPECT_EQ(out, nullptr);
}

}  // namespace
