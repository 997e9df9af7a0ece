// Header section 3: KV cache specs -- defaults, page sizes, worst-case
// memory per request, merge; every number checked against the vLLM era-B
// formulas written out here (worked examples + random specs).
#include <cstring>
#include <random>
#include <string>

#include "test_util.h"

namespace {

vattn_kv_cache_spec_t spec(int32_t kind, int32_t bs, int32_t kvh, int32_t hs, int32_t dtype) {
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  s.kind = kind;
  s.block_size = bs;
  s.num_kv_heads = kvh;
  s.head_size = hs;
  s.dtype = dtype;
  return s;
}

int64_t page(const vattn_kv_cache_spec_t &s) {
  int64_t out = -777;
  EXPECT_EQ(vattn_kv_cache_spec_page_size_bytes(&s, &out), VATTN_OK) << vattn_last_error_message();
  return out;
}

int64_t max_mem(const vattn_kv_cache_spec_t &s, const vattn_model_limits_t &l) {
  int64_t out = -777;
  EXPECT_EQ(vattn_kv_cache_spec_max_memory_usage_bytes(&s, &l, &out), VATTN_OK)
      << vattn_last_error_message();
  return out;
}

vattn_model_limits_t limits(int64_t max_model_len, int64_t max_batched, int64_t max_enc = 0) {
  vattn_model_limits_t l;
  vattn_model_limits_init(&l);
  l.max_model_len = max_model_len;
  l.max_num_batched_tokens = max_batched;
  l.max_encoder_len = max_enc;
  return l;
}

TEST(KvSpec, InitDefaults) {
  vattn_kv_cache_spec_t s;
  std::memset(&s, 0x5a, sizeof s);
  vattn_kv_cache_spec_init(&s);
  EXPECT_EQ(s.struct_size, sizeof s);
  EXPECT_EQ(s.kind, VATTN_KV_SPEC_FULL);
  EXPECT_EQ(s.block_size, 16);
  EXPECT_EQ(s.num_kv_heads, 8);
  EXPECT_EQ(s.head_size, 128);
  EXPECT_EQ(s.dtype, VATTN_DTYPE_BFLOAT16);
  EXPECT_EQ(s.sliding_window, 0);
  EXPECT_EQ(s.attention_chunk_size, 0);
  EXPECT_EQ(s.mla_fp8_ds, 0);
  EXPECT_EQ(s.page_size_padded, 0);
  vattn_kv_cache_spec_init(nullptr);  // no crash

  vattn_model_limits_t l;
  std::memset(&l, 0x5a, sizeof l);
  vattn_model_limits_init(&l);
  EXPECT_EQ(l.struct_size, sizeof l);
  EXPECT_GT(l.max_model_len, 0);
  EXPECT_GT(l.max_num_batched_tokens, 0);
  EXPECT_EQ(l.max_encoder_len, 0);
  EXPECT_EQ(l.dcp_world_size, 1);
  EXPECT_EQ(l.pcp_world_size, 1);
  vattn_model_limits_init(nullptr);
}

TEST(KvSpec, PageSizeWorkedExamples) {
  // Llama-3-8B: block 16, 8 KV heads, head 128, bf16: 2*16*8*128*2 = 65536.
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  EXPECT_EQ(page(s), 65536);
  EXPECT_EQ(page(spec(VATTN_KV_SPEC_FULL, 16, 8, 128, VATTN_DTYPE_FLOAT32)), 131072);
  EXPECT_EQ(page(spec(VATTN_KV_SPEC_FULL, 16, 8, 128, VATTN_DTYPE_FP8_E4M3)), 32768);
  EXPECT_EQ(page(spec(VATTN_KV_SPEC_CROSS_ATTENTION, 32, 4, 64, VATTN_DTYPE_FLOAT16)), 32768);
  vattn_kv_cache_spec_t sw = spec(VATTN_KV_SPEC_SLIDING_WINDOW, 16, 8, 128, VATTN_DTYPE_BFLOAT16);
  sw.sliding_window = 4096;
  EXPECT_EQ(page(sw), 65536);
  // DeepSeek MLA: latent 512 + rope 64 = 576, bf16, block 64: 64*576*2.
  EXPECT_EQ(page(spec(VATTN_KV_SPEC_MLA, 64, 1, 576, VATTN_DTYPE_BFLOAT16)), 73728);
  // fp8_ds_mla: 656 bytes per token.
  vattn_kv_cache_spec_t ds = spec(VATTN_KV_SPEC_MLA, 64, 1, 576, VATTN_DTYPE_UINT8);
  ds.mla_fp8_ds = 1;
  EXPECT_EQ(page(ds), 64 * 656);
  // Padding overrides (and may equal the real size).
  s.page_size_padded = 70000;
  EXPECT_EQ(page(s), 70000);
  s.page_size_padded = 65536;
  EXPECT_EQ(page(s), 65536);
}

TEST(KvSpec, PageSizeRandomSpecs) {
  std::mt19937_64 g(vt::test_seed());
  const int32_t dtypes[] = {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16,
                            VATTN_DTYPE_FP8_E4M3, VATTN_DTYPE_FP8_E5M2, VATTN_DTYPE_UINT8};
  const int64_t sizes[] = {4, 2, 2, 1, 1, 1};
  for (int it = 0; it < 200; ++it) {
    int di = static_cast<int>(g() % 6);
    int32_t kind = static_cast<int32_t>(g() % 6);
    int32_t bs = 1 + static_cast<int32_t>(g() % 256), kvh = 1 + static_cast<int32_t>(g() % 64),
            hs = 1 + static_cast<int32_t>(g() % 512);
    if (kind == VATTN_KV_SPEC_MLA) kvh = 1;
    vattn_kv_cache_spec_t s = spec(kind, bs, kvh, hs, dtypes[di]);
    if (kind == VATTN_KV_SPEC_SLIDING_WINDOW) s.sliding_window = 1 + static_cast<int32_t>(g() % 9000);
    if (kind == VATTN_KV_SPEC_CHUNKED_LOCAL) s.attention_chunk_size = 1 + static_cast<int32_t>(g() % 9000);
    const int64_t coef = kind == VATTN_KV_SPEC_MLA ? 1 : 2;
    const int64_t want = coef * bs * kvh * hs * sizes[di];
    EXPECT_EQ(page(s), want) << "kind " << kind << " bs " << bs << " kvh " << kvh << " hs " << hs;
    s.page_size_padded = want + static_cast<int64_t>(g() % 1000);
    EXPECT_EQ(page(s), s.page_size_padded);
  }
}

TEST(KvSpec, MaxMemoryWorkedExamples) {
  vattn_kv_cache_spec_t full;
  vattn_kv_cache_spec_init(&full);  // page 65536
  const int64_t P = 65536;
  // Full: ceil(1000 / 16) = 63 blocks.
  EXPECT_EQ(max_mem(full, limits(1000, 2048)), 63 * P);
  // Full with a compute-time window is still full.
  vattn_kv_cache_spec_t fw = full;
  fw.sliding_window = 128;
  EXPECT_EQ(max_mem(fw, limits(1000, 2048)), 63 * P);
  // Context parallel: ceil(1000 / (2*2)) = 250 tokens -> 16 blocks.
  vattn_model_limits_t cp = limits(1000, 2048);
  cp.dcp_world_size = 2;
  cp.pcp_world_size = 2;
  EXPECT_EQ(max_mem(full, cp), 16 * P);
  cp.pcp_world_size = 1;  // ceil(1000 / 2) = 500 -> 32 blocks
  EXPECT_EQ(max_mem(full, cp), 32 * P);
  // MLA is a full spec: 64*576*2 page, ceil(1000/64) = 16 blocks.
  vattn_kv_cache_spec_t mla = spec(VATTN_KV_SPEC_MLA, 64, 1, 576, VATTN_DTYPE_BFLOAT16);
  EXPECT_EQ(max_mem(mla, limits(1000, 2048)), 16 * 73728);
  // Sliding window 512: min(511 + 2048, 8192) = 2559 -> 160 blocks + 1.
  vattn_kv_cache_spec_t sw = full;
  sw.kind = VATTN_KV_SPEC_SLIDING_WINDOW;
  sw.sliding_window = 512;
  EXPECT_EQ(max_mem(sw, limits(8192, 2048)), 161 * P);
  // ... capped by max_model_len: min(2559, 1000) = 1000 -> 63 + 1.
  EXPECT_EQ(max_mem(sw, limits(1000, 2048)), 64 * P);
  // Window 1, 16 batched tokens: exactly 1 block + 1.
  sw.sliding_window = 1;
  EXPECT_EQ(max_mem(sw, limits(8192, 16)), 2 * P);
  // Chunked local 1024: min(1024 + 2048, 8192) = 3072 -> 192 blocks.
  vattn_kv_cache_spec_t cl = full;
  cl.kind = VATTN_KV_SPEC_CHUNKED_LOCAL;
  cl.attention_chunk_size = 1024;
  EXPECT_EQ(max_mem(cl, limits(8192, 2048)), 192 * P);
  EXPECT_EQ(max_mem(cl, limits(2000, 2048)), 125 * P);  // ceil(2000/16)
  // Encoder-only: no cache.
  vattn_kv_cache_spec_t eo = full;
  eo.kind = VATTN_KV_SPEC_ENCODER_ONLY;
  EXPECT_EQ(max_mem(eo, limits(8192, 2048)), 0);
  // Cross-attention: ceil(1500 / 16) = 94 blocks (Whisper-like encoder).
  vattn_kv_cache_spec_t ca = full;
  ca.kind = VATTN_KV_SPEC_CROSS_ATTENTION;
  EXPECT_EQ(max_mem(ca, limits(448, 2048, 1500)), 94 * P);
  // The padded page size is what the pool is sized with.
  full.page_size_padded = 100000;
  EXPECT_EQ(max_mem(full, limits(1000, 2048)), 63 * 100000);
  // NULL limits = defaults (max_model_len 8192): 512 blocks.
  vattn_kv_cache_spec_t d;
  vattn_kv_cache_spec_init(&d);
  vattn_model_limits_t def;
  vattn_model_limits_init(&def);
  int64_t out = -1;
  ASSERT_VATTN_OK(vattn_kv_cache_spec_max_memory_usage_bytes(&d, nullptr, &out));
  EXPECT_EQ(out, (def.max_model_len + 15) / 16 * P);
}

TEST(KvSpec, MaxMemoryRandom) {
  std::mt19937_64 g(vt::test_seed());
  auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  for (int it = 0; it < 300; ++it) {
    vattn_kv_cache_spec_t s = spec(static_cast<int32_t>(g() % 6), 1 + static_cast<int32_t>(g() % 64),
                                   1 + static_cast<int32_t>(g() % 8), 8 * (1 + static_cast<int32_t>(g() % 16)),
                                   VATTN_DTYPE_FLOAT16);
    if (s.kind == VATTN_KV_SPEC_MLA) s.num_kv_heads = 1;
    if (s.kind == VATTN_KV_SPEC_SLIDING_WINDOW) s.sliding_window = 1 + static_cast<int32_t>(g() % 5000);
    if (s.kind == VATTN_KV_SPEC_CHUNKED_LOCAL) s.attention_chunk_size = 1 + static_cast<int32_t>(g() % 5000);
    vattn_model_limits_t l = limits(1 + static_cast<int64_t>(g() % 20000), 1 + static_cast<int64_t>(g() % 9000),
                                    static_cast<int64_t>(g() % 3000));
    if (s.kind != VATTN_KV_SPEC_SLIDING_WINDOW) {
      l.dcp_world_size = 1 + static_cast<int32_t>(g() % 4);
      l.pcp_world_size = 1 + static_cast<int32_t>(g() % 2);
    }
    const int64_t p = (s.kind == VATTN_KV_SPEC_MLA ? 1 : 2) * int64_t(s.block_size) * s.num_kv_heads *
                      s.head_size * 2;
    int64_t blocks = 0;
    switch (s.kind) {
      case VATTN_KV_SPEC_FULL:
      case VATTN_KV_SPEC_MLA: {
        int64_t cp = int64_t(l.dcp_world_size) * l.pcp_world_size;
        blocks = cdiv(cdiv(l.max_model_len, cp), s.block_size);
        break;
      }
      case VATTN_KV_SPEC_SLIDING_WINDOW:
        blocks = cdiv(std::min<int64_t>(s.sliding_window - 1 + l.max_num_batched_tokens, l.max_model_len),
                      s.block_size) + 1;
        break;
      case VATTN_KV_SPEC_CHUNKED_LOCAL:
        blocks = cdiv(std::min<int64_t>(s.attention_chunk_size + l.max_num_batched_tokens, l.max_model_len),
                      s.block_size);
        break;
      case VATTN_KV_SPEC_CROSS_ATTENTION: blocks = cdiv(l.max_encoder_len, s.block_size); break;
      default: blocks = 0;
    }
    EXPECT_EQ(max_mem(s, l), blocks * p) << "kind " << s.kind;
  }
}

TEST(KvSpec, MaxMemorySlidingWindowRejectsDcp) {
  vattn_kv_cache_spec_t sw = spec(VATTN_KV_SPEC_SLIDING_WINDOW, 16, 8, 128, VATTN_DTYPE_BFLOAT16);
  sw.sliding_window = 512;
  vattn_model_limits_t l = limits(8192, 2048);
  l.dcp_world_size = 2;
  int64_t out = -5;
  EXPECT_VATTN_ERR(vattn_kv_cache_spec_max_memory_usage_bytes(&sw, &l, &out), VATTN_ERR_UNSUPPORTED,
                   "dcp_world_size");
  EXPECT_EQ(out, -5);
}

TEST(KvSpec, MaxMemoryOverflowIsAnError) {
  vattn_kv_cache_spec_t s = spec(VATTN_KV_SPEC_FULL, 1, 1 << 20, 1 << 10, VATTN_DTYPE_FLOAT32);  // 2^33 page
  vattn_model_limits_t l = limits(INT64_C(1) << 40, 16);
  int64_t out = -5;
  EXPECT_VATTN_ERR(vattn_kv_cache_spec_max_memory_usage_bytes(&s, &l, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "overflow");
  EXPECT_EQ(out, -5);
}

// ---- merge ------------------------------------------------------------------

vattn_kv_cache_spec_t merged(const std::vector<vattn_kv_cache_spec_t> &v) {
  vattn_kv_cache_spec_t out;
  vattn_kv_cache_spec_init(&out);
  out.block_size = -99;  // poison
  EXPECT_EQ(vattn_kv_cache_specs_merge(v.data(), v.size(), &out), VATTN_OK)
      << vattn_last_error_message();
  return out;
}

TEST(KvSpecMerge, EqualSpecsMergeToThemselves) {
  std::mt19937_64 g(vt::test_seed());
  vattn_kv_cache_spec_t s = spec(VATTN_KV_SPEC_SLIDING_WINDOW, 32, 4, 64, VATTN_DTYPE_FLOAT16);
  s.sliding_window = 1 + static_cast<int32_t>(g() % 4096);
  vattn_kv_cache_spec_t m = merged({s, s, s});
  EXPECT_EQ(m.struct_size, sizeof m);
  EXPECT_EQ(m.kind, s.kind);
  EXPECT_EQ(m.block_size, 32);
  EXPECT_EQ(m.num_kv_heads, 4);
  EXPECT_EQ(m.head_size, 64);
  EXPECT_EQ(m.dtype, VATTN_DTYPE_FLOAT16);
  EXPECT_EQ(m.sliding_window, s.sliding_window);
  vattn_kv_cache_spec_t mla = spec(VATTN_KV_SPEC_MLA, 64, 1, 576, VATTN_DTYPE_UINT8);
  mla.mla_fp8_ds = 1;
  EXPECT_EQ(merged({mla, mla}).mla_fp8_ds, 1);
}

TEST(KvSpecMerge, FullSpecsReconcileOneWindowOrChunk) {
  vattn_kv_cache_spec_t a;
  vattn_kv_cache_spec_init(&a);
  vattn_kv_cache_spec_t b = a, c = a;
  b.sliding_window = 512;
  c.sliding_window = 512;
  EXPECT_EQ(merged({a, b, c}).sliding_window, 512);
  EXPECT_EQ(merged({b, a}).sliding_window, 512);
  EXPECT_EQ(merged({a, a}).sliding_window, 0);
  vattn_kv_cache_spec_t d = a;
  d.attention_chunk_size = 8192;
  vattn_kv_cache_spec_t m = merged({a, d, a});
  EXPECT_EQ(m.attention_chunk_size, 8192);
  EXPECT_EQ(m.sliding_window, 0);
}

TEST(KvSpecMerge, RejectsWhatVllmRejects) {
  vattn_kv_cache_spec_t a;
  vattn_kv_cache_spec_init(&a);
  vattn_kv_cache_spec_t out;
  vattn_kv_cache_spec_init(&out);
  out.head_size = 4242;  // poison: must survive every failure
  auto expect_fail = [&](std::vector<vattn_kv_cache_spec_t> v, const char *needle) {
    EXPECT_VATTN_ERR(vattn_kv_cache_specs_merge(v.data(), v.size(), &out), VATTN_ERR_INVALID_ARGUMENT,
                     needle);
    EXPECT_EQ(out.head_size, 4242);
  };
  vattn_kv_cache_spec_t h = a;
  h.head_size = 64;
  expect_fail({a, a, h}, "All layers in the same KV cache group must be the same");
  expect_fail({a, a, h}, "specs[2] differs from specs[0] in head_size");
  vattn_kv_cache_spec_t w1 = a, w2 = a;
  w1.sliding_window = 512;
  w2.sliding_window = 1024;
  expect_fail({w1, a, w2}, "must have the same window size");
  vattn_kv_cache_spec_t ch1 = a, ch2 = a;
  ch1.attention_chunk_size = 256;
  ch2.attention_chunk_size = 512;
  expect_fail({ch1, ch2}, "same attention chunk size");
  expect_fail({w1, ch1}, "cannot mix sliding window and chunked local");
  // Window fields are only reconciled for FULL specs.
  vattn_kv_cache_spec_t s1 = a, s2 = a;
  s1.kind = s2.kind = VATTN_KV_SPEC_SLIDING_WINDOW;
  s1.sliding_window = 128;
  s2.sliding_window = 256;
  expect_fail({s1, s2}, "differs from specs[0] in sliding_window");
  vattn_kv_cache_spec_t k = a;
  k.kind = VATTN_KV_SPEC_CROSS_ATTENTION;
  expect_fail({a, k}, "in kind");
  vattn_kv_cache_spec_t m1 = spec(VATTN_KV_SPEC_MLA, 64, 1, 576, VATTN_DTYPE_UINT8), m2 = m1;
  m2.mla_fp8_ds = 1;
  expect_fail({m1, m2}, "in mla_fp8_ds");
  vattn_kv_cache_spec_t p = a;
  p.page_size_padded = 70000;
  expect_fail({a, p}, "page_size_padded");
}

}  // namespace
