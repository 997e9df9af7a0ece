// test_cpu_kernel.cpp -- both builds of the CPU attention kernel (baseline
// and AVX2/FMA/F16C, see backends/cpu/attention.h) against the float64
// oracle of tests/cpu, whichever one the machine would pick by itself.
#include "../cpu/cpu_harness.h"
#include "backends/cpu/attention.h"

namespace {

struct KernelGuard {
  ~KernelGuard() { vattn::cpu::force_kernel(-1); }
};

TEST(CpuKernelBuilds, BaselineAndAvx2MatchTheOracle) {
  KernelGuard restore;
  auto g = ct::seeded_rng();
  for (int which : {0, 1}) {
    if (which == 1 && !vattn::cpu::kernel_avx2_available()) continue;
    vattn::cpu::force_kernel(which);
    ASSERT_STREQ(vattn::cpu::kernel_name(), which ? "avx2" : "baseline");
    for (int D : {72, 128}) {  // 72: a head size that is not a multiple of 32
      for (int32_t dt : {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16}) {
        ct::Config c;
        c.head_size = D;
        c.dtype = dt;
        c.num_heads = 6;
        c.num_kv_heads = 2;
        c.soft_cap = dt == VATTN_DTYPE_FLOAT16 ? 4.f : 0.f;
        c.sinks = dt == VATTN_DTYPE_BFLOAT16;
        c.sliding_window = D == 72 ? 19 : 0;
        std::vector<int32_t> q, s;
        ct::random_batch(g, 5, 80, 40, &q, &s);
        ct::run_case(c, q, s, g);
      }
      ct::Config f8;
      f8.head_size = D;
      f8.kv_cache_dtype = VATTN_KV_CACHE_DTYPE_FP8_E4M3;
      f8.layout = VATTN_LAYOUT_HND;
      ct::run_case(f8, {1, 30}, {50, 45}, g);
    }
  }
}

}  // namespace
