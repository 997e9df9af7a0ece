// CommonAttentionMetadata handles: create / describe / unpadded against the
// arrays they were built from, and every invariant violation.
#include <functional>

#include "md_util.h"

using mdt::Batch;

namespace {

vattn_metadata_t *kSentinel() { return reinterpret_cast<vattn_metadata_t *>(0x1234); }

TEST(MetadataCreate, RoundTripRandom) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 50; ++it) {
    int64_t n = std::uniform_int_distribution<int64_t>(1, 12)(g);
    int64_t pad = it % 3;
    Batch b = mdt::random_batch(g, n, 1, 20, 70, 16, pad);
    vattn_metadata_desc_t d = b.desc();
    auto m = mdt::create(d);
    ASSERT_TRUE(m);
    vattn_metadata_desc_t o = mdt::describe(m.get());
    EXPECT_EQ(o.num_reqs, n);
    EXPECT_EQ(o.num_actual_tokens, b.num_actual_tokens);
    EXPECT_EQ(mdt::vec(o.query_start_loc, n + 1), b.qsl);
    EXPECT_EQ(mdt::vec(o.seq_lens, n), b.seq_lens);
    EXPECT_EQ(mdt::vec(o.block_table, b.rows * b.cols), b.block_table);
    EXPECT_EQ(o.block_table_rows, b.rows);
    EXPECT_EQ(o.block_table_cols, b.cols);
    EXPECT_EQ(mdt::vec(o.slot_mapping, o.slot_mapping_len), b.slots);
    int32_t mq = 0, ms = 0;
    for (int64_t r = 0; r < n; ++r) {
      mq = std::max(mq, b.query_len(r));
      ms = std::max(ms, b.seq_lens[r]);
      EXPECT_EQ(o.num_computed_tokens[r], b.seq_lens[r] - b.query_len(r));
    }
    EXPECT_EQ(o.max_query_len, mq);
    EXPECT_EQ(o.max_seq_len, ms);
    EXPECT_EQ(o.causal, 1);
    EXPECT_EQ(o.block_size, 16);
    EXPECT_EQ(o.num_cache_blocks, b.num_cache_blocks);
    EXPECT_EQ(o.encoder_seq_lens, nullptr);
    EXPECT_EQ(o.logits_indices_padded, nullptr);
    EXPECT_EQ(o.dcp_local_seq_lens, nullptr);
  }
}

TEST(MetadataCreate, KeepsUpperBoundsAndOptionalArrays) {
  std::mt19937_64 g(vt::test_seed());
  Batch b = mdt::make_batch(g, {3, 1, 5}, {10, 7, 5}, 4);
  std::vector<int32_t> nct = {7, 6, 0}, enc = {11, 3, 9}, dcp = {5, 3, 2}, logits = {2, 3, 8, 0};
  vattn_metadata_desc_t d = b.desc();
  d.max_query_len = 9;
  d.max_seq_len = 100;
  d.num_computed_tokens = nct.data();
  d.encoder_seq_lens = enc.data();
  d.dcp_local_seq_lens = dcp.data();
  d.logits_indices_padded = logits.data();
  d.logits_indices_len = 4;
  d.num_logits_indices = 3;
  d.causal = 0;
  auto m = mdt::create(d);
  ASSERT_TRUE(m);
  auto o = mdt::describe(m.get());
  EXPECT_EQ(o.max_query_len, 9);
  EXPECT_EQ(o.max_seq_len, 100);
  EXPECT_EQ(mdt::vec(o.num_computed_tokens, 3), nct);
  EXPECT_EQ(mdt::vec(o.encoder_seq_lens, 3), enc);
  EXPECT_EQ(mdt::vec(o.dcp_local_seq_lens, 3), dcp);
  EXPECT_EQ(mdt::vec(o.logits_indices_padded, o.logits_indices_len), logits);
  EXPECT_EQ(o.num_logits_indices, 3);
  EXPECT_EQ(o.causal, 0);
  // Deep copy: changing the caller's arrays does not change the handle.
  b.qsl[1] = 99;
  EXPECT_EQ(mdt::describe(m.get()).query_start_loc[1], 3);
}

