// int_scan.h -- vectorised minimum / maximum of integer arrays, used to
// validate block ids and slots with one pass of branch-free loads instead
// of one compare-and-branch per entry.  On x86-64 (GCC/Clang) an AVX2
// build of each loop is chosen at run time when the CPU has AVX2; the
// library itself stays baseline x86-64.
//
// On an empty range the result is {max, min} of the type (min > max), so
// results of several ranges merge with std::min / std::max.
#pragma once

#include <cstdint>

namespace vattn {

struct MinMax32 {
  int32_t min;
  int32_t max;
};
struct MinMax64 {
  int64_t min;
  int64_t max;
};

MinMax32 minmax_i32(const int32_t *p, int64_t n);
MinMax64 minmax_i64(const int64_t *p, int64_t n);

// Minimum and maximum over the first n[r] entries of each of `rows` rows
// (row r starts at p + r * stride); every n[r] must be in [0, stride].
MinMax32 minmax_i32_rows(const int32_t *p, int64_t rows, int64_t stride, const int64_t *n);

// Copies rows * stride entries from src to dst (which must not overlap)
// and returns minmax_i32_rows(src, rows, stride, n): one pass over the
// scanned entries instead of a copy and a second read.
MinMax32 copy_minmax_i32_rows(int32_t *dst, const int32_t *src, int64_t rows, int64_t stride,
                              const int64_t *n);

// Tests: true makes every scan use the baseline loops (default false).
void int_scan_force_baseline(bool on);

}  // namespace vattn
