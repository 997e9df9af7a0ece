// test_cpu_ops.cpp -- the stand-alone operations on host tensors:
// reshape_and_cache (exact and fp8), merge_attn_states (incl. -inf/+inf LSE
// cases), copy_blocks and swap_blocks (exact), with bad inputs.
#include <algorithm>

#include "cpu_ref.h"
#include "cpu_harness.h"

namespace {

std::mt19937_64 seeded() { return ct::seeded_rng(); }

struct CacheCase {
  int64_t T = 42, H = 4, D = 64, bs = 16, nb = 20;
  int32_t dtype = VATTN_DTYPE_FLOAT32;
  int32_t kv_cache_dtype = VATTN_KV_CACHE_DTYPE_AUTO;
  int32_t layout = VATTN_LAYOUT_NHD;
};

int32_t storage(const CacheCase &c) {
  return c.kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E4M3   ? VATTN_DTYPE_FP8_E4M3
         : c.kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E5M2 ? VATTN_DTYPE_FP8_E5M2
                                                             : c.dtype;
}

// Random K/V (padded past the slot count), distinct random slots with some
// -1, cache filled with random bytes; checks every written element and that
// every other byte is unchanged.
void run_reshape(const CacheCase &c, std::mt19937_64 &g, float k_scale, float v_scale) {
  const int32_t st = storage(c);
  const bool fp8 = st == VATTN_DTYPE_FP8_E4M3 || st == VATTN_DTYPE_FP8_E5M2;
  vt::HostTensor k({c.T + 3, c.H, c.D}, ct::dl_of(c.dtype)), v({c.T + 3, c.H, c.D}, ct::dl_of(c.dtype));
  std::vector<double> kv[2];
  for (int s = 0; s < 2; ++s) {
    vt::HostTensor &t = s ? v : k;
    for (int64_t i = 0; i < (c.T + 3) * c.H * c.D; ++i) {
      double x = ct::round_to(c.dtype, vt::uniform(g, -300.f, 300.f));
      kv[s].push_back(x);
      ct::put(c.dtype, t.bytes.data() + i * ct::dtype_bytes(c.dtype), x);
    }
  }
  std::vector<int64_t> pool(static_cast<size_t>(c.nb * c.bs));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), g);
  vt::HostTensor slots({c.T}, vt::dl_i64());
  for (int64_t i = 0; i < c.T; ++i) slots.as<int64_t>()[i] = (i % 7 == 3) ? -1 : pool[i];
  auto strides = ct::cache_strides(c.layout, c.nb, c.bs, c.H, c.D);
  vt::HostTensor cache({2, c.nb, c.bs, c.H, c.D}, ct::dl_of(st), strides);
  for (auto &b : cache.bytes) b = static_cast<unsigned char>(g());
  const std::vector<unsigned char> before = cache.bytes;
  ASSERT_VATTN_OK(vattn_reshape_and_cache(k.dl(), v.dl(), cache.dl(), slots.dl(), c.kv_cache_dtype,
                                          k_scale, v_scale, nullptr));
  const size_t es = ct::dtype_bytes(st);
  std::vector<char> touched(cache.bytes.size(), 0);
  for (int64_t i = 0; i < c.T; ++i) {
    const int64_t s = slots.as<int64_t>()[i];
    if (s < 0) continue;
    for (int side = 0; side < 2; ++side)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t d = 0; d < c.D; ++d) {
          const int64_t off = side * strides[0] + (s / c.bs) * strides[1] + (s % c.bs) * strides[2] +
                              h * strides[3] + d * strides[4];
          const double x = kv[side][(i * c.H + h) * c.D + d];
          const double sc = side ? v_scale : k_scale;
          const double want = fp8 ? ct::round_to(st, x / sc) : x;
          const double got = ct::get(st, cache.bytes.data() + off * es);
          ASSERT_EQ(got, want) << "token " << i << " side " << side << " h " << h << " d " << d
                               << " x " << x;
          for (size_t b = 0; b < es; ++b) touched[off * es + b] = 1;
        }
  }
  for (size_t b = 0; b < cache.bytes.size(); ++b)
    if (!touched[b]) {
      ASSERT_EQ(cache.bytes[b], before[b]) << "byte " << b << " written";
    }
}

