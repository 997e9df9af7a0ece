// Header section 5: KV cache budget, allocation, groups, sharing, views.
// Views are checked by writing random values through the view's strides and
// reading the raw allocation at independently computed physical offsets.
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "test_util.h"

namespace {

vattn_kv_cache_spec_t spec(int32_t bs, int32_t kvh, int32_t hs, int32_t dtype,
                           int32_t kind = VATTN_KV_SPEC_FULL) {
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  s.kind = kind;
  s.block_size = bs;
  s.num_kv_heads = kvh;
  s.head_size = hs;
  s.dtype = dtype;
  return s;
}

vattn_kv_cache_options_t cpu_opts(int64_t num_blocks, int32_t layout = VATTN_LAYOUT_NHD) {
  vattn_kv_cache_options_t o;
  vattn_kv_cache_options_init(&o);
  o.num_blocks = num_blocks;
  o.layout = layout;
  return o;
}

// RAII for a cache handle.
struct Cache {
  vattn_kv_cache_t *h = nullptr;
  ~Cache() { vattn_kv_cache_destroy(h); }
  vattn_kv_cache_info_t info() const {
    vattn_kv_cache_info_t in;
    std::memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    EXPECT_EQ(vattn_kv_cache_get_info(h, &in), VATTN_OK) << vattn_last_error_message();
    return in;
  }
  DLTensor tensor(size_t layer) const {
    DLTensor t;
    std::memset(&t, 0xab, sizeof t);
    EXPECT_EQ(vattn_kv_cache_layer_tensor(h, layer, &t), VATTN_OK) << vattn_last_error_message();
    return t;
  }
  int32_t group(size_t layer) const {
    int32_t g = -99;
    EXPECT_EQ(vattn_kv_cache_layer_group(h, layer, &g), VATTN_OK) << vattn_last_error_message();
    return g;
  }
};

TEST(KvCacheOptions, InitDefaults) {
  vattn_kv_cache_options_t o;
  std::memset(&o, 0x77, sizeof o);
  vattn_kv_cache_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.device_type, kDLCPU);
  EXPECT_EQ(o.device_id, 0);
  EXPECT_EQ(o.layout, -1);
  EXPECT_EQ(o.zero_fill, 1);
  EXPECT_EQ(o.num_blocks, 0);
  EXPECT_EQ(o.memory_budget_bytes, 0);
  EXPECT_EQ(o.backend, nullptr);
  vattn_kv_cache_options_init(nullptr);
}

TEST(KvCacheBudget, WorkedExamples) {
  // 32 Llama-3-8B layers: 32 * 65536 = 2 MiB per block; 1 GiB -> 512 blocks.
  std::vector<vattn_kv_cache_spec_t> specs(32);
  for (auto &s : specs) vattn_kv_cache_spec_init(&s);
  int64_t nb = -1;
  ASSERT_VATTN_OK(vattn_kv_cache_num_blocks_for_budget(specs.data(), nullptr, 32, INT64_C(1) << 30, &nb));
  EXPECT_EQ(nb, 512);
  ASSERT_VATTN_OK(vattn_kv_cache_num_blocks_for_budget(specs.data(), nullptr, 32, (INT64_C(1) << 30) - 1, &nb));
  EXPECT_EQ(nb, 511);
  // Layers 16..31 read layers 0..15: only half the layers own memory.
  std::vector<int32_t> share(32, -1);
  for (int i = 16; i < 32; ++i) share[i] = i - 16;
  ASSERT_VATTN_OK(vattn_kv_cache_num_blocks_for_budget(specs.data(), share.data(), 32, INT64_C(1) << 30, &nb));
  EXPECT_EQ(nb, 1024);
  // Mixed page sizes: 65536 + 131072 (fp32) + 73728 (MLA) + 0 (encoder-only).
  std::vector<vattn_kv_cache_spec_t> mixed = {
      spec(16, 8, 128, VATTN_DTYPE_BFLOAT16), spec(16, 8, 128, VATTN_DTYPE_FLOAT32),
      spec(64, 1, 576, VATTN_DTYPE_BFLOAT16, VATTN_KV_SPEC_MLA),
      spec(16, 8, 128, VATTN_DTYPE_BFLOAT16, VATTN_KV_SPEC_ENCODER_ONLY)};
  const int64_t per_block = 65536 + 131072 + 73728;
  ASSERT_VATTN_OK(vattn_kv_cache_num_blocks_for_budget(mixed.data(), nullptr, 4, per_block * 37 + 5, &nb));
  EXPECT_EQ(nb, 37);
  // Padded pages count with their padded size.
  mixed[0].page_size_padded = 100000;
  ASSERT_VATTN_OK(vattn_kv_cache_num_blocks_for_budget(mixed.data(), nullptr, 4,
                                                       (per_block - 65536 + 100000) * 3, &nb));
  EXPECT_EQ(nb, 3);
}

