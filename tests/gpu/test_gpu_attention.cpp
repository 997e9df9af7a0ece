// test_gpu_attention.cpp -- the CUDA backend's forward against the float64
// oracle and the CPU backend over a sampled grid: head sizes x block sizes x
// GQA x {fp16, bf16} x cache {auto, e4m3, e5m2} x {NHD, HND} x features
// (sliding window, soft-cap, ALiBi, sinks) x batch mixes.  Tolerances: the
// CPU suite's (atol 1e-2, rtol 1e-2 on outputs; LSE 1e-4 + 1e-5 |x|; cache
// bytes exact) and |CUDA - CPU| <= 2e-2.  VATTN_GPU_CASES sets the number
// of sampled cases per mix (default 24); VATTN_TEST_SEED replays a run.
#include <cstdlib>

#include "gpu_harness.h"

namespace {

int cases_per_mix() {
  const char *e = std::getenv("VATTN_GPU_CASES");
  int n = e ? std::atoi(e) : 24;
  return n > 0 ? n : 1;
}

template <class T>
T pick(std::mt19937_64 &g, std::initializer_list<T> v) {
  return *(v.begin() + g() % v.size());
}

ct::Config random_config(std::mt19937_64 &g) {
  ct::Config c;
  c.head_size = pick(g, {64, 80, 96, 112, 128, 256});
  c.block_size = pick(g, {16, 32, 16, 32, 64});
  const int G = pick(g, {1, 4, 8});
  c.num_kv_heads = pick(g, {1, 2});
  c.num_heads = c.num_kv_heads * G;
  c.dtype = pick(g, {VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16});
  c.kv_cache_dtype = pick(g, {VATTN_KV_CACHE_DTYPE_AUTO, VATTN_KV_CACHE_DTYPE_AUTO,
                              VATTN_KV_CACHE_DTYPE_FP8_E4M3, VATTN_KV_CACHE_DTYPE_FP8_E5M2});
  if (c.kv_cache_dtype != VATTN_KV_CACHE_DTYPE_AUTO) {
    c.k_scale = pick(g, {0.5f, 0.25f, 1.f});
    c.v_scale = pick(g, {0.5f, 0.125f, 1.f});
  }
  c.layout = pick(g, {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND});
  if (g() % 4 == 0) c.sliding_window = pick(g, {1, 7, 33, 100, 257});
  if (g() % 4 == 0) c.soft_cap = pick(g, {0.5f, 2.f, 10.f});
  c.alibi = g() % 4 == 0;
  c.sinks = g() % 4 == 0;
  c.pad_tokens = static_cast<int>(g() % 4);
  c.want_lse = g() % 8 != 0;
  c.num_threads = 8;
  return c;
}

void run_mix(int mix) {
  const uint64_t seed = vt::test_seed();
  std::mt19937_64 g(seed);
  const int n = cases_per_mix();
  for (int i = 0; i < n; ++i) {
    ct::Config c = random_config(g);
    std::vector<int32_t> q, s;
    switch (mix) {
      case 0:  // pure decode, one long sequence to force split-KV
        for (int r = 0; r < 5; ++r) {
          q.push_back(1);
          s.push_back(1 + static_cast<int>(g() % 700));
        }
        q.push_back(1);
        s.push_back(1500 + static_cast<int>(g() % 2000));
        break;
      case 1:  // pure prefill
        for (int r = 0; r < 3; ++r) {
          const int l = 1 + static_cast<int>(g() % 150);
          q.push_back(l);
          s.push_back(l);
        }
        break;
      case 2:  // chunked prefill with cached context
        for (int r = 0; r < 3; ++r) {
          const int l = 1 + static_cast<int>(g() % 80);
          q.push_back(l);
          s.push_back(l + 1 + static_cast<int>(g() % 300));
        }
        break;
      default:  // mixed: decodes, spec-decode, chunked, fresh prefill
        ct::random_batch(g, 6, 300, 40, &q, &s);
        q.push_back(3);
        s.push_back(3 + static_cast<int>(g() % 200));
        break;
    }
    SCOPED_TRACE("seed " + std::to_string(seed) + " case " + std::to_string(i) + ": " + c.str());
    gt::run_gpu_case(c, q, s, g);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace

TEST(GpuAttention, PureDecode) {
  GPU_TEST_REQUIRE();
  run_mix(0);
}
TEST(GpuAttention, PurePrefill) {
  GPU_TEST_REQUIRE();
  run_mix(1);
}
TEST(GpuAttention, ChunkedPrefill) {
  GPU_TEST_REQUIRE();
  run_mix(2);
}
TEST(GpuAttention, Mixed) {
  GPU_TEST_REQUIRE();
  run_mix(3);
}

// Split-KV on and off must agree with the oracle on long decodes.
TEST(GpuAttention, SplitKvLongDecode) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int splits : {1, 4, 16}) {
    ct::Config c;
    c.dtype = VATTN_DTYPE_BFLOAT16;
    c.num_heads = 32;
    c.num_kv_heads = 8;
    c.head_size = 128;
    c.num_threads = 8;
    c.sinks = splits == 16;
    SCOPED_TRACE("max_num_splits " + std::to_string(splits));
    gt::run_gpu_case(c, {1, 1, 1}, {4000, 1, 2100}, g, splits);
  }
  // Split decode tiles merge themselves in the kernel (the last CTA to
  // finish): head size 96 has no decode kernel, so attention_kernel runs the
  // decode items and their merge; fp16 + LSE + sinks through the decode kernel.
  for (int variant = 0; variant < 2; ++variant) {
    ct::Config c;
    c.dtype = variant == 0 ? VATTN_DTYPE_BFLOAT16 : VATTN_DTYPE_FLOAT16;
    c.num_heads = 16;
    c.num_kv_heads = 4;
    c.head_size = variant == 0 ? 96 : 64;
    c.num_threads = 8;
    c.sinks = true;
    SCOPED_TRACE("self-merging split decode, head size " + std::to_string(c.head_size));
    gt::run_gpu_case(c, {1, 1, 1, 2}, {6000, 300, 2100, 5000}, g, 32);
  }
  // One KV head, G = 8 (an 8-KV-head model at tensor parallelism 8), with
  // sinks: a lone long request splits into more than 64 parts by default
  // (up to kMaxMergeTileParts), which merge in a tree (groups of
  // kDecMergeGroup parts, then the groups); then split at most 64 ways,
  // flat, next to a short request that does not split.  Tree merges of
  // every group size run in gpu-check's testmerge step.
  {
    ct::Config c;
    c.dtype = VATTN_DTYPE_BFLOAT16;
    c.num_heads = 8;
    c.num_kv_heads = 1;
    c.head_size = 128;
    c.num_threads = 8;
    c.sinks = true;
    c.block_size = 32;  // 40000 keys in 1250 blocks
    SCOPED_TRACE("one KV head, tree merge");
    gt::run_gpu_case(c, {1}, {40000}, g);
    c.block_size = 16;
    gt::run_gpu_case(c, {1, 1, 1}, {30000, 17, 12000}, g, 64);
  }
}

// The decode kernel at head size 64 (its 128-byte / fp8 64-byte key rows)
// over G in {1, 2, 4, 8} and several KV heads: every cache kind and both
// layouts, ALiBi, sinks, LSE and a window; decodes of 1 and 2 tokens next
// to a 3-token request (rows beyond one decode item at G = 8) and long
// contexts that split (with and without a split bound).  The plan is built
// for each cache kind against each kind of cache: planned for fp8, a CTA
// runs two adjacent KV heads (kern::decode_kv_heads_per_cta), each with
// its own rows, masks, slopes, sinks, LSE and split merge, also on a 16-bit
// cache; planned for a 16-bit cache, one head, also on an fp8 cache.
TEST(GpuAttention, DecodeHeadSize64) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  const int32_t caches[3] = {VATTN_KV_CACHE_DTYPE_AUTO, VATTN_KV_CACHE_DTYPE_FP8_E4M3,
                             VATTN_KV_CACHE_DTYPE_FP8_E5M2};
  int variant = 0;
  for (int G : {1, 2, 4, 8}) {
    for (int nkv : {2, 6}) {
      ct::Config c;
      c.dtype = variant % 2 ? VATTN_DTYPE_FLOAT16 : VATTN_DTYPE_BFLOAT16;
      c.num_kv_heads = nkv;
      c.num_heads = nkv * G;
      c.head_size = 64;
      c.block_size = variant % 3 == 0 ? 32 : 16;
      c.kv_cache_dtype = caches[variant % 3];
      c.builder_kv_cache_dtype = caches[(variant + variant / 3) % 3];
      if (c.kv_cache_dtype != VATTN_KV_CACHE_DTYPE_AUTO) {
        c.k_scale = 0.5f;
        c.v_scale = 0.25f;
      }
      c.layout = variant % 4 < 2 ? VATTN_LAYOUT_NHD : VATTN_LAYOUT_HND;
      c.alibi = variant % 2 == 1;
      c.sinks = variant % 3 != 1;
      c.sliding_window = variant == 5 ? 257 : 0;
      c.want_lse = true;
      c.num_threads = 8;
      SCOPED_TRACE("decode head size 64, variant " + std::to_string(variant) + " " + c.str());
      gt::run_gpu_case(c, {1, 2, 1, 3, 1}, {5000, 37, 1, 900, 2100}, g, variant % 2 ? 0 : 24);
      ++variant;
    }
  }
}

