// Slot mapping v1 (incl. context parallel) and v0 against naive references
// and the docstring example.
#include "md_util.h"

namespace {

struct V1Case {
  std::vector<int32_t> table, nblocks, qsl;
  std::vector<int64_t> pos;
  int64_t rows = 0, stride = 0, reqs = 0, ncb = 0;
  int32_t bs = 0;
  vattn_slot_mapping_args_t args() const {
    vattn_slot_mapping_args_t a;
    vattn_slot_mapping_args_init(&a);
    a.block_table = table.data();
    a.num_rows = rows;
    a.row_stride = stride;
    a.num_blocks_per_row = nblocks.data();
    a.query_start_loc = qsl.data();
    a.num_reqs = reqs;
    a.positions = pos.data();
    a.num_tokens = qsl.back();
    a.block_size = bs;
    a.num_cache_blocks = ncb;
    return a;
  }
};

// Random requests whose positions lie in [ctx, seq) and whose rows hold
// exactly the blocks those positions need, for a virtual block of
// bs * world tokens.
V1Case random_v1(std::mt19937_64 &g, int32_t world) {
  V1Case c;
  c.bs = 1 << std::uniform_int_distribution<int>(0, 5)(g);
  c.reqs = std::uniform_int_distribution<int64_t>(1, 8)(g);
  c.rows = c.reqs + std::uniform_int_distribution<int64_t>(0, 2)(g);
  c.stride = 12;
  c.ncb = 500;
  c.table.assign(c.rows * c.stride, 0);
  c.nblocks.assign(c.rows, 0);
  c.qsl.assign(1, 0);
  for (int64_t r = 0; r < c.reqs; ++r) {
    int64_t vb = (int64_t)c.bs * world;
    int64_t seq = std::uniform_int_distribution<int64_t>(1, vb * c.stride)(g);
    int64_t q = std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(seq, 40))(g);
    int64_t nb = (seq + vb - 1) / vb;
    c.nblocks[r] = (int32_t)nb;
    for (int64_t b = 0; b < nb; ++b)
      c.table[r * c.stride + b] = std::uniform_int_distribution<int32_t>(0, (int32_t)c.ncb - 1)(g);
    for (int64_t i = 0; i < q; ++i) c.pos.push_back(seq - q + i);
    c.qsl.push_back(c.qsl.back() + (int32_t)q);
  }
  return c;
}

TEST(SlotMappingV1, MatchesNaiveWithPadding) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 40; ++it) {
    V1Case c = random_v1(g, 1);
    int64_t n = c.qsl.back(), pad = it % 4;
    std::vector<int64_t> out(n + pad, 0x5555);
    auto a = c.args();
    if (it % 2) a.num_blocks_per_row = nullptr;  // whole row valid
    ASSERT_VATTN_OK(vattn_slot_mapping_compute(&a, out.data(), (int64_t)out.size()));
    for (int64_t r = 0; r < c.reqs; ++r)
      for (int32_t t = c.qsl[r]; t < c.qsl[r + 1]; ++t) {
        int64_t p = c.pos[t];
        EXPECT_EQ(out[t], (int64_t)c.table[r * c.stride + p / c.bs] * c.bs + p % c.bs) << t;
      }
    for (int64_t i = n; i < n + pad; ++i) EXPECT_EQ(out[i], -1);
  }
}

TEST(SlotMappingV1, ContextParallelMatchesCountingReference) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 60; ++it) {
    int32_t world = 1 << std::uniform_int_distribution<int>(0, 2)(g);
    V1Case c = random_v1(g, world);
    int32_t il = std::min(c.bs, 1 << std::uniform_int_distribution<int>(0, 3)(g));  // divides bs
    int32_t rank = std::uniform_int_distribution<int32_t>(0, world - 1)(g);
    auto a = c.args();
    a.cp_world_size = world;
    a.cp_rank = rank;
    a.cp_interleave = il;
    int64_t n = c.qsl.back();
    std::vector<int64_t> out(n, 0x5555);
    ASSERT_VATTN_OK(vattn_slot_mapping_compute(&a, out.data(), n));
    // Reference: tokens of a virtual block are dealt to ranks in runs of
    // `il`; this rank's local offset counts its tokens before p in the block.
    const int64_t vb = (int64_t)c.bs * world;
    auto owner = [&](int64_t p) { return ((p % vb) / il) % world; };
    for (int64_t r = 0; r < c.reqs; ++r)
      for (int32_t t = c.qsl[r]; t < c.qsl[r + 1]; ++t) {
        int64_t p = c.pos[t], b = p / vb;
        if (owner(p) != rank) {
          EXPECT_EQ(out[t], -1);
          continue;
        }
        int64_t local = 0;
        for (int64_t x = b * vb; x < p; ++x) local += owner(x) == rank;
        ASSERT_LT(local, c.bs);
        EXPECT_EQ(out[t], (int64_t)c.table[r * c.stride + b] * c.bs + local) << "world " << world << " il " << il;
      }
  }
}