TEST(KvCacheBudget, RandomMatchesFormula) {
  std::mt19937_64 g(vt::test_seed());
  for (int it = 0; it < 50; ++it) {
    size_t n = 1 + g() % 12;
    std::vector<vattn_kv_cache_spec_t> specs;
    std::vector<int32_t> share(n, -1);
    int64_t per_block = 0;
    for (size_t i = 0; i < n; ++i) {
      specs.push_back(spec(1 + static_cast<int32_t>(g() % 32), 1 + static_cast<int32_t>(g() % 8),
                           8 * (1 + static_cast<int32_t>(g() % 16)), VATTN_DTYPE_FLOAT16));
      if (i > 0 && g() % 3 == 0) {
        int32_t t = static_cast<int32_t>(g() % i);
        if (share[t] >= 0) t = share[t];
        share[i] = t;
        specs[i] = specs[t];
      } else {
        per_block += 2 * int64_t(specs[i].block_size) * specs[i].num_kv_heads * specs[i].head_size * 2;
      }
    }
    const int64_t budget = static_cast<int64_t>(g() % (INT64_C(1) << 34)) + per_block;
    int64_t nb = -1;
    ASSERT_VATTN_OK(vattn_kv_cache_num_blocks_for_budget(specs.data(), share.data(), n, budget, &nb));
    EXPECT_EQ(nb, budget / per_block);
  }
}

TEST(KvCacheBudget, TooSmallIsOutOfMemoryWithBytesNeeded) {
  std::vector<vattn_kv_cache_spec_t> specs(2);
  for (auto &s : specs) vattn_kv_cache_spec_init(&s);
  int64_t nb = -3;
  EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(specs.data(), nullptr, 2, 131071, &nb),
                   VATTN_ERR_OUT_OF_MEMORY, "131072");
  EXPECT_VATTN_ERR(vattn_kv_cache_num_blocks_for_budget(specs.data(), nullptr, 2, 0, &nb),
                   VATTN_ERR_OUT_OF_MEMORY, "memory_budget_bytes");
  EXPECT_EQ(nb, -3);
}

// Reads element e (logical index) of a float tensor through its strides.
float *at(const DLTensor &t, const int64_t *idx) {
  int64_t off = 0;
  for (int d = 0; d < t.ndim; ++d) off += idx[d] * t.strides[d];
  return reinterpret_cast<float *>(static_cast<char *>(t.data) + t.byte_offset) + off;
}

// Writes a distinct random value at every logical index through the view,
// then checks the raw allocation at the physical offset of `layout`.
void check_view_layout(const DLTensor &t, int32_t layout, std::mt19937_64 &g) {
  ASSERT_EQ(t.ndim, 5);
  const int64_t nb = t.shape[1], bs = t.shape[2], H = t.shape[3], D = t.shape[4];
  std::vector<float> want(static_cast<size_t>(2 * nb * bs * H * D));
  const float *raw = static_cast<const float *>(t.data);
  for (int64_t kv = 0; kv < 2; ++kv)
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t s = 0; s < bs; ++s)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < D; ++d) {
            const int64_t idx[5] = {kv, b, s, h, d};
            const float v = vt::uniform(g, 1.f, 2.f) + static_cast<float>(b);
            *at(t, idx) = v;
            const int64_t phys = layout == VATTN_LAYOUT_NHD
                                     ? (((kv * nb + b) * bs + s) * H + h) * D + d
                                     : (((kv * nb + b) * H + h) * bs + s) * D + d;
            want[static_cast<size_t>(phys)] = v;
          }
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(raw[i], want[i]) << "physical element " << i;
}

