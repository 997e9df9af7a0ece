// v0: per-sequence builder (hand-worked batches + random batches against a
// naive reference), v0 metadata handles, per-attention-type accessors, and
// the CUDA-graph state.
#include <functional>

#include "md_util.h"

namespace {

struct BuilderDel {
  void operator()(vattn_v0_builder_t *b) const { vattn_v0_builder_destroy(b); }
};
struct V0Del {
  void operator()(vattn_v0_metadata_t *m) const { vattn_v0_metadata_destroy(m); }
};
struct GsDel {
  void operator()(vattn_graph_state_t *s) const { vattn_graph_state_destroy(s); }
};
using BuilderPtr = std::unique_ptr<vattn_v0_builder_t, BuilderDel>;
using V0Ptr = std::unique_ptr<vattn_v0_metadata_t, V0Del>;
using GsPtr = std::unique_ptr<vattn_graph_state_t, GsDel>;

BuilderPtr make_builder(int32_t bs, int32_t sw, int32_t chunked, int32_t max_blocks = 0, int64_t ncb = 0) {
  vattn_v0_builder_options_t o;
  vattn_v0_builder_options_init(&o);
  o.block_size = bs;
  o.sliding_window = sw;
  o.chunked_prefill_enabled = chunked;
  o.max_blocks_per_seq = max_blocks;
  o.num_cache_blocks = ncb;
  vattn_v0_builder_t *b = nullptr;
  EXPECT_VATTN_OK(vattn_v0_builder_create(&b, &o));
  return BuilderPtr(b);
}

vattn_v0_seq_t seq(int32_t prompt, int64_t token_len, int64_t seq_len, int64_t query_len, int64_t ctx,
                   const std::vector<int32_t> *table, int32_t sw_blocks = 0, int32_t hit = 0) {
  vattn_v0_seq_t s;
  vattn_v0_seq_init(&s);
  s.is_prompt = prompt;
  s.token_len = token_len;
  s.seq_len = seq_len;
  s.curr_seq_len = seq_len;
  s.query_len = query_len;
  s.context_len = ctx;
  s.curr_sliding_window_blocks = sw_blocks;
  s.prefix_cache_hit = hit;
  s.block_table = table ? table->data() : nullptr;
  s.block_table_len = table ? (int64_t)table->size() : 0;
  return s;
}

vattn_v0_metadata_desc_t describe(const vattn_v0_metadata_t *m) {
  vattn_v0_metadata_desc_t d;
  vattn_v0_metadata_desc_init(&d);
  EXPECT_VATTN_OK(vattn_v0_metadata_describe(m, &d));
  return d;
}

TEST(V0Builder, HandWorkedMixedBatch) {
  auto b = make_builder(4, 0, 0);
  std::vector<int32_t> ta = {3, 5}, tb = {8, 9}, tc = {1, 2, 7}, td = {4, 6, 11};
  auto sa = seq(1, 6, 6, 6, 0, &ta);           // plain prompt: no table for the kernel
  auto sb = seq(1, 3, 7, 3, 4, &tb, 0, 1);     // prefix-cache hit: whole table
  auto sc = seq(0, 1, 10, 1, 9, &tc);          // decode
  auto sd = seq(0, 1, 9, 1, 8, &td, 2);        // decode, window of the last 2 blocks
  for (auto *s : {&sa, &sb, &sc, &sd}) ASSERT_VATTN_OK(vattn_v0_builder_add_seq(b.get(), s));
  const int32_t sl[4] = {6, 7, 10, 9}, ql[4] = {6, 3, 1, 1};
  vattn_v0_metadata_t *out = nullptr;
  ASSERT_VATTN_OK(vattn_v0_builder_build(b.get(), sl, ql, 4, -1, 4, &out));
  V0Ptr m(out);
  auto d = describe(out);
  EXPECT_EQ(d.num_prefills, 2);
  EXPECT_EQ(d.num_prefill_tokens, 9);
  EXPECT_EQ(d.num_decode_tokens, 2);
  EXPECT_EQ(d.num_seqs, 4);
  EXPECT_EQ(mdt::vec(d.slot_mapping, d.slot_mapping_len),
            (std::vector<int64_t>{12, 13, 14, 15, 20, 21, 36, 37, 38, 29, 44}));
  ASSERT_EQ(d.block_tables_cols, 3);
  EXPECT_EQ(mdt::vec(d.block_tables, 12), (std::vector<int32_t>{0, 0, 0, 8, 9, 0, 1, 2, 7, 6, 11, 0}));
  EXPECT_EQ(mdt::vec(d.context_lens, 4), (std::vector<int32_t>{0, 4, 9, 8}));
  EXPECT_EQ(mdt::vec(d.seq_lens, 4), (std::vector<int32_t>{6, 7, 10, 9}));
  EXPECT_EQ(mdt::vec(d.query_start_loc, 5), (std::vector<int32_t>{0, 6, 9, 10, 11}));
  EXPECT_EQ(mdt::vec(d.seq_start_loc, 5), (std::vector<int32_t>{0, 6, 13, 23, 32}));
  EXPECT_EQ(d.max_query_len, 6);
  EXPECT_EQ(d.max_prefill_seq_len, 7);
  EXPECT_EQ(d.max_decode_seq_len, 10);
  EXPECT_EQ(d.use_cuda_graph, 0);
  // The builder was reset: a second build without sequences fails.
  vattn_v0_metadata_t *again = reinterpret_cast<vattn_v0_metadata_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b.get(), sl, ql, 4, -1, 4, &again), VATTN_ERR_INVALID_ARGUMENT,
                   "no sequence");
  EXPECT_EQ(again, nullptr);
}

