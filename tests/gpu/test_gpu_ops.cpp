// test_gpu_ops.cpp -- section 12 operations on CUDA tensors against the CPU
// backend on the same inputs: reshape_and_cache (byte-exact, 16-bit and fp8,
// NHD / HND, padding slots, out-of-range slots skipped), merge_attn_states
// (+inf / both -inf LSEs; atol 1e-3 fp32, 1e-2 16-bit), copy_blocks and
// swap_blocks (byte-exact, host <-> device and device <-> device).
#include <algorithm>
#include <numeric>

#include "gpu_harness.h"

namespace {

int32_t storage_of(int32_t dtype, int32_t kvd) {
  return kvd == VATTN_KV_CACHE_DTYPE_FP8_E4M3   ? VATTN_DTYPE_FP8_E4M3
         : kvd == VATTN_KV_CACHE_DTYPE_FP8_E5M2 ? VATTN_DTYPE_FP8_E5M2
                                                : dtype;
}

void fill(vt::HostTensor &t, int32_t dtype, std::mt19937_64 &g, float lo, float hi) {
  const size_t es = ct::dtype_bytes(dtype);
  for (size_t i = 0; i + es <= t.nbytes(); i += es)
    ct::put(dtype, t.bytes.data() + i, ct::round_to(dtype, vt::uniform(g, lo, hi)));
}

// Byte equality of the tensors' storage (HostTensor keeps one spare byte
// past its span, which a device copy does not carry).
bool same(const vt::HostTensor &a, const vt::HostTensor &b) {
  return a.nbytes() == b.nbytes() && std::equal(a.bytes.begin(), a.bytes.begin() + a.nbytes(), b.bytes.begin());
}

}  // namespace

TEST(GpuOps, ReshapeAndCacheMatchesCpu) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int32_t dtype : {VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16, VATTN_DTYPE_FLOAT32})
    for (int32_t kvd : {VATTN_KV_CACHE_DTYPE_AUTO, VATTN_KV_CACHE_DTYPE_FP8_E4M3,
                        VATTN_KV_CACHE_DTYPE_FP8_E5M2})
      for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND})
        for (int64_t D : {64, 80, 256}) {
          SCOPED_TRACE("dtype " + std::to_string(dtype) + " kv " + std::to_string(kvd) + " layout " +
                       std::to_string(layout) + " D " + std::to_string(D));
          const int64_t T = 42, H = 4, bs = 16, nb = 20;
          const int32_t st = storage_of(dtype, kvd);
          vt::HostTensor k({T + 3, H, D}, ct::dl_of(dtype)), v({T + 3, H, D}, ct::dl_of(dtype));
          // Wide range so fp8 saturation is exercised (scale 0.5: |x| up to 600).
          fill(k, dtype, g, -300.f, 300.f);
          fill(v, dtype, g, -300.f, 300.f);
          std::vector<int64_t> pool(static_cast<size_t>(nb * bs));
          std::iota(pool.begin(), pool.end(), 0);
          std::shuffle(pool.begin(), pool.end(), g);
          vt::HostTensor slots({T}, vt::dl_i64()), slots_cpu({T}, vt::dl_i64());
          for (int64_t i = 0; i < T; ++i) {
            int64_t s = (i % 7 == 3) ? -1 : pool[i];
            slots_cpu.as<int64_t>()[i] = s;
            if (i == 5) s = nb * bs + 3;  // beyond the cache: skipped on CUDA
            slots.as<int64_t>()[i] = s;
          }
          slots_cpu.as<int64_t>()[5] = -1;
          auto strides = ct::cache_strides(layout, nb, bs, H, D);
          vt::HostTensor cache({2, nb, bs, H, D}, ct::dl_of(st), strides);
          for (auto &b : cache.bytes) b = static_cast<unsigned char>(g());
          gt::DevTensor dk(k), dv(v), ds(slots), dc(cache);
          ASSERT_VATTN_OK(vattn_reshape_and_cache(k.dl(), v.dl(), cache.dl(), slots_cpu.dl(), kvd,
                                                  0.5f, 0.25f, nullptr));
          ASSERT_VATTN_OK(vattn_reshape_and_cache(dk.dl(), dv.dl(), dc.dl(), ds.dl(), kvd, 0.5f,
                                                  0.25f, nullptr));
          vt::HostTensor got({2, nb, bs, H, D}, ct::dl_of(st), strides);
          dc.download(&got);
          EXPECT_TRUE(same(got, cache));
        }
}