TEST(CpuReshapeAndCache, ExactForModelDtypesBothLayouts) {
  auto g = seeded();
  for (int32_t dt : {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16})
    for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND})
      for (int64_t D : {64, 80, 256}) {
        CacheCase c;
        c.dtype = dt;
        c.layout = layout;
        c.D = D;
        run_reshape(c, g, 1.f, 1.f);
      }
}

TEST(CpuReshapeAndCache, Fp8SaturatesAndRoundsToNearestEven) {
  auto g = seeded();
  for (int32_t kvd : {VATTN_KV_CACHE_DTYPE_FP8_E4M3, VATTN_KV_CACHE_DTYPE_FP8_E5M2})
    for (int32_t dt : {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_BFLOAT16})
      for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND}) {
        CacheCase c;
        c.dtype = dt;
        c.kv_cache_dtype = kvd;
        c.layout = layout;
        // Scale 0.25: values up to 1200 > 448 saturate for e4m3.
        run_reshape(c, g, 0.25f, 4.f);
      }
}

TEST(CpuReshapeAndCache, OutOfRangeSlotWritesNothing) {
  auto g = seeded();
  vt::HostTensor k({4, 2, 8}, vt::dl_f32()), v({4, 2, 8}, vt::dl_f32());
  for (int i = 0; i < 64; ++i) k.as<float>()[i] = v.as<float>()[i] = vt::uniform(g, -1, 1);
  vt::HostTensor cache({2, 3, 4, 2, 8}, vt::dl_f32());
  for (auto &b : cache.bytes) b = static_cast<unsigned char>(g());
  const auto before = cache.bytes;
  vt::HostTensor slots({4}, vt::dl_i64());
  int64_t s[4] = {0, 5, 12, 1};  // 12 == 3 blocks * 4: one past the end
  std::memcpy(slots.bytes.data(), s, sizeof s);
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v.dl(), cache.dl(), slots.dl(), 0, 1.f, 1.f, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "slot_mapping");
  EXPECT_EQ(cache.bytes, before);
  s[2] = -2;
  std::memcpy(slots.bytes.data(), s, sizeof s);
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v.dl(), cache.dl(), slots.dl(), 0, 1.f, 1.f, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "slot_mapping");
  EXPECT_EQ(cache.bytes, before);
}

TEST(CpuReshapeAndCache, BadShapesAndDtypes) {
  vt::HostTensor k({4, 2, 8}, vt::dl_f32()), v({4, 2, 8}, vt::dl_f32());
  vt::HostTensor v_short({2, 2, 8}, vt::dl_f32()), k_f16({4, 2, 8}, vt::dl_f16());
  vt::HostTensor k_heads({4, 3, 8}, vt::dl_f32());
  vt::HostTensor cache({2, 3, 4, 2, 8}, vt::dl_f32()), cache_u8({2, 3, 4, 2, 8}, vt::dl_u8());
  vt::HostTensor cache4({3, 4, 2, 8}, vt::dl_f32());
  vt::HostTensor slots({4}, vt::dl_i64()), slots32({4}, vt::dl_i32());
  for (int i = 0; i < 4; ++i) slots.as<int64_t>()[i] = i;
  const auto before = cache.bytes;
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(nullptr, v.dl(), cache.dl(), slots.dl(), 0, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "key");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v_short.dl(), cache.dl(), slots.dl(), 0, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "value");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k_heads.dl(), v.dl(), cache.dl(), slots.dl(), 0, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "key");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k_f16.dl(), v.dl(), cache.dl(), slots.dl(), 0, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "value");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v.dl(), cache_u8.dl(), slots.dl(), 0, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "kv_cache");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v.dl(), cache.dl(), slots.dl(),
                                           VATTN_KV_CACHE_DTYPE_FP8_E4M3, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "kv_cache");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v.dl(), cache4.dl(), slots.dl(), 0, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "kv_cache");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v.dl(), cache.dl(), slots32.dl(), 0, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "slot_mapping");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v.dl(), cache.dl(), slots.dl(), 7, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "kv_cache_dtype");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v.dl(), cache.dl(), slots.dl(), 0, 0.f, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "k_scale");
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(k.dl(), v.dl(), cache.dl(), slots.dl(), 0, 1, NAN, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "v_scale");
  int64_t neg[3] = {2, -4, 8};
  DLTensor bad = *k.dl();
  bad.shape = neg;
  EXPECT_VATTN_ERR(vattn_reshape_and_cache(&bad, v.dl(), cache.dl(), slots.dl(), 0, 1, 1, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "key");
  EXPECT_EQ(cache.bytes, before);
}