TEST(KvCacheCreate, NhdAndHndViewsAddressThePhysicalLayout) {
  std::mt19937_64 g(vt::test_seed());
  const int64_t nb = 3 + static_cast<int64_t>(g() % 4);
  const vattn_kv_cache_spec_t s = spec(4, 3, 8, VATTN_DTYPE_FLOAT32);  // page 2*4*3*8*4 = 768
  const vattn_kv_cache_spec_t specs[3] = {s, s, s};
  for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND}) {
    Cache c;
    vattn_kv_cache_options_t o = cpu_opts(nb, layout);
    ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, specs, nullptr, 3, &o));
    vattn_kv_cache_info_t in = c.info();
    EXPECT_EQ(in.num_blocks, nb);
    EXPECT_EQ(in.total_bytes, 3 * nb * 768);
    EXPECT_EQ(in.num_layers, 3);
    EXPECT_EQ(in.num_groups, 1);
    EXPECT_EQ(in.device_type, kDLCPU);
    EXPECT_EQ(in.device_id, 0);
    EXPECT_EQ(in.layout, layout);
    std::vector<void *> ptrs;
    for (size_t l = 0; l < 3; ++l) {
      DLTensor t = c.tensor(l);
      EXPECT_EQ(c.group(l), 0);
      ASSERT_EQ(t.ndim, 5);
      EXPECT_EQ(t.device.device_type, kDLCPU);
      EXPECT_EQ(t.dtype.code, kDLFloat);
      EXPECT_EQ(t.dtype.bits, 32);
      EXPECT_EQ(t.byte_offset, 0u);
      const int64_t shape[5] = {2, nb, 4, 3, 8};
      for (int d = 0; d < 5; ++d) EXPECT_EQ(t.shape[d], shape[d]);
      const int64_t nhd[5] = {nb * 96, 96, 24, 8, 1}, hnd[5] = {nb * 96, 96, 8, 32, 1};
      for (int d = 0; d < 5; ++d) EXPECT_EQ(t.strides[d], layout == VATTN_LAYOUT_NHD ? nhd[d] : hnd[d]);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
      // zero_fill defaults to 1.
      const float *f = static_cast<const float *>(t.data);
      for (int64_t i = 0; i < 2 * nb * 96; ++i) ASSERT_EQ(f[i], 0.f);
      check_view_layout(t, layout, g);
      ptrs.push_back(t.data);
    }
    EXPECT_NE(ptrs[0], ptrs[1]);
    EXPECT_NE(ptrs[1], ptrs[2]);
    // Layers do not overlap: writing layer 1 left layer 0's values intact.
    DLTensor t0 = c.tensor(0);
    const int64_t idx[5] = {1, nb - 1, 3, 2, 7};
    const float keep = *at(t0, idx);
    const DLTensor t1 = c.tensor(1);
    *at(t1, idx) = -keep;
    EXPECT_EQ(*at(t0, idx), keep);
  }
}

TEST(KvCacheCreate, DefaultLayoutFollowsEnvAndOverride) {
  const vattn_kv_cache_spec_t s = spec(2, 2, 8, VATTN_DTYPE_FLOAT16);
  vattn_kv_cache_options_t o = cpu_opts(2, -1);
  ASSERT_EQ(setenv("VATTN_KV_CACHE_LAYOUT", "HND", 1), 0);
  {
    Cache c;
    ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, &s, nullptr, 1, &o));
    EXPECT_EQ(c.info().layout, VATTN_LAYOUT_HND);
    EXPECT_EQ(c.tensor(0).strides[3], 2 * 8);  // head stride = block_size * head_size
  }
  ASSERT_VATTN_OK(vattn_set_kv_cache_layout(VATTN_LAYOUT_NHD));
  {
    Cache c;
    ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, &s, nullptr, 1, &o));
    EXPECT_EQ(c.info().layout, VATTN_LAYOUT_NHD);
  }
  ASSERT_VATTN_OK(vattn_set_kv_cache_layout(-1));
  // An invalid environment value fails the create (nothing allocated).
  ASSERT_EQ(setenv("VATTN_KV_CACHE_LAYOUT", "nhd", 1), 0);
  vattn_kv_cache_t *h = reinterpret_cast<vattn_kv_cache_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, &s, nullptr, 1, &o), VATTN_ERR_INVALID_ARGUMENT,
                   "VATTN_KV_CACHE_LAYOUT");
  EXPECT_EQ(h, nullptr);
  // An explicit layout does not read the environment.
  o.layout = VATTN_LAYOUT_HND;
  {
    Cache c;
    ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, &s, nullptr, 1, &o));
    EXPECT_EQ(c.info().layout, VATTN_LAYOUT_HND);
  }
  unsetenv("VATTN_KV_CACHE_LAYOUT");
}

