// Header section 5, bad inputs: status, a message naming the argument, and
// untouched outputs (handles set to NULL) for every function.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

vattn_kv_cache_spec_t small_spec(int32_t kind = VATTN_KV_SPEC_FULL) {
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  s.kind = kind;
  s.block_size = 4;
  s.num_kv_heads = 2;
  s.head_size = 8;
  s.dtype = VATTN_DTYPE_FLOAT32;
  return s;
}

vattn_kv_cache_t *poison_handle() { return reinterpret_cast<vattn_kv_cache_t *>(uintptr_t(0xdead)); }

// create() must fail with `status`, a message containing `needle`, *out NULL.
void expect_create_fails(const std::vector<vattn_kv_cache_spec_t> &specs, const int32_t *share,
                         const vattn_kv_cache_options_t *o, vattn_status_t status, const char *needle) {
  vattn_kv_cache_t *h = poison_handle();
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, specs.data(), share, specs.size(), o), status, needle);
  EXPECT_EQ(h, nullptr);
}

vattn_kv_cache_options_t opts(int64_t nb) {
  vattn_kv_cache_options_t o;
  vattn_kv_cache_options_init(&o);
  o.num_blocks = nb;
  return o;
}

TEST(KvCacheBad, CreatePointersAndCounts) {
  const vattn_kv_cache_spec_t s = small_spec();
  vattn_kv_cache_options_t o = opts(2);
  EXPECT_VATTN_ERR(vattn_kv_cache_create(nullptr, &s, nullptr, 1, &o), VATTN_ERR_INVALID_ARGUMENT, "'out'");
  vattn_kv_cache_t *h = poison_handle();
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, nullptr, nullptr, 1, &o), VATTN_ERR_INVALID_ARGUMENT, "'specs'");
  EXPECT_EQ(h, nullptr);
  h = poison_handle();
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, &s, nullptr, 0, &o), VATTN_ERR_INVALID_ARGUMENT, "'num_layers'");
  EXPECT_EQ(h, nullptr);
  h = poison_handle();
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, &s, nullptr, SIZE_MAX, &o), VATTN_ERR_INVALID_ARGUMENT,
                   "'num_layers'");
  EXPECT_EQ(h, nullptr);
  // NULL options: no num_blocks and no budget.
  h = poison_handle();
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, &s, nullptr, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "memory_budget_bytes");
  EXPECT_EQ(h, nullptr);
}

TEST(KvCacheBad, CreateBadSpecNamesTheLayer) {
  std::vector<vattn_kv_cache_spec_t> specs = {small_spec(), small_spec(), small_spec()};
  specs[2].head_size = -8;
  vattn_kv_cache_options_t o = opts(2);
  expect_create_fails(specs, nullptr, &o, VATTN_ERR_INVALID_ARGUMENT, "specs[2]");
  specs[2] = small_spec();
  specs[1].struct_size = 3;
  expect_create_fails(specs, nullptr, &o, VATTN_ERR_INVALID_ARGUMENT, "specs[1]");
  // Two FULL layers whose windows cannot merge into one group.
  specs[1] = small_spec();
  specs[0].sliding_window = 64;
  specs[2].sliding_window = 128;
  expect_create_fails(specs, nullptr, &o, VATTN_ERR_INVALID_ARGUMENT, "same window size");
}

TEST(KvCacheBad, CreateBadSharing) {
  vattn_kv_cache_spec_t other = small_spec();
  other.head_size = 16;
  const std::vector<vattn_kv_cache_spec_t> specs = {small_spec(), small_spec(), small_spec()};
  vattn_kv_cache_options_t o = opts(2);
  struct Case {
    std::vector<int32_t> share;
    const char *needle;
  };
  const Case cases[] = {
      {{0, -1, -1}, "kv_sharing_target[0] = 0"},   // layer 0 has no earlier layer
      {{-1, 1, -1}, "kv_sharing_target[1] = 1"},   // itself
      {{-1, 2, -1}, "kv_sharing_target[1] = 2"},   // a later layer
      {{-1, -2, -1}, "kv_sharing_target[1] = -2"}, // negative other than -1
      {{-1, INT32_MIN, -1}, "kv_sharing_target[1]"},
      {{-1, 0, 1}, "itself reads"},                // chain
  };
  for (const Case &c : cases) {
    expect_create_fails(specs, c.share.data(), &o, VATTN_ERR_INVALID_ARGUMENT, c.needle);
    int64_t nb = -7;
    EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(specs.data(), c.share.data(), 3, 1 << 20, &nb),
                     VATTN_ERR_INVALID_ARGUMENT, c.needle);
    EXPECT_EQ(nb, -7);
  }
  std::vector<vattn_kv_cache_spec_t> mixed = {small_spec(), other};
  const int32_t s01[2] = {-1, 0};
  expect_create_fails(mixed, s01, &o, VATTN_ERR_INVALID_ARGUMENT, "differs from specs[0] in head_size");
  std::vector<vattn_kv_cache_spec_t> enc = {small_spec(VATTN_KV_SPEC_ENCODER_ONLY),
                                            small_spec(VATTN_KV_SPEC_ENCODER_ONLY)};
  expect_create_fails(enc, s01, &o, VATTN_ERR_INVALID_ARGUMENT, "ENCODER_ONLY");
}

