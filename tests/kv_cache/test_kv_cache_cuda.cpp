// Header section 5 on a GPU (skipped when vattn_cuda_device_count() is 0):
// CUDA caches are zero-filled, hold what is swapped in, and can be wrapped.
// Device memory is read back with vattn_swap_blocks into CPU caches (device
// to pageable host copies complete before the call returns).
#include <cstring>
#include <random>
#include <vector>

#include "test_util.h"

namespace {

int32_t gpus() {
  int32_t n = 0;
  EXPECT_EQ(vattn_cuda_device_count(&n), VATTN_OK);
  return n;
}

struct Cache {
  vattn_kv_cache_t *h = nullptr;
  ~Cache() { vattn_kv_cache_destroy(h); }
  DLTensor tensor() const {
    DLTensor t;
    EXPECT_EQ(vattn_kv_cache_layer_tensor(h, 0, &t), VATTN_OK) << vattn_last_error_message();
    return t;
  }
};

vattn_kv_cache_spec_t f16_spec() {
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  s.block_size = 16;
  s.num_kv_heads = 2;
  s.head_size = 64;
  s.dtype = VATTN_DTYPE_FLOAT16;
  return s;
}

void make(Cache *c, int32_t device_type, int32_t layout, int64_t nb, int32_t zero_fill = 1) {
  const vattn_kv_cache_spec_t s = f16_spec();
  vattn_kv_cache_options_t o;
  vattn_kv_cache_options_init(&o);
  o.device_type = device_type;
  o.layout = layout;
  o.num_blocks = nb;
  o.zero_fill = zero_fill;
  ASSERT_EQ(vattn_kv_cache_create(&c->h, &s, nullptr, 1, &o), VATTN_OK) << vattn_last_error_message();
}

uint16_t &el(const DLTensor &t, int64_t kv, int64_t b, int64_t s, int64_t h, int64_t d) {
  const int64_t off = kv * t.strides[0] + b * t.strides[1] + s * t.strides[2] + h * t.strides[3] + d * t.strides[4];
  return static_cast<uint16_t *>(t.data)[off];
}

template <class F>
void for_each(const DLTensor &t, F f) {
  for (int64_t kv = 0; kv < 2; ++kv)
    for (int64_t b = 0; b < t.shape[1]; ++b)
      for (int64_t s = 0; s < t.shape[2]; ++s)
        for (int64_t h = 0; h < t.shape[3]; ++h)
          for (int64_t d = 0; d < t.shape[4]; ++d) f(kv, b, s, h, d);
}

TEST(KvCacheCuda, ZeroFillAndRoundTrip) {
  if (gpus() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 g(vt::test_seed());
  const int64_t nb = 6;
  for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND}) {
    Cache dev, a, b;
    make(&dev, kDLCUDA, layout, nb);
    make(&a, kDLCPU, layout, nb);
    make(&b, kDLCPU, layout, nb);
    vattn_kv_cache_info_t in;
    std::memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    ASSERT_VATTN_OK(vattn_kv_cache_get_info(dev.h, &in));
    EXPECT_EQ(in.device_type, kDLCUDA);
    EXPECT_EQ(in.layout, layout);
    EXPECT_EQ(in.total_bytes, nb * 2 * 16 * 2 * 64 * 2);
    DLTensor td = dev.tensor(), ta = a.tensor(), tb = b.tensor();
    EXPECT_EQ(td.device.device_type, kDLCUDA);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(td.data) % 256, 0u);
    for (int d = 0; d < 5; ++d) EXPECT_EQ(td.strides[d], ta.strides[d]);

    // Random host data everywhere; the fresh GPU cache must read back as zeros.
    for_each(ta, [&](auto... i) { el(ta, i...) = static_cast<uint16_t>(1 + g() % 60000); });
    for_each(tb, [&](auto... i) { el(tb, i...) = static_cast<uint16_t>(1 + g() % 60000); });
    std::vector<int64_t> ident;
    for (int64_t i = 0; i < nb; ++i) {
      ident.push_back(i);
      ident.push_back(i);
    }
    ASSERT_VATTN_OK(vattn_swap_blocks(&td, &tb, ident.data(), nb, nullptr));
    size_t nonzero = 0;
    for_each(tb, [&](auto... i) { nonzero += el(tb, i...) != 0; });
    EXPECT_EQ(nonzero, 0u) << "zero_fill left " << nonzero << " non-zero elements";