TEST(KvCacheCreate, SharingLayersReadTheirTargetsMemory) {
  const vattn_kv_cache_spec_t s = spec(4, 2, 8, VATTN_DTYPE_BFLOAT16);  // page 256
  const vattn_kv_cache_spec_t specs[4] = {s, s, s, s};
  const int32_t share[4] = {-1, -1, 0, 1};
  Cache c;
  vattn_kv_cache_options_t o = cpu_opts(5);
  ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, specs, share, 4, &o));
  EXPECT_EQ(c.info().total_bytes, 2 * 5 * 256);
  EXPECT_EQ(c.info().num_groups, 1);
  EXPECT_EQ(c.tensor(2).data, c.tensor(0).data);
  EXPECT_EQ(c.tensor(3).data, c.tensor(1).data);
  EXPECT_NE(c.tensor(0).data, c.tensor(1).data);
  EXPECT_EQ(c.tensor(2).strides[3], c.tensor(0).strides[3]);
  EXPECT_EQ(c.group(3), c.group(1));
}

TEST(KvCacheCreate, GroupsMergeAndMlaViews) {
  std::vector<vattn_kv_cache_spec_t> specs = {
      spec(16, 2, 8, VATTN_DTYPE_FLOAT16),                                  // 0: full
      spec(16, 2, 8, VATTN_DTYPE_FLOAT16, VATTN_KV_SPEC_SLIDING_WINDOW),    // 1: sliding
      spec(16, 2, 8, VATTN_DTYPE_FLOAT16),                                  // 2: full + window
      spec(16, 1, 576, VATTN_DTYPE_BFLOAT16, VATTN_KV_SPEC_MLA),            // 3: MLA
      spec(16, 2, 8, VATTN_DTYPE_FLOAT16),                                  // 4: full
      spec(16, 1, 576, VATTN_DTYPE_UINT8, VATTN_KV_SPEC_MLA),               // 5: fp8_ds_mla
      spec(16, 2, 8, VATTN_DTYPE_FP8_E4M3),                                 // 6: fp8 full
  };
  specs[1].sliding_window = 128;
  specs[2].sliding_window = 256;
  specs[5].mla_fp8_ds = 1;
  Cache c;
  vattn_kv_cache_options_t o = cpu_opts(3);
  ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, specs.data(), nullptr, specs.size(), &o));
  EXPECT_EQ(c.info().num_groups, 5);
  const int32_t want_group[7] = {0, 1, 0, 2, 0, 3, 4};
  for (size_t l = 0; l < 7; ++l) EXPECT_EQ(c.group(l), want_group[l]) << l;
  vattn_kv_cache_spec_t gs;
  vattn_kv_cache_spec_init(&gs);
  ASSERT_VATTN_OK(vattn_kv_cache_group_spec(c.h, 0, &gs));
  EXPECT_EQ(gs.kind, VATTN_KV_SPEC_FULL);
  EXPECT_EQ(gs.sliding_window, 256);  // merged
  ASSERT_VATTN_OK(vattn_kv_cache_group_spec(c.h, 1, &gs));
  EXPECT_EQ(gs.kind, VATTN_KV_SPEC_SLIDING_WINDOW);
  EXPECT_EQ(gs.sliding_window, 128);
  ASSERT_VATTN_OK(vattn_kv_cache_group_spec(c.h, 3, &gs));
  EXPECT_EQ(gs.mla_fp8_ds, 1);

  DLTensor m = c.tensor(3);
  ASSERT_EQ(m.ndim, 3);
  EXPECT_EQ(m.shape[0], 3);
  EXPECT_EQ(m.shape[1], 16);
  EXPECT_EQ(m.shape[2], 576);
  EXPECT_EQ(m.strides[0], 16 * 576);
  EXPECT_EQ(m.strides[1], 576);
  EXPECT_EQ(m.strides[2], 1);
  EXPECT_EQ(m.dtype.code, kDLBfloat);
  DLTensor ds = c.tensor(5);
  ASSERT_EQ(ds.ndim, 3);
  EXPECT_EQ(ds.shape[2], 656);
  EXPECT_EQ(ds.dtype.code, kDLUInt);
  EXPECT_EQ(ds.dtype.bits, 8);
  DLTensor f8 = c.tensor(6);
  EXPECT_EQ(f8.dtype.code, kDLUInt);
  EXPECT_EQ(f8.dtype.bits, 8);
  // Bytes: 3 full f16 (2*16*2*8*2 = 1024) + sliding 1024 + MLA 16*576*2 + ds 16*656 + fp8 512.
  EXPECT_EQ(c.info().total_bytes, 3 * (4 * 1024 + 18432 + 10496 + 512));
}

