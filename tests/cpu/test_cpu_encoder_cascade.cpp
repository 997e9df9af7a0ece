// test_cpu_encoder_cascade.cpp -- encoder, encoder-only and cross
// attention, and cascade (shared prefix) attention, against the oracle.
#include "cpu_harness.h"

namespace {

using ct::Config;

std::mt19937_64 seeded() { return ct::seeded_rng(); }

TEST(CpuEncoder, EncoderNonCausalNoCache) {
  auto g = seeded();
  for (int32_t dt : {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_BFLOAT16}) {
    Config c;
    c.attn_type = VATTN_ATTN_ENCODER;
    c.dtype = dt;
    c.pad_tokens = 2;
    ct::run_case(c, {7, 1, 33}, {}, g);
  }
}

TEST(CpuEncoder, EncoderOnlyTwoSidedWindow) {
  auto g = seeded();
  for (int w : {0, 1, 5, 16}) {
    Config c;
    c.attn_type = VATTN_ATTN_ENCODER_ONLY;
    c.sliding_window = w;
    c.head_size = 112;
    ct::run_case(c, {20, 3, 41}, {}, g);
  }
}

TEST(CpuEncoder, EncoderOnlyWithAlibiSinksSoftCap) {
  auto g = seeded();
  Config c;
  c.attn_type = VATTN_ATTN_ENCODER_ONLY;
  c.alibi = true;
  c.sinks = true;
  c.soft_cap = 2.f;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  ct::run_case(c, {12, 30}, {}, g);
}

TEST(CpuEncoder, CrossAttentionWritesEncoderKv) {
  auto g = seeded();
  for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND}) {
    Config c;
    c.attn_type = VATTN_ATTN_ENCODER_DECODER;
    c.causal = false;
    c.layout = layout;
    // Decoder queries (1 token decode, 4-token prompt) over encoder lengths.
    ct::run_case(c, {1, 4, 2}, {30, 17, 50}, g);
  }
}

TEST(CpuEncoder, CrossAttentionFromCacheOnly) {
  auto g = seeded();
  Config c;
  c.attn_type = VATTN_ATTN_ENCODER_DECODER;
  c.causal = false;
  c.pass_kv = false;
  c.dtype = VATTN_DTYPE_FLOAT16;
  c.kv_cache_dtype = VATTN_KV_CACHE_DTYPE_FP8_E5M2;
  c.k_scale = 2.f;
  ct::run_case(c, {1, 1, 3}, {25, 9, 40}, g);
}

// Cascade: a shared prefix of P tokens in the same physical blocks.
TEST(CpuCascade, MatchesOracleAndNonCascade) {
  auto g = seeded();
  for (int32_t dt : {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_BFLOAT16})
    for (bool sinks : {false, true}) {
      Config c;
      c.dtype = dt;
      c.sinks = sinks;
      c.common_prefix_len = 32;
      c.pad_tokens = 1;
      std::vector<int32_t> q{1, 1, 5, 1, 12}, s{40, 33, 60, 90, 44};
      ct::run_case(c, q, s, g);
      // Same metadata without cascade gives the same answer (oracle again).
      c.common_prefix_len = 0;
      ct::run_case(c, q, s, g);
    }
}

TEST(CpuCascade, SoftCapAndGqaHeadSizes) {
  auto g = seeded();
  for (int D : {64, 128, 256}) {
    Config c;
    c.head_size = D;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.soft_cap = 5.f;
    c.block_size = 8;
    c.common_prefix_len = 24;
    c.layout = D == 128 ? VATTN_LAYOUT_HND : VATTN_LAYOUT_NHD;
    ct::run_case(c, {3, 1, 7}, {30, 25, 61}, g);
  }
}

// Cascade and plain runs of one problem agree with each other directly.
TEST(CpuCascade, SameOutputBitsCloseToPlain) {
  auto g = seeded();
  Config c;
  c.common_prefix_len = 16;
  std::vector<int32_t> q{2, 1, 4}, s{20, 18, 50};
  auto p = ct::make_problem(c, q, s, g);
  ASSERT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), 16, p->md.get(), 0, nullptr));
  ASSERT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args));
  std::vector<float> casc(p->out.as<float>(), p->out.as<float>() + p->T * c.num_heads * c.head_size);
  std::vector<float> lse_c(p->lse.as<float>(), p->lse.as<float>() + p->lse.nbytes() / 4);
  // Second run: plan without cascade; K/V already in the cache.
  ASSERT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), 0, p->md.get(), 0, nullptr));
  ASSERT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args));
  for (size_t i = 0; i < casc.size(); ++i)
    ASSERT_NEAR(casc[i], p->out.as<float>()[i], 2e-5 + 1e-5 * std::fabs(casc[i])) << i;
  for (size_t i = 0; i < lse_c.size(); ++i)
    if (std::isfinite(lse_c[i])) {
      ASSERT_NEAR(lse_c[i], p->lse.as<float>()[i], 1e-4) << i;
    }
}

TEST(CpuCascade, RejectsAlibiWindowAndNonDecoder) {
  auto g = seeded();
  for (int what = 0; what < 3; ++what) {
    Config c;
    c.common_prefix_len = 16;
    if (what == 0) c.alibi = true;
    if (what == 1) c.sliding_window = 8;
    if (what == 2) c.causal = false;
    auto p = ct::make_problem(c, {1, 2}, {20, 30}, g);
    ASSERT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), 16, p->md.get(), 0, nullptr));
    const char *needle = what == 0 ? "ALiBi" : what == 1 ? "sliding window" : "causal";
    EXPECT_VATTN_ERR(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args),
                     VATTN_ERR_UNSUPPORTED, needle);
    EXPECT_EQ(p->cache.bytes, p->cache_before) << "cache written on a rejected call";
  }
}

TEST(CpuCascade, BuildRejectsBadPrefix) {
  auto g = seeded();
  Config c;
  auto p = ct::make_problem(c, {1, 2}, {20, 30}, g);
  // Not a multiple of the block size / beyond a request's context.
  EXPECT_VATTN_ERR(vattn_builder_build(p->builder.get(), p->plan.get(), 8, p->md.get(), 0, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "common_prefix_len");
  EXPECT_VATTN_ERR(vattn_builder_build(p->builder.get(), p->plan.get(), 32, p->md.get(), 0, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "common_prefix_len");
}

}  // namespace

namespace {

// One thread: every work item covers all KV heads (the head-sweep path).
TEST(CpuWholeRequestItems, CascadeEncoderDecoderOnOneThread) {
  auto g = ct::seeded_rng();
  ct::Config c;
  c.num_threads = 1;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.common_prefix_len = 32;
  c.sinks = true;
  ct::run_case(c, {1, 3, 1, 9, 1}, {200, 90, 150, 64, 33}, g);
  ct::Config e;
  e.num_threads = 1;
  e.num_kv_heads = 4;
  e.attn_type = VATTN_ATTN_ENCODER_ONLY;
  e.sliding_window = 40;
  ct::run_case(e, {150, 7, 90, 1}, {}, g);
  ct::Config d;
  d.num_threads = 1;
  d.num_kv_heads = 4;
  d.alibi = true;
  d.layout = VATTN_LAYOUT_HND;
  d.dtype = VATTN_DTYPE_BFLOAT16;
  ct::run_case(d, {1, 1, 1, 1, 1, 1}, {300, 129, 64, 65, 1, 17}, g);
}

}  // namespace