TEST(KvCacheBad, CreateBadOptions) {
  const std::vector<vattn_kv_cache_spec_t> specs = {small_spec()};
  using O = vattn_kv_cache_options_t;
  const std::vector<std::pair<const char *, std::function<void(O &)>>> cases = {
      {"struct_size", [](O &o) { o.struct_size = 0; }},
      {"struct_size", [](O &o) { o.struct_size = sizeof(O) + 8; }},
      {"device_type", [](O &o) { o.device_type = kDLCUDAHost; }},
      {"device_type", [](O &o) { o.device_type = 0; }},
      {"device_id", [](O &o) { o.device_id = -1; }},
      {"layout", [](O &o) { o.layout = 2; }},
      {"layout", [](O &o) { o.layout = -2; }},
      {"zero_fill", [](O &o) { o.zero_fill = 2; }},
      {"num_blocks", [](O &o) { o.num_blocks = -1; }},
      {"memory_budget_bytes", [](O &o) { o.num_blocks = 0; o.memory_budget_bytes = -1; }},
      {"both 0", [](O &o) { o.num_blocks = 0; }},
      {"overflow", [](O &o) { o.num_blocks = INT64_MAX; }},
      {"overflow", [](O &o) { o.num_blocks = INT64_MAX / 256; }},
  };
  for (const auto &c : cases) {
    O o = opts(2);
    c.second(o);
    expect_create_fails(specs, nullptr, &o, VATTN_ERR_INVALID_ARGUMENT, c.first);
  }
  // A backend of the wrong device.
  const vattn_backend_t *cpu = nullptr;
  ASSERT_VATTN_OK(vattn_backend_find("CPU", &cpu));
  O o = opts(2);
  o.device_type = kDLCUDA;
  o.backend = cpu;
  expect_create_fails(specs, nullptr, &o, VATTN_ERR_INVALID_ARGUMENT, "backend CPU runs on device type");
  // A budget below one block.
  o = opts(0);
  o.memory_budget_bytes = 511;  // page = 2*4*2*8*4 = 512
  expect_create_fails(specs, nullptr, &o, VATTN_ERR_OUT_OF_MEMORY, "512");
}

TEST(KvCacheBad, BudgetArguments) {
  const vattn_kv_cache_spec_t s = small_spec();
  int64_t nb = -9;
  EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(&s, nullptr, 1, 1 << 20, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "'out'");
  EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(nullptr, nullptr, 1, 1 << 20, &nb),
                   VATTN_ERR_INVALID_ARGUMENT, "'specs'");
  EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(&s, nullptr, 0, 1 << 20, &nb),
                   VATTN_ERR_INVALID_ARGUMENT, "'num_layers'");
  EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(&s, nullptr, 1, -1, &nb),
                   VATTN_ERR_INVALID_ARGUMENT, "'memory_budget_bytes'");
  vattn_kv_cache_spec_t bad = s;
  bad.dtype = 99;
  EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(&bad, nullptr, 1, 1 << 20, &nb),
                   VATTN_ERR_INVALID_ARGUMENT, "specs[0]");
  const vattn_kv_cache_spec_t enc = small_spec(VATTN_KV_SPEC_ENCODER_ONLY);
  EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(&enc, nullptr, 1, 1 << 20, &nb),
                   VATTN_ERR_INVALID_ARGUMENT, "no layer keeps a cache");
  // Pages whose sum overflows int64 cannot fit any budget.
  vattn_kv_cache_spec_t big = s;
  big.page_size_padded = INT64_MAX / 2 + 1;
  const vattn_kv_cache_spec_t two[2] = {big, big};
  EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(two, nullptr, 2, INT64_MAX, &nb),
                   VATTN_ERR_OUT_OF_MEMORY, "INT64_MAX");
  EXPECT_EQ(nb, -9);
}

