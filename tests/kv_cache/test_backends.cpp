// Header section 4: backend registry, descriptors, selector (with the
// VATTN_ATTENTION_BACKEND override), KV cache shape / stride order, and the
// KV cache layout setting (with VATTN_KV_CACHE_LAYOUT).
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

const vattn_backend_t *cpu_backend() {
  const vattn_backend_t *b = nullptr;
  EXPECT_EQ(vattn_backend_find("CPU", &b), VATTN_OK) << vattn_last_error_message();
  return b;
}

vattn_backend_info_t info_of(const vattn_backend_t *b) {
  vattn_backend_info_t in;
  std::memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  EXPECT_EQ(vattn_backend_get_info(b, &in), VATTN_OK) << vattn_last_error_message();
  return in;
}

// Clears both layout sources for the duration of a test.
struct LayoutEnvGuard {
  LayoutEnvGuard() { reset(); }
  ~LayoutEnvGuard() { reset(); }
  static void reset() {
    unsetenv("VATTN_KV_CACHE_LAYOUT");
    vattn_set_kv_cache_layout(-1);
  }
};
struct BackendEnvGuard {
  BackendEnvGuard() { unsetenv("VATTN_ATTENTION_BACKEND"); }
  ~BackendEnvGuard() { unsetenv("VATTN_ATTENTION_BACKEND"); }
};

// ---- registry --------------------------------------------------------------

TEST(BackendRegistry, CountGetFind) {
  const size_t n = vattn_backend_count();
  ASSERT_GE(n, 1u);
  size_t cpu_index = n;
  for (size_t i = 0; i < n; ++i) {
    const vattn_backend_t *b = nullptr;
    ASSERT_VATTN_OK(vattn_backend_get(i, &b));
    ASSERT_NE(b, nullptr);
    const vattn_backend_t *again = nullptr;
    ASSERT_VATTN_OK(vattn_backend_get(i, &again));
    EXPECT_EQ(again, b);  // descriptors are process-lifetime singletons
    if (std::string(info_of(b).name) == "CPU") cpu_index = i;
    // Every backend is found by its own name.
    const vattn_backend_t *f = nullptr;
    ASSERT_VATTN_OK(vattn_backend_find(info_of(b).name, &f));
    EXPECT_EQ(f, b);
  }
  ASSERT_LT(cpu_index, n) << "the CPU backend is always registered";
  EXPECT_EQ(cpu_index, n - 1) << "CPU is the fallback: registered after any GPU backend";
  const vattn_backend_t *cpu = nullptr;
  ASSERT_VATTN_OK(vattn_backend_get(cpu_index, &cpu));
  for (const char *name : {"CPU", "cpu", "Cpu", "cPU"}) {
    const vattn_backend_t *f = nullptr;
    ASSERT_VATTN_OK(vattn_backend_find(name, &f));
    EXPECT_EQ(f, cpu) << name;
  }
}

TEST(BackendRegistry, BadArguments) {
  const size_t n = vattn_backend_count();
  const vattn_backend_t *b = reinterpret_cast<const vattn_backend_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_backend_get(n, &b), VATTN_ERR_NOT_FOUND, "'index'");
  EXPECT_EQ(b, nullptr);
  b = reinterpret_cast<const vattn_backend_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_backend_get(SIZE_MAX, &b), VATTN_ERR_NOT_FOUND, "'index'");
  EXPECT_EQ(b, nullptr);
  EXPECT_VATTN_ERR(vattn_backend_get(0, nullptr), VATTN_ERR_INVALID_ARGUMENT, "'out'");

  b = reinterpret_cast<const vattn_backend_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_backend_find("FlashInfer-XYZ", &b), VATTN_ERR_NOT_FOUND, "FlashInfer-XYZ");
  EXPECT_NE(std::string(vattn_last_error_message()).find("CPU"), std::string::npos)
      << "the message lists the registered backends: " << vattn_last_error_message();
  EXPECT_EQ(b, nullptr);
  for (const char *name : {"", "CP", "CPUX", "CPU "}) {
    b = reinterpret_cast<const vattn_backend_t *>(0x1);
    EXPECT_VATTN_ERR(vattn_backend_find(name, &b), VATTN_ERR_NOT_FOUND, "'name'");
    EXPECT_EQ(b, nullptr);
  }
  b = reinterpret_cast<const vattn_backend_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_backend_find(nullptr, &b), VATTN_ERR_INVALID_ARGUMENT, "'name'");
  EXPECT_EQ(b, nullptr);
  EXPECT_VATTN_ERR(vattn_backend_find("CPU", nullptr), VATTN_ERR_INVALID_ARGUMENT, "'out'");
}

