// int_scan.cpp -- see int_scan.h.
#include "core/int_scan.h"

#include <atomic>
#include <cstring>
#include <limits>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define VATTN_SCAN_X86_DISPATCH 1
#include <immintrin.h>
#else
#define VATTN_SCAN_X86_DISPATCH 0
#endif

namespace vattn {
namespace {

#if VATTN_SCAN_X86_DISPATCH
std::atomic<bool> g_force_baseline{false};
#endif

// Plain reductions (no early exit) that compilers vectorise with the
// baseline ISA.
template <class T, class R>
inline R mm_plain(const T *p, int64_t n) {
  T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::min();
  for (int64_t i = 0; i < n; ++i) {
    lo = p[i] < lo ? p[i] : lo;
    hi = p[i] > hi ? p[i] : hi;
  }
  return {lo, hi};
}

#if VATTN_SCAN_X86_DISPATCH
bool have_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok && !g_force_baseline.load(std::memory_order_relaxed);
}

// The 32-bit scans with AVX2 intrinsics, so that they are vectorised at
// -O2 too (GCC 12 only auto-vectorises the plain loops at -O3).  The
// accumulators run across rows and stay in registers (no store of them to
// an array, which makes GCC -O3 keep them in memory); a row's tail is a
// masked load, so nothing past a row's n entries is read.
__attribute__((target("avx2"))) MinMax32 mm32_rows_avx2(const int32_t *p, int64_t rows,
                                                        int64_t stride, const int64_t *n) {
  __m256i lo = _mm256_set1_epi32(std::numeric_limits<int32_t>::max());
  __m256i hi = _mm256_set1_epi32(std::numeric_limits<int32_t>::min());
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t k = 0; k < rows; ++k) {
    const int32_t *q = p + k * stride;
    const int64_t m = n ? n[k] : stride;
    int64_t i = 0;
    for (; i + 8 <= m; i += 8) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + i));
      lo = _mm256_min_epi32(lo, a);
      hi = _mm256_max_epi32(hi, a);
    }
    if (i < m) {  // lanes [0, m - i) are loaded, the others keep the accumulators
      const __m256i mask =
          _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(m - i)), lane);
      const __m256i a = _mm256_maskload_epi32(q + i, mask);
      lo = _mm256_blendv_epi8(lo, _mm256_min_epi32(lo, a), mask);
      hi = _mm256_blendv_epi8(hi, _mm256_max_epi32(hi, a), mask);
    }
  }
  __m128i l4 = _mm_min_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
  __m128i h4 = _mm_max_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
  l4 = _mm_min_epi32(l4, _mm_shuffle_epi32(l4, 0x4e));
  h4 = _mm_max_epi32(h4, _mm_shuffle_epi32(h4, 0x4e));
  l4 = _mm_min_epi32(l4, _mm_shuffle_epi32(l4, 0xb1));
  h4 = _mm_max_epi32(h4, _mm_shuffle_epi32(h4, 0xb1));
  return {_mm_cvtsi128_si32(l4), _mm_cvtsi128_si32(h4)};
}

__attribute__((target("avx2"))) MinMax32 copy_mm32_rows_avx2(int32_t *dst, const int32_t *src,
                                                             int64_t rows, int64_t stride,
                                                             const int64_t *n) {
  __m256i lo = _mm256_set1_epi32(std::numeric_limits<int32_t>::max());
  __m256i hi = _mm256_set1_epi32(std::numeric_limits<int32_t>::min());
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t k = 0; k < rows; ++k) {
    const int32_t *q = src + k * stride;
    int32_t *o = dst + k * stride;
    const int64_t m = n[k];
    int64_t i = 0;
    for (; i + 8 <= m; i += 8) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(o + i), a);
      lo = _mm256_min_epi32(lo, a);
      hi = _mm256_max_epi32(hi, a);
    }
    if (i < m) {
      const __m256i mask =
          _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(m - i)), lane);
      const __m256i a = _mm256_maskload_epi32(q + i, mask);
      lo = _mm256_blendv_epi8(lo, _mm256_min_epi32(lo, a), mask);
      hi = _mm256_blendv_epi8(hi, _mm256_max_epi32(hi, a), mask);
    }
    // The tail of the prefix (just scanned) and the rest of the row.
    if (i < stride) std::memcpy(o + i, q + i, sizeof(int32_t) * static_cast<size_t>(stride - i));
  }
  __m128i l4 = _mm_min_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
  __m128i h4 = _mm_max_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
  l4 = _mm_min_epi32(l4, _mm_shuffle_epi32(l4, 0x4e));
  h4 = _mm_max_epi32(h4, _mm_shuffle_epi32(h4, 0x4e));
  l4 = _mm_min_epi32(l4, _mm_shuffle_epi32(l4, 0xb1));
  h4 = _mm_max_epi32(h4, _mm_shuffle_epi32(h4, 0xb1));
  return {_mm_cvtsi128_si32(l4), _mm_cvtsi128_si32(h4)};
}

__attribute__((target("avx2"))) MinMax64 mm64_avx2(const int64_t *p, int64_t n) {
  return mm_plain<int64_t, MinMax64>(p, n);
}
#endif

}  // namespace

MinMax32 minmax_i32(const int32_t *p, int64_t n) {
#if VATTN_SCAN_X86_DISPATCH
  if (have_avx2()) return mm32_rows_avx2(p, 1, n, nullptr);
#endif
  return mm_plain<int32_t, MinMax32>(p, n);
}

MinMax64 minmax_i64(const int64_t *p, int64_t n) {
#if VATTN_SCAN_X86_DISPATCH
  if (have_avx2()) return mm64_avx2(p, n);
#endif
  return mm_plain<int64_t, MinMax64>(p, n);
}

MinMax32 minmax_i32_rows(const int32_t *p, int64_t rows, int64_t stride, const int64_t *n) {
#if VATTN_SCAN_X86_DISPATCH
  if (have_avx2()) return mm32_rows_avx2(p, rows, stride, n);
#endif
  MinMax32 r{std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
  for (int64_t k = 0; k < rows; ++k) {
    const MinMax32 m = mm_plain<int32_t, MinMax32>(p + k * stride, n[k]);
    r.min = m.min < r.min ? m.min : r.min;
    r.max = m.max > r.max ? m.max : r.max;
  }
  return r;
}

MinMax32 copy_minmax_i32_rows(int32_t *dst, const int32_t *src, int64_t rows, int64_t stride,
                              const int64_t *n) {
#if VATTN_SCAN_X86_DISPATCH
  if (have_avx2()) return copy_mm32_rows_avx2(dst, src, rows, stride, n);
#endif
  if (rows > 0 && stride > 0)
    std::memcpy(dst, src, sizeof(int32_t) * static_cast<size_t>(rows * stride));
  return minmax_i32_rows(dst, rows, stride, n);
}

void int_scan_force_baseline(bool on) {
#if VATTN_SCAN_X86_DISPATCH
  g_force_baseline.store(on);
#else
  (void)on;  // only the baseline loops exist
#endif
}

}  // namespace vattn