TEST(KvCacheCreate, BudgetPaddingEncoderOnlyAndNoZeroFill) {
  vattn_kv_cache_spec_t a = spec(4, 2, 8, VATTN_DTYPE_FLOAT32);  // page 512
  a.page_size_padded = 600;
  vattn_kv_cache_spec_t e = spec(4, 2, 8, VATTN_DTYPE_FLOAT32, VATTN_KV_SPEC_ENCODER_ONLY);
  const vattn_kv_cache_spec_t specs[3] = {a, e, spec(4, 2, 8, VATTN_DTYPE_FLOAT32)};
  vattn_kv_cache_options_t o = cpu_opts(0);
  o.memory_budget_bytes = 1112 * 7 + 100;  // 600 + 512 per block
  o.zero_fill = 0;
  Cache c;
  ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, specs, nullptr, 3, &o));
  int64_t nb = -1;
  ASSERT_VATTN_OK(vattn_kv_cache_num_blocks_for_budget(specs, nullptr, 3, o.memory_budget_bytes, &nb));
  EXPECT_EQ(nb, 7);
  EXPECT_EQ(c.info().num_blocks, 7);
  EXPECT_EQ(c.info().total_bytes, 7 * 1112);
  EXPECT_EQ(c.info().num_groups, 3);
  DLTensor t = c.tensor(1);  // encoder-only: no cache
  EXPECT_EQ(t.data, nullptr);
  EXPECT_EQ(t.ndim, 5);
  EXPECT_EQ(t.shape[1], 0);
  DLTensor p = c.tensor(0);  // padded page: data compact at the start
  EXPECT_NE(p.data, nullptr);
  EXPECT_EQ(p.strides[0], 7 * 64);
}

// AddressSanitizer aborts on an allocation this large instead of throwing.
#if defined(__SANITIZE_ADDRESS__)
#define VT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VT_ASAN 1
#endif
#endif

TEST(KvCacheCreate, HugeHostAllocationIsOutOfMemory) {
#ifdef VT_ASAN
  GTEST_SKIP() << "AddressSanitizer aborts on huge allocations";
#endif
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);  // 65536-byte pages
  vattn_kv_cache_options_t o = cpu_opts(INT64_C(1) << 40);  // 2^56 bytes
  vattn_kv_cache_t *h = reinterpret_cast<vattn_kv_cache_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, &s, nullptr, 1, &o), VATTN_ERR_OUT_OF_MEMORY,
                   "host memory");
  EXPECT_EQ(h, nullptr);
}