TEST(BackendInfo, CpuDescriptor) {
  const vattn_backend_info_t in = info_of(cpu_backend());
  EXPECT_EQ(in.struct_size, sizeof in);
  EXPECT_STREQ(in.name, "CPU");
  EXPECT_EQ(in.device_type, kDLCPU);
  EXPECT_EQ(in.cudagraph_support, VATTN_CUDAGRAPH_NEVER);  // no graphs on the host
  EXPECT_GE(in.reorder_batch_threshold, 0);
  EXPECT_EQ(in.block_size_multiple, 1);  // any block size
  EXPECT_EQ(in.max_head_size, 256);
  EXPECT_EQ(in.head_size_multiple, 8);
  for (int32_t d : {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16})
    EXPECT_TRUE(in.dtypes & (1u << d)) << d;
  EXPECT_FALSE(in.dtypes & (1u << VATTN_DTYPE_FP8_E4M3));  // fp8 only as a cache dtype
  for (int32_t d : {VATTN_KV_CACHE_DTYPE_AUTO, VATTN_KV_CACHE_DTYPE_FP8_E4M3, VATTN_KV_CACHE_DTYPE_FP8_E5M2})
    EXPECT_TRUE(in.kv_cache_dtypes & (1u << d)) << d;
  for (int32_t t : {VATTN_ATTN_DECODER, VATTN_ATTN_ENCODER, VATTN_ATTN_ENCODER_ONLY, VATTN_ATTN_ENCODER_DECODER})
    EXPECT_TRUE(in.attn_types & (1u << t)) << t;
  for (uint32_t f : {VATTN_FEATURE_ALIBI, VATTN_FEATURE_SLIDING_WINDOW, VATTN_FEATURE_SOFT_CAP,
                     VATTN_FEATURE_SINKS, VATTN_FEATURE_FP8_KV_CACHE, VATTN_FEATURE_LSE_OUTPUT,
                     VATTN_FEATURE_CASCADE, VATTN_FEATURE_KV_SHARING})
    EXPECT_TRUE(in.features & f) << f;
  ASSERT_NE(in.head_sizes, nullptr);
  ASSERT_GT(in.num_head_sizes, 0u);
  for (size_t i = 0; i < in.num_head_sizes; ++i) {
    EXPECT_EQ(in.head_sizes[i] % 8, 0);
    EXPECT_LE(in.head_sizes[i], 256);
  }
}