// ---- merge_attn_states ------------------------------------------------------------
void run_merge(int32_t dt, int64_t T, int64_t H, int64_t D, bool with_out_lse, std::mt19937_64 &g) {
  const DLDataType mdt = ct::dl_of(dt);
  const size_t es = ct::dtype_bytes(dt);
  vt::HostTensor po({T, H, D}, mdt), so({T, H, D}, mdt), out({T, H, D}, mdt);
  vt::HostTensor pl({H, T}, vt::dl_f32()), sl({H, T}, vt::dl_f32()), ol({H, T}, vt::dl_f32());
  std::vector<double> P, S;
  for (int64_t i = 0; i < T * H * D; ++i) {
    P.push_back(ct::round_to(dt, vt::uniform(g, -2, 2)));
    S.push_back(ct::round_to(dt, vt::uniform(g, -2, 2)));
    ct::put(dt, po.bytes.data() + i * es, P.back());
    ct::put(dt, so.bytes.data() + i * es, S.back());
    ct::put(dt, out.bytes.data() + i * es, std::nan(""));
  }
  // LSE mix: normal values, ~10% +inf / -inf on one side, some both -inf.
  for (int64_t i = 0; i < H * T; ++i) {
    float a = vt::uniform(g, -5, 5), b = vt::uniform(g, -5, 5);
    const int k = static_cast<int>(g() % 10);
    if (k == 0) a = INFINITY;
    if (k == 1) b = INFINITY;
    if (k == 2) a = -INFINITY;
    if (k == 3) b = -INFINITY;
    if (k == 4) a = b = -INFINITY;
    if (k == 5) a = INFINITY, b = -INFINITY;
    pl.as<float>()[i] = a;
    sl.as<float>()[i] = b;
    ol.as<float>()[i] = NAN;
  }
  ASSERT_VATTN_OK(vattn_merge_attn_states(out.dl(), with_out_lse ? ol.dl() : nullptr, po.dl(), pl.dl(),
                                          so.dl(), sl.dl(), nullptr));
  const double atol = dt == VATTN_DTYPE_FLOAT32 ? 2e-6 : 1e-2, rtol = dt == VATTN_DTYPE_FLOAT32 ? 1e-5 : 1e-2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double a = pl.as<float>()[h * T + t], b = sl.as<float>()[h * T + t];
      if (a == ct::kInf) a = -ct::kInf;
      if (b == ct::kInf) b = -ct::kInf;
      const double m = std::max(a, b);
      double wa = 1, wb = 0, lse = -ct::kInf;
      if (m != -ct::kInf) {
        const double ea = std::exp(a - m), eb = std::exp(b - m);
        wa = ea / (ea + eb);
        wb = eb / (ea + eb);
        lse = m + std::log(ea + eb);
      }
      for (int64_t d = 0; d < D; ++d) {
        const size_t i = static_cast<size_t>((t * H + h) * D + d);
        const double want = wa * P[i] + wb * S[i];
        const double got = ct::get(dt, out.bytes.data() + i * es);
        ASSERT_TRUE(std::fabs(got - want) <= atol + rtol * std::fabs(want))
            << "t " << t << " h " << h << " d " << d << " got " << got << " want " << want
            << " lse " << a << "," << b;
      }
      if (with_out_lse) {
        const float got = ol.as<float>()[h * T + t];
        if (std::isinf(lse)) ASSERT_EQ(got, lse);
        else ASSERT_NEAR(got, lse, 1e-5 + 1e-6 * std::fabs(lse));
      }
    }
}

TEST(CpuMerge, MatchesReferenceAllDtypes) {
  auto g = seeded();
  for (int32_t dt : {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16})
    for (int64_t D : {32, 64, 128}) {
      run_merge(dt, 37, 4, D, true, g);
      run_merge(dt, 5, 3, D, false, g);
    }
}