TEST(KvCacheCreate, CudaNeedsADevice) {
  int32_t n = -1;
  ASSERT_VATTN_OK(vattn_cuda_device_count(&n));
  vattn_kv_cache_spec_t s = spec(16, 2, 64, VATTN_DTYPE_FLOAT16);
  vattn_kv_cache_options_t o = cpu_opts(4);
  o.device_type = kDLCUDA;
  if (n == 0) {
    vattn_kv_cache_t *h = reinterpret_cast<vattn_kv_cache_t *>(0x1);
    vattn_status_t st = vattn_kv_cache_create(&h, &s, nullptr, 1, &o);
    EXPECT_EQ(st, VATTN_ERR_NO_DEVICE) << vattn_last_error_message();
    EXPECT_EQ(h, nullptr);
    return;
  }
  Cache c;
  ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, &s, nullptr, 1, &o));
  EXPECT_EQ(c.info().device_type, kDLCUDA);
  EXPECT_EQ(c.info().total_bytes, 4 * 2 * 16 * 2 * 64 * 2);
  DLTensor t = c.tensor(0);
  EXPECT_EQ(t.device.device_type, kDLCUDA);
  EXPECT_NE(t.data, nullptr);
  o.device_id = n;  // one past the last device
  vattn_kv_cache_t *h = nullptr;
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, &s, nullptr, 1, &o), VATTN_ERR_NO_DEVICE, "device");
}

// ---- create_from_tensors -------------------------------------------------------

TEST(KvCacheWrap, DetectsLayoutAndKeepsCallerMemory) {
  std::mt19937_64 g(vt::test_seed());
  const int64_t nb = 3, bs = 4, H = 2, D = 8;
  const vattn_kv_cache_spec_t s = spec(4, 2, 8, VATTN_DTYPE_FLOAT32);
  const vattn_kv_cache_spec_t specs[3] = {s, s, s};
  const int32_t share[3] = {-1, -1, 1};
  // HND: physical [2, nb, H, bs, D].
  const std::vector<int64_t> hnd = {nb * H * bs * D, H * bs * D, D, bs * D, 1};
  for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND}) {
    std::vector<vt::HostTensor> ts;
    for (int i = 0; i < 2; ++i) {
      ts.emplace_back(std::vector<int64_t>{2, nb, bs, H, D}, vt::dl_f32(),
                      layout == VATTN_LAYOUT_HND ? hnd : std::vector<int64_t>{});
      for (auto &b : ts.back().bytes) b = static_cast<unsigned char>(g());
    }
    const DLTensor *tp[3] = {ts[0].dl(), ts[1].dl(), nullptr};
    Cache c;
    vattn_kv_cache_options_t o = cpu_opts(0, 1 - layout);  // the tensors win over opts.layout
    ASSERT_VATTN_OK(vattn_kv_cache_create_from_tensors(&c.h, specs, share, 3, tp, &o));
    vattn_kv_cache_info_t in = c.info();
    EXPECT_EQ(in.layout, layout);
    EXPECT_EQ(in.num_blocks, nb);
    EXPECT_EQ(in.total_bytes, 0);
    EXPECT_EQ(c.tensor(0).data, ts[0].t.data);
    EXPECT_EQ(c.tensor(1).data, ts[1].t.data);
    EXPECT_EQ(c.tensor(2).data, ts[1].t.data);
    DLTensor v = c.tensor(1);
    for (int d = 0; d < 5; ++d) {
      EXPECT_EQ(v.shape[d], ts[1].shape[d]);
      EXPECT_EQ(v.strides[d], layout == VATTN_LAYOUT_HND ? hnd[d] : (d == 0 ? nb * bs * H * D : d == 1 ? bs * H * D : d == 2 ? H * D : d == 3 ? D : 1));
    }
  }
}

TEST(KvCacheWrap, MlaAndAmbiguousLayoutUsesDefault) {
  // block_size 1: NHD and HND strides coincide; MLA tensors fit both.
  const vattn_kv_cache_spec_t a = spec(1, 2, 8, VATTN_DTYPE_FLOAT16);
  const vattn_kv_cache_spec_t m = spec(4, 1, 576, VATTN_DTYPE_BFLOAT16, VATTN_KV_SPEC_MLA);
  const vattn_kv_cache_spec_t specs[2] = {a, m};
  vt::HostTensor t0({2, 5, 1, 2, 8}, vt::dl_f16());
  vt::HostTensor t1({5, 4, 576}, vt::dl_bf16());
  t0.bytes[3] = 9;  // not all zero
  const DLTensor *tp[2] = {t0.dl(), t1.dl()};
  for (int32_t pref : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND}) {
    Cache c;
    vattn_kv_cache_options_t o = cpu_opts(0, pref);
    ASSERT_VATTN_OK(vattn_kv_cache_create_from_tensors(&c.h, specs, nullptr, 2, tp, &o));
    EXPECT_EQ(c.info().layout, pref);
    EXPECT_EQ(c.info().num_groups, 2);
    EXPECT_EQ(c.tensor(1).ndim, 3);
    EXPECT_EQ(c.tensor(1).data, t1.t.data);
  }
}

}  // namespace