TEST(GpuOps, MergeAttnStatesMatchesCpu) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int32_t dtype : {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16})
    for (int64_t D : {64, 128, 80}) {
      const int64_t T = 613, H = 8;
      vt::HostTensor po({T, H, D}, ct::dl_of(dtype)), so({T, H, D}, ct::dl_of(dtype)),
          out({T, H, D}, ct::dl_of(dtype)), pl({H, T}, vt::dl_f32()), sl({H, T}, vt::dl_f32()),
          ol({H, T}, vt::dl_f32());
      fill(po, dtype, g, -2.f, 2.f);
      fill(so, dtype, g, -2.f, 2.f);
      std::normal_distribution<float> nd(0.f, 2.f);
      for (int64_t i = 0; i < H * T; ++i) {
        pl.as<float>()[i] = nd(g);
        sl.as<float>()[i] = nd(g);
        if (i % 10 == 1) pl.as<float>()[i] = INFINITY;
        if (i % 10 == 2) sl.as<float>()[i] = INFINITY;
        if (i % 10 == 3) pl.as<float>()[i] = sl.as<float>()[i] = -INFINITY;
      }
      gt::DevTensor dpo(po), dso(so), dout(out), dpl(pl), dsl(sl), dol(ol);
      ASSERT_VATTN_OK(vattn_merge_attn_states(out.dl(), ol.dl(), po.dl(), pl.dl(), so.dl(), sl.dl(), nullptr));
      ASSERT_VATTN_OK(vattn_merge_attn_states(dout.dl(), dol.dl(), dpo.dl(), dpl.dl(), dso.dl(),
                                              dsl.dl(), nullptr));
      vt::HostTensor gout({T, H, D}, ct::dl_of(dtype)), gol({H, T}, vt::dl_f32());
      dout.download(&gout);
      dol.download(&gol);
      const double atol = dtype == VATTN_DTYPE_FLOAT32 ? 1e-3 : 1e-2;
      int64_t bad = 0;
      const size_t es = ct::dtype_bytes(dtype);
      for (int64_t i = 0; i < T * H * D; ++i) {
        const double a = ct::get(dtype, gout.bytes.data() + i * es);
        const double b = ct::get(dtype, out.bytes.data() + i * es);
        if (!(std::fabs(a - b) <= atol + 1e-2 * std::fabs(b))) ++bad;
      }
      for (int64_t i = 0; i < H * T; ++i) {
        const float a = gol.as<float>()[i], b = ol.as<float>()[i];
        if (!((std::isinf(b) && a == b) || std::fabs(a - b) <= 1e-5 + 1e-5 * std::fabs(b))) ++bad;
      }
      EXPECT_EQ(bad, 0) << "dtype " << dtype << " D " << D;
    }
}

TEST(GpuOps, CopyAndSwapBlocksExact) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND}) {
    const int64_t nb = 300, bs = 16, H = 4, D = 80;
    auto strides = ct::cache_strides(layout, nb, bs, H, D);
    vt::HostTensor c0({2, nb, bs, H, D}, vt::dl_bf16(), strides), c1({2, nb, bs, H, D}, vt::dl_u8(), strides);
    for (auto &b : c0.bytes) b = static_cast<unsigned char>(g());
    for (auto &b : c1.bytes) b = static_cast<unsigned char>(g());
    // 150 pairs with distinct destinations (more than one launch's 128).
    std::vector<int64_t> ids(nb);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), g);
    std::vector<int64_t> map;
    for (int i = 0; i < 150; ++i) {
      map.push_back(ids[i]);
      map.push_back(ids[150 + i]);
    }
    gt::DevTensor d0(c0), d1(c1);
    DLTensor *hl[2] = {c0.dl(), c1.dl()}, *dl[2] = {d0.dl(), d1.dl()};
    ASSERT_VATTN_OK(vattn_copy_blocks(hl, 2, map.data(), 150, nullptr));
    ASSERT_VATTN_OK(vattn_copy_blocks(dl, 2, map.data(), 150, nullptr));
    vt::HostTensor g0({2, nb, bs, H, D}, vt::dl_bf16(), strides), g1({2, nb, bs, H, D}, vt::dl_u8(), strides);
    d0.download(&g0);
    d1.download(&g1);
    EXPECT_TRUE(same(g0, c0)) << "copy_blocks layout " << layout;
    EXPECT_TRUE(same(g1, c1)) << "copy_blocks fp8 layout " << layout;

    // swap: device -> host, host -> device, device -> device, against the
    // CPU's host -> host result.
    vt::HostTensor hdst({2, nb, bs, H, D}, vt::dl_bf16(), strides), expect({2, nb, bs, H, D}, vt::dl_bf16(), strides);
    for (auto &b : hdst.bytes) b = static_cast<unsigned char>(g());
    expect.bytes = hdst.bytes;
    expect.t.data = expect.bytes.data();
    ASSERT_VATTN_OK(vattn_swap_blocks(c0.dl(), expect.dl(), map.data(), 150, nullptr));
    gt::DevTensor ddst(hdst);
    ASSERT_VATTN_OK(vattn_swap_blocks(d0.dl(), hdst.dl(), map.data(), 150, nullptr));  // D2H
    gt::drv().cuCtxSynchronize();
    EXPECT_TRUE(same(hdst, expect)) << "swap D2H layout " << layout;
    ASSERT_VATTN_OK(vattn_swap_blocks(c0.dl(), ddst.dl(), map.data(), 150, nullptr));  // H2D
    vt::HostTensor got({2, nb, bs, H, D}, vt::dl_bf16(), strides);
    ddst.download(&got);
    EXPECT_TRUE(same(got, expect)) << "swap H2D layout " << layout;
    gt::DevTensor ddst2(hdst);  // == expect
    ASSERT_VATTN_OK(vattn_swap_blocks(d0.dl(), ddst2.dl(), map.data(), 150, nullptr));  // D2D
    ddst2.download(&got);
    EXPECT_TRUE(same(got, expect)) << "swap D2D layout " << layout;
  }
}