// The fp8 decode kernel at head size 128, whose warps keep one or two tiles
// in flight of three stages (two for items that cover their keys on devices
// past the H100's bus, kern::decode_fp8_ahead; scripts/gpu-check's step
// testahead forces each): both fp8 kinds and layouts, fp16 / bf16, G 1 / 4
// / 8, block sizes 16 and 32, a window, sinks, ALiBi, soft-cap and LSE.
// The batch has long decodes of many tiles per warp (the ring wraps, block
// ids refetched every 32 tiles, a last tile cut short) beside short ones;
// even variants keep every item whole (max_num_splits 1), odd ones let the
// long decodes split into parts.
TEST(GpuAttention, Fp8DecodeHeadSize128) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int variant = 0; variant < 8; ++variant) {
    ct::Config c;
    c.dtype = variant % 4 < 2 ? VATTN_DTYPE_BFLOAT16 : VATTN_DTYPE_FLOAT16;
    c.head_size = 128;
    c.num_kv_heads = 1 + variant % 3;
    c.num_heads = c.num_kv_heads * (variant % 3 == 0 ? 4 : variant % 3 == 1 ? 8 : 1);
    c.block_size = variant < 4 ? 16 : 32;
    c.kv_cache_dtype = variant % 2 ? VATTN_KV_CACHE_DTYPE_FP8_E5M2 : VATTN_KV_CACHE_DTYPE_FP8_E4M3;
    c.builder_kv_cache_dtype = c.kv_cache_dtype;
    c.k_scale = 0.5f;
    c.v_scale = 0.25f;
    c.layout = variant / 2 % 2 ? VATTN_LAYOUT_HND : VATTN_LAYOUT_NHD;
    c.sliding_window = variant == 5 ? 1000 : 0;
    c.soft_cap = variant == 6 ? 10.f : 0.f;
    c.alibi = variant == 3;
    c.sinks = variant % 4 == 1;
    c.want_lse = true;
    c.num_threads = 8;
    SCOPED_TRACE("fp8 decode head size 128, variant " + std::to_string(variant) + " " + c.str());
    gt::run_gpu_case(c, {1, 1, 1, 1, 1}, {4100, 37, 2999, 16, 1500}, g, variant % 2 ? 0 : 1);
  }
}