TEST(V0Builder, SlidingWindowChunkedPrefillDocstring) {
  auto b = make_builder(4, 8, 1);
  std::vector<int32_t> t = {0, 1, 0};
  auto s = seq(1, 10, 10, 10, 0, &t);
  ASSERT_VATTN_OK(vattn_v0_builder_add_seq(b.get(), &s));
  const int32_t sl[1] = {10}, ql[1] = {10};
  vattn_v0_metadata_t *out = nullptr;
  ASSERT_VATTN_OK(vattn_v0_builder_build(b.get(), sl, ql, 1, -1, 1, &out));
  V0Ptr m(out);
  auto d = describe(out);
  EXPECT_EQ(mdt::vec(d.slot_mapping, d.slot_mapping_len), (std::vector<int64_t>{-1, -1, 2, 3, 4, 5, 6, 7, 0, 1}));
  EXPECT_EQ(mdt::vec(d.block_tables, 3), (std::vector<int32_t>{0, 1, 0}));  // chunked: table kept
}

TEST(V0Builder, ProfileRunPadsEverything) {
  auto b = make_builder(16, 0, 0);
  auto s = seq(1, 5, 5, 5, 0, nullptr);
  ASSERT_VATTN_OK(vattn_v0_builder_add_seq(b.get(), &s));
  const int32_t sl[1] = {5}, ql[1] = {5};
  vattn_v0_metadata_t *out = nullptr;
  ASSERT_VATTN_OK(vattn_v0_builder_build(b.get(), sl, ql, 1, -1, 1, &out));
  V0Ptr m(out);
  auto d = describe(out);
  EXPECT_EQ(mdt::vec(d.slot_mapping, d.slot_mapping_len), std::vector<int64_t>(5, -1));
  EXPECT_EQ(d.block_tables_cols, 0);
}