TEST(SlotMappingV1, BadInputsLeaveOutputUntouched) {
  std::mt19937_64 g(vt::test_seed());
  V1Case c = random_v1(g, 1);
  int64_t n = c.qsl.back();
  std::vector<int64_t> out(n + 2, 0x5555);
  const std::vector<int64_t> poison = out;
  auto expect_bad = [&](vattn_slot_mapping_args_t a, const char *needle, int64_t len = -1) {
    EXPECT_VATTN_ERR(vattn_slot_mapping_compute(&a, out.data(), len < 0 ? (int64_t)out.size() : len),
                     VATTN_ERR_INVALID_ARGUMENT, needle);
    EXPECT_EQ(out, poison);
  };
  {
    // A position beyond the row's valid entries (last token of request 0).
    V1Case d = c;
    d.pos[d.qsl[1] - 1] = (int64_t)d.nblocks[0] * d.bs;
    expect_bad(d.args(), "valid entries");
  }
  {
    V1Case d = c;
    d.table[0 * d.stride + d.pos[0] / d.bs] = (int32_t)d.ncb;
    expect_bad(d.args(), "outside the cache");
  }
  {
    V1Case d = c;
    d.pos[0] = -1;
    expect_bad(d.args(), "positions[0]");
  }
  auto a = c.args();
  a.num_tokens = n + 1;
  expect_bad(a, "num_tokens");
  a = c.args();
  expect_bad(a, "slot_mapping_len", n - 1);
  a = c.args();
  a.num_rows = a.num_reqs - 1;
  expect_bad(a, "num_rows");
  a = c.args();
  a.block_size = 0;
  expect_bad(a, "block_size");
  a = c.args();
  a.cp_rank = 1;
  expect_bad(a, "cp_rank");
  a = c.args();
  a.cp_interleave = 0;
  expect_bad(a, "cp_interleave");
  a = c.args();
  a.block_size = 4;
  a.cp_interleave = 3;
  expect_bad(a, "divide block_size");
  a = c.args();
  a.row_stride = INT64_C(1) << 40;
  a.num_rows = INT64_C(1) << 30;
  expect_bad(a, "overflows");
  a = c.args();
  a.positions = nullptr;
  expect_bad(a, "positions is NULL");
  a = c.args();
  a.struct_size = 3;
  expect_bad(a, "struct_size");
  if (c.reqs >= 2) {
    V1Case d = c;
    std::swap(d.qsl[1], d.qsl[2]);
    expect_bad(d.args(), "query_start_loc[2]");
  }
  {
    V1Case d = c;
    d.nblocks[0] = (int32_t)d.stride + 1;
    expect_bad(d.args(), "num_blocks_per_row[0]");
  }
  EXPECT_VATTN_ERR(vattn_slot_mapping_compute(nullptr, out.data(), n), VATTN_ERR_INVALID_ARGUMENT, "args");
  a = c.args();
  EXPECT_VATTN_ERR(vattn_slot_mapping_compute(&a, nullptr, n), VATTN_ERR_INVALID_ARGUMENT, "slot_mapping");
}

// ---- v0 -------------------------------------------------------------------------

TEST(SlotMappingV0, DocstringExample) {
  int64_t start = -7;
  ASSERT_VATTN_OK(vattn_slot_mapping_v0_start_idx(1, 10, 0, 8, &start));
  EXPECT_EQ(start, 2);
  const int32_t table[3] = {0, 1, 0};
  std::vector<int64_t> out(12, 0x5555);
  int64_t len = 0;
  ASSERT_VATTN_OK(vattn_slot_mapping_v0_compute(0, 10, 0, start, 4, table, 3, 0, out.data(), 12, &len));
  EXPECT_EQ(len, 10);
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.begin() + 10),
            (std::vector<int64_t>{-1, -1, 2, 3, 4, 5, 6, 7, 0, 1}));
  EXPECT_EQ(out[10], 0x5555);
}

