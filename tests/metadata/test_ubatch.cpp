// slice_query_start_locs, ubatch slices (plain and padded) and
// split_attn_metadata, incl. a request split across two ubatches.
#include "md_util.h"

namespace {

TEST(SliceQueryStartLocs, Basic) {
  const int32_t qsl[6] = {0, 3, 7, 7, 12, 20};
  int32_t out[4] = {-1, -1, -1, -1};
  ASSERT_VATTN_OK(vattn_slice_query_start_locs(qsl, 6, 1, 4, out));
  EXPECT_EQ(std::vector<int32_t>(out, out + 4), (std::vector<int32_t>{0, 4, 4, 9}));
  int32_t one[2] = {-1, -1};
  ASSERT_VATTN_OK(vattn_slice_query_start_locs(qsl, 6, 5, 5, one));
  EXPECT_EQ(one[0], 0);
  EXPECT_EQ(one[1], -1);
  EXPECT_VATTN_ERR(vattn_slice_query_start_locs(qsl, 6, 2, 6, out), VATTN_ERR_INVALID_ARGUMENT, "request_stop");
  EXPECT_VATTN_ERR(vattn_slice_query_start_locs(qsl, 6, 3, 2, out), VATTN_ERR_INVALID_ARGUMENT, "request_start");
  EXPECT_VATTN_ERR(vattn_slice_query_start_locs(qsl, 6, -1, 2, out), VATTN_ERR_INVALID_ARGUMENT, "request_start");
  EXPECT_VATTN_ERR(vattn_slice_query_start_locs(nullptr, 6, 1, 2, out), VATTN_ERR_INVALID_ARGUMENT, "query_start_loc");
  EXPECT_VATTN_ERR(vattn_slice_query_start_locs(qsl, 6, 1, 2, nullptr), VATTN_ERR_INVALID_ARGUMENT, "out");
  EXPECT_VATTN_ERR(vattn_slice_query_start_locs(qsl, 0, 0, 0, out), VATTN_ERR_INVALID_ARGUMENT, "len");
  EXPECT_EQ(std::vector<int32_t>(out, out + 4), (std::vector<int32_t>{0, 4, 4, 9}));
}

bool same(const vattn_ubatch_slice_t &a, int64_t rs, int64_t re, int64_t ts, int64_t te) {
  return a.request_start == rs && a.request_stop == re && a.token_start == ts && a.token_stop == te;
}

TEST(UbatchSlices, StraddlingRequestAppearsInBoth) {
  const int32_t sched[4] = {3, 6, 2, 5};  // cu [0, 3, 9, 11, 16]
  vattn_ubatch_slice_t s[2], p[2];
  ASSERT_VATTN_OK(vattn_ubatch_slices_create(sched, 4, 20, 6, 2, 0, s, p));
  // split point 20 / 2 = 10: request 2 ([9, 11)) straddles.
  EXPECT_TRUE(same(s[0], 0, 3, 0, 10));
  EXPECT_TRUE(same(s[1], 2, 4, 10, 16));
  EXPECT_TRUE(same(p[0], 0, 3, 0, 10));
  EXPECT_TRUE(same(p[1], 2, 6, 10, 20));
  // Explicit split point on a request boundary: no sharing.
  ASSERT_VATTN_OK(vattn_ubatch_slices_create(sched, 4, 16, 4, 2, 9, s, nullptr));
  EXPECT_TRUE(same(s[0], 0, 2, 0, 9));
  EXPECT_TRUE(same(s[1], 2, 4, 9, 16));
}

TEST(UbatchSlices, RandomCoverEveryTokenOnce) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 100; ++it) {
    int64_t n = std::uniform_int_distribution<int64_t>(1, 10)(g);
    std::vector<int32_t> sched(n);
    std::vector<int64_t> cu(1, 0);
    for (auto &x : sched) {
      x = std::uniform_int_distribution<int32_t>(1, 12)(g);
      cu.push_back(cu.back() + x);
    }
    int32_t nu = std::uniform_int_distribution<int32_t>(1, 4)(g);
    int64_t padded = cu.back() + std::uniform_int_distribution<int64_t>(0, 3)(g);
    if (padded / nu == 0 || padded / nu * (nu - 1) >= cu.back()) continue;  // an empty ubatch
    std::vector<vattn_ubatch_slice_t> s(nu), p(nu);
    ASSERT_VATTN_OK(vattn_ubatch_slices_create(sched.data(), n, padded, n + 1, nu, 0, s.data(), p.data()));
    EXPECT_EQ(s[0].token_start, 0);
    EXPECT_EQ(s[nu - 1].token_stop, cu.back());
    EXPECT_EQ(p[nu - 1].token_stop, padded);
    EXPECT_EQ(p[nu - 1].request_stop, n + 1);
    for (int32_t u = 0; u < nu; ++u) {
      if (u > 0) EXPECT_EQ(s[u].token_start, s[u - 1].token_stop);
      // Request range = exactly the requests owning a token of the range.
      int64_t rs = -1, re = -1;
      for (int64_t r = 0; r < n; ++r)
        if (cu[r] < s[u].token_stop && cu[r + 1] > s[u].token_start) {
          if (rs < 0) rs = r;
          re = r + 1;
        }
      EXPECT_EQ(s[u].request_start, rs);
      EXPECT_EQ(s[u].request_stop, re);
    }
  }
}