    // a --(block i -> perm[i])--> GPU --(identity)--> b: b's block perm[i] is a's block i.
    std::vector<int64_t> perm = {3, 0, 5, 1, 4, 2}, pairs;
    for (int64_t i = 0; i < nb; ++i) {
      pairs.push_back(i);
      pairs.push_back(perm[i]);
    }
    ASSERT_VATTN_OK(vattn_swap_blocks(&ta, &td, pairs.data(), nb, nullptr));
    ASSERT_VATTN_OK(vattn_swap_blocks(&td, &tb, ident.data(), nb, nullptr));
    for (int64_t i = 0; i < nb; ++i)
      for_each(ta, [&](int64_t kv, int64_t blk, int64_t s, int64_t h, int64_t d) {
        if (blk == i) ASSERT_EQ(el(tb, kv, perm[i], s, h, d), el(ta, kv, i, s, h, d));
      });
  }
}

TEST(KvCacheCuda, NoZeroFillBudgetAndWrap) {
  if (gpus() == 0) GTEST_SKIP() << "no CUDA device";
  Cache dev;
  make(&dev, kDLCUDA, VATTN_LAYOUT_HND, 4, /*zero_fill=*/0);
  DLTensor t = dev.tensor();
  ASSERT_NE(t.data, nullptr);
  // Budget path on the GPU: 8 pages of 8192 bytes.
  const vattn_kv_cache_spec_t s = f16_spec();
  vattn_kv_cache_options_t o;
  vattn_kv_cache_options_init(&o);
  o.device_type = kDLCUDA;
  o.memory_budget_bytes = 8 * 8192 + 100;
  {
    Cache c;
    ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, &s, nullptr, 1, &o));
    vattn_kv_cache_info_t in;
    std::memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    ASSERT_VATTN_OK(vattn_kv_cache_get_info(c.h, &in));
    EXPECT_EQ(in.num_blocks, 8);
  }
  // Wrapping device memory: the layout is read from the strides.
  o.memory_budget_bytes = 0;
  o.layout = VATTN_LAYOUT_NHD;
  const DLTensor *tp[1] = {&t};
  Cache w;
  ASSERT_VATTN_OK(vattn_kv_cache_create_from_tensors(&w.h, &s, nullptr, 1, tp, &o));
  vattn_kv_cache_info_t in;
  std::memset(&in, 0, sizeof in);
  in.struct_size = sizeof in;
  ASSERT_VATTN_OK(vattn_kv_cache_get_info(w.h, &in));
  EXPECT_EQ(in.layout, VATTN_LAYOUT_HND);
  EXPECT_EQ(in.total_bytes, 0);
  EXPECT_EQ(w.tensor().data, t.data);
  // A block size the default CUDA backend does not support.
  const vattn_backend_t *cb = nullptr;
  ASSERT_VATTN_OK(vattn_backend_find("CUDA", &cb));
  vattn_backend_info_t bi;
  std::memset(&bi, 0, sizeof bi);
  bi.struct_size = sizeof bi;
  ASSERT_VATTN_OK(vattn_backend_get_info(cb, &bi));
  if (bi.block_size_multiple > 1) {
    vattn_kv_cache_spec_t odd = s;
    odd.block_size = bi.block_size_multiple + 1;
    vattn_kv_cache_options_t oo = o;
    oo.num_blocks = 2;
    oo.layout = -1;
    vattn_kv_cache_t *bad = reinterpret_cast<vattn_kv_cache_t *>(0x1);
    EXPECT_VATTN_ERR(vattn_kv_cache_create(&bad, &odd, nullptr, 1, &oo), VATTN_ERR_UNSUPPORTED, "block_size");
    EXPECT_EQ(bad, nullptr);
  }
  // A device that does not exist.
  o.device_id = gpus();
  o.num_blocks = 2;
  vattn_kv_cache_t *h = reinterpret_cast<vattn_kv_cache_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, &s, nullptr, 1, &o), VATTN_ERR_NO_DEVICE, "device");
  EXPECT_EQ(h, nullptr);
}

TEST(KvCacheCuda, HugeDeviceAllocationIsOutOfMemory) {
  if (gpus() == 0) GTEST_SKIP() << "no CUDA device";
  const vattn_kv_cache_spec_t s = f16_spec();  // 8192-byte pages
  vattn_kv_cache_options_t o;
  vattn_kv_cache_options_init(&o);
  o.device_type = kDLCUDA;
  o.num_blocks = INT64_C(1) << 34;  // 128 TiB
  vattn_kv_cache_t *h = reinterpret_cast<vattn_kv_cache_t *>(0x1);
  EXPECT_VATTN_ERR(vattn_kv_cache_create(&h, &s, nullptr, 1, &o), VATTN_ERR_OUT_OF_MEMORY, "device memory");
  EXPECT_EQ(h, nullptr);
  // The failure is not sticky: the next allocation works.
  o.num_blocks = 2;
  Cache c;
  ASSERT_VATTN_OK(vattn_kv_cache_create(&c.h, &s, nullptr, 1, &o));
}

}  // namespace
