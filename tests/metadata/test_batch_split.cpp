// split_decodes_and_prefills, split_decodes_prefills_and_extends and the
// era-B 3-way reorder: doc examples, surprises, properties, bad inputs.
#include "md_util.h"

namespace {

mdt::MdPtr md_from(std::mt19937_64 &g, const std::vector<int32_t> &q, const std::vector<int32_t> &s,
                   int64_t pad = 0, int32_t max_q = -1) {
  mdt::Batch b = mdt::make_batch(g, q, s, 4, pad);
  auto d = b.desc();
  d.max_query_len = max_q;
  return mdt::create(d);
}

void expect_split(const vattn_decode_prefill_split_t &r, int64_t d, int64_t p, int64_t dt, int64_t pt) {
  EXPECT_EQ(r.num_decodes, d);
  EXPECT_EQ(r.num_prefills, p);
  EXPECT_EQ(r.num_decode_tokens, dt);
  EXPECT_EQ(r.num_prefill_tokens, pt);
}

TEST(SplitDecodesAndPrefills, DocCases) {
  std::mt19937_64 g(vt::test_seed());
  vattn_decode_prefill_split_t r;
  auto m = md_from(g, {1, 1, 5, 5}, {32, 40, 48, 56});
  ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), 1, 0, &r));
  expect_split(r, 2, 2, 2, 10);
  // All-decode shortcut returns the padded token count.
  m = md_from(g, {1, 1, 1}, {5, 6, 7}, 5);
  ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), 1, 0, &r));
  expect_split(r, 3, 0, 8, 0);
  // First request long: no decodes, padded token count as prefill tokens.
  m = md_from(g, {6, 1}, {6, 9}, 2);
  ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), 1, 0, &r));
  expect_split(r, 0, 2, 0, 9);
  // Non-reordered tail: era B counts everything after the first prefill
  // as prefill.
  m = md_from(g, {1, 5, 1}, {3, 9, 4});
  ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), 1, 0, &r));
  expect_split(r, 1, 2, 1, 6);
  // Upper-bound max_query_len > threshold but every request short.
  m = md_from(g, {1, 1}, {3, 9}, 0, 7);
  ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), 1, 0, &r));
  expect_split(r, 2, 0, 2, 0);
}

TEST(SplitDecodesAndPrefills, RequireUniformSurprises) {
  std::mt19937_64 g(vt::test_seed());
  vattn_decode_prefill_split_t r;
  // [2,1,2,4] threshold 4: requests after the first mismatch are prefills
  // even when short.
  auto m = md_from(g, {2, 1, 2, 4}, {9, 9, 9, 9});
  ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), 4, 1, &r));
  expect_split(r, 1, 3, 2, 7);
  // Same batch without require_uniform: everything is a decode.
  ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), 4, 0, &r));
  expect_split(r, 4, 0, 9, 0);
  // Uniform with zero-length padding requests: all decode when padded right.
  mdt::Batch b = mdt::make_batch(g, {3, 3, 0, 0}, {7, 8, 0, 0}, 4, 6);
  m = mdt::create(b.desc());
  ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), 3, 1, &r));
  expect_split(r, 4, 0, 12, 0);
  // ... and an error when the token count is not padded to 4 * 3.
  b = mdt::make_batch(g, {3, 3, 0, 0}, {7, 8, 0, 0}, 4, 2);
  m = mdt::create(b.desc());
  vattn_decode_prefill_split_t before{-9, -9, -9, -9}, out = before;
  EXPECT_VATTN_ERR(vattn_split_decodes_and_prefills(m.get(), 3, 1, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "tokens not padded correctly");
  EXPECT_EQ(out.num_decodes, -9);
  // threshold <= 1 with require_uniform still takes the shortcut.
  m = md_from(g, {1, 1}, {3, 4});
  ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), 1, 1, &r));
  expect_split(r, 2, 0, 2, 0);
}