TEST(V0Builder, CudaGraphPadding) {
  auto b = make_builder(4, 0, 0, 5);
  std::vector<int32_t> t0 = {7, 3}, t1 = {2, 9, 4};
  auto s0 = seq(0, 1, 6, 1, 5, &t0), s1 = seq(0, 1, 12, 1, 11, &t1);
  ASSERT_VATTN_OK(vattn_v0_builder_add_seq(b.get(), &s0));
  ASSERT_VATTN_OK(vattn_v0_builder_add_seq(b.get(), &s1));
  const int32_t sl[2] = {6, 12}, ql[2] = {1, 1};
  vattn_v0_metadata_t *out = nullptr;
  ASSERT_VATTN_OK(vattn_v0_builder_build(b.get(), sl, ql, 2, 2, 4, &out));
  V0Ptr m(out);
  auto d = describe(out);
  EXPECT_EQ(d.use_cuda_graph, 1);
  EXPECT_EQ(d.num_seqs, 4);
  EXPECT_EQ(d.num_decode_tokens, 4);
  EXPECT_EQ(mdt::vec(d.slot_mapping, d.slot_mapping_len), (std::vector<int64_t>{3 * 4 + 1, 4 * 4 + 3, -1, -1}));
  EXPECT_EQ(mdt::vec(d.seq_lens, 4), (std::vector<int32_t>{6, 12, 1, 1}));
  EXPECT_EQ(mdt::vec(d.context_lens, 4), (std::vector<int32_t>{5, 11, 0, 0}));
  ASSERT_EQ(d.block_tables_cols, 5);
  EXPECT_EQ(mdt::vec(d.block_tables, 20),
            (std::vector<int32_t>{7, 3, 0, 0, 0, 2, 9, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(V0Builder, RandomBatchesMatchNaive) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 30; ++it) {
    int32_t bs = 1 << std::uniform_int_distribution<int>(1, 4)(g);
    int32_t sw = std::uniform_int_distribution<int>(0, 1)(g) ? std::uniform_int_distribution<int32_t>(1, 40)(g) : 0;
    int32_t chunked = std::uniform_int_distribution<int>(0, 1)(g);
    auto b = make_builder(bs, sw, chunked);
    int np = std::uniform_int_distribution<int>(0, 3)(g), nd = std::uniform_int_distribution<int>(np ? 0 : 1, 4)(g);
    std::vector<std::vector<int32_t>> tables;
    tables.reserve(np + nd);
    std::vector<int64_t> ref_slots;
    std::vector<std::vector<int32_t>> ref_tables;
    std::vector<int32_t> sl, ql;
    for (int i = 0; i < np + nd; ++i) {
      bool prompt = i < np;
      int64_t seq_len = std::uniform_int_distribution<int64_t>(1, 60)(g);
      int64_t ctx = prompt ? std::uniform_int_distribution<int64_t>(0, seq_len - 1)(g) : seq_len - 1;
      int64_t q = seq_len - ctx;
      int32_t hit = prompt && ctx > 0 ? std::uniform_int_distribution<int>(0, 1)(g) : 0;
      tables.emplace_back((seq_len + bs - 1) / bs);
      for (auto &x : tables.back()) x = std::uniform_int_distribution<int32_t>(0, 1000)(g);
      int32_t swb = std::uniform_int_distribution<int32_t>(0, (int32_t)tables.back().size())(g);
      auto s = seq(prompt, q, seq_len, q, ctx, &tables.back(), swb, hit);
      ASSERT_VATTN_OK(vattn_v0_builder_add_seq(b.get(), &s));
      // Naive reference: positions [ctx, seq) with a prompt's window
      // masking the first query_len - sw positions of the query.
      const auto &t = tables.back();
      int64_t masked = prompt && sw > 0 ? std::max<int64_t>(0, q - sw) : 0;
      for (int64_t p = ctx; p < seq_len; ++p)
        ref_slots.push_back(p < masked ? -1 : (int64_t)t[p / bs] * bs + p % bs);
      if (masked > seq_len) ref_slots.insert(ref_slots.end(), masked - seq_len, -1);
      std::vector<int32_t> rt;
      if (hit) rt = t;
      else if (chunked || !prompt) rt.assign(t.end() - (swb ? swb : (int64_t)t.size()), t.end());
      ref_tables.push_back(rt);
      sl.push_back((int32_t)seq_len);
      ql.push_back((int32_t)q);
    }
    vattn_v0_metadata_t *out = nullptr;
    ASSERT_VATTN_OK(vattn_v0_builder_build(b.get(), sl.data(), ql.data(), np + nd, -1, np + nd, &out));
    V0Ptr m(out);
    auto d = describe(out);
    EXPECT_EQ(mdt::vec(d.slot_mapping, d.slot_mapping_len), ref_slots);
    size_t cols = 0;
    for (auto &t : ref_tables) cols = std::max(cols, t.size());
    ASSERT_EQ(d.block_tables_cols, (int64_t)cols);
    for (size_t r = 0; r < ref_tables.size(); ++r)
      for (size_t c = 0; c < cols; ++c)
        EXPECT_EQ(d.block_tables[r * cols + c], c < ref_tables[r].size() ? ref_tables[r][c] : 0);
    EXPECT_EQ(d.num_prefills, np);
  }
}

TEST(V0Builder, BadInputsLeaveBuilderUnchanged) {
  auto b = make_builder(4, 0, 0, 2, 50);
  std::vector<int32_t> t = {1, 2}, shortt = {1}, big = {1, 60}, three = {1, 2, 3};
  auto good = seq(0, 1, 6, 1, 5, &t);
  ASSERT_VATTN_OK(vattn_v0_builder_add_seq(b.get(), &good));
  auto bad = seq(0, 2, 6, 2, 4, &t);
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(b.get(), &bad), VATTN_ERR_INVALID_ARGUMENT, "query_len 1");
  bad = seq(1, 6, 6, 6, 0, &t);
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(b.get(), &bad), VATTN_ERR_INVALID_ARGUMENT, "prompt cannot follow");
  bad = seq(0, 1, 6, 1, 5, &shortt);
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(b.get(), &bad), VATTN_ERR_INVALID_ARGUMENT, "block_table_len");
  bad = seq(0, 1, 6, 1, 5, &big);
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(b.get(), &bad), VATTN_ERR_INVALID_ARGUMENT, "block_table[1] = 60");
  bad = seq(0, 1, 6, 1, 5, &t, 3);
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(b.get(), &bad), VATTN_ERR_INVALID_ARGUMENT, "curr_sliding_window_blocks");
  bad = seq(0, 1, 6, 1, 7, &t);
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(b.get(), &bad), VATTN_ERR_INVALID_ARGUMENT, "context_len");
  bad = seq(0, 1, -6, 1, 5, &t);
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(b.get(), &bad), VATTN_ERR_INVALID_ARGUMENT, "seq_len");
  bad = good;
  bad.struct_size = 5;
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(b.get(), &bad), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(b.get(), nullptr), VATTN_ERR_INVALID_ARGUMENT, "seq");
  EXPECT_VATTN_ERR(vattn_v0_builder_add_seq(nullptr, &good), VATTN_ERR_INVALID_ARGUMENT, "b");
  // A table wider than max_blocks_per_seq is refused at a CUDA-graph build.
  auto wide = seq(0, 1, 10, 1, 9, &three);
  ASSERT_VATTN_OK(vattn_v0_builder_add_seq(b.get(), &wide));
  const int32_t sl[3] = {6, 10, 1}, ql[3] = {1, 1, 1};
  vattn_v0_metadata_t *out = reinterpret_cast<vattn_v0_metadata_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b.get(), sl, ql, 2, 1, 3, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "max_blocks_per_seq");
  EXPECT_EQ(out, nullptr);
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b.get(), sl, ql, 3, -1, 3, &out), VATTN_ERR_INVALID_ARGUMENT, "num_seqs");
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b.get(), sl, ql, 2, -2, 2, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "cuda_graph_pad_size");
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b.get(), nullptr, ql, 2, -1, 2, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "seq_lens");
  const int32_t badq[2] = {1, 11};
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b.get(), sl, badq, 2, -1, 2, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "query_lens");
  // Nothing above changed the builder: the two good sequences build.
  ASSERT_VATTN_OK(vattn_v0_builder_build(b.get(), sl, ql, 2, -1, 2, &out));
  V0Ptr m(out);
  auto d = describe(out);
  EXPECT_EQ(mdt::vec(d.slot_mapping, d.slot_mapping_len), (std::vector<int64_t>{2 * 4 + 1, 3 * 4 + 1}));
  vattn_v0_builder_options_t o;
  vattn_v0_builder_options_init(&o);
  o.block_size = 0;
  vattn_v0_builder_t *nb = reinterpret_cast<vattn_v0_builder_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_v0_builder_create(&nb, &o), VATTN_ERR_INVALID_ARGUMENT, "block_size");
  EXPECT_EQ(nb, nullptr);
  vattn_v0_builder_options_init(&o);
  o.sliding_window = -1;
  EXPECT_VATTN_ERR(vattn_v0_builder_create(&nb, &o), VATTN_ERR_INVALID_ARGUMENT, "sliding_window");
  EXPECT_VATTN_ERR(vattn_v0_builder_create(nullptr, &o), VATTN_ERR_INVALID_ARGUMENT, "out");
  vattn_v0_builder_destroy(nullptr);
}

