// KV-sharing fast prefill, spec-decode views, cascade decision, prefill
// chunking, DCP local lengths, global hyper-parameters.
#include "md_util.h"

namespace {

TEST(FastPrefill, BucketsLogitsIndicesPerRequest) {
  std::mt19937_64 g(vt::test_seed());
  // Requests of 4, 0, 5, 3 tokens: qsl [0, 4, 4, 9, 12].
  mdt::Batch b = mdt::make_batch(g, {4, 0, 5, 3}, {9, 2, 5, 30}, 4, 2);
  std::vector<int32_t> logits = {3, 5, 8, 11, 0, 0};
  auto d = b.desc();
  d.logits_indices_padded = logits.data();
  d.logits_indices_len = 6;
  d.num_logits_indices = 4;
  auto m = mdt::create(d);
  vattn_metadata_t *out = nullptr;
  ASSERT_VATTN_OK(vattn_make_kv_sharing_fast_prefill_metadata(m.get(), &out));
  mdt::MdPtr f(out);
  auto o = mdt::describe(out);
  EXPECT_EQ(mdt::vec(o.query_start_loc, 5), (std::vector<int32_t>{0, 1, 1, 3, 4}));
  EXPECT_EQ(o.num_actual_tokens, 4);
  EXPECT_EQ(o.max_query_len, 2);
  EXPECT_EQ(mdt::vec(o.seq_lens, 4), b.seq_lens);
  EXPECT_EQ(mdt::vec(o.block_table, b.rows * b.cols), b.block_table);
  EXPECT_EQ(o.max_seq_len, 30);
  EXPECT_EQ(o.causal, 1);
  EXPECT_EQ(mdt::vec(o.slot_mapping, o.slot_mapping_len),
            (std::vector<int64_t>{b.slots[3], b.slots[5], b.slots[8], b.slots[11]}));
}

TEST(FastPrefill, DecodeBatchUnchangedAndErrors) {
  std::mt19937_64 g(vt::test_seed());
  mdt::Batch b = mdt::make_batch(g, {1, 1}, {9, 2}, 4);
  auto m = mdt::create(b.desc());
  vattn_metadata_t *out = nullptr;
  ASSERT_VATTN_OK(vattn_make_kv_sharing_fast_prefill_metadata(m.get(), &out));
  mdt::MdPtr f(out);
  auto o = mdt::describe(out);
  EXPECT_EQ(mdt::vec(o.query_start_loc, 3), b.qsl);
  EXPECT_EQ(mdt::vec(o.slot_mapping, o.slot_mapping_len), b.slots);
  mdt::Batch p = mdt::make_batch(g, {3, 1}, {9, 2}, 4);
  auto mp = mdt::create(p.desc());
  auto sentinel = reinterpret_cast<vattn_metadata_t *>(0x55);
  out = sentinel;
  EXPECT_VATTN_ERR(vattn_make_kv_sharing_fast_prefill_metadata(mp.get(), &out), VATTN_ERR_INVALID_ARGUMENT,
                   "logits_indices_padded");
  EXPECT_EQ(out, nullptr);
  std::vector<int32_t> unsorted = {2, 0};
  auto d = p.desc();
  d.logits_indices_padded = unsorted.data();
  d.logits_indices_len = 2;
  d.num_logits_indices = 2;
  auto mu = mdt::create(d);
  EXPECT_VATTN_ERR(vattn_make_kv_sharing_fast_prefill_metadata(mu.get(), &out), VATTN_ERR_INVALID_ARGUMENT,
                   "logits_indices_padded[1]");
  EXPECT_VATTN_ERR(vattn_make_kv_sharing_fast_prefill_metadata(nullptr, &out), VATTN_ERR_INVALID_ARGUMENT, "md");
  EXPECT_VATTN_ERR(vattn_make_kv_sharing_fast_prefill_metadata(mp.get(), nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "out");
}

// ---- spec-decode views ----------------------------------------------------------

TEST(SpecDecodeReshape, ViewsKeepStridesAndRoundTrip) {
  std::mt19937_64 g(vt::test_seed());
  // A strided query: [12, 4, 8] inside a [12, 6, 8] buffer (head stride 8,
  // token stride 48) with an offset.
  vt::HostTensor buf({12, 6, 8}, vt::dl_f32());
  for (int64_t i = 0; i < 12 * 6 * 8; ++i) buf.as<float>()[i] = vt::uniform(g, -1, 1);
  std::vector<int64_t> shape = {12, 4, 8}, strides = {48, 8, 1};
  DLTensor q = buf.t;
  q.shape = shape.data();
  q.strides = strides.data();
  q.byte_offset = 8 * sizeof(float);
  DLTensor v;
  int64_t sb[4] = {-1, -1, -1, -1}, tb[4] = {-1, -1, -1, -1};
  ASSERT_VATTN_OK(vattn_reshape_query_for_spec_decode(&q, 3, &v, sb, tb));
  EXPECT_EQ(v.ndim, 4);
  EXPECT_EQ(v.data, q.data);
  EXPECT_EQ(v.byte_offset, q.byte_offset);
  EXPECT_EQ(std::vector<int64_t>(sb, sb + 4), (std::vector<int64_t>{3, 4, 4, 8}));
  EXPECT_EQ(std::vector<int64_t>(tb, tb + 4), (std::vector<int64_t>{192, 48, 8, 1}));
  // Element (b, l, h, d) of the view is query token b * 4 + l.
  auto at = [](const DLTensor &t, std::initializer_list<int64_t> idx) {
    int64_t off = 0, i = 0;
    for (auto x : idx) off += x * t.strides[i++];
    return reinterpret_cast<const float *>(static_cast<const char *>(t.data) + t.byte_offset)[off];
  };
  EXPECT_EQ(at(v, {2, 1, 3, 5}), at(q, {9, 3, 5}));
  DLTensor back;
  int64_t sb2[4], tb2[4];
  ASSERT_VATTN_OK(vattn_reshape_attn_output_for_spec_decode(&v, &back, sb2, tb2));
  EXPECT_EQ(back.ndim, 3);
  EXPECT_EQ(std::vector<int64_t>(sb2, sb2 + 3), shape);
  EXPECT_EQ(std::vector<int64_t>(tb2, tb2 + 3), strides);
  // 3-D output is returned as is.
  ASSERT_VATTN_OK(vattn_reshape_attn_output_for_spec_decode(&q, &back, sb2, tb2));
  EXPECT_EQ(back.ndim, 3);
  EXPECT_EQ(std::vector<int64_t>(tb2, tb2 + 3), strides);
}

TEST(SpecDecodeReshape, BadInputs) {
  vt::HostTensor q({10, 2, 4}, vt::dl_f32());
  DLTensor v;
  std::memset(&v, 0x3c, sizeof v);
  DLTensor before = v;
  int64_t sb[4], tb[4];
  EXPECT_VATTN_ERR(vattn_reshape_query_for_spec_decode(q.dl(), 3, &v, sb, tb), VATTN_ERR_INVALID_ARGUMENT,
                   "batch_size");
  EXPECT_VATTN_ERR(vattn_reshape_query_for_spec_decode(q.dl(), 0, &v, sb, tb), VATTN_ERR_INVALID_ARGUMENT,
                   "batch_size");
  vt::HostTensor q2({10, 8}, vt::dl_f32());
  EXPECT_VATTN_ERR(vattn_reshape_query_for_spec_decode(q2.dl(), 2, &v, sb, tb), VATTN_ERR_INVALID_ARGUMENT,
                   "query");
  EXPECT_VATTN_ERR(vattn_reshape_query_for_spec_decode(nullptr, 2, &v, sb, tb), VATTN_ERR_INVALID_ARGUMENT,
                   "query");
  EXPECT_VATTN_ERR(vattn_reshape_query_for_spec_decode(q.dl(), 2, &v, nullptr, tb), VATTN_ERR_INVALID_ARGUMENT,
                   "shape_buf");
  EXPECT_VATTN_ERR(vattn_reshape_attn_output_for_spec_decode(q2.dl(), &v, sb, tb), VATTN_ERR_INVALID_ARGUMENT,
                   "output");
  // 4-D whose [B, L] cannot merge (B strided past L rows).
  vt::HostTensor o({2, 3, 2, 4}, vt::dl_f32(), {48, 8, 4, 1});
  EXPECT_VATTN_ERR(vattn_reshape_attn_output_for_spec_decode(o.dl(), &v, sb, tb), VATTN_ERR_INVALID_ARGUMENT,
                   "cannot be merged");
  EXPECT_EQ(std::memcmp(&v, &before, sizeof v), 0);
}

// ---- cascade ------------------------------------------------------------------------

int32_t cascade(int64_t prefix, const std::vector<int32_t> &q, int32_t hq, int32_t hkv, int32_t alibi = 0,
                int32_t sw = 0, int32_t local = 0, int32_t sms = 132, int32_t dcp = 1) {
  int32_t out = -1;
  EXPECT_VATTN_OK(vattn_use_cascade_attention(prefix, q.data(), (int64_t)q.size(), hq, hkv, alibi, sw, local,
                                              sms, dcp, &out));
  return out;
}

TEST(Cascade, Rules) {
  std::vector<int32_t> dec8(8, 1), mixed(8, 1), big(1000, 1);
  mixed[3] = 7;
  EXPECT_EQ(cascade(255, mixed, 32, 8), 0);  // prefix too short
  EXPECT_EQ(cascade(256, mixed, 32, 8), 1);  // no FlashDecoding in use
  EXPECT_EQ(cascade(256, std::vector<int32_t>(7, 3), 32, 8), 0);  // < 8 requests
  EXPECT_EQ(cascade(4096, mixed, 32, 8, 1), 0);
  EXPECT_EQ(cascade(4096, mixed, 32, 8, 0, 1), 0);
  EXPECT_EQ(cascade(4096, mixed, 32, 8, 0, 0, 1), 0);
  EXPECT_EQ(cascade(4096, mixed, 32, 8, 0, 0, 0, 132, 2), 0);  // DCP
  EXPECT_EQ(cascade(4096, dec8, 32, 32), 1);  // MHA: no FlashDecoding
  // GQA all-decode: compare the two time models by hand.
  // 8 reqs, 32 q heads, 8 kv heads, 132 SMs, prefix 1024 (8 tiles):
  // cascade = ceil(32 * 1 / 132) * 8 = 8; fd = ceil(8 * 8 * 1 * 8 / 132) = 4 -> no.
  EXPECT_EQ(cascade(1024, dec8, 32, 8), 0);
  // 1000 reqs: cascade = ceil(32 * 8 / 132) * 8 = 16; fd = ceil(1000*8*8/132) = 485 -> yes.
  EXPECT_EQ(cascade(1024, big, 32, 8), 1);
}

TEST(Cascade, BadInputs) {
  std::vector<int32_t> q(8, 1);
  int32_t out = -3;
  EXPECT_VATTN_ERR(vattn_use_cascade_attention(-1, q.data(), 8, 32, 8, 0, 0, 0, 132, 1, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "common_prefix_len");
  EXPECT_VATTN_ERR(vattn_use_cascade_attention(512, nullptr, 8, 32, 8, 0, 0, 0, 132, 1, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "query_lens");
  EXPECT_VATTN_ERR(vattn_use_cascade_attention(512, q.data(), -8, 32, 8, 0, 0, 0, 132, 1, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "num_reqs");
  EXPECT_VATTN_ERR(vattn_use_cascade_attention(512, q.data(), 8, 0, 8, 0, 0, 0, 132, 1, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "num_q_heads");
  EXPECT_VATTN_ERR(vattn_use_cascade_attention(512, q.data(), 8, 32, 5, 0, 0, 0, 132, 1, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "num_kv_heads");
  EXPECT_VATTN_ERR(vattn_use_cascade_attention(512, q.data(), 8, 32, 8, 0, 0, 0, 0, 1, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "num_sms");
  EXPECT_VATTN_ERR(vattn_use_cascade_attention(512, q.data(), 8, 32, 8, 0, 0, 0, 132, 0, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "dcp_world_size");
  EXPECT_VATTN_ERR(vattn_use_cascade_attention(512, q.data(), 8, 32, 8, 0, 0, 0, 132, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "out");
  EXPECT_EQ(out, -3);
}

// ---- prefill chunks -------------------------------------------------------------------

TEST(SplitPrefillChunks, GreedyPacking) {
  const int32_t s[5] = {3, 4, 2, 5, 1};
  int64_t out[10], n = -1;
  std::fill(out, out + 10, -9);
  ASSERT_VATTN_OK(vattn_split_prefill_chunks(s, 5, 7, 10, out, 5, &n));
  ASSERT_EQ(n, 3);
  EXPECT_EQ(std::vector<int64_t>(out, out + 6), (std::vector<int64_t>{10, 12, 12, 14, 14, 15}));
  EXPECT_EQ(out[6], -9);
}

TEST(SplitPrefillChunks, RandomChunksAreMaximalAndFit) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 50; ++it) {
    int64_t n = std::uniform_int_distribution<int64_t>(0, 20)(g);
    int64_t ws = std::uniform_int_distribution<int64_t>(10, 60)(g);
    std::vector<int32_t> s(n);
    for (auto &x : s) x = std::uniform_int_distribution<int32_t>(0, (int32_t)ws)(g);
    std::vector<int64_t> out(2 * n + 2, -9);
    int64_t k = -1;
    ASSERT_VATTN_OK(vattn_split_prefill_chunks(s.data(), n, ws, 0, out.data(), n + 1, &k));
    int64_t expect_start = 0;
    for (int64_t c = 0; c < k; ++c) {
      int64_t a = out[2 * c], e = out[2 * c + 1], sum = 0;
      EXPECT_EQ(a, expect_start);
      for (int64_t i = a; i < e; ++i) sum += s[i];
      EXPECT_LE(sum, ws);
      if (e < n) EXPECT_GT(sum + s[e], ws);  // greedy: the next one would not fit
      expect_start = e;
    }
    EXPECT_EQ(expect_start, n);
  }
}

TEST(SplitPrefillChunks, BadInputs) {
  const int32_t s[3] = {3, 9, 2};
  int64_t out[6] = {-9, -9, -9, -9, -9, -9}, n = -1;
  EXPECT_VATTN_ERR(vattn_split_prefill_chunks(s, 3, 8, 0, out, 3, &n), VATTN_ERR_INVALID_ARGUMENT, "seq_lens");
  EXPECT_VATTN_ERR(vattn_split_prefill_chunks(s, 3, 9, 0, out, 1, &n), VATTN_ERR_BUFFER_TOO_SMALL,
                   "out_capacity_pairs");
  EXPECT_VATTN_ERR(vattn_split_prefill_chunks(s, 3, -1, 0, out, 3, &n), VATTN_ERR_INVALID_ARGUMENT,
                   "workspace_size");
  EXPECT_VATTN_ERR(vattn_split_prefill_chunks(s, -3, 9, 0, out, 3, &n), VATTN_ERR_INVALID_ARGUMENT, "num_reqs");
  EXPECT_VATTN_ERR(vattn_split_prefill_chunks(nullptr, 3, 9, 0, out, 3, &n), VATTN_ERR_INVALID_ARGUMENT,
                   "seq_lens");
  EXPECT_VATTN_ERR(vattn_split_prefill_chunks(s, 3, 9, -1, out, 3, &n), VATTN_ERR_INVALID_ARGUMENT,
                   "request_offset");
  EXPECT_VATTN_ERR(vattn_split_prefill_chunks(s, 3, 9, 0, out, 3, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "num_chunks");
  EXPECT_EQ(n, -1);
  EXPECT_EQ(out[0], -9);
}

// ---- DCP -----------------------------------------------------------------------------

TEST(DcpLocalSeqLens, MatchesDealingTokens) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 40; ++it) {
    int32_t size = std::uniform_int_distribution<int32_t>(1, 8)(g);
    int32_t il = std::uniform_int_distribution<int32_t>(1, 5)(g);
    int64_t n = std::uniform_int_distribution<int64_t>(1, 10)(g);
    std::vector<int32_t> s(n);
    for (auto &x : s) x = std::uniform_int_distribution<int32_t>(0, 200)(g);
    std::vector<int32_t> all(n * size, -1), one(n, -1);
    ASSERT_VATTN_OK(vattn_get_dcp_local_seq_lens(s.data(), n, size, -1, il, all.data()));
    int32_t rank = std::uniform_int_distribution<int32_t>(0, size - 1)(g);
    ASSERT_VATTN_OK(vattn_get_dcp_local_seq_lens(s.data(), n, size, rank, il, one.data()));
    for (int64_t r = 0; r < n; ++r) {
      // Token i goes to rank (i / il) % size.
      std::vector<int32_t> cnt(size, 0);
      for (int32_t i = 0; i < s[r]; ++i) cnt[(i / il) % size]++;
      for (int32_t k = 0; k < size; ++k) EXPECT_EQ(all[r * size + k], cnt[k]);
      EXPECT_EQ(one[r], cnt[rank]);
    }
  }
}

TEST(DcpLocalSeqLens, BadInputs) {
  const int32_t s[2] = {5, 9};
  int32_t out[2] = {-1, -1};
  EXPECT_VATTN_ERR(vattn_get_dcp_local_seq_lens(s, 2, 0, 0, 1, out), VATTN_ERR_INVALID_ARGUMENT, "dcp_size");
  EXPECT_VATTN_ERR(vattn_get_dcp_local_seq_lens(s, 2, 2, 2, 1, out), VATTN_ERR_INVALID_ARGUMENT, "dcp_rank");
  EXPECT_VATTN_ERR(vattn_get_dcp_local_seq_lens(s, 2, 2, 0, 0, out), VATTN_ERR_INVALID_ARGUMENT, "interleave");
  EXPECT_VATTN_ERR(vattn_get_dcp_local_seq_lens(nullptr, 2, 2, 0, 1, out), VATTN_ERR_INVALID_ARGUMENT, "seq_lens");
  EXPECT_VATTN_ERR(vattn_get_dcp_local_seq_lens(s, 2, 2, 0, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "out");
  EXPECT_VATTN_ERR(vattn_get_dcp_local_seq_lens(s, -2, 2, 0, 1, out), VATTN_ERR_INVALID_ARGUMENT, "num_reqs");
  const int32_t neg[2] = {5, -9};
  EXPECT_VATTN_ERR(vattn_get_dcp_local_seq_lens(neg, 2, 2, 0, 1, out), VATTN_ERR_INVALID_ARGUMENT, "seq_lens");
  EXPECT_EQ(out[0], -1);
  EXPECT_EQ(out[1], -1);
}

// ---- global hyper-parameters ------------------------------------------------------------

TEST(InferGlobalHyperparameters, Flags) {
  std::vector<vattn_per_layer_params_t> l(3, vattn_per_layer_params_t{127, 0.f, 0.125f, 0});
  vattn_global_params_t g;
  ASSERT_VATTN_OK(vattn_infer_global_hyperparameters(l.data(), 3, &g));
  EXPECT_EQ(g.params.window_left, 127);
  EXPECT_EQ(g.params.sm_scale, 0.125f);
  EXPECT_EQ(g.has_same_window_lefts, 1);
  EXPECT_EQ(g.has_same_all_params, 1);
  l[2].logits_soft_cap = 30.f;
  ASSERT_VATTN_OK(vattn_infer_global_hyperparameters(l.data(), 3, &g));
  EXPECT_EQ(g.has_same_window_lefts, 1);
  EXPECT_EQ(g.has_same_all_params, 0);
  l[1].window_left = -1;  // a full-attention layer among windowed ones: not an error
  ASSERT_VATTN_OK(vattn_infer_global_hyperparameters(l.data(), 3, &g));
  EXPECT_EQ(g.has_same_window_lefts, 0);
  EXPECT_EQ(g.params.window_left, 127);  // the first layer's
  vattn_global_params_t before = g;
  EXPECT_VATTN_ERR(vattn_infer_global_hyperparameters(l.data(), 0, &g), VATTN_ERR_INVALID_ARGUMENT,
                   "no attention layers");
  EXPECT_VATTN_ERR(vattn_infer_global_hyperparameters(nullptr, 3, &g), VATTN_ERR_INVALID_ARGUMENT, "layers");
  EXPECT_VATTN_ERR(vattn_infer_global_hyperparameters(l.data(), 3, nullptr), VATTN_ERR_INVALID_ARGUMENT, "out");
  EXPECT_EQ(std::memcmp(&g, &before, sizeof g), 0);
}

}  // namespace