TEST(MetadataCreate, EmptyBatch) {
  int32_t qsl[1] = {0};
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  d.query_start_loc = qsl;
  auto m = mdt::create(d);
  ASSERT_TRUE(m);
  auto o = mdt::describe(m.get());
  EXPECT_EQ(o.num_reqs, 0);
  EXPECT_EQ(o.max_query_len, 0);
  EXPECT_EQ(o.query_start_loc[0], 0);
}

TEST(MetadataCreate, OlderStructSizeAccepted) {
  std::mt19937_64 g(vt::test_seed());
  Batch b = mdt::make_batch(g, {2, 3}, {4, 9}, 4);
  vattn_metadata_desc_t d = b.desc();
  auto m = mdt::create(d);
  ASSERT_TRUE(m);
  // describe into a struct whose size is exactly the published one.
  vattn_metadata_desc_t o;
  std::memset(&o, 0x5a, sizeof o);
  o.struct_size = sizeof o;
  ASSERT_VATTN_OK(vattn_metadata_describe(m.get(), &o));
  EXPECT_EQ(o.struct_size, sizeof o);
}

// ---- bad inputs ---------------------------------------------------------------

struct BadCase {
  const char *name;
  std::function<void(Batch &, vattn_metadata_desc_t &)> mutate;
  const char *needle;
};