TEST(SplitDecodesAndPrefills, BadInputs) {
  std::mt19937_64 g(vt::test_seed());
  auto m = md_from(g, {1, 5}, {3, 9});
  vattn_decode_prefill_split_t out{-9, -9, -9, -9};
  EXPECT_VATTN_ERR(vattn_split_decodes_and_prefills(nullptr, 1, 0, &out), VATTN_ERR_INVALID_ARGUMENT, "md");
  EXPECT_VATTN_ERR(vattn_split_decodes_and_prefills(m.get(), 1, 0, nullptr), VATTN_ERR_INVALID_ARGUMENT, "out");
  EXPECT_VATTN_ERR(vattn_split_decodes_and_prefills(m.get(), -1, 0, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "decode_threshold");
  EXPECT_EQ(out.num_decodes, -9);
}

TEST(SplitDecodesPrefillsExtends, Cases) {
  std::mt19937_64 g(vt::test_seed());
  vattn_decode_extend_prefill_split_t r;
  auto m = md_from(g, {1, 1, 3, 3, 4}, {5, 6, 10, 3, 4});
  ASSERT_VATTN_OK(vattn_split_decodes_prefills_and_extends(m.get(), 1, &r));
  EXPECT_EQ(r.num_decodes, 2);
  EXPECT_EQ(r.num_extends, 1);
  EXPECT_EQ(r.num_prefills, 2);
  EXPECT_EQ(r.num_decode_tokens, 2);
  EXPECT_EQ(r.num_extend_tokens, 3);
  EXPECT_EQ(r.num_prefill_tokens, 7);
  // No pure prefill: extends are all the non-decodes (padding included).
  m = md_from(g, {1, 3, 3}, {5, 10, 9}, 3);
  ASSERT_VATTN_OK(vattn_split_decodes_prefills_and_extends(m.get(), 1, &r));
  EXPECT_EQ(r.num_decodes, 1);
  EXPECT_EQ(r.num_extends, 2);
  EXPECT_EQ(r.num_prefills, 0);
  EXPECT_EQ(r.num_decode_tokens, 1);
  EXPECT_EQ(r.num_extend_tokens, 9);
  EXPECT_EQ(r.num_prefill_tokens, 0);
  // All short: everything decodes with the padded token count.
  m = md_from(g, {2, 1}, {5, 10}, 4);
  ASSERT_VATTN_OK(vattn_split_decodes_prefills_and_extends(m.get(), 2, &r));
  EXPECT_EQ(r.num_decodes, 2);
  EXPECT_EQ(r.num_decode_tokens, 7);
  EXPECT_EQ(r.num_extends + r.num_prefills, 0);
  vattn_decode_extend_prefill_split_t out{-9, -9, -9, -9, -9, -9};
  EXPECT_VATTN_ERR(vattn_split_decodes_prefills_and_extends(m.get(), -2, &out), VATTN_ERR_INVALID_ARGUMENT,
                   "decode_threshold");
  EXPECT_VATTN_ERR(vattn_split_decodes_prefills_and_extends(nullptr, 1, &out), VATTN_ERR_INVALID_ARGUMENT, "md");
  EXPECT_VATTN_ERR(vattn_split_decodes_prefills_and_extends(m.get(), 1, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "out");
  EXPECT_EQ(out.num_decodes, -9);
}

// ---- reorder -------------------------------------------------------------------

struct Reorder {
  std::vector<int64_t> swaps, order;
  int64_t num_swaps = -1;
  int32_t modified = -1;
};

Reorder run_reorder(const std::vector<int32_t> &s, const std::vector<int32_t> &c, int32_t th) {
  Reorder r;
  int64_t n = (int64_t)s.size();
  r.swaps.assign(2 * n + 2, -7);
  r.order.assign(n, -7);
  EXPECT_VATTN_OK(vattn_reorder_batch_to_split_decodes_and_prefills(s.data(), c.data(), n, th, r.swaps.data(),
                                                                    &r.num_swaps, r.order.data(), &r.modified));
  return r;
}

int region(int32_t s, int32_t c, int32_t th) { return c == 0 ? 2 : (s <= th ? 0 : 1); }

TEST(ReorderBatch, DecodesAtEnd) {
  // [P, P, D, D] -> era B order [2, 3, 0, 1] (era A would give [3, 2, 1, 0]).
  Reorder r = run_reorder({5, 7, 1, 1}, {0, 0, 9, 4}, 1);
  EXPECT_EQ(r.order, (std::vector<int64_t>{2, 3, 0, 1}));
  EXPECT_EQ(r.num_swaps, 2);
  EXPECT_EQ(std::vector<int64_t>(r.swaps.begin(), r.swaps.begin() + 4), (std::vector<int64_t>{2, 0, 3, 1}));
  EXPECT_EQ(r.modified, 1);
}

TEST(ReorderBatch, SortedBatchDoesNotMove) {
  Reorder r = run_reorder({1, 1, 4, 3, 6}, {5, 2, 8, 1, 0}, 1);
  EXPECT_EQ(r.modified, 0);
  EXPECT_EQ(r.num_swaps, 0);
  EXPECT_EQ(r.order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(r.swaps[0], -7);
}

TEST(ReorderBatch, SingleTokenNewRequestIsPrefill) {
  // s=1, c=0 is a prefill in era B: it goes behind the decode.
  Reorder r = run_reorder({1, 1}, {0, 3}, 1);
  EXPECT_EQ(r.order, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(r.modified, 1);
}

TEST(ReorderBatch, RandomMatchesDirectPermutationAndSplitAgrees) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 200; ++it) {
    int64_t n = std::uniform_int_distribution<int64_t>(0, 14)(g);
    int32_t th = std::uniform_int_distribution<int32_t>(1, 4)(g);
    std::vector<int32_t> s(n), c(n);
    for (int64_t i = 0; i < n; ++i) {
      c[i] = std::uniform_int_distribution<int>(0, 2)(g) == 0 ? 0 : std::uniform_int_distribution<int32_t>(1, 50)(g);
      // New prompts are longer than the threshold so that the split's
      // classification (by length) agrees with the reorder's (by context).
      s[i] = c[i] == 0 ? std::uniform_int_distribution<int32_t>(th + 1, 20)(g)
                       : std::uniform_int_distribution<int32_t>(1, 2 * th + 2)(g);
    }
    Reorder r = run_reorder(s, c, th);
    // Direct reference: misplaced slots in index order receive the
    // misplaced requests ordered stably by region.
    std::vector<int> reg(n);
    int64_t cnt[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; ++i) cnt[reg[i] = region(s[i], c[i], th)]++;
    auto target = [&](int64_t i) { return i < cnt[0] ? 0 : (i < cnt[0] + cnt[1] ? 1 : 2); };
    std::vector<int64_t> wrong, expect(n);
    for (int64_t i = 0; i < n; ++i) {
      expect[i] = i;
      if (reg[i] != target(i)) wrong.push_back(i);
    }
    std::vector<int64_t> by_region = wrong;
    std::stable_sort(by_region.begin(), by_region.end(), [&](int64_t a, int64_t b) { return reg[a] < reg[b]; });
    for (size_t k = 0; k < wrong.size(); ++k) expect[wrong[k]] = by_region[k];
    ASSERT_EQ(r.order, expect);
    EXPECT_EQ(r.modified, wrong.empty() ? 0 : 1);
    EXPECT_LE(r.num_swaps, (int64_t)wrong.size());
    // Applying the swaps reproduces the order.
    std::vector<int64_t> applied(n);
    for (int64_t i = 0; i < n; ++i) applied[i] = i;
    for (int64_t k = 0; k < r.num_swaps; ++k) std::swap(applied[r.swaps[2 * k]], applied[r.swaps[2 * k + 1]]);
    EXPECT_EQ(applied, r.order);
    if (n == 0) continue;
    // Build the reordered batch and check the splits count the regions.
    std::vector<int32_t> q, sl;
    for (int64_t i = 0; i < n; ++i) {
      q.push_back(s[r.order[i]]);
      sl.push_back(s[r.order[i]] + c[r.order[i]]);
    }
    mdt::Batch b = mdt::make_batch(g, q, sl, 8);
    auto m = mdt::create(b.desc());
    vattn_decode_extend_prefill_split_t e;
    ASSERT_VATTN_OK(vattn_split_decodes_prefills_and_extends(m.get(), th, &e));
    EXPECT_EQ(e.num_decodes, cnt[0]);
    EXPECT_EQ(e.num_extends, cnt[1]);
    EXPECT_EQ(e.num_prefills, cnt[2]);
    EXPECT_EQ(e.num_decode_tokens + e.num_extend_tokens + e.num_prefill_tokens, b.real_tokens());
    vattn_decode_prefill_split_t dp;
    ASSERT_VATTN_OK(vattn_split_decodes_and_prefills(m.get(), th, 0, &dp));
    EXPECT_EQ(dp.num_decodes, cnt[0]);
    EXPECT_EQ(dp.num_prefills, cnt[1] + cnt[2]);
    EXPECT_EQ(dp.num_decode_tokens, e.num_decode_tokens);
  }
}

TEST(ReorderBatch, OptionalOutputsAndBadInputs) {
  std::vector<int32_t> s = {5, 1}, c = {0, 2};
  int32_t modified = -1;
  ASSERT_VATTN_OK(vattn_reorder_batch_to_split_decodes_and_prefills(s.data(), c.data(), 2, 1, nullptr, nullptr,
                                                                    nullptr, &modified));
  EXPECT_EQ(modified, 1);
  std::vector<int64_t> order(2, -7);
  int64_t ns = -7;
  modified = -7;
  EXPECT_VATTN_ERR(vattn_reorder_batch_to_split_decodes_and_prefills(nullptr, c.data(), 2, 1, nullptr, &ns,
                                                                     order.data(), &modified),
                   VATTN_ERR_INVALID_ARGUMENT, "num_scheduled_tokens");
  EXPECT_VATTN_ERR(vattn_reorder_batch_to_split_decodes_and_prefills(s.data(), nullptr, 2, 1, nullptr, &ns,
                                                                     order.data(), &modified),
                   VATTN_ERR_INVALID_ARGUMENT, "num_computed_tokens");
  EXPECT_VATTN_ERR(vattn_reorder_batch_to_split_decodes_and_prefills(s.data(), c.data(), -1, 1, nullptr, &ns,
                                                                     order.data(), &modified),
                   VATTN_ERR_INVALID_ARGUMENT, "num_reqs");
  EXPECT_VATTN_ERR(vattn_reorder_batch_to_split_decodes_and_prefills(s.data(), c.data(), 2, -1, nullptr, &ns,
                                                                     order.data(), &modified),
                   VATTN_ERR_INVALID_ARGUMENT, "decode_threshold");
  std::vector<int32_t> neg = {5, -1};
  EXPECT_VATTN_ERR(vattn_reorder_batch_to_split_decodes_and_prefills(neg.data(), c.data(), 2, 1, nullptr, &ns,
                                                                     order.data(), &modified),
                   VATTN_ERR_INVALID_ARGUMENT, "num_scheduled_tokens");
  EXPECT_VATTN_ERR(vattn_reorder_batch_to_split_decodes_and_prefills(s.data(), neg.data(), 2, 1, nullptr, &ns,
                                                                     order.data(), &modified),
                   VATTN_ERR_INVALID_ARGUMENT, "num_computed_tokens");
  EXPECT_EQ(order, (std::vector<int64_t>{-7, -7}));
  EXPECT_EQ(ns, -7);
  EXPECT_EQ(modified, -7);
}

}  // namespace
