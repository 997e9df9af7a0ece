// test_int_scan.cpp -- core/int_scan.h (vectorised min/max used to validate
// block ids and slots) against a plain loop, over lengths that exercise
// the 8-wide body, the masked tail and empty rows, with the extreme values
// at every position; and core/cow_vector.h's value semantics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/cow_vector.h"
#include "core/int_scan.h"
#include "test_util.h"

namespace {

using vattn::CowVector;

// Runs a test body with the dispatched (AVX2 where available) and the
// baseline loops.
class IntScanBoth : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { vattn::int_scan_force_baseline(GetParam()); }
  void TearDown() override { vattn::int_scan_force_baseline(false); }
};
INSTANTIATE_TEST_SUITE_P(IntScan, IntScanBoth, ::testing::Values(false, true));

TEST_P(IntScanBoth, MatchesPlainLoopForEveryLengthAndPosition) {
  std::mt19937_64 g(vt::test_seed());
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<int32_t> v(static_cast<size_t>(n) + 8, 0);
    for (auto &x : v) x = std::uniform_int_distribution<int32_t>(-1000, 1000)(g);
    for (int64_t at = -1; at < n; ++at) {
      std::vector<int32_t> w = v;
      // Values just past the range (never part of the answer).
      for (int64_t i = n; i < n + 8; ++i) w[i] = (i % 2) ? std::numeric_limits<int32_t>::min()
                                                         : std::numeric_limits<int32_t>::max();
      if (at >= 0) w[at] = (at % 2) ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
      int32_t lo = std::numeric_limits<int32_t>::max(), hi = std::numeric_limits<int32_t>::min();
      for (int64_t i = 0; i < n; ++i) lo = std::min(lo, w[i]), hi = std::max(hi, w[i]);
      const vattn::MinMax32 m = vattn::minmax_i32(w.data(), n);
      ASSERT_EQ(m.min, lo) << "n=" << n << " at=" << at;
      ASSERT_EQ(m.max, hi) << "n=" << n << " at=" << at;
      std::vector<int64_t> w64(w.begin(), w.end());
      const vattn::MinMax64 m64 = vattn::minmax_i64(w64.data(), n);
      ASSERT_EQ(m64.min, n ? lo : std::numeric_limits<int64_t>::max());
      ASSERT_EQ(m64.max, n ? hi : std::numeric_limits<int64_t>::min());
    }
  }
}

TEST_P(IntScanBoth, RowsReadOnlyTheirPrefix) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 200; ++it) {
    const int64_t rows = std::uniform_int_distribution<int64_t>(0, 9)(g);
    const int64_t stride = std::uniform_int_distribution<int64_t>(1, 70)(g);
    std::vector<int32_t> t(static_cast<size_t>(rows * stride));
    for (auto &x : t) x = std::uniform_int_distribution<int32_t>(-5, 1 << 20)(g);
    std::vector<int64_t> n(static_cast<size_t>(rows));
    int32_t lo = std::numeric_limits<int32_t>::max(), hi = std::numeric_limits<int32_t>::min();
    for (int64_t r = 0; r < rows; ++r) {
      n[r] = std::uniform_int_distribution<int64_t>(0, stride)(g);
      // Entries past the prefix hold extremes that must not show up.
      for (int64_t c = n[r]; c < stride; ++c)
        t[r * stride + c] = (c % 2) ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max();
      for (int64_t c = 0; c < n[r]; ++c) lo = std::min(lo, t[r * stride + c]), hi = std::max(hi, t[r * stride + c]);
    }
    const vattn::MinMax32 m = vattn::minmax_i32_rows(t.data(), rows, stride, n.data());
    ASSERT_EQ(m.min, lo) << it;
    ASSERT_EQ(m.max, hi) << it;
    // The copying scan: same answer, every entry copied (prefixes and rest).
    std::vector<int32_t> dst(t.size() + 1, 0x1234567);
    const vattn::MinMax32 mc = vattn::copy_minmax_i32_rows(dst.data(), t.data(), rows, stride, n.data());
    ASSERT_EQ(mc.min, lo) << it;
    ASSERT_EQ(mc.max, hi) << it;
    ASSERT_TRUE(std::equal(t.begin(), t.end(), dst.begin())) << it;
    ASSERT_EQ(dst.back(), 0x1234567) << it;  // nothing written past the end
  }
}

TEST(CowVector, CopiesShareUntilWritten) {
  CowVector<int32_t> a;
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.data(), nullptr);
  const std::vector<int32_t> src{1, 2, 3};
  a.assign(src.begin(), src.end());
  ASSERT_EQ(a.size(), 3u);
  CowVector<int32_t> b = a;
  EXPECT_TRUE(b.shares_with(a));
  EXPECT_EQ(b.data(), a.data());
  b.mut()[1] = 20;  // detaches b; a unchanged
  EXPECT_FALSE(b.shares_with(a));
  EXPECT_EQ(a[1], 2);
  EXPECT_EQ(b[1], 20);
  CowVector<int32_t> c = a;
  c.resize(1);
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(c.size(), 1u);
  CowVector<int32_t> d = a;
  const int32_t more[2] = {7, 8};
  d.assign(more, more + 2);  // replaces d's elements only
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(d[1], 8);
  CowVector<int32_t> e = a;
  e.push_back(4);
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(e.size(), 4u);
  EXPECT_TRUE(e == (CowVector<int32_t>{1, 2, 3, 4}));
  // Sole owner: written in place.
  const int32_t *before = e.data();
  e.mut()[0] = 9;
  EXPECT_EQ(e.data(), before);
  a.clear();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b[0], 1);  // b's buffer outlives a's handle
}

}  // namespace