TEST(MetadataCreate, RejectsEveryBrokenInvariant) {
  std::mt19937_64 g(vt::test_seed());
  static std::vector<int32_t> keep32;
  static std::vector<int64_t> keep64;
  std::vector<BadCase> cases = {
      {"qsl0", [](Batch &b, vattn_metadata_desc_t &) { b.qsl[0] = 1; }, "query_start_loc[0] = 1"},
      {"qsl decreasing",
       [](Batch &b, vattn_metadata_desc_t &) { b.qsl[2] = b.qsl[1] - 1; },
       "query_start_loc[2]"},
      {"qsl beyond tokens", [](Batch &b, vattn_metadata_desc_t &d) { d.num_actual_tokens = b.qsl[4] - 1; },
       "num_actual_tokens"},
      {"seq < query", [](Batch &b, vattn_metadata_desc_t &) { b.seq_lens[1] = b.query_len(1) - 1; },
       "seq_lens[1]"},
      {"nct mismatch",
       [](Batch &b, vattn_metadata_desc_t &d) {
         keep32 = {0, 0, 0, 0};
         d.num_computed_tokens = keep32.data();
       },
       "num_computed_tokens[0]"},
      {"rows < reqs", [](Batch &, vattn_metadata_desc_t &d) { d.block_table_rows = 2; }, "block_table_rows"},
      {"cols too small", [](Batch &, vattn_metadata_desc_t &d) { d.block_table_cols = 1; }, "block_table_cols"},
      {"block id out", [](Batch &b, vattn_metadata_desc_t &) { b.block_table[b.cols * 2 + 1] = (int32_t)b.num_cache_blocks; },
       "block_table[2][1]"},
      {"block id negative", [](Batch &b, vattn_metadata_desc_t &) { b.block_table[0] = -3; },
       "block_table[0][0]"},
      {"slot out", [](Batch &b, vattn_metadata_desc_t &) { b.slots[4] = b.num_cache_blocks * b.block_size; },
       "slot_mapping[4]"},
      {"slot -2", [](Batch &b, vattn_metadata_desc_t &) { b.slots[0] = -2; }, "slot_mapping[0]"},
      {"slot len short", [](Batch &, vattn_metadata_desc_t &d) { d.slot_mapping_len -= 3; }, "slot_mapping_len"},
      {"slot len long",
       [](Batch &b, vattn_metadata_desc_t &d) {
         keep64 = b.slots;
         keep64.push_back(-1);
         d.slot_mapping = keep64.data();
         d.slot_mapping_len = (int64_t)keep64.size();
       },
       "slot_mapping_len"},
      {"pad slot not -1",
       [](Batch &b, vattn_metadata_desc_t &d) {
         keep64 = b.slots;
         keep64.push_back(5);
         d.slot_mapping = keep64.data();
         d.slot_mapping_len = (int64_t)keep64.size();
         d.num_actual_tokens += 1;
       },
       "must be -1"},
      {"max_query_len small", [](Batch &, vattn_metadata_desc_t &d) { d.max_query_len = 1; }, "max_query_len"},
      {"max_query_len -2", [](Batch &, vattn_metadata_desc_t &d) { d.max_query_len = -2; }, "max_query_len"},
      {"max_seq_len small", [](Batch &, vattn_metadata_desc_t &d) { d.max_seq_len = 2; }, "max_seq_len"},
      {"num_reqs negative", [](Batch &, vattn_metadata_desc_t &d) { d.num_reqs = -1; }, "num_reqs"},
      {"num_reqs huge", [](Batch &, vattn_metadata_desc_t &d) { d.num_reqs = INT64_MAX; }, "num_reqs"},
      {"tokens negative", [](Batch &, vattn_metadata_desc_t &d) { d.num_actual_tokens = -5; }, "num_actual_tokens"},
      {"bt overflow",
       [](Batch &, vattn_metadata_desc_t &d) {
         d.block_table_rows = INT64_C(1) << 35;
         d.block_table_cols = INT64_C(1) << 35;
       },
       "block_table"},
      {"cols negative", [](Batch &, vattn_metadata_desc_t &d) { d.block_table_cols = -1; }, "block_table_cols"},
      {"slot len negative", [](Batch &, vattn_metadata_desc_t &d) { d.slot_mapping_len = -1; }, "slot_mapping_len"},
      {"qsl NULL", [](Batch &, vattn_metadata_desc_t &d) { d.query_start_loc = nullptr; }, "query_start_loc is NULL"},
      {"seq NULL", [](Batch &, vattn_metadata_desc_t &d) { d.seq_lens = nullptr; }, "seq_lens is NULL"},
      {"bt NULL", [](Batch &, vattn_metadata_desc_t &d) { d.block_table = nullptr; }, "block_table is NULL"},
      {"slots NULL", [](Batch &, vattn_metadata_desc_t &d) { d.slot_mapping = nullptr; }, "slot_mapping is NULL"},
      {"block_size negative", [](Batch &, vattn_metadata_desc_t &d) { d.block_size = -4; }, "block_size"},
      {"causal 2", [](Batch &, vattn_metadata_desc_t &d) { d.causal = 2; }, "causal"},
      {"encoder negative",
       [](Batch &, vattn_metadata_desc_t &d) {
         keep32 = {1, -1, 1, 1};
         d.encoder_seq_lens = keep32.data();
       },
       "encoder_seq_lens[1]"},
      {"dcp > seq",
       [](Batch &b, vattn_metadata_desc_t &d) {
         keep32 = b.seq_lens;
         keep32[2] += 1;
         d.dcp_local_seq_lens = keep32.data();
       },
       "dcp_local_seq_lens[2]"},
      {"logits count > len",
       [](Batch &, vattn_metadata_desc_t &d) {
         keep32 = {0, 1};
         d.logits_indices_padded = keep32.data();
         d.logits_indices_len = 2;
         d.num_logits_indices = 3;
       },
       "num_logits_indices"},
      {"logits index out",
       [](Batch &b, vattn_metadata_desc_t &d) {
         keep32 = {0, (int32_t)b.real_tokens()};
         d.logits_indices_padded = keep32.data();
         d.logits_indices_len = 2;
         d.num_logits_indices = 2;
       },
       "logits_indices_padded[1]"},
      {"logits NULL with count", [](Batch &, vattn_metadata_desc_t &d) { d.num_logits_indices = 1; },
       "num_logits_indices"},
      {"struct_size small", [](Batch &, vattn_metadata_desc_t &d) { d.struct_size = 8; }, "struct_size"},
      {"struct_size big", [](Batch &, vattn_metadata_desc_t &d) { d.struct_size = sizeof(d) + 8; }, "struct_size"},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.name);
    Batch b = mdt::make_batch(g, {3, 4, 2, 5}, {10, 4, 19, 7}, 4, 2);
    vattn_metadata_desc_t d = b.desc();
    c.mutate(b, d);
    vattn_metadata_t *out = kSentinel();
    EXPECT_VATTN_ERR(vattn_metadata_create(&out, &d), VATTN_ERR_INVALID_ARGUMENT, c.needle);
    EXPECT_EQ(out, nullptr);
  }
}