// The 16-bit decode kernel at head size 128, whose warps keep two tiles in
// flight of three stages, or one for items of at least 2048 keys in
// launches of more working CTAs than SMs (kern::decode_16bit_ahead;
// scripts/gpu-check's step testahead forces each): 20 requests x 8 KV heads
// (160 CTAs, more than the 132 SMs of an H100 or H200), 12 of them long
// (2048-4200 keys: the ring wraps, block ids are refetched every 32 tiles,
// a last tile is cut short) beside short ones; bf16 / fp16, NHD / HND,
// block sizes 16 and 32, LSE in one variant.  Even variants keep every item
// whole (max_num_splits 1), odd ones let the long decodes split into parts.
TEST(GpuAttention, DecodeHeadSize128LongItems) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int variant = 0; variant < 4; ++variant) {
    ct::Config c;
    c.dtype = variant % 2 ? VATTN_DTYPE_FLOAT16 : VATTN_DTYPE_BFLOAT16;
    c.head_size = 128;
    c.num_kv_heads = 8;
    c.num_heads = 32;
    c.block_size = variant < 2 ? 16 : 32;
    c.layout = variant == 1 || variant == 2 ? VATTN_LAYOUT_HND : VATTN_LAYOUT_NHD;
    c.want_lse = variant == 3;
    c.num_threads = 8;
    std::uniform_int_distribution<int32_t> long_len(2048, 4200), short_len(1, 1500);
    std::vector<int32_t> kv_lens(20);
    for (size_t i = 0; i < kv_lens.size(); ++i) kv_lens[i] = i % 5 < 3 ? long_len(g) : short_len(g);
    SCOPED_TRACE("16-bit decode head size 128, long items, variant " + std::to_string(variant) + " " + c.str());
    gt::run_gpu_case(c, std::vector<int32_t>(kv_lens.size(), 1), kv_lens, g, variant % 2 ? 0 : 1);
  }
}