TEST(CpuMerge, InPlaceIntoPrefix) {
  auto g = seeded();
  const int64_t T = 9, H = 2, D = 16;
  vt::HostTensor po({T, H, D}, vt::dl_f32()), so({T, H, D}, vt::dl_f32());
  vt::HostTensor pl({H, T}, vt::dl_f32()), sl({H, T}, vt::dl_f32());
  std::vector<float> P, S;
  for (int64_t i = 0; i < T * H * D; ++i) {
    P.push_back(po.as<float>()[i] = vt::uniform(g, -1, 1));
    S.push_back(so.as<float>()[i] = vt::uniform(g, -1, 1));
  }
  std::vector<float> A, B;
  for (int64_t i = 0; i < H * T; ++i) {
    A.push_back(pl.as<float>()[i] = vt::uniform(g, -3, 3));
    B.push_back(sl.as<float>()[i] = vt::uniform(g, -3, 3));
  }
  ASSERT_VATTN_OK(vattn_merge_attn_states(po.dl(), pl.dl(), po.dl(), pl.dl(), so.dl(), sl.dl(), nullptr));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const double a = A[h * T + t], b = B[h * T + t], m = std::max(a, b);
      const double ea = std::exp(a - m), eb = std::exp(b - m);
      for (int64_t d = 0; d < D; ++d) {
        const size_t i = static_cast<size_t>((t * H + h) * D + d);
        ASSERT_NEAR(po.as<float>()[i], (ea * P[i] + eb * S[i]) / (ea + eb), 1e-5);
      }
      ASSERT_NEAR(pl.as<float>()[h * T + t], m + std::log(ea + eb), 1e-5);
    }
}