TEST(MetadataCreate, MessagesNameFieldAndIndex) {
  std::mt19937_64 g(vt::test_seed());
  Batch b = mdt::make_batch(g, {3, 4, 2, 5}, {10, 4, 19, 7}, 4);
  b.qsl = {0, 3, 7, 5, 10};
  vattn_metadata_desc_t d = b.desc();
  vattn_metadata_t *out = nullptr;
  EXPECT_VATTN_ERR(vattn_metadata_create(&out, &d), VATTN_ERR_INVALID_ARGUMENT,
                   "query_start_loc[3] = 5 < query_start_loc[2] = 7");
  EXPECT_VATTN_ERR(vattn_metadata_create(&out, &d), VATTN_ERR_INVALID_ARGUMENT, "vattn_metadata_create");
}

TEST(MetadataCreate, NullArguments) {
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  EXPECT_VATTN_ERR(vattn_metadata_create(nullptr, &d), VATTN_ERR_INVALID_ARGUMENT, "out");
  vattn_metadata_t *out = kSentinel();
  EXPECT_VATTN_ERR(vattn_metadata_create(&out, nullptr), VATTN_ERR_INVALID_ARGUMENT, "desc");
  EXPECT_EQ(out, nullptr);
  vattn_metadata_destroy(nullptr);
  vattn_metadata_desc_init(nullptr);
}

TEST(MetadataCreate, CrossAttentionSlotMappingAnyLength) {
  std::mt19937_64 g(vt::test_seed());
  Batch b = mdt::make_batch(g, {1, 1}, {5, 9}, 4);
  std::vector<int32_t> enc = {12, 7};
  std::vector<int64_t> slots(19);
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = (int64_t)i;
  vattn_metadata_desc_t d = b.desc();
  d.encoder_seq_lens = enc.data();
  d.slot_mapping = slots.data();
  d.slot_mapping_len = (int64_t)slots.size();
  d.num_cache_blocks = 0;  // unchecked ids
  d.block_table_cols = b.cols;
  // The cross-attention table must cover the encoder lengths (3 blocks).
  std::vector<int32_t> bt = {1, 2, 3, 4, 5, 6};
  d.block_table = bt.data();
  d.block_table_cols = 3;
  auto m = mdt::create(d);
  ASSERT_TRUE(m);
  EXPECT_EQ(mdt::describe(m.get()).slot_mapping_len, 19);
  d.block_table_cols = 2;
  vattn_metadata_t *out = nullptr;
  EXPECT_VATTN_ERR(vattn_metadata_create(&out, &d), VATTN_ERR_INVALID_ARGUMENT, "encoder_seq_lens");
}