namespace {

// The Hopper prefill tests' common grid: variant -> fp16 / bf16, GQA 1 / 4
// / 8 over 1 or 2 KV heads, block sizes 16 and 32, NHD / HND, a window,
// soft-cap, ALiBi, sinks, LSE (the cache fields are the caller's).
ct::Config hopper_prefill_config(int variant, int head_size) {
  ct::Config c;
  c.dtype = variant % 2 ? VATTN_DTYPE_FLOAT16 : VATTN_DTYPE_BFLOAT16;
  c.head_size = head_size;
  c.num_kv_heads = 1 + variant % 2;
  c.num_heads = c.num_kv_heads * (variant % 3 == 0 ? 1 : variant % 3 == 1 ? 4 : 8);
  c.block_size = variant < 4 ? 16 : 32;
  c.layout = variant / 2 % 2 ? VATTN_LAYOUT_HND : VATTN_LAYOUT_NHD;
  c.sliding_window = variant == 3 ? 100 : 0;
  c.soft_cap = variant == 5 ? 10.f : 0.f;
  c.alibi = variant == 6;
  c.sinks = variant % 4 == 1;
  c.want_lse = true;
  c.num_threads = 8;
  return c;
}
// Its batch: fresh prefills, chunked prefills after cached context whose
// keys end inside a 16-key segment (cp.async rows beside TMA boxes), a long
// prompt of many key tiles (split into parts where the batch leaves SMs
// idle) and decodes; even variants bound the splits at 8.
void run_hopper_prefill_case(const ct::Config &c, int variant, std::mt19937_64 &g) {
  gt::run_gpu_case(c, {300, 57, 1, 130, 2, 700}, {300, 1000, 800, 901, 2, 700}, g, variant % 2 ? 0 : 8);
}

}  // namespace

// fp8 caches at head size 128 through the Hopper prefill kernel (on compute
// capability 9.0; attention_kernel with VATTN_CUDA_SM90=0): its producer
// converts each K / V tile's raw bytes to fp16 in shared memory.  Both fp8
// kinds and k / v scales over the common grid (bf16 Q goes to fp16 for the
// products).
TEST(GpuAttention, Fp8PrefillHeadSize128) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int variant = 0; variant < 8; ++variant) {
    ct::Config c = hopper_prefill_config(variant, 128);
    c.kv_cache_dtype = variant % 4 < 2 ? VATTN_KV_CACHE_DTYPE_FP8_E4M3 : VATTN_KV_CACHE_DTYPE_FP8_E5M2;
    c.k_scale = pick(g, {0.5f, 0.25f, 1.f});
    c.v_scale = pick(g, {0.5f, 0.125f, 1.f});
    SCOPED_TRACE("fp8 prefill, variant " + std::to_string(variant) + " " + c.str());
    run_hopper_prefill_case(c, variant, g);
  }
}

// Head size 256 with a 16-bit cache over the common grid: on compute
// capability 9.0 the Hopper kernel (Q read from shared memory, 32-key
// tiles, 128-row items), elsewhere (and with VATTN_CUDA_SM90=0)
// attention_kernel.  Variants 8 .. 11 build the plan for another cache kind
// than the layer's: planned for a 16-bit cache (128-row items on compute
// capability 9.0), an fp8 cache runs attention_kernel on each item as two
// 64-row ranges; planned for fp8 (64-row items), a 16-bit cache runs the
// Hopper kernel on half-filled units.
TEST(GpuAttention, HeadSize256) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int variant = 0; variant < 12; ++variant) {
    ct::Config c = hopper_prefill_config(variant, 256);
    if (variant >= 8) {
      const bool fp8_layer = variant % 2 == 0;
      const int32_t fp8 = variant < 10 ? VATTN_KV_CACHE_DTYPE_FP8_E4M3 : VATTN_KV_CACHE_DTYPE_FP8_E5M2;
      c.kv_cache_dtype = fp8_layer ? fp8 : VATTN_KV_CACHE_DTYPE_AUTO;
      c.builder_kv_cache_dtype = fp8_layer ? VATTN_KV_CACHE_DTYPE_AUTO : fp8;
      if (fp8_layer) {
        c.k_scale = 0.5f;
        c.v_scale = 0.25f;
      }
    }
    SCOPED_TRACE("head size 256, variant " + std::to_string(variant) + " " + c.str());
    run_hopper_prefill_case(c, variant, g);
  }
}