TEST(CpuMerge, BadInputs) {
  vt::HostTensor o({4, 2, 8}, vt::dl_f32()), p({4, 2, 8}, vt::dl_f32()), s({4, 2, 8}, vt::dl_f32());
  vt::HostTensor s16({4, 2, 8}, vt::dl_f16()), s3({3, 2, 8}, vt::dl_f32());
  vt::HostTensor pl({2, 4}, vt::dl_f32()), sl({2, 4}, vt::dl_f32()), bad_lse({4, 2}, vt::dl_f32());
  vt::HostTensor lse16({2, 4}, vt::dl_f16()), o_i32({4, 2, 8}, vt::dl_i32());
  for (auto &b : o.bytes) b = 0xAB;
  const auto before = o.bytes;
  EXPECT_VATTN_ERR(vattn_merge_attn_states(nullptr, nullptr, p.dl(), pl.dl(), s.dl(), sl.dl(), nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "output");
  EXPECT_VATTN_ERR(vattn_merge_attn_states(o.dl(), nullptr, p.dl(), pl.dl(), s16.dl(), sl.dl(), nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "suffix_output");
  EXPECT_VATTN_ERR(vattn_merge_attn_states(o.dl(), nullptr, p.dl(), pl.dl(), s3.dl(), sl.dl(), nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "suffix_output");
  EXPECT_VATTN_ERR(vattn_merge_attn_states(o.dl(), nullptr, p.dl(), bad_lse.dl(), s.dl(), sl.dl(), nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "prefix_lse");
  EXPECT_VATTN_ERR(vattn_merge_attn_states(o.dl(), lse16.dl(), p.dl(), pl.dl(), s.dl(), sl.dl(), nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "output_lse");
  EXPECT_VATTN_ERR(vattn_merge_attn_states(o_i32.dl(), nullptr, p.dl(), pl.dl(), s.dl(), sl.dl(), nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "output");
  EXPECT_VATTN_ERR(vattn_merge_attn_states(o.dl(), nullptr, p.dl(), pl.dl(), s.dl(), nullptr, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "suffix_lse");
  EXPECT_EQ(o.bytes, before);
}

// ---- copy / swap ---------------------------------------------------------------------
TEST(CpuBlocks, CopyBlocksExactAcrossLayersAndLayouts) {
  auto g = seeded();
  for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND}) {
    const int64_t nb = 12, bs = 4, H = 2, D = 16;
    auto st = ct::cache_strides(layout, nb, bs, H, D);
    std::vector<vt::HostTensor> caches;
    caches.emplace_back(std::vector<int64_t>{2, nb, bs, H, D}, vt::dl_bf16(), st);
    caches.emplace_back(std::vector<int64_t>{2, nb, bs, H, D}, vt::dl_bf16(), st);
    for (auto &c : caches)
      for (auto &b : c.bytes) b = static_cast<unsigned char>(g());
    std::vector<std::vector<unsigned char>> before;
    for (auto &c : caches) before.push_back(c.bytes);
    const int64_t pairs[6] = {3, 7, 0, 11, 5, 1};
    DLTensor *ts[2] = {caches[0].dl(), caches[1].dl()};
    ASSERT_VATTN_OK(vattn_copy_blocks(ts, 2, pairs, 3, nullptr));
    for (int l = 0; l < 2; ++l)
      for (int side = 0; side < 2; ++side)
        for (int64_t blk = 0; blk < nb; ++blk) {
          int64_t src = blk;
          for (int k = 0; k < 3; ++k)
            if (pairs[2 * k + 1] == blk) src = pairs[2 * k];
          for (int64_t o = 0; o < bs; ++o)
            for (int64_t h = 0; h < H; ++h)
              for (int64_t d = 0; d < D; ++d) {
                const int64_t a = side * st[0] + blk * st[1] + o * st[2] + h * st[3] + d * st[4];
                const int64_t b = side * st[0] + src * st[1] + o * st[2] + h * st[3] + d * st[4];
                ASSERT_EQ(std::memcmp(&caches[l].bytes[a * 2], &before[l][b * 2], 2), 0)
                    << "layer " << l << " block " << blk;
              }
        }
  }
}

TEST(CpuBlocks, CopyBlocksRejectsOutOfRangeIdsWritingNothing) {
  auto g = seeded();
  vt::HostTensor c({2, 4, 2, 1, 8}, vt::dl_f32());
  for (auto &b : c.bytes) b = static_cast<unsigned char>(g());
  const auto before = c.bytes;
  DLTensor *ts[1] = {c.dl()};
  const int64_t pairs[4] = {0, 1, 2, 4};
  EXPECT_VATTN_ERR(vattn_copy_blocks(ts, 1, pairs, 2, nullptr), VATTN_ERR_INVALID_ARGUMENT, "block_mapping");
  EXPECT_EQ(c.bytes, before);
  const int64_t neg[2] = {-1, 0};
  EXPECT_VATTN_ERR(vattn_copy_blocks(ts, 1, neg, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "block_mapping");
  EXPECT_VATTN_ERR(vattn_copy_blocks(ts, 1, nullptr, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "block_mapping");
  EXPECT_EQ(c.bytes, before);
}

TEST(CpuBlocks, SwapBlocksCpuToCpuExact) {
  auto g = seeded();
  const int64_t nb = 6, bs = 4, H = 2, D = 8;
  vt::HostTensor src({2, nb, bs, H, D}, vt::dl_f16());
  vt::HostTensor dst({2, nb, bs, H, D}, vt::dl_f16(), ct::cache_strides(VATTN_LAYOUT_HND, nb, bs, H, D));
  for (auto &b : src.bytes) b = static_cast<unsigned char>(g());
  for (auto &b : dst.bytes) b = static_cast<unsigned char>(g());
  const auto dst_before = dst.bytes;
  const int64_t pairs[4] = {1, 4, 5, 0};
  ASSERT_VATTN_OK(vattn_swap_blocks(src.dl(), dst.dl(), pairs, 2, nullptr));
  auto sst = ct::cache_strides(VATTN_LAYOUT_NHD, nb, bs, H, D);
  auto dstt = ct::cache_strides(VATTN_LAYOUT_HND, nb, bs, H, D);
  for (int side = 0; side < 2; ++side)
    for (int64_t blk = 0; blk < nb; ++blk)
      for (int64_t o = 0; o < bs; ++o)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < D; ++d) {
            int64_t from = -1;
            if (blk == 4) from = 1;
            if (blk == 0) from = 5;
            const int64_t a = side * dstt[0] + blk * dstt[1] + o * dstt[2] + h * dstt[3] + d * dstt[4];
            if (from < 0) {
              ASSERT_EQ(std::memcmp(&dst.bytes[a * 2], &dst_before[a * 2], 2), 0);
            } else {
              const int64_t b = side * sst[0] + from * sst[1] + o * sst[2] + h * sst[3] + d * sst[4];
              ASSERT_EQ(std::memcmp(&dst.bytes[a * 2], &src.bytes[b * 2], 2), 0);
            }
          }
  // Mismatched dtype / out-of-range id: nothing written.
  vt::HostTensor dst32({2, nb, bs, H, D}, vt::dl_f32());
  EXPECT_VATTN_ERR(vattn_swap_blocks(src.dl(), dst32.dl(), pairs, 2, nullptr), VATTN_ERR_INVALID_ARGUMENT, "dst");
  const auto snap = dst.bytes;
  const int64_t bad[2] = {0, 6};
  EXPECT_VATTN_ERR(vattn_swap_blocks(src.dl(), dst.dl(), bad, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "block_mapping");
  EXPECT_EQ(dst.bytes, snap);
}

}  // namespace