// ---- create_from_tensors -------------------------------------------------------

struct WrapBad : ::testing::Test {
  std::vector<vattn_kv_cache_spec_t> specs = {small_spec(), small_spec(), small_spec()};
  std::vector<int32_t> share = {-1, -1, 0};
  vt::HostTensor a{{2, 3, 4, 2, 8}, vt::dl_f32()};
  vt::HostTensor b{{2, 3, 4, 2, 8}, vt::dl_f32()};
  vattn_kv_cache_options_t o = opts(0);

  void expect_fails(const DLTensor *t1, const char *needle, const DLTensor *t2 = nullptr) {
    const DLTensor *tp[3] = {a.dl(), t1, t2};
    vattn_kv_cache_t *h = poison_handle();
    EXPECT_VATTN_ERR(vattn_kv_cache_create_from_tensors(&h, specs.data(), share.data(), 3, tp, &o),
                     VATTN_ERR_INVALID_ARGUMENT, needle);
    EXPECT_EQ(h, nullptr);
  }
};

TEST_F(WrapBad, RejectsBadTensors) {
  vattn_kv_cache_t *h = poison_handle();
  EXPECT_VATTN_ERR(vattn_kv_cache_create_from_tensors(&h, specs.data(), share.data(), 3, nullptr, &o),
                   VATTN_ERR_INVALID_ARGUMENT, "'tensors'");
  EXPECT_EQ(h, nullptr);
  expect_fails(nullptr, "tensors[1]");                        // owner without a tensor
  expect_fails(b.dl(), "must be NULL", b.dl());                // sharing layer with one
  DLTensor t = b.t;
  int64_t shape_h[5] = {2, 3, 4, 3, 8};
  t.shape = shape_h;
  expect_fails(&t, "does not match the cache shape");
  t = b.t;
  int64_t shape_nb[5] = {2, 4, 4, 2, 8};
  t.shape = shape_nb;
  expect_fails(&t, "has 4 blocks but tensors[0] has 3");
  t = b.t;
  int64_t shape0[5] = {2, 0, 4, 2, 8};
  t.shape = shape0;
  expect_fails(&t, "num_blocks");
  t = b.t;
  t.ndim = 4;
  expect_fails(&t, "does not match");
  t = b.t;
  t.dtype = vt::dl_f16();
  expect_fails(&t, "dtype float16");
  t = b.t;
  t.device = DLDevice{kDLCUDA, 0};
  expect_fails(&t, "device");
  t = b.t;
  int64_t weird[5] = {192, 64, 1, 32, 4};  // neither NHD nor HND
  t.strides = weird;
  expect_fails(&t, "neither the NHD nor the HND");
  int64_t padded[5] = {2 * 3 * 4 * 2 * 9, 4 * 2 * 9, 2 * 9, 9, 1};  // padded rows
  t.strides = padded;
  expect_fails(&t, "neither the NHD nor the HND");
  int64_t neg[5] = {192, 64, 16, -8, 1};
  t.strides = neg;
  expect_fails(&t, "strides[3]");
  t = b.t;
  int64_t hnd[5] = {192, 64, 8, 32, 1};  // HND while tensors[0] is NHD
  t.strides = hnd;
  expect_fails(&t, "share one layout");
  t = b.t;
  t.data = nullptr;
  expect_fails(&t, "data is NULL");
}