namespace {

TEST(KvCacheCreate, MlaIgnoresTheLayout) {
  vattn_kv_cache_spec_t m = spec(8, 1, 576, VATTN_DTYPE_BFLOAT16, VATTN_KV_SPEC_MLA);
  const vattn_kv_cache_spec_t specs[2] = {m, spec(8, 2, 16, VATTN_DTYPE_BFLOAT16)};
  Cache c;
  vattn_kv_cache_options_t o = cpu_opts(3, VATTN_LAYOUT_HND);
  ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, specs, nullptr, 2, &o));
  DLTensor t = c.tensor(0);
  ASSERT_EQ(t.ndim, 3);
  EXPECT_EQ(t.strides[0], 8 * 576);
  EXPECT_EQ(t.strides[1], 576);
  EXPECT_EQ(t.strides[2], 1);
  DLTensor a = c.tensor(1);  // the attention layer is HND: head stride = block_size * head_size
  EXPECT_EQ(a.strides[3], 8 * 16);
  EXPECT_EQ(a.strides[2], 16);
}

TEST(KvCacheWrap, EncoderOnlyAndFp8DsMlaLayers) {
  vattn_kv_cache_spec_t ds = spec(4, 1, 576, VATTN_DTYPE_UINT8, VATTN_KV_SPEC_MLA);
  ds.mla_fp8_ds = 1;
  const vattn_kv_cache_spec_t specs[3] = {ds, spec(4, 2, 8, VATTN_DTYPE_FLOAT16, VATTN_KV_SPEC_ENCODER_ONLY),
                                          spec(4, 2, 8, VATTN_DTYPE_FP8_E5M2)};
  vt::HostTensor t0({6, 4, 656}, vt::dl_u8());
  vt::HostTensor t2({2, 6, 4, 2, 8}, vt::dl_u8());
  t0.bytes[5] = 1;
  vt::HostTensor extra({2, 6, 4, 2, 8}, vt::dl_f16());
  vattn_kv_cache_options_t o = cpu_opts(0);
  {
    const DLTensor *tp[3] = {t0.dl(), nullptr, t2.dl()};
    Cache c;
    ASSERT_VATTN_OK(vattn_kv_cache_create_from_tensors(&c.h, specs, nullptr, 3, tp, &o));
    EXPECT_EQ(c.info().num_blocks, 6);
    EXPECT_EQ(c.tensor(1).data, nullptr);
    EXPECT_EQ(c.tensor(1).shape[1], 0);
    EXPECT_EQ(c.tensor(0).shape[2], 656);
  }
  // A tensor for the encoder-only layer is refused.
  const DLTensor *tp[3] = {t0.dl(), extra.dl(), t2.dl()};
  vattn_kv_cache_t *h = reinterpret_cast<vattn_kv_cache_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_kv_cache_create_from_tensors(&h, specs, nullptr, 3, tp, &o), VATTN_ERR_INVALID_ARGUMENT,
                   "ENCODER_ONLY");
  EXPECT_EQ(h, nullptr);
  // fp8_ds_mla needs 656-byte entries, not head_size 576.
  vt::HostTensor wrong({6, 4, 576}, vt::dl_u8());
  const DLTensor *tw[3] = {wrong.dl(), nullptr, t2.dl()};
  h = reinterpret_cast<vattn_kv_cache_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_kv_cache_create_from_tensors(&h, specs, nullptr, 3, tw, &o), VATTN_ERR_INVALID_ARGUMENT,
                   "656");
  EXPECT_EQ(h, nullptr);
}

}  // namespace