TEST(UbatchSlices, BadInputs) {
  const int32_t sched[3] = {3, 6, 2};
  vattn_ubatch_slice_t s[2] = {{-1, -1, -1, -1}, {-1, -1, -1, -1}};
  EXPECT_VATTN_ERR(vattn_ubatch_slices_create(sched, 3, 10, 3, 2, 0, s, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "num_tokens_padded");
  EXPECT_VATTN_ERR(vattn_ubatch_slices_create(sched, 3, 12, 2, 2, 0, s, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "num_reqs_padded");
  EXPECT_VATTN_ERR(vattn_ubatch_slices_create(sched, 3, 12, 3, 0, 0, s, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "num_ubatches");
  EXPECT_VATTN_ERR(vattn_ubatch_slices_create(sched, 3, 12, 3, 2, 13, s, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "split_point");
  EXPECT_VATTN_ERR(vattn_ubatch_slices_create(nullptr, 3, 12, 3, 2, 0, s, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "num_scheduled_tokens");
  EXPECT_VATTN_ERR(vattn_ubatch_slices_create(sched, -3, 12, 3, 2, 0, s, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "num_reqs");
  const int32_t neg[3] = {3, -6, 2};
  EXPECT_VATTN_ERR(vattn_ubatch_slices_create(neg, 3, 12, 3, 2, 0, s, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "num_scheduled_tokens");
  EXPECT_TRUE(same(s[0], -1, -1, -1, -1));
  EXPECT_TRUE(same(s[1], -1, -1, -1, -1));
}

// ---- split_attn_metadata -----------------------------------------------------------

TEST(SplitAttnMetadata, StraddlingRequestSeqLenAdjusted) {
  std::mt19937_64 g(vt::test_seed());
  mdt::Batch b = mdt::make_batch(g, {3, 6, 2, 5}, {10, 6, 20, 5}, 4);
  auto m = mdt::create(b.desc());
  auto before = mdt::describe(m.get());
  const std::vector<int32_t> qsl_before = mdt::vec(before.query_start_loc, 5);
  vattn_ubatch_slice_t s[2] = {{0, 2, 0, 8}, {1, 4, 8, 16}};  // request 1 = tokens [3, 9)
  vattn_metadata_t *out[2] = {nullptr, nullptr};
  ASSERT_VATTN_OK(vattn_split_attn_metadata(s, 2, m.get(), out));
  mdt::MdPtr a(out[0]), c(out[1]);
  auto da = mdt::describe(a.get()), dc = mdt::describe(c.get());
  EXPECT_EQ(da.num_reqs, 2);
  EXPECT_EQ(da.num_actual_tokens, 8);
  EXPECT_EQ(mdt::vec(da.query_start_loc, 3), (std::vector<int32_t>{0, 3, 8}));
  EXPECT_EQ(mdt::vec(da.seq_lens, 2), (std::vector<int32_t>{10, 5}));  // 6 - 1 token left for later
  EXPECT_EQ(da.max_query_len, 5);
  EXPECT_EQ(dc.num_reqs, 3);
  EXPECT_EQ(dc.num_actual_tokens, 8);
  EXPECT_EQ(mdt::vec(dc.query_start_loc, 4), (std::vector<int32_t>{0, 1, 3, 8}));
  EXPECT_EQ(mdt::vec(dc.seq_lens, 3), (std::vector<int32_t>{6, 20, 5}));  // full seq_len kept
  EXPECT_EQ(mdt::vec(dc.num_computed_tokens, 3), (std::vector<int32_t>{5, 18, 0}));
  EXPECT_EQ(mdt::vec(da.block_table, 2 * b.cols),
            std::vector<int32_t>(b.block_table.begin(), b.block_table.begin() + 2 * b.cols));
  EXPECT_EQ(mdt::vec(dc.block_table, 3 * b.cols),
            std::vector<int32_t>(b.block_table.begin() + b.cols, b.block_table.begin() + 4 * b.cols));
  std::vector<int64_t> cat = mdt::vec(da.slot_mapping, da.slot_mapping_len);
  auto tail = mdt::vec(dc.slot_mapping, dc.slot_mapping_len);
  cat.insert(cat.end(), tail.begin(), tail.end());
  EXPECT_EQ(cat, b.slots);
  // Input untouched.
  auto after = mdt::describe(m.get());
  EXPECT_EQ(mdt::vec(after.query_start_loc, 5), qsl_before);
  EXPECT_EQ(after.seq_lens[1], 6);
}

TEST(SplitAttnMetadata, RandomPiecesReassemble) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 60; ++it) {
    int64_t n = std::uniform_int_distribution<int64_t>(1, 8)(g);
    int64_t pad = std::uniform_int_distribution<int64_t>(0, 3)(g);
    mdt::Batch b = mdt::random_batch(g, n, 1, 10, 20, 4, pad);
    int32_t nu = std::uniform_int_distribution<int32_t>(1, 3)(g);
    int64_t total = b.real_tokens(), padded = b.num_actual_tokens;
    if (padded / nu == 0 || padded / nu * (nu - 1) >= total) continue;
    std::vector<int32_t> sched(n);
    for (int64_t r = 0; r < n; ++r) sched[r] = b.query_len(r);
    std::vector<vattn_ubatch_slice_t> s(nu), sp(nu);
    ASSERT_VATTN_OK(vattn_ubatch_slices_create(sched.data(), n, padded, n, nu, 0, s.data(), sp.data()));
    auto m = mdt::create(b.desc());
    for (auto *slices : {&s, &sp}) {
      std::vector<vattn_metadata_t *> out(nu, nullptr);
      ASSERT_VATTN_OK(vattn_split_attn_metadata(slices->data(), nu, m.get(), out.data()));
      std::vector<mdt::MdPtr> keep;
      for (auto *o : out) keep.emplace_back(o);
      // Every real token appears once, as (request, absolute position),
      // and its slot follows it.
      std::vector<std::pair<int64_t, int64_t>> seen;
      std::vector<int64_t> slots;
      for (int32_t u = 0; u < nu; ++u) {
        auto d = mdt::describe(out[u]);
        EXPECT_EQ(d.num_actual_tokens, (*slices)[u].token_stop - (*slices)[u].token_start);
        for (int64_t i = 0; i < d.num_reqs; ++i) {
          int32_t q = d.query_start_loc[i + 1] - d.query_start_loc[i];
          for (int32_t k = 0; k < q; ++k) {
            seen.emplace_back((*slices)[u].request_start + i, d.seq_lens[i] - q + k);
            slots.push_back(d.slot_mapping[d.query_start_loc[i] + k]);
          }
        }
      }
      std::vector<std::pair<int64_t, int64_t>> expect;
      for (int64_t r = 0; r < n; ++r)
        for (int32_t k = 0; k < b.query_len(r); ++k)
          expect.emplace_back(r, b.seq_lens[r] - b.query_len(r) + k);
      EXPECT_EQ(seen, expect);
      EXPECT_EQ(slots, std::vector<int64_t>(b.slots.begin(), b.slots.begin() + total));
    }
  }
}

TEST(SplitAttnMetadata, BadSlicesLeaveNoHandles) {
  std::mt19937_64 g(vt::test_seed());
  mdt::Batch b = mdt::make_batch(g, {3, 6, 2, 5}, {10, 6, 20, 5}, 4);
  auto m = mdt::create(b.desc());
  auto sentinel = reinterpret_cast<vattn_metadata_t *>(0x77);
  auto check = [&](vattn_ubatch_slice_t bad, const char *needle) {
    vattn_ubatch_slice_t s[2] = {{0, 2, 0, 8}, bad};
    vattn_metadata_t *out[2] = {sentinel, sentinel};
    EXPECT_VATTN_ERR(vattn_split_attn_metadata(s, 2, m.get(), out), VATTN_ERR_INVALID_ARGUMENT, needle);
    EXPECT_EQ(out[0], sentinel);
    EXPECT_EQ(out[1], sentinel);
  };
  check({1, 1, 8, 16}, "slices[1]");           // empty request range
  check({1, 4, 8, 8}, "token range");          // empty token range
  check({1, 5, 8, 16}, "request range");       // beyond num_reqs
  check({1, 4, 8, 17}, "token range");         // beyond num_actual_tokens
  check({2, 4, 8, 16}, "token_start 8");       // starts in request 1, not 2
  check({1, 3, 8, 16}, "token_stop 16");       // request 3's tokens not covered
  vattn_metadata_t *out[1] = {sentinel};
  vattn_ubatch_slice_t ok[1] = {{0, 4, 0, 16}};
  EXPECT_VATTN_ERR(vattn_split_attn_metadata(nullptr, 1, m.get(), out), VATTN_ERR_INVALID_ARGUMENT, "slices");
  EXPECT_VATTN_ERR(vattn_split_attn_metadata(ok, 1, nullptr, out), VATTN_ERR_INVALID_ARGUMENT, "md");
  EXPECT_VATTN_ERR(vattn_split_attn_metadata(ok, 1, m.get(), nullptr), VATTN_ERR_INVALID_ARGUMENT, "out");
  EXPECT_EQ(out[0], sentinel);
}

}  // namespace