TEST(BackendInfo, BadArguments) {
  vattn_backend_info_t in;
  std::memset(&in, 0x6b, sizeof in);
  in.struct_size = sizeof in;
  const vattn_backend_info_t in0 = in;
  EXPECT_VATTN_ERR(vattn_backend_get_info(nullptr, &in), VATTN_ERR_INVALID_ARGUMENT, "'backend'");
  EXPECT_VATTN_ERR(vattn_backend_get_info(cpu_backend(), nullptr), VATTN_ERR_INVALID_ARGUMENT, "'out'");
  in.struct_size = 0;
  EXPECT_VATTN_ERR(vattn_backend_get_info(cpu_backend(), &in), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
  in.struct_size = sizeof in + 8;
  EXPECT_VATTN_ERR(vattn_backend_get_info(cpu_backend(), &in), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
  in.struct_size = sizeof in;
  EXPECT_EQ(std::memcmp(&in, &in0, sizeof in), 0);
}

// ---- selector --------------------------------------------------------------------

vattn_backend_selector_t cpu_sel() {
  vattn_backend_selector_t s;
  vattn_backend_selector_init(&s);
  s.device_type = kDLCPU;
  return s;
}

TEST(BackendSelector, InitDefaults) {
  vattn_backend_selector_t s;
  std::memset(&s, 0x33, sizeof s);
  vattn_backend_selector_init(&s);
  EXPECT_EQ(s.struct_size, sizeof s);
  EXPECT_EQ(s.head_size, 128);
  EXPECT_EQ(s.dtype, VATTN_DTYPE_BFLOAT16);
  EXPECT_EQ(s.kv_cache_dtype, VATTN_KV_CACHE_DTYPE_AUTO);
  EXPECT_EQ(s.block_size, 16);
  EXPECT_EQ(s.use_mla, 0);
  EXPECT_EQ(s.has_sink, 0);
  EXPECT_EQ(s.attn_type, VATTN_ATTN_DECODER);
  EXPECT_EQ(s.device_type, 0);
  EXPECT_EQ(s.features, 0u);
  vattn_backend_selector_init(nullptr);
}

TEST(BackendSelector, PicksCpuForCpuLayers) {
  BackendEnvGuard env;
  const vattn_backend_t *cpu = cpu_backend();
  vattn_backend_selector_t s = cpu_sel();
  for (int32_t hs : {64, 80, 128, 256})
    for (int32_t dt : {VATTN_DTYPE_FLOAT32, VATTN_DTYPE_FLOAT16, VATTN_DTYPE_BFLOAT16})
      for (int32_t kvd : {VATTN_KV_CACHE_DTYPE_AUTO, VATTN_KV_CACHE_DTYPE_FP8_E4M3}) {
        s.head_size = hs;
        s.dtype = dt;
        s.kv_cache_dtype = kvd;
        s.block_size = 1 + hs % 17;
        s.has_sink = hs == 64;
        s.features = VATTN_FEATURE_ALIBI | VATTN_FEATURE_SOFT_CAP;
        const vattn_backend_t *b = nullptr;
        ASSERT_VATTN_OK(vattn_get_attn_backend(&s, &b));
        EXPECT_EQ(b, cpu);
      }
  // No device named and no GPU: the CPU backend.
  int32_t ngpu = -1;
  ASSERT_VATTN_OK(vattn_cuda_device_count(&ngpu));
  if (ngpu == 0) {
    vattn_backend_selector_t d;
    vattn_backend_selector_init(&d);
    const vattn_backend_t *b = nullptr;
    ASSERT_VATTN_OK(vattn_get_attn_backend(&d, &b));
    EXPECT_EQ(b, cpu);
  }
}

TEST(BackendSelector, NothingFitsListsEveryReason) {
  BackendEnvGuard env;
  struct Case {
    std::function<void(vattn_backend_selector_t &)> mutate;
    const char *reason;
  };
  const bool cpu_mla = info_of(cpu_backend()).features & VATTN_FEATURE_MLA;
  std::vector<Case> cases = {
      {[](vattn_backend_selector_t &s) { s.head_size = 100; }, "head size 100"},
      {[](vattn_backend_selector_t &s) { s.head_size = 512; }, "head size 512"},
      {[](vattn_backend_selector_t &s) { s.head_size = -8; }, "head size -8"},
      {[](vattn_backend_selector_t &s) { s.dtype = VATTN_DTYPE_FP8_E4M3; }, "dtype fp8_e4m3"},
      {[](vattn_backend_selector_t &s) { s.dtype = 0; }, "dtype"},
      {[](vattn_backend_selector_t &s) { s.kv_cache_dtype = 9; }, "kv_cache_dtype 9"},
      {[](vattn_backend_selector_t &s) { s.kv_cache_dtype = -1; }, "kv_cache_dtype -1"},
      {[](vattn_backend_selector_t &s) { s.block_size = 0; }, "block size 0"},
      {[](vattn_backend_selector_t &s) { s.attn_type = 7; }, "attention type 7"},
      {[](vattn_backend_selector_t &s) { s.features = 1u << 30; }, "missing features 0x40000000"},
  };
  if (!cpu_mla) cases.push_back({[](vattn_backend_selector_t &s) { s.use_mla = 1; }, "MLA"});
  for (const Case &c : cases) {
    vattn_backend_selector_t s = cpu_sel();
    c.mutate(s);
    const vattn_backend_t *b = reinterpret_cast<const vattn_backend_t *>(0x1);
    EXPECT_VATTN_ERR(vattn_get_attn_backend(&s, &b), VATTN_ERR_UNSUPPORTED, c.reason);
    const std::string msg = vattn_last_error_message();
    EXPECT_NE(msg.find("no attention backend fits"), std::string::npos) << msg;
    // Every registered backend appears with its reason.
    for (size_t i = 0; i < vattn_backend_count(); ++i) {
      const vattn_backend_t *r = nullptr;
      ASSERT_VATTN_OK(vattn_backend_get(i, &r));
      EXPECT_NE(msg.find(std::string(info_of(r).name) + ":"), std::string::npos) << msg;
    }
    EXPECT_EQ(b, nullptr);
  }
  // Asking for CUDA in a build / machine without it.
  int32_t ngpu = -1;
  ASSERT_VATTN_OK(vattn_cuda_device_count(&ngpu));
  if (vattn_backend_count() == 1) {
    vattn_backend_selector_t s = cpu_sel();
    s.device_type = kDLCUDA;
    const vattn_backend_t *b = nullptr;
    EXPECT_VATTN_ERR(vattn_get_attn_backend(&s, &b), VATTN_ERR_UNSUPPORTED, "CPU: runs on device type");
  }
}

TEST(BackendSelector, EnvironmentOverride) {
  BackendEnvGuard env;
  const vattn_backend_t *cpu = cpu_backend();
  vattn_backend_selector_t s = cpu_sel();
  ASSERT_EQ(setenv("VATTN_ATTENTION_BACKEND", "cpu", 1), 0);
  const vattn_backend_t *b = nullptr;
  ASSERT_VATTN_OK(vattn_get_attn_backend(&s, &b));
  EXPECT_EQ(b, cpu);
  // The forced backend is still checked.
  s.head_size = 100;
  b = reinterpret_cast<const vattn_backend_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_get_attn_backend(&s, &b), VATTN_ERR_UNSUPPORTED,
                   "VATTN_ATTENTION_BACKEND=cpu cannot serve this layer");
  EXPECT_NE(std::string(vattn_last_error_message()).find("head size 100"), std::string::npos);
  EXPECT_EQ(b, nullptr);
  // An unknown name.
  s = cpu_sel();
  ASSERT_EQ(setenv("VATTN_ATTENTION_BACKEND", "NoSuchBackend", 1), 0);
  b = reinterpret_cast<const vattn_backend_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_get_attn_backend(&s, &b), VATTN_ERR_NOT_FOUND, "NoSuchBackend");
  EXPECT_EQ(b, nullptr);
  // Empty means unset.
  ASSERT_EQ(setenv("VATTN_ATTENTION_BACKEND", "", 1), 0);
  ASSERT_VATTN_OK(vattn_get_attn_backend(&s, &b));
  EXPECT_EQ(b, cpu);
}