// The slot bound num_cache_blocks * block_size saturates instead of
// overflowing (UBSan runs this in CI): the largest block count with a huge
// block size, every slot of the batch below the bound.
TEST(MetadataCreate, HugeCacheBoundDoesNotOverflow) {
  std::mt19937_64 g(vt::test_seed());
  Batch b = mdt::make_batch(g, {2, 3}, {4, 9}, 4);
  vattn_metadata_desc_t d = b.desc();
  d.num_cache_blocks = INT64_C(1) << 40;
  d.block_size = INT32_MAX;
  vattn_metadata_t *out = nullptr;
  const vattn_status_t st = vattn_metadata_create(&out, &d);
  EXPECT_EQ(st, VATTN_OK) << vattn_last_error_message();
  vattn_metadata_destroy(out);
}

TEST(MetadataDescribe, BadArguments) {
  std::mt19937_64 g(vt::test_seed());
  Batch b = mdt::make_batch(g, {2, 3}, {4, 9}, 4);
  auto m = mdt::create(b.desc());
  vattn_metadata_desc_t o;
  std::memset(&o, 0x77, sizeof o);
  o.struct_size = 4;
  vattn_metadata_desc_t before = o;
  EXPECT_VATTN_ERR(vattn_metadata_describe(m.get(), &o), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_EQ(std::memcmp(&o, &before, sizeof o), 0);
  EXPECT_VATTN_ERR(vattn_metadata_describe(m.get(), nullptr), VATTN_ERR_INVALID_ARGUMENT, "out");
  o.struct_size = sizeof o;
  before = o;
  EXPECT_VATTN_ERR(vattn_metadata_describe(nullptr, &o), VATTN_ERR_INVALID_ARGUMENT, "md");
  EXPECT_EQ(std::memcmp(&o, &before, sizeof o), 0);
}

// ---- unpadded ---------------------------------------------------------------------

TEST(MetadataUnpadded, TruncatesToRealSizes) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 20; ++it) {
    int64_t n = std::uniform_int_distribution<int64_t>(2, 10)(g);
    Batch b = mdt::random_batch(g, n, 1, 9, 40, 8, 5);
    // Two padding requests of length 0 with seq_len 0 (model-runner style).
    int64_t real_reqs = n;
    b.qsl.push_back(b.qsl.back());
    b.qsl.push_back(b.qsl.back());
    b.seq_lens.push_back(0);
    b.seq_lens.push_back(0);
    b.num_reqs += 2;
    b.rows += 2;
    b.block_table.resize(b.rows * b.cols, 0);
    vattn_metadata_desc_t d = b.desc();
    d.max_seq_len = 500;
    auto m = mdt::create(d);
    ASSERT_TRUE(m);
    vattn_metadata_t *u = nullptr;
    ASSERT_VATTN_OK(vattn_metadata_unpadded(m.get(), b.real_tokens(), real_reqs, &u));
    mdt::MdPtr up(u);
    auto o = mdt::describe(u);
    EXPECT_EQ(o.num_reqs, real_reqs);
    EXPECT_EQ(o.num_actual_tokens, b.real_tokens());
    EXPECT_EQ(mdt::vec(o.query_start_loc, real_reqs + 1),
              std::vector<int32_t>(b.qsl.begin(), b.qsl.begin() + real_reqs + 1));
    EXPECT_EQ(mdt::vec(o.seq_lens, real_reqs),
              std::vector<int32_t>(b.seq_lens.begin(), b.seq_lens.begin() + real_reqs));
    EXPECT_EQ(o.block_table_rows, real_reqs);
    EXPECT_EQ(mdt::vec(o.block_table, real_reqs * b.cols),
              std::vector<int32_t>(b.block_table.begin(), b.block_table.begin() + real_reqs * b.cols));
    EXPECT_EQ(mdt::vec(o.slot_mapping, o.slot_mapping_len),
              std::vector<int64_t>(b.slots.begin(), b.slots.begin() + b.real_tokens()));
    EXPECT_EQ(o.max_seq_len, 500);
  }
}