TEST(SlotMappingV0, StartIdxRules) {
  int64_t s = -1;
  ASSERT_VATTN_OK(vattn_slot_mapping_v0_start_idx(0, 10, 3, 8, &s));  // decode: 0
  EXPECT_EQ(s, 0);
  ASSERT_VATTN_OK(vattn_slot_mapping_v0_start_idx(1, 10, 3, 0, &s));  // no window
  EXPECT_EQ(s, 0);
  ASSERT_VATTN_OK(vattn_slot_mapping_v0_start_idx(1, 5, 0, 8, &s));  // prompt shorter than window
  EXPECT_EQ(s, 0);
  ASSERT_VATTN_OK(vattn_slot_mapping_v0_start_idx(1, 30, 0, 8, &s));
  EXPECT_EQ(s, 22);
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_start_idx(1, -1, 0, 8, &s), VATTN_ERR_INVALID_ARGUMENT, "query_len");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_start_idx(1, 1, -1, 8, &s), VATTN_ERR_INVALID_ARGUMENT, "context_len");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_start_idx(1, 1, 0, -8, &s), VATTN_ERR_INVALID_ARGUMENT, "sliding_window");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_start_idx(1, 1, 0, 8, nullptr), VATTN_ERR_INVALID_ARGUMENT, "out");
  EXPECT_EQ(s, 22);
}

TEST(SlotMappingV0, RandomAppendsMatchNaive) {
  std::mt19937_64 g(vt::test_seed());
  std::vector<int64_t> out(4096, 0x5555);
  std::vector<int64_t> ref;
  int64_t len = 0;
  for (int it = 0; it < 30; ++it) {
    int32_t bs = 1 << std::uniform_int_distribution<int>(0, 4)(g);
    int64_t seq = std::uniform_int_distribution<int64_t>(1, 100)(g);
    int64_t ctx = std::uniform_int_distribution<int64_t>(0, seq)(g);
    int64_t start = std::uniform_int_distribution<int64_t>(0, seq + 3)(g);
    bool profile = it % 7 == 0;
    std::vector<int32_t> table((seq + bs - 1) / bs);
    for (auto &b : table) b = std::uniform_int_distribution<int32_t>(0, 99)(g);
    // Naive: positions [ctx, seq) are fed this step; those before start_idx
    // are masked.  Quirk kept from vLLM: a start_idx past seq_len still
    // pads start_idx - ctx entries.
    if (profile) {
      ref.insert(ref.end(), seq, -1);
    } else {
      for (int64_t i = ctx; i < seq; ++i)
        ref.push_back(i < start ? -1 : (int64_t)table[i / bs] * bs + i % bs);
      if (start > seq) ref.insert(ref.end(), start - std::max(seq, ctx), -1);
    }
    ASSERT_VATTN_OK(vattn_slot_mapping_v0_compute(profile, seq, ctx, start, bs, profile ? nullptr : table.data(),
                                                  (int64_t)table.size(), 100, out.data(), (int64_t)out.size(), &len));
    ASSERT_EQ(len, (int64_t)ref.size());
  }
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.begin() + len), ref);
  EXPECT_EQ(out[len], 0x5555);
}

TEST(SlotMappingV0, BadInputsLeaveOutputUntouched) {
  const int32_t table[3] = {0, 1, 7};
  std::vector<int64_t> out(8, 0x5555);
  const auto poison = out;
  int64_t len = 0;
  // Needs 10 entries, capacity 8.
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 10, 0, 0, 4, table, 3, 0, out.data(), 8, &len),
                   VATTN_ERR_BUFFER_TOO_SMALL, "out_capacity");
  std::vector<int64_t> big(16, 0x5555);
  const auto big_poison = big;
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 13, 0, 0, 4, table, 3, 0, big.data(), 16, &len),
                   VATTN_ERR_INVALID_ARGUMENT, "block_table_len");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 10, 0, 0, 4, table, 3, 5, big.data(), 16, &len),
                   VATTN_ERR_INVALID_ARGUMENT, "block_table[2] = 7");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 10, 0, 0, 4, nullptr, 3, 0, big.data(), 16, &len),
                   VATTN_ERR_INVALID_ARGUMENT, "block_table");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 10, 11, 0, 4, table, 3, 0, big.data(), 16, &len),
                   VATTN_ERR_INVALID_ARGUMENT, "context_len");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, -1, 0, 0, 4, table, 3, 0, big.data(), 16, &len),
                   VATTN_ERR_INVALID_ARGUMENT, "seq_len");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 10, 0, -1, 4, table, 3, 0, big.data(), 16, &len),
                   VATTN_ERR_INVALID_ARGUMENT, "start_idx");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 10, 0, 0, 0, table, 3, 0, big.data(), 16, &len),
                   VATTN_ERR_INVALID_ARGUMENT, "block_size");
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 10, 0, 0, 4, table, 3, 0, big.data(), 16, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "out_len");
  len = 17;
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 10, 0, 0, 4, table, 3, 0, big.data(), 16, &len),
                   VATTN_ERR_INVALID_ARGUMENT, "out_len");
  EXPECT_EQ(len, 17);
  len = 0;
  EXPECT_VATTN_ERR(vattn_slot_mapping_v0_compute(0, 10, 0, 0, 4, table, 3, 0, nullptr, 16, &len),
                   VATTN_ERR_INVALID_ARGUMENT, "out");
  EXPECT_EQ(out, poison);
  EXPECT_EQ(big, big_poison);
  EXPECT_EQ(len, 0);
}