TEST_F(WrapBad, RejectsBadSpecsAndOptions) {
  const DLTensor *tp[3] = {a.dl(), b.dl(), nullptr};
  vattn_kv_cache_t *h = poison_handle();
  specs[1].kind = 42;
  EXPECT_VATTN_ERR(vattn_kv_cache_create_from_tensors(&h, specs.data(), share.data(), 3, tp, &o),
                   VATTN_ERR_INVALID_ARGUMENT, "specs[1]");
  EXPECT_EQ(h, nullptr);
  specs[1] = small_spec();
  o.struct_size = 1;
  h = poison_handle();
  EXPECT_VATTN_ERR(vattn_kv_cache_create_from_tensors(&h, specs.data(), share.data(), 3, tp, &o),
                   VATTN_ERR_INVALID_ARGUMENT, "'opts'");
  EXPECT_EQ(h, nullptr);
  EXPECT_VATTN_ERR(vattn_kv_cache_create_from_tensors(nullptr, specs.data(), share.data(), 3, tp, &o),
                   VATTN_ERR_INVALID_ARGUMENT, "'out'");
}

// ---- accessors ------------------------------------------------------------------

TEST(KvCacheBad, Accessors) {
  const vattn_kv_cache_spec_t s = small_spec();
  vattn_kv_cache_options_t o = opts(2);
  vattn_kv_cache_t *c = nullptr;
  ASSERT_VATTN_OK(vattn_kv_cache_create(&c, &s, nullptr, 1, &o));

  vattn_kv_cache_info_t in;
  std::memset(&in, 0x3c, sizeof in);
  in.struct_size = sizeof in;
  const vattn_kv_cache_info_t in0 = in;
  EXPECT_VATTN_ERR(vattn_kv_cache_get_info(nullptr, &in), VATTN_ERR_INVALID_ARGUMENT, "'cache'");
  EXPECT_VATTN_ERR(vattn_kv_cache_get_info(c, nullptr), VATTN_ERR_INVALID_ARGUMENT, "'out'");
  in.struct_size = 4;
  EXPECT_VATTN_ERR(vattn_kv_cache_get_info(c, &in), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
  in.struct_size = sizeof in + 8;
  EXPECT_VATTN_ERR(vattn_kv_cache_get_info(c, &in), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
  in.struct_size = sizeof in;
  EXPECT_EQ(std::memcmp(&in, &in0, sizeof in), 0);

  int32_t g = -5;
  EXPECT_VATTN_ERR(vattn_kv_cache_layer_group(nullptr, 0, &g), VATTN_ERR_INVALID_ARGUMENT, "'cache'");
  EXPECT_VATTN_ERR(vattn_kv_cache_layer_group(c, 0, nullptr), VATTN_ERR_INVALID_ARGUMENT, "'group_out'");
  EXPECT_VATTN_ERR(vattn_kv_cache_layer_group(c, 1, &g), VATTN_ERR_NOT_FOUND, "'layer'");
  EXPECT_VATTN_ERR(vattn_kv_cache_layer_group(c, SIZE_MAX, &g), VATTN_ERR_NOT_FOUND, "'layer'");
  EXPECT_EQ(g, -5);

  vattn_kv_cache_spec_t gs;
  vattn_kv_cache_spec_init(&gs);
  gs.head_size = 31337;
  EXPECT_VATTN_ERR(vattn_kv_cache_group_spec(nullptr, 0, &gs), VATTN_ERR_INVALID_ARGUMENT, "'cache'");
  EXPECT_VATTN_ERR(vattn_kv_cache_group_spec(c, 0, nullptr), VATTN_ERR_INVALID_ARGUMENT, "'out'");
  EXPECT_VATTN_ERR(vattn_kv_cache_group_spec(c, 1, &gs), VATTN_ERR_NOT_FOUND, "'group'");
  gs.struct_size = 0;
  EXPECT_VATTN_ERR(vattn_kv_cache_group_spec(c, 0, &gs), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
  EXPECT_EQ(gs.head_size, 31337);

  DLTensor t;
  std::memset(&t, 0x5e, sizeof t);
  DLTensor t0 = t;
  EXPECT_VATTN_ERR(vattn_kv_cache_layer_tensor(nullptr, 0, &t), VATTN_ERR_INVALID_ARGUMENT, "'cache'");
  EXPECT_VATTN_ERR(vattn_kv_cache_layer_tensor(c, 0, nullptr), VATTN_ERR_INVALID_ARGUMENT, "'out'");
  EXPECT_VATTN_ERR(vattn_kv_cache_layer_tensor(c, 7, &t), VATTN_ERR_NOT_FOUND, "'layer'");
  EXPECT_EQ(std::memcmp(&t, &t0, sizeof t), 0);

  vattn_kv_cache_destroy(c);
  vattn_kv_cache_destroy(nullptr);  // no-op
}

}  // namespace