TEST(BackendSelector, BadArguments) {
  BackendEnvGuard env;
  vattn_backend_selector_t s = cpu_sel();
  const vattn_backend_t *b = reinterpret_cast<const vattn_backend_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_get_attn_backend(nullptr, &b), VATTN_ERR_INVALID_ARGUMENT, "'sel'");
  EXPECT_EQ(b, nullptr);
  EXPECT_VATTN_ERR(vattn_get_attn_backend(&s, nullptr), VATTN_ERR_INVALID_ARGUMENT, "'out'");
  for (size_t bad : {size_t(0), size_t(4), sizeof s + 4}) {
    s.struct_size = bad;
    b = reinterpret_cast<const vattn_backend_t *>(0x1);
    EXPECT_VATTN_ERR(vattn_get_attn_backend(&s, &b), VATTN_ERR_INVALID_ARGUMENT, "struct_size");
    EXPECT_EQ(b, nullptr);
  }
  s = cpu_sel();
  for (int32_t dev : {3, -1, static_cast<int>(kDLCUDAHost)}) {
    s.device_type = dev;
    b = reinterpret_cast<const vattn_backend_t *>(0x1);
    EXPECT_VATTN_ERR(vattn_get_attn_backend(&s, &b), VATTN_ERR_INVALID_ARGUMENT, "device_type");
    EXPECT_EQ(b, nullptr);
  }
}

// ---- KV cache shape and stride order -----------------------------------------

TEST(BackendKvCacheShape, RankFiveAttentionShape) {
  const vattn_backend_t *cpu = cpu_backend();
  int64_t shape[5];
  int32_t nd = -1;
  ASSERT_VATTN_OK(vattn_backend_kv_cache_shape(cpu, 1000, 16, 8, 128, 0, shape, &nd));
  ASSERT_EQ(nd, 5);
  const int64_t want[5] = {2, 1000, 16, 8, 128};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(shape[i], want[i]);
  ASSERT_VATTN_OK(vattn_backend_kv_cache_shape(cpu, 0, 3, 1, 8, 0, shape, &nd));  // 0 blocks is a shape
  EXPECT_EQ(shape[1], 0);
  EXPECT_EQ(shape[2], 3);
  if (info_of(cpu).features & VATTN_FEATURE_MLA) {
    ASSERT_VATTN_OK(vattn_backend_kv_cache_shape(cpu, 7, 64, 1, 576, 1, shape, &nd));
    ASSERT_EQ(nd, 3);
    EXPECT_EQ(shape[0], 7);
    EXPECT_EQ(shape[1], 64);
    EXPECT_EQ(shape[2], 576);
  } else {
    shape[0] = -42;
    EXPECT_VATTN_ERR(vattn_backend_kv_cache_shape(cpu, 7, 64, 1, 576, 1, shape, &nd), VATTN_ERR_UNSUPPORTED,
                     "MLA");
    EXPECT_EQ(shape[0], -42);
  }
}

