// test_cpu_info.cpp -- the CPU backend descriptor, selection, and what the
// backend refuses at layer creation.
#include "cpu_harness.h"

namespace {

TEST(CpuInfo, Descriptor) {
  const vattn_backend_t *b = ct::cpu();
  ASSERT_NE(b, nullptr);
  vattn_backend_info_t in;
  in.struct_size = sizeof in;
  ASSERT_VATTN_OK(vattn_backend_get_info(b, &in));
  EXPECT_STREQ(in.name, "CPU");
  EXPECT_EQ(in.device_type, kDLCPU);
  EXPECT_EQ(in.cudagraph_support, VATTN_CUDAGRAPH_NEVER);
  EXPECT_EQ(in.reorder_batch_threshold, 1);
  EXPECT_EQ(in.block_size_multiple, 1);
  EXPECT_EQ(in.max_head_size, 256);
  EXPECT_EQ(in.head_size_multiple, 8);
  EXPECT_EQ(in.dtypes, (1u << VATTN_DTYPE_FLOAT32) | (1u << VATTN_DTYPE_FLOAT16) | (1u << VATTN_DTYPE_BFLOAT16));
  EXPECT_EQ(in.kv_cache_dtypes, 7u);
  EXPECT_EQ(in.attn_types, 15u);
  const uint32_t want = VATTN_FEATURE_ALIBI | VATTN_FEATURE_SLIDING_WINDOW | VATTN_FEATURE_SOFT_CAP |
                        VATTN_FEATURE_SINKS | VATTN_FEATURE_FP8_KV_CACHE | VATTN_FEATURE_LSE_OUTPUT |
                        VATTN_FEATURE_CASCADE | VATTN_FEATURE_KV_SHARING;
  EXPECT_EQ(in.features, want);
  EXPECT_EQ(in.features & VATTN_FEATURE_MLA, 0u);
  ASSERT_GT(in.num_head_sizes, 0u);
  for (size_t i = 0; i < in.num_head_sizes; ++i) EXPECT_EQ(in.head_sizes[i] % 8, 0);
}

TEST(CpuInfo, SelectedForCpuDevice) {
  vattn_backend_selector_t sel;
  vattn_backend_selector_init(&sel);
  sel.device_type = kDLCPU;
  sel.head_size = 80;
  sel.block_size = 5;
  sel.features = VATTN_FEATURE_SINKS | VATTN_FEATURE_CASCADE;
  const vattn_backend_t *b = nullptr;
  ASSERT_VATTN_OK(vattn_get_attn_backend(&sel, &b));
  EXPECT_EQ(b, ct::cpu());
  sel.head_size = 100;
  EXPECT_VATTN_ERR(vattn_get_attn_backend(&sel, &b), VATTN_ERR_UNSUPPORTED, "head size");
  sel.head_size = 64;
  sel.use_mla = 1;
  EXPECT_VATTN_ERR(vattn_get_attn_backend(&sel, &b), VATTN_ERR_UNSUPPORTED, "MLA");
}

TEST(CpuInfo, BuilderLevels) {
  vattn_builder_options_t o;
  vattn_builder_options_init(&o);
  vattn_builder_t *b = nullptr;
  ASSERT_VATTN_OK(vattn_builder_create(&b, ct::cpu(), &o));
  ct::BuilderPtr bp(b);
  int32_t v = -1;
  ASSERT_VATTN_OK(vattn_builder_cudagraph_support(b, &v));
  EXPECT_EQ(v, VATTN_CUDAGRAPH_NEVER);
  ASSERT_VATTN_OK(vattn_builder_reorder_batch_threshold(b, &v));
  EXPECT_EQ(v, 1);
}

// kv_cache_dtype (the last field of vattn_builder_options_t): a known cache
// kind or a named error with nothing created; a struct that ends before it
// (an older caller) gets AUTO.
TEST(CpuInfo, BuilderKvCacheDtype) {
  auto make = [](auto tweak) {
    vattn_builder_options_t o;
    vattn_builder_options_init(&o);
    tweak(o);
    vattn_builder_t *b = reinterpret_cast<vattn_builder_t *>(0x1);
    const vattn_status_t st = vattn_builder_create(&b, ct::cpu(), &o);
    if (st != VATTN_OK) EXPECT_EQ(b, nullptr) << "out must be NULL on failure";
    else vattn_builder_destroy(b);
    return st;
  };
  vattn_builder_options_t d;
  vattn_builder_options_init(&d);
  EXPECT_EQ(d.kv_cache_dtype, VATTN_KV_CACHE_DTYPE_AUTO);
  for (int32_t k : {VATTN_KV_CACHE_DTYPE_AUTO, VATTN_KV_CACHE_DTYPE_FP8_E4M3, VATTN_KV_CACHE_DTYPE_FP8_E5M2})
    EXPECT_EQ(make([&](auto &o) { o.kv_cache_dtype = k; }), VATTN_OK) << k;
  for (int32_t k : {-1, 3, 9}) {
    EXPECT_EQ(make([&](auto &o) { o.kv_cache_dtype = k; }), VATTN_ERR_INVALID_ARGUMENT) << k;
    EXPECT_NE(std::string(vattn_last_error_message()).find("kv_cache_dtype = " + std::to_string(k)),
              std::string::npos)
        << vattn_last_error_message();
  }
  // An older struct: the garbage past struct_size is never read.
  EXPECT_EQ(make([](auto &o) {
              o.struct_size = offsetof(vattn_builder_options_t, kv_cache_dtype);
              o.kv_cache_dtype = 9;
            }),
            VATTN_OK);
}

TEST(CpuInfo, LayerRefusesUnsupported) {
  auto make = [](auto tweak) {
    vattn_layer_options_t o;
    vattn_layer_options_init(&o);
    o.num_heads = 8;
    o.num_kv_heads = 2;
    o.head_size = 64;
    tweak(o);
    vattn_layer_t *l = reinterpret_cast<vattn_layer_t *>(0x1);
    vattn_status_t st = vattn_layer_create(&l, ct::cpu(), &o);
    if (st != VATTN_OK) EXPECT_EQ(l, nullptr) << "out must be NULL on failure";
    else vattn_layer_destroy(l);
    return st;
  };
  EXPECT_EQ(make([](auto &o) { o.head_size = 100; }), VATTN_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(vattn_last_error_message()).find("head_size"), std::string::npos);
  EXPECT_EQ(make([](auto &o) { o.head_size = 264; }), VATTN_ERR_UNSUPPORTED);
  EXPECT_EQ(make([](auto &o) { o.dtype = VATTN_DTYPE_FP8_E4M3; }), VATTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(make([](auto &o) { o.num_kv_heads = 3; }), VATTN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vattn_last_error_message()).find("num_kv_heads"), std::string::npos);
  EXPECT_EQ(make([](auto &o) { o.kv_cache_dtype = 9; }), VATTN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(make([](auto &o) { o.struct_size = 1; }), VATTN_ERR_INVALID_ARGUMENT);
  for (int hs = 8; hs <= 256; hs += 8)
    EXPECT_EQ(make([&](auto &o) { o.head_size = hs; }), VATTN_OK) << hs;
  for (int t = VATTN_ATTN_DECODER; t <= VATTN_ATTN_ENCODER_DECODER; ++t)
    EXPECT_EQ(make([&](auto &o) { o.attn_type = t; }), VATTN_OK) << t;
}

}  // namespace
