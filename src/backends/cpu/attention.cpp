// attention.cpp -- see attention.h.
//
// Loop structure of attend_tile: keys are taken in chunks of kKeyChunk.  A
// chunk's K rows are converted to float32 once and shared by every query row
// of the tile (all query heads of the KV head: GQA rows reuse the same K/V
// bytes, which is what makes decode memory-bound rather than load-bound);
// then the chunk's logits update each row's running max / sum, and the V
// rows are converted and accumulated with the row's probabilities.  Inner
// loops run over head_size (a multiple of 8), contiguous in the scratch
// buffers, so the compiler vectorizes them.
#include "backends/cpu/attention.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <limits>

// x86-64 with GCC/Clang: the kernel is also compiled for AVX2 + FMA + F16C
// and chosen at run time, so the library itself stays baseline x86-64.
// (GCC only: clang ignores '#pragma GCC target'; the clang fuzz build runs
// the baseline kernel.)
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
#define VATTN_CPU_X86_DISPATCH 1
#include <immintrin.h>
#else
#define VATTN_CPU_X86_DISPATCH 0
#endif

namespace vattn {
namespace cpu {

// Baseline build of the kernel.
#define VATTN_KERNEL_AVX2 0
namespace k_base {
#include "backends/cpu/attention_kernel.inc"
}  // namespace k_base
#undef VATTN_KERNEL_AVX2

#if VATTN_CPU_X86_DISPATCH
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#define VATTN_KERNEL_AVX2 1
namespace k_avx2 {
#include "backends/cpu/attention_kernel.inc"
}  // namespace k_avx2
#undef VATTN_KERNEL_AVX2
#pragma GCC pop_options
#endif

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

Scratch &Scratch::local() {
  thread_local Scratch s;
  return s;
}

namespace {

// -1 = decide from the CPU (and VATTN_CPU_KERNEL=baseline), 0 / 1 = forced.
std::atomic<int> g_kernel_override{-1};

bool use_avx2() {
#if VATTN_CPU_X86_DISPATCH
  const int o = g_kernel_override.load(std::memory_order_relaxed);
  if (o >= 0) return o == 1 && kernel_avx2_available();
  static const bool pick = [] {
    const char *env = std::getenv("VATTN_CPU_KERNEL");
    if (env && std::strcmp(env, "baseline") == 0) return false;
    return kernel_avx2_available();
  }();
  return pick;
#else
  return false;
#endif
}

}  // namespace

bool kernel_avx2_available() {
#if VATTN_CPU_X86_DISPATCH
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c");
  return ok;
#else
  return false;
#endif
}

void force_kernel(int which) { g_kernel_override.store(which < 0 ? -1 : (which ? 1 : 0)); }

const char *kernel_name() { return use_avx2() ? "avx2" : "baseline"; }

void attend_tile(const KvView &kv, const MaskRule &mask, const TileQuery &tq, int64_t D,
                 Scratch &scr, float *acc, float *m, float *l) {
#if VATTN_CPU_X86_DISPATCH
  if (use_avx2()) return k_avx2::attend_tile_impl(kv, mask, tq, D, scr, acc, m, l);
#endif
  k_base::attend_tile_impl(kv, mask, tq, D, scr, acc, m, l);
}

float finalize_row(const float *acc, float m, float l, bool has_sink, float sink, int64_t D,
                   float *o) {
  const bool sink_on = has_sink && sink != kNegInf;
  if (sink_on && std::isinf(sink)) {  // +inf sink takes all the mass
    for (int64_t d = 0; d < D; ++d) o[d] = 0.f;
    return sink;
  }
  if (m == kNegInf) {  // no visible key
    for (int64_t d = 0; d < D; ++d) o[d] = 0.f;
    return sink_on ? sink : kNegInf;
  }
  float M = m, total = l;
  if (sink_on) {
    M = std::max(m, sink);
    total = l * std::exp(m - M) + std::exp(sink - M);
  }
  const float f = (sink_on ? std::exp(m - M) : 1.f) / total;
  for (int64_t d = 0; d < D; ++d) o[d] = acc[d] * f;
  return M + std::log(total);
}

float merge_row(const float *prefix, float prefix_lse, const float *suffix, float suffix_lse,
                int64_t D, float *out) {
  const float inf = std::numeric_limits<float>::infinity();
  const float p = prefix_lse == inf ? kNegInf : prefix_lse;
  const float s = suffix_lse == inf ? kNegInf : suffix_lse;
  const float mx = std::max(p, s);
  if (mx == kNegInf) {  // both empty: keep the prefix (never 0/0)
    if (out != prefix)
      for (int64_t d = 0; d < D; ++d) out[d] = prefix[d];
    return kNegInf;
  }
  const float wp = std::exp(p - mx), ws = std::exp(s - mx);
  const float inv = 1.f / (wp + ws);
  const float a = wp * inv, b = ws * inv;
  for (int64_t d = 0; d < D; ++d) out[d] = prefix[d] * a + suffix[d] * b;
  return std::log(wp + ws) + mx;
}

}  // namespace cpu
}  // namespace vattn
