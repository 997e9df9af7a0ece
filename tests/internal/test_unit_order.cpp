// test_unit_order.cpp -- the Hopper kernel's unit claim order
// (src/backends/unit_order.h) against an independent restatement of its
// rule, on random batches: a permutation of the units, length classes
// longest first, and within a class each (request, KV head) group
// contiguous, in request then KV-head order, items in their given order.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "backends/unit_order.h"

namespace {

int log2_class(int64_t k) {  // floor(log2(k)), 0 for k <= 1
  int c = 0;
  while (k > 1) {
    k >>= 1;
    ++c;
  }
  return c;
}

TEST(UnitOrder, RandomBatchesFollowTheRule) {
  std::mt19937 rng(20261122);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = std::uniform_int_distribution<int>(0, 300)(rng);
    const int kvh = std::uniform_int_distribution<int>(1, 8)(rng);
    const int nreq = std::uniform_int_distribution<int>(1, 12)(rng);
    std::vector<int32_t> req(n);
    std::vector<int64_t> keys(n);
    for (int i = 0; i < n; ++i) {
      req[i] = std::uniform_int_distribution<int>(0, nreq - 1)(rng);
      // Odd trials: request ids far above the item count (the comparison
      // sort path; even trials take the counting sorts).
      if (trial % 2) req[i] = req[i] * 100003 + 7;
      keys[i] = std::uniform_int_distribution<int64_t>(0, 1 << 16)(rng);
    }
    std::vector<int32_t> units(static_cast<size_t>(n) * kvh, -7);
    ASSERT_TRUE(vattn::unit_order(req.data(), sizeof(int32_t), keys.data(), n, kvh, units.data()));

    // A permutation of [0, n * kvh).
    std::vector<int32_t> sorted = units;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t u = 0; u < static_cast<int64_t>(sorted.size()); ++u) ASSERT_EQ(sorted[u], u);

    // Consecutive units compare by (class desc, request, kv head, item index).
    for (size_t u = 1; u < units.size(); ++u) {
      const int a = units[u - 1] / kvh, ha = units[u - 1] % kvh;
      const int b = units[u] / kvh, hb = units[u] % kvh;
      const int ca = log2_class(keys[a]), cb = log2_class(keys[b]);
      ASSERT_GE(ca, cb) << "trial " << trial << " unit " << u;
      if (ca != cb) continue;
      ASSERT_LE(req[a], req[b]) << "trial " << trial << " unit " << u;
      if (req[a] != req[b]) continue;
      ASSERT_LE(ha, hb) << "trial " << trial << " unit " << u;
      if (ha != hb) continue;
      ASSERT_LT(a, b) << "trial " << trial << " unit " << u;
    }
  }
}

TEST(UnitOrder, WorkedExample) {
  // Items (request, keys): 0 (0, 1024), 1 (1, 1000), 2 (0, 600), 3 (1, 520), 4 (0, 40).
  // Classes: 10, 9, 9, 9, 5.  Two KV heads.
  const int32_t req[] = {0, 1, 0, 1, 0};
  const int64_t keys[] = {1024, 1000, 600, 520, 40};
  int32_t units[10];
  ASSERT_TRUE(vattn::unit_order(req, sizeof(int32_t), keys, 5, 2, units));
  // class 10: item 0 (h0, h1); class 9: request 0 (item 2), request 1 (items 1, 3); class 5: item 4.
  const int32_t want[] = {0, 1, 4, 5, 2, 6, 3, 7, 8, 9};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(units[i], want[i]) << i;
}

}  // namespace