TEST(MetadataUnpadded, BadArguments) {
  std::mt19937_64 g(vt::test_seed());
  Batch b = mdt::make_batch(g, {2, 3}, {4, 9}, 4, 3);
  auto m = mdt::create(b.desc());
  vattn_metadata_t *u = kSentinel();
  EXPECT_VATTN_ERR(vattn_metadata_unpadded(m.get(), 5, 3, &u), VATTN_ERR_INVALID_ARGUMENT, "num_reqs");
  EXPECT_EQ(u, nullptr);
  u = kSentinel();
  EXPECT_VATTN_ERR(vattn_metadata_unpadded(m.get(), 5, -1, &u), VATTN_ERR_INVALID_ARGUMENT, "num_reqs");
  EXPECT_EQ(u, nullptr);
  EXPECT_VATTN_ERR(vattn_metadata_unpadded(m.get(), 4, 2, &u), VATTN_ERR_INVALID_ARGUMENT, "num_tokens");
  EXPECT_VATTN_ERR(vattn_metadata_unpadded(m.get(), 9, 2, &u), VATTN_ERR_INVALID_ARGUMENT, "num_tokens");
  EXPECT_VATTN_ERR(vattn_metadata_unpadded(nullptr, 5, 2, &u), VATTN_ERR_INVALID_ARGUMENT, "md");
  EXPECT_VATTN_ERR(vattn_metadata_unpadded(m.get(), 5, 2, nullptr), VATTN_ERR_INVALID_ARGUMENT, "out");
}

}  // namespace

// The block-table check scans exactly the entries each request needs
// (ceil(seq_len / block_size) of its row), whatever the row lengths: a bad
// id in any needed entry is reported by position, the first one in
// row-major order, and garbage past the needed entries is accepted.
TEST(MetadataCreate, BlockTableEveryNeededEntryChecked) {
  std::mt19937_64 g(vt::test_seed());
  // Lengths that give 0..37 needed blocks (8-wide body, tails, empty rows).
  std::vector<int32_t> qlens, slens;
  for (int32_t nb = 0; nb <= 37; ++nb) {
    qlens.push_back(nb == 0 ? 0 : 1);
    slens.push_back(nb * 4 - (nb > 0 ? std::uniform_int_distribution<int32_t>(0, 3)(g) : 0));
  }
  Batch base = mdt::make_batch(g, qlens, slens, 4, 0, 3);
  // Unused entries hold ids outside the cache: still accepted.
  for (int64_t r = 0; r < base.num_reqs; ++r)
    for (int64_t c = (slens[r] + 3) / 4; c < base.cols; ++c)
      base.block_table[r * base.cols + c] = (c % 2) ? -7 : INT32_MAX;
  {
    vattn_metadata_t *md = nullptr;
    vattn_metadata_desc_t d = base.desc();
    ASSERT_VATTN_OK(vattn_metadata_create(&md, &d));
    vattn_metadata_desc_t o;
    vattn_metadata_desc_init(&o);
    ASSERT_VATTN_OK(vattn_metadata_describe(md, &o));
    EXPECT_EQ(mdt::vec(o.block_table, base.rows * base.cols), base.block_table);  // kept verbatim
    vattn_metadata_destroy(md);
  }
  const int32_t bad_values[] = {-1, INT32_MIN, (int32_t)base.num_cache_blocks, INT32_MAX};
  for (int64_t r = 0; r < base.num_reqs; ++r) {
    const int64_t need = (slens[r] + 3) / 4;
    for (int64_t c = 0; c < need; ++c) {
      Batch b = base;
      const int32_t v = bad_values[(r + c) % 4];
      b.block_table[r * b.cols + c] = v;
      // A second bad entry later in row-major order is not the one reported.
      if (r + 1 < b.num_reqs && slens[r + 1] > 0) b.block_table[(r + 1) * b.cols] = -1;
      vattn_metadata_desc_t d = b.desc();
      vattn_metadata_t *out = kSentinel();
      const std::string needle = "block_table[" + std::to_string(r) + "][" + std::to_string(c) +
                                 "] = " + std::to_string(v) + " is outside the cache";
      EXPECT_VATTN_ERR(vattn_metadata_create(&out, &d), VATTN_ERR_INVALID_ARGUMENT, needle.c_str());
      EXPECT_EQ(out, nullptr);
    }
  }
  // Without a cache size the ids are not checked (only the row lengths).
  Batch b = base;
  b.block_table[5 * b.cols] = -1;
  b.num_cache_blocks = 0;
  b.slots.assign(b.slots.size(), -1);
  vattn_metadata_desc_t d = b.desc();
  vattn_metadata_t *md = nullptr;
  EXPECT_VATTN_OK(vattn_metadata_create(&md, &d));
  vattn_metadata_destroy(md);
  // Row too short for a request: named before any bad id in later rows.
  b = base;
  b.seq_lens[3] = (int32_t)(b.cols * 4 + 1);
  b.block_table[10 * b.cols] = -1;
  d = b.desc();
  md = kSentinel();
  EXPECT_VATTN_ERR(vattn_metadata_create(&md, &d), VATTN_ERR_INVALID_ARGUMENT,
                   "blocks needed by request 3");
  EXPECT_EQ(md, nullptr);
}