TEST(BackendKvCacheShape, BadArguments) {
  const vattn_backend_t *cpu = cpu_backend();
  int64_t shape[5] = {-1, -1, -1, -1, -1};
  int32_t nd = -1;
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_shape(nullptr, 1, 16, 8, 128, 0, shape, &nd),
                   VATTN_ERR_INVALID_ARGUMENT, "'backend'");
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_shape(cpu, 1, 16, 8, 128, 0, nullptr, &nd),
                   VATTN_ERR_INVALID_ARGUMENT, "'shape_out'");
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_shape(cpu, 1, 16, 8, 128, 0, shape, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "'ndim_out'");
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_shape(cpu, -1, 16, 8, 128, 0, shape, &nd),
                   VATTN_ERR_INVALID_ARGUMENT, "'num_blocks'");
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_shape(cpu, 1, 0, 8, 128, 0, shape, &nd),
                   VATTN_ERR_INVALID_ARGUMENT, "'block_size'");
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_shape(cpu, 1, -16, 8, 128, 0, shape, &nd),
                   VATTN_ERR_INVALID_ARGUMENT, "'block_size'");
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_shape(cpu, 1, 16, 0, 128, 0, shape, &nd),
                   VATTN_ERR_INVALID_ARGUMENT, "'num_kv_heads'");
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_shape(cpu, 1, 16, 8, -128, 0, shape, &nd),
                   VATTN_ERR_INVALID_ARGUMENT, "'head_size'");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(shape[i], -1);
  EXPECT_EQ(nd, -1);
}

// Applies a stride order to named logical dims: physical dim i is logical
// dim order[i].
std::string physical(const std::vector<std::string> &logical, const int32_t *order, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + logical[order[i]];
  return s;
}

TEST(BackendKvCacheStrideOrder, NhdHndWithAndWithoutLayersDim) {
  const vattn_backend_t *cpu = cpu_backend();
  const std::vector<std::string> dims5 = {"2", "nb", "bs", "H", "D"};
  const std::vector<std::string> dims6 = {"L", "2", "nb", "bs", "H", "D"};
  int32_t order[6];
  int32_t nd = -1;
  ASSERT_VATTN_OK(vattn_backend_kv_cache_stride_order(cpu, VATTN_LAYOUT_NHD, 0, order, &nd));
  ASSERT_EQ(nd, 5);
  EXPECT_EQ(physical(dims5, order, 5), "2,nb,bs,H,D");
  ASSERT_VATTN_OK(vattn_backend_kv_cache_stride_order(cpu, VATTN_LAYOUT_HND, 0, order, &nd));
  ASSERT_EQ(nd, 5);
  EXPECT_EQ(physical(dims5, order, 5), "2,nb,H,bs,D");
  const int32_t hnd[5] = {0, 1, 3, 2, 4};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(order[i], hnd[i]);
  // With a leading num_layers dim (cross-layer allocation): blocks outermost.
  ASSERT_VATTN_OK(vattn_backend_kv_cache_stride_order(cpu, VATTN_LAYOUT_NHD, 1, order, &nd));
  ASSERT_EQ(nd, 6);
  EXPECT_EQ(physical(dims6, order, 6), "nb,L,2,bs,H,D");
  ASSERT_VATTN_OK(vattn_backend_kv_cache_stride_order(cpu, VATTN_LAYOUT_HND, 7, order, &nd));
  ASSERT_EQ(nd, 6);
  EXPECT_EQ(physical(dims6, order, 6), "nb,H,L,2,bs,D");
}