// Block sizes that are not powers of two (division path) and huge cache
// sizes / positions (no 32-bit overflow), against the naive formula; bad
// tokens anywhere leave the output untouched and are named.
TEST(SlotMappingV1, AnyBlockSizeMatchesNaive) {
  std::mt19937_64 g(vt::test_seed());
  for (int32_t bs : {1, 3, 5, 12, 16, 48, 100}) {
    for (int it = 0; it < 10; ++it) {
      V1Case c = random_v1(g, 1);
      // Re-derive positions for this block size: rows of 12 blocks.
      c.bs = bs;
      c.pos.clear();
      c.qsl.assign(1, 0);
      for (int64_t r = 0; r < c.reqs; ++r) {
        const int64_t seq = std::uniform_int_distribution<int64_t>(1, (int64_t)bs * c.stride)(g);
        const int64_t q = std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(seq, 30))(g);
        c.nblocks[r] = (int32_t)((seq + bs - 1) / bs);
        for (int64_t b = 0; b < c.stride; ++b)
          c.table[r * c.stride + b] = std::uniform_int_distribution<int32_t>(0, INT32_MAX)(g);
        for (int64_t i = 0; i < q; ++i) c.pos.push_back(seq - q + i);
        c.qsl.push_back(c.qsl.back() + (int32_t)q);
      }
      c.ncb = (it % 2) ? 0 : (INT64_C(1) << 33);  // unchecked / larger than any int32 id
      const int64_t n = c.qsl.back();
      std::vector<int64_t> out(n + 1, 0x5555);
      auto a = c.args();
      ASSERT_VATTN_OK(vattn_slot_mapping_compute(&a, out.data(), (int64_t)out.size()));
      for (int64_t r = 0; r < c.reqs; ++r)
        for (int32_t t = c.qsl[r]; t < c.qsl[r + 1]; ++t) {
          const int64_t p = c.pos[t];
          ASSERT_EQ(out[t], (int64_t)c.table[r * c.stride + p / bs] * bs + p % bs) << "bs=" << bs;
        }
      EXPECT_EQ(out[n], -1);
      // The last token of the last request, then the first token, made bad.
      for (int64_t t : {n - 1, INT64_C(0)}) {
        const int64_t r = t == 0 ? 0 : c.reqs - 1;
        const std::vector<int64_t> poison(out.size(), 0x7777);
        auto expect_bad = [&](const V1Case &d, const std::string &needle) {
          std::vector<int64_t> o = poison;
          auto b = d.args();
          EXPECT_VATTN_ERR(vattn_slot_mapping_compute(&b, o.data(), (int64_t)o.size()),
                           VATTN_ERR_INVALID_ARGUMENT, needle.c_str());
          EXPECT_EQ(o, poison);
        };
        V1Case d = c;
        d.pos[t] = -1;
        expect_bad(d, "positions[" + std::to_string(t) + "] = -1 is negative");
        d = c;
        d.pos[t] = (int64_t)d.nblocks[r] * bs;
        expect_bad(d, "positions[" + std::to_string(t) + "]");
        d = c;
        const int64_t bi = d.pos[t] / bs;
        d.table[r * d.stride + bi] = -2;
        expect_bad(d, "block_table[" + std::to_string(r) + "][" + std::to_string(bi) + "] = -2");
        if (c.ncb == 0) {  // a cache of 1000 blocks: id 1000 is just outside
          for (auto &id : d.table) id = id < 0 ? id : id % 1000;
          d.ncb = 1000;
          d.table[r * d.stride + bi] = 1000;
          expect_bad(d, "block_table[" + std::to_string(r) + "][" + std::to_string(bi) + "] = 1000");
        }
      }
    }
  }
}

}  // namespace