TEST(GpuAttention, EncoderTypesAndCross) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int32_t type : {VATTN_ATTN_ENCODER, VATTN_ATTN_ENCODER_ONLY, VATTN_ATTN_ENCODER_DECODER}) {
    for (int variant = 0; variant < 4; ++variant) {
      ct::Config c = random_config(g);
      c.attn_type = type;
      c.causal = type == VATTN_ATTN_ENCODER_DECODER ? false : c.causal;
      if (type != VATTN_ATTN_ENCODER_DECODER) c.kv_cache_dtype = VATTN_KV_CACHE_DTYPE_AUTO;
      c.pad_tokens = 0;
      if (type == VATTN_ATTN_ENCODER_ONLY && variant % 2) c.sliding_window = 9;
      SCOPED_TRACE("type " + std::to_string(type) + " " + c.str());
      if (type == VATTN_ATTN_ENCODER_DECODER)
        gt::run_gpu_case(c, {1, 4, 2}, {37, 120, 5}, g);
      else
        gt::run_gpu_case(c, {17, 90, 1}, {17, 90, 1}, g);
    }
  }
}

TEST(GpuAttention, CascadeSharedPrefix) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int variant = 0; variant < 4; ++variant) {
    ct::Config c;
    c.dtype = variant % 2 ? VATTN_DTYPE_FLOAT16 : VATTN_DTYPE_BFLOAT16;
    c.num_heads = 16;
    c.num_kv_heads = 4;
    c.head_size = variant < 2 ? 128 : 64;
    c.num_threads = 8;
    c.common_prefix_len = 256;
    c.soft_cap = variant == 3 ? 2.f : 0.f;
    c.sinks = variant == 2;
    c.kv_cache_dtype = variant == 1 ? VATTN_KV_CACHE_DTYPE_FP8_E4M3 : VATTN_KV_CACHE_DTYPE_AUTO;
    std::vector<int32_t> q, s;
    for (int r = 0; r < 9; ++r) {
      const int ql = r < 6 ? 1 : 1 + static_cast<int>(g() % 20);
      q.push_back(ql);
      s.push_back(257 + static_cast<int>(g() % 300) + ql);
    }
    SCOPED_TRACE(c.str());
    gt::run_gpu_case(c, q, s, g);
  }
}

TEST(GpuAttention, KvSharingNeverWrites) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  ct::Config c;
  c.dtype = VATTN_DTYPE_FLOAT16;
  c.kv_sharing = true;
  c.num_threads = 8;
  gt::run_gpu_case(c, {1, 5}, {40, 70}, g);
}

// Unsupported configurations are refused at layer creation.
TEST(GpuAttention, RefusesUnsupportedAtCreation) {
  GPU_TEST_REQUIRE();
  vattn_layer_options_t lo;
  vattn_layer_options_init(&lo);
  vattn_layer_t *l = nullptr;
  lo.head_size = 72;
  EXPECT_VATTN_ERR(vattn_layer_create(&l, gt::cuda(), &lo), VATTN_ERR_UNSUPPORTED, "head_size");
  EXPECT_EQ(l, nullptr);
  vattn_layer_options_init(&lo);
  lo.dtype = VATTN_DTYPE_FLOAT32;
  EXPECT_VATTN_ERR(vattn_layer_create(&l, gt::cuda(), &lo), VATTN_ERR_UNSUPPORTED, "dtype");
  vattn_layer_options_init(&lo);
  lo.block_size = 8;
  EXPECT_VATTN_ERR(vattn_layer_create(&l, gt::cuda(), &lo), VATTN_ERR_UNSUPPORTED, "block_size");
  vattn_backend_info_t in;
  in.struct_size = sizeof in;
  ASSERT_VATTN_OK(vattn_backend_get_info(gt::cuda(), &in));
  EXPECT_STREQ(in.name, "CUDA");
  EXPECT_EQ(in.cudagraph_support, VATTN_CUDAGRAPH_ALWAYS);
}