TEST(BackendKvCacheStrideOrder, BadArguments) {
  const vattn_backend_t *cpu = cpu_backend();
  int32_t order[6] = {9, 9, 9, 9, 9, 9};
  int32_t nd = -1;
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_stride_order(nullptr, 0, 0, order, &nd), VATTN_ERR_INVALID_ARGUMENT,
                   "'backend'");
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_stride_order(cpu, 0, 0, nullptr, &nd), VATTN_ERR_INVALID_ARGUMENT,
                   "'order_out'");
  EXPECT_VATTN_ERR(vattn_backend_kv_cache_stride_order(cpu, 0, 0, order, nullptr), VATTN_ERR_INVALID_ARGUMENT,
                   "'ndim_out'");
  for (int32_t layout : {2, -1, 100}) {
    EXPECT_VATTN_ERR(vattn_backend_kv_cache_stride_order(cpu, layout, 0, order, &nd),
                     VATTN_ERR_INVALID_ARGUMENT, "'layout'");
  }
  for (int i = 0; i < 6; ++i) EXPECT_EQ(order[i], 9);
  EXPECT_EQ(nd, -1);
}

// ---- layout setting ---------------------------------------------------------------

int32_t layout_now() {
  int32_t l = -7;
  EXPECT_EQ(vattn_get_kv_cache_layout(&l), VATTN_OK) << vattn_last_error_message();
  return l;
}

TEST(KvCacheLayout, DefaultEnvAndOverride) {
  LayoutEnvGuard guard;
  EXPECT_EQ(layout_now(), VATTN_LAYOUT_NHD);  // default
  ASSERT_EQ(setenv("VATTN_KV_CACHE_LAYOUT", "HND", 1), 0);
  EXPECT_EQ(layout_now(), VATTN_LAYOUT_HND);  // not cached: read at every call
  ASSERT_EQ(setenv("VATTN_KV_CACHE_LAYOUT", "NHD", 1), 0);
  EXPECT_EQ(layout_now(), VATTN_LAYOUT_NHD);
  ASSERT_EQ(setenv("VATTN_KV_CACHE_LAYOUT", "HND", 1), 0);
  ASSERT_VATTN_OK(vattn_set_kv_cache_layout(VATTN_LAYOUT_NHD));  // override beats env
  EXPECT_EQ(layout_now(), VATTN_LAYOUT_NHD);
  ASSERT_VATTN_OK(vattn_set_kv_cache_layout(VATTN_LAYOUT_HND));
  EXPECT_EQ(layout_now(), VATTN_LAYOUT_HND);
  ASSERT_VATTN_OK(vattn_set_kv_cache_layout(-1));  // removes the override: env again
  ASSERT_EQ(setenv("VATTN_KV_CACHE_LAYOUT", "NHD", 1), 0);
  EXPECT_EQ(layout_now(), VATTN_LAYOUT_NHD);
  ASSERT_VATTN_OK(vattn_set_kv_cache_layout(VATTN_LAYOUT_HND));
  ASSERT_VATTN_OK(vattn_set_kv_cache_layout(-5));  // any negative clears
  unsetenv("VATTN_KV_CACHE_LAYOUT");
  EXPECT_EQ(layout_now(), VATTN_LAYOUT_NHD);
  // Empty environment value means unset.
  ASSERT_EQ(setenv("VATTN_KV_CACHE_LAYOUT", "", 1), 0);
  EXPECT_EQ(layout_now(), VATTN_LAYOUT_NHD);
}

TEST(KvCacheLayout, BadArguments) {
  LayoutEnvGuard guard;
  EXPECT_VATTN_ERR(vattn_get_kv_cache_layout(nullptr), VATTN_ERR_INVALID_ARGUMENT, "'layout_out'");
  for (int32_t bad : {2, 3, 1000}) {
    EXPECT_VATTN_ERR(vattn_set_kv_cache_layout(bad), VATTN_ERR_INVALID_ARGUMENT, "'layout'");
    EXPECT_EQ(layout_now(), VATTN_LAYOUT_NHD);  // unchanged
  }
  for (const char *env : {"hnd", "HND ", "XYZ", "1"}) {
    ASSERT_EQ(setenv("VATTN_KV_CACHE_LAYOUT", env, 1), 0);
    int32_t l = -7;
    EXPECT_VATTN_ERR(vattn_get_kv_cache_layout(&l), VATTN_ERR_INVALID_ARGUMENT, "VATTN_KV_CACHE_LAYOUT");
    EXPECT_EQ(l, -7);
  }
  // The override still wins over a broken environment.
  ASSERT_VATTN_OK(vattn_set_kv_cache_layout(VATTN_LAYOUT_HND));
  EXPECT_EQ(layout_now(), VATTN_LAYOUT_HND);
}

}  // namespace