// block_size 0 (unknown): every column of every request's row is checked.
TEST(MetadataCreate, BlockTableWholeRowsWithoutBlockSize) {
  std::mt19937_64 g(vt::test_seed());
  Batch b = mdt::make_batch(g, {3, 4, 2, 5}, {10, 4, 19, 7}, 4, 0, 2);
  b.block_size = 0;
  b.slots.assign(b.slots.size(), -1);
  vattn_metadata_desc_t d = b.desc();
  vattn_metadata_t *md = nullptr;
  ASSERT_VATTN_OK(vattn_metadata_create(&md, &d));  // padding entries are 0
  vattn_metadata_destroy(md);
  b.block_table[1 * b.cols + b.cols - 1] = (int32_t)b.num_cache_blocks;
  d = b.desc();
  md = kSentinel();
  const std::string needle = "block_table[1][" + std::to_string(b.cols - 1) + "]";
  EXPECT_VATTN_ERR(vattn_metadata_create(&md, &d), VATTN_ERR_INVALID_ARGUMENT, needle.c_str());
  EXPECT_EQ(md, nullptr);
}

// Every slot position, incl. padding entries, is checked (vectorised scan
// with an exact report).
TEST(MetadataCreate, SlotMappingEveryEntryChecked) {
  std::mt19937_64 g(vt::test_seed());
  Batch base = mdt::make_batch(g, {3, 4, 2, 5, 9, 1}, {10, 4, 19, 7, 30, 3}, 4, 3);
  const int64_t n = (int64_t)base.slots.size(), real = base.real_tokens();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t v : {INT64_MIN, (int64_t)-2, base.num_cache_blocks * base.block_size, INT64_MAX}) {
      Batch b = base;
      b.slots[i] = v;
      vattn_metadata_desc_t d = b.desc();
      vattn_metadata_t *out = kSentinel();
      const std::string needle = "slot_mapping[" + std::to_string(i) + "] = " + std::to_string(v);
      EXPECT_VATTN_ERR(vattn_metadata_create(&out, &d), VATTN_ERR_INVALID_ARGUMENT, needle.c_str());
      EXPECT_EQ(out, nullptr);
    }
    if (i >= real) {  // a padding entry must be -1, even when it is a valid slot
      Batch b = base;
      b.slots[i] = 0;
      vattn_metadata_desc_t d = b.desc();
      vattn_metadata_t *out = kSentinel();
      EXPECT_VATTN_ERR(vattn_metadata_create(&out, &d), VATTN_ERR_INVALID_ARGUMENT, "must be -1");
      EXPECT_EQ(out, nullptr);
    }
  }
}