// ---- v0 metadata handle and accessors -------------------------------------------

struct EncDec {
  std::vector<int64_t> slots = {5, 6, 7, 9, 10};
  std::vector<int32_t> seq_lens = {4, 9}, ctx = {0, 8}, qsl = {0, 4, 5}, ssl = {0, 4, 13}, bt = {1, 2, 0, 3, 4, 5};
  std::vector<int32_t> enc = {7, 3}, cross = {11, 12, 13, 0};
  vattn_v0_metadata_desc_t desc(bool with_encoder) {
    vattn_v0_metadata_desc_t d;
    vattn_v0_metadata_desc_init(&d);
    d.num_prefills = 1;
    d.num_prefill_tokens = 4;
    d.num_decode_tokens = 1;
    d.num_seqs = 2;
    d.slot_mapping = slots.data();
    d.slot_mapping_len = 5;
    d.seq_lens = seq_lens.data();
    d.context_lens = ctx.data();
    d.query_start_loc = qsl.data();
    d.seq_start_loc = ssl.data();
    d.block_tables = bt.data();
    d.block_tables_cols = 3;
    d.max_query_len = 4;
    d.max_prefill_seq_len = 4;
    d.max_decode_seq_len = 9;
    d.max_decode_query_len = 1;
    if (with_encoder) {
      d.encoder_seq_lens = enc.data();
      d.num_encoder_tokens = 10;
      d.max_encoder_seq_len = 7;
      d.cross_block_tables = cross.data();
      d.cross_block_tables_cols = 2;
    }
    return d;
  }
};

V0Ptr create_v0(const vattn_v0_metadata_desc_t &d) {
  vattn_v0_metadata_t *m = nullptr;
  EXPECT_VATTN_OK(vattn_v0_metadata_create(&m, &d));
  return V0Ptr(m);
}

TEST(V0Metadata, CreateDescribeDeepCopies) {
  EncDec e;
  auto m = create_v0(e.desc(true));
  e.seq_lens[0] = 99;  // caller's arrays may change afterwards
  auto d = describe(m.get());
  EXPECT_EQ(mdt::vec(d.seq_lens, 2), (std::vector<int32_t>{4, 9}));
  EXPECT_EQ(mdt::vec(d.slot_mapping, d.slot_mapping_len), e.slots);
  EXPECT_EQ(mdt::vec(d.block_tables, 6), e.bt);
  EXPECT_EQ(mdt::vec(d.cross_block_tables, 4), e.cross);
  EXPECT_EQ(d.num_encoder_tokens, 10);
}

TEST(V0Metadata, TokenCountsPerAttentionType) {
  EncDec e;
  auto m = create_v0(e.desc(true));
  int64_t o[3] = {-1, -1, -1};
  ASSERT_VATTN_OK(vattn_v0_get_num_prefill_decode_query_kv_tokens(m.get(), VATTN_ATTN_DECODER, o));
  EXPECT_EQ(std::vector<int64_t>(o, o + 3), (std::vector<int64_t>{4, 4, 1}));
  ASSERT_VATTN_OK(vattn_v0_get_num_prefill_decode_query_kv_tokens(m.get(), VATTN_ATTN_ENCODER_ONLY, o));
  EXPECT_EQ(std::vector<int64_t>(o, o + 3), (std::vector<int64_t>{4, 4, 1}));
  ASSERT_VATTN_OK(vattn_v0_get_num_prefill_decode_query_kv_tokens(m.get(), VATTN_ATTN_ENCODER, o));
  EXPECT_EQ(std::vector<int64_t>(o, o + 3), (std::vector<int64_t>{10, 10, 0}));
  ASSERT_VATTN_OK(vattn_v0_get_num_prefill_decode_query_kv_tokens(m.get(), VATTN_ATTN_ENCODER_DECODER, o));
  EXPECT_EQ(std::vector<int64_t>(o, o + 3), (std::vector<int64_t>{4, 10, 1}));
  auto plain = create_v0(e.desc(false));
  EXPECT_VATTN_ERR(vattn_v0_get_num_prefill_decode_query_kv_tokens(plain.get(), VATTN_ATTN_ENCODER, o),
                   VATTN_ERR_INVALID_ARGUMENT, "num_encoder_tokens");
  EXPECT_VATTN_ERR(vattn_v0_get_num_prefill_decode_query_kv_tokens(m.get(), 9, o), VATTN_ERR_INVALID_ARGUMENT,
                   "attn_type");
  EXPECT_VATTN_ERR(vattn_v0_get_num_prefill_decode_query_kv_tokens(nullptr, 0, o), VATTN_ERR_INVALID_ARGUMENT, "md");
  EXPECT_VATTN_ERR(vattn_v0_get_num_prefill_decode_query_kv_tokens(m.get(), 0, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "out3");
  EXPECT_EQ(std::vector<int64_t>(o, o + 3), (std::vector<int64_t>{4, 10, 1}));
}

TEST(V0Metadata, SeqLenBlockTableArgs) {
  EncDec e;
  auto m = create_v0(e.desc(true));
  auto d = describe(m.get());
  const int32_t *sl = nullptr, *bt = nullptr;
  int64_t n = -1, cols = -1;
  int32_t mx = -1;
  ASSERT_VATTN_OK(vattn_v0_get_seq_len_block_table_args(m.get(), 1, VATTN_ATTN_DECODER, &sl, &n, &mx, &bt, &cols));
  EXPECT_EQ(sl, d.seq_lens);
  EXPECT_EQ(mx, 4);
  EXPECT_EQ(bt, d.block_tables);
  EXPECT_EQ(cols, 3);
  ASSERT_VATTN_OK(vattn_v0_get_seq_len_block_table_args(m.get(), 0, VATTN_ATTN_DECODER, &sl, &n, &mx, &bt, &cols));
  EXPECT_EQ(mx, 9);
  ASSERT_VATTN_OK(
      vattn_v0_get_seq_len_block_table_args(m.get(), 0, VATTN_ATTN_ENCODER_DECODER, &sl, &n, &mx, &bt, &cols));
  EXPECT_EQ(sl, d.encoder_seq_lens);
  EXPECT_EQ(mx, 7);
  EXPECT_EQ(bt, d.cross_block_tables);
  EXPECT_EQ(cols, 2);
  ASSERT_VATTN_OK(vattn_v0_get_seq_len_block_table_args(m.get(), 1, VATTN_ATTN_ENCODER, &sl, &n, &mx, &bt, &cols));
  EXPECT_EQ(sl, d.encoder_seq_lens);
  EXPECT_EQ(bt, nullptr);
  EXPECT_EQ(n, 2);
  EXPECT_VATTN_ERR(
      vattn_v0_get_seq_len_block_table_args(m.get(), 1, VATTN_ATTN_ENCODER_ONLY, &sl, &n, &mx, &bt, &cols),
      VATTN_ERR_INVALID_ARGUMENT, "invalid attention type");
  EXPECT_EQ(sl, d.encoder_seq_lens);
  auto plain = create_v0(e.desc(false));
  EXPECT_VATTN_ERR(
      vattn_v0_get_seq_len_block_table_args(plain.get(), 1, VATTN_ATTN_ENCODER, &sl, &n, &mx, &bt, &cols),
      VATTN_ERR_INVALID_ARGUMENT, "encoder_seq_lens");
}

TEST(V0Metadata, BadDescriptions) {
  std::vector<std::pair<std::function<void(vattn_v0_metadata_desc_t &)>, const char *>> cases = {
      {[](vattn_v0_metadata_desc_t &d) { d.num_seqs = -1; }, "num_seqs"},
      {[](vattn_v0_metadata_desc_t &d) { d.num_prefills = 3; }, "num_prefills"},
      {[](vattn_v0_metadata_desc_t &d) { d.num_decode_tokens = -1; }, "num_decode_tokens"},
      {[](vattn_v0_metadata_desc_t &d) { d.slot_mapping = nullptr; }, "slot_mapping"},
      {[](vattn_v0_metadata_desc_t &d) { d.seq_lens = nullptr; }, "seq_lens"},
      {[](vattn_v0_metadata_desc_t &d) { d.block_tables = nullptr; }, "block_tables"},
      {[](vattn_v0_metadata_desc_t &d) { d.block_tables_cols = -1; }, "block_tables_cols"},
      {[](vattn_v0_metadata_desc_t &d) { d.max_decode_seq_len = 5; }, "max_decode_seq_len"},
      {[](vattn_v0_metadata_desc_t &d) { d.use_cuda_graph = 2; }, "use_cuda_graph"},
      {[](vattn_v0_metadata_desc_t &d) { d.num_encoder_tokens = 11; }, "num_encoder_tokens"},
      {[](vattn_v0_metadata_desc_t &d) { d.max_encoder_seq_len = 6; }, "max_encoder_seq_len"},
      {[](vattn_v0_metadata_desc_t &d) { d.struct_size = 1; }, "struct_size"},
  };
  for (auto &c : cases) {
    EncDec e;
    auto d = e.desc(true);
    c.first(d);
    vattn_v0_metadata_t *m = reinterpret_cast<vattn_v0_metadata_t *>(0x1);
    EXPECT_VATTN_ERR(vattn_v0_metadata_create(&m, &d), VATTN_ERR_INVALID_ARGUMENT, c.second);
    EXPECT_EQ(m, nullptr);
  }
  // Array contents.
  EncDec e;
  e.slots[2] = -4;
  auto d = e.desc(true);
  vattn_v0_metadata_t *m = nullptr;
  EXPECT_VATTN_ERR(vattn_v0_metadata_create(&m, &d), VATTN_ERR_INVALID_ARGUMENT, "slot_mapping[2]");
  EncDec e2;
  e2.qsl[1] = 6;
  d = e2.desc(true);
  EXPECT_VATTN_ERR(vattn_v0_metadata_create(&m, &d), VATTN_ERR_INVALID_ARGUMENT, "query_start_loc[2]");
  EncDec e3;
  e3.ssl[2] = 12;
  d = e3.desc(true);
  EXPECT_VATTN_ERR(vattn_v0_metadata_create(&m, &d), VATTN_ERR_INVALID_ARGUMENT, "seq_start_loc");
  EXPECT_VATTN_ERR(vattn_v0_metadata_create(&m, nullptr), VATTN_ERR_INVALID_ARGUMENT, "desc");
  EXPECT_VATTN_ERR(vattn_v0_metadata_create(nullptr, &d), VATTN_ERR_INVALID_ARGUMENT, "out");
  auto ok = create_v0(EncDec().desc(true));
  vattn_v0_metadata_desc_t o;
  std::memset(&o, 0x11, sizeof o);
  o.struct_size = 3;
  vattn_v0_metadata_desc_t before = o;
  EXPECT_VATTN_ERR(vattn_v0_metadata_describe(ok.get(), &o), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_EQ(std::memcmp(&o, &before, sizeof o), 0);
  vattn_v0_metadata_destroy(nullptr);
}

// ---- CUDA-graph state ---------------------------------------------------------------

TEST(GraphState, ViewsSeeReplayedBatches) {
  vattn_graph_state_t *st = nullptr;
  ASSERT_VATTN_OK(vattn_graph_state_create(&st, 4, 3, 100));
  GsPtr s(st);
  vattn_v0_metadata_t *v = nullptr;
  ASSERT_VATTN_OK(vattn_graph_state_metadata_for_batch(st, 3, &v));
  V0Ptr view(v);
  auto d = describe(v);
  EXPECT_EQ(d.num_seqs, 3);
  EXPECT_EQ(d.num_decode_tokens, 3);
  EXPECT_EQ(d.num_prefills, 0);
  EXPECT_EQ(d.use_cuda_graph, 1);
  EXPECT_EQ(d.max_query_len, 1);
  EXPECT_EQ(d.max_decode_seq_len, 100);
  EXPECT_EQ(d.query_start_loc, nullptr);
  EXPECT_EQ(mdt::vec(d.slot_mapping, 3), std::vector<int64_t>(3, -1));
  EXPECT_EQ(mdt::vec(d.seq_lens, 3), std::vector<int32_t>(3, 1));
  EXPECT_EQ(mdt::vec(d.block_tables, 9), std::vector<int32_t>(9, 0));
  // Replay a real decode batch of 2.
  std::vector<int64_t> slots = {41, 17};
  std::vector<int32_t> sl = {30, 7}, bt = {5, 6, 2, 0};
  vattn_v0_metadata_desc_t rd;
  vattn_v0_metadata_desc_init(&rd);
  rd.num_seqs = 2;
  rd.num_decode_tokens = 2;
  rd.slot_mapping = slots.data();
  rd.slot_mapping_len = 2;
  rd.seq_lens = sl.data();
  rd.block_tables = bt.data();
  rd.block_tables_cols = 2;
  rd.max_query_len = 1;
  rd.max_decode_seq_len = 30;
  auto real = create_v0(rd);
  ASSERT_VATTN_OK(vattn_graph_state_prepare_replay(st, real.get()));
  auto d2 = describe(v);  // same addresses, new contents
  EXPECT_EQ(d2.seq_lens, d.seq_lens);
  EXPECT_EQ(mdt::vec(d2.slot_mapping, 3), (std::vector<int64_t>{41, 17, -1}));
  EXPECT_EQ(mdt::vec(d2.seq_lens, 3), (std::vector<int32_t>{30, 7, 1}));
  EXPECT_EQ(mdt::vec(d2.block_tables, 9), (std::vector<int32_t>{5, 6, 0, 2, 0, 0, 0, 0, 0}));
  // A smaller batch afterwards returns the second row to padding.
  rd.num_seqs = 1;
  rd.num_decode_tokens = 1;
  rd.slot_mapping_len = 1;
  auto one = create_v0(rd);
  ASSERT_VATTN_OK(vattn_graph_state_prepare_replay(st, one.get()));
  EXPECT_EQ(mdt::vec(d2.slot_mapping, 3), (std::vector<int64_t>{41, -1, -1}));
  EXPECT_EQ(mdt::vec(d2.seq_lens, 3), (std::vector<int32_t>{30, 1, 1}));
  EXPECT_EQ(mdt::vec(d2.block_tables, 6), (std::vector<int32_t>{5, 6, 0, 0, 0, 0}));
  // Replaying the state's own view is safe (aliasing).
  ASSERT_VATTN_OK(vattn_graph_state_prepare_replay(st, v));
  EXPECT_EQ(mdt::vec(d2.seq_lens, 3), (std::vector<int32_t>{30, 1, 1}));
}

TEST(GraphState, BadInputs) {
  vattn_graph_state_t *st = reinterpret_cast<vattn_graph_state_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_graph_state_create(&st, 0, 3, 100), VATTN_ERR_INVALID_ARGUMENT, "max_batch_size");
  EXPECT_EQ(st, nullptr);
  EXPECT_VATTN_ERR(vattn_graph_state_create(&st, 4, 0, 100), VATTN_ERR_INVALID_ARGUMENT, "max_blocks_per_seq");
  EXPECT_VATTN_ERR(vattn_graph_state_create(&st, 4, 3, 0), VATTN_ERR_INVALID_ARGUMENT, "max_seq_len_to_capture");
  EXPECT_VATTN_ERR(vattn_graph_state_create(&st, INT64_C(1) << 30, 1 << 30, 10), VATTN_ERR_INVALID_ARGUMENT,
                   "max_blocks_per_seq");
  EXPECT_VATTN_ERR(vattn_graph_state_create(nullptr, 4, 3, 100), VATTN_ERR_INVALID_ARGUMENT, "out");
  ASSERT_VATTN_OK(vattn_graph_state_create(&st, 4, 3, 100));
  GsPtr s(st);
  vattn_v0_metadata_t *v = reinterpret_cast<vattn_v0_metadata_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_graph_state_metadata_for_batch(st, 5, &v), VATTN_ERR_INVALID_ARGUMENT, "batch_size");
  EXPECT_EQ(v, nullptr);
  EXPECT_VATTN_ERR(vattn_graph_state_metadata_for_batch(st, 0, &v), VATTN_ERR_INVALID_ARGUMENT, "batch_size");
  EXPECT_VATTN_ERR(vattn_graph_state_metadata_for_batch(nullptr, 1, &v), VATTN_ERR_INVALID_ARGUMENT, "st");
  ASSERT_VATTN_OK(vattn_graph_state_metadata_for_batch(st, 2, &v));
  V0Ptr view(v);
  EncDec e;
  auto prefill = create_v0(e.desc(false));
  EXPECT_VATTN_ERR(vattn_graph_state_prepare_replay(st, prefill.get()), VATTN_ERR_INVALID_ARGUMENT, "prefills");
  std::vector<int64_t> slots = {1};
  std::vector<int32_t> sl = {101}, bt = {1, 2, 3, 4};
  vattn_v0_metadata_desc_t rd;
  vattn_v0_metadata_desc_init(&rd);
  rd.num_seqs = 1;
  rd.slot_mapping = slots.data();
  rd.slot_mapping_len = 1;
  rd.seq_lens = sl.data();
  rd.block_tables = bt.data();
  rd.block_tables_cols = 2;
  rd.max_decode_seq_len = 101;
  auto longseq = create_v0(rd);
  EXPECT_VATTN_ERR(vattn_graph_state_prepare_replay(st, longseq.get()), VATTN_ERR_INVALID_ARGUMENT,
                   "max_seq_len_to_capture");
  sl[0] = 5;
  rd.block_tables_cols = 4;
  auto wide = create_v0(rd);
  EXPECT_VATTN_ERR(vattn_graph_state_prepare_replay(st, wide.get()), VATTN_ERR_INVALID_ARGUMENT,
                   "block_tables_cols");
  EXPECT_VATTN_ERR(vattn_graph_state_prepare_replay(nullptr, wide.get()), VATTN_ERR_INVALID_ARGUMENT, "st");
  EXPECT_VATTN_ERR(vattn_graph_state_prepare_replay(st, nullptr), VATTN_ERR_INVALID_ARGUMENT, "md");
  // Nothing was written.
  auto d = describe(v);
  EXPECT_EQ(mdt::vec(d.seq_lens, 2), std::vector<int32_t>(2, 1));
  EXPECT_EQ(mdt::vec(d.slot_mapping, 2), std::vector<int64_t>(2, -1));
  vattn_graph_state_destroy(nullptr);
}

}  // namespace
