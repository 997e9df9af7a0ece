// test_block_copy.cpp -- vattn::host_copy_blocks / host_swap_blocks against
// an element-by-element reference that walks the logical indices through
// the tensors' strides and copies bytes into a snapshot of the buffer.
// The whole buffer (including padding between strided elements) is then
// compared byte for byte, so both "copied the right elements" and "touched
// nothing else" are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kv_cache/block_copy.h"
#include "test_util.h"

namespace {

using vt::HostTensor;

// Strides for `shape` stored in physical order `order` (physical dim i is
// logical dim order[i]), with `pad[i]` extra elements added to physical dim
// i's extent (pad simulates row / page padding).
std::vector<int64_t> strides_for(const std::vector<int64_t> &shape, const std::vector<int> &order,
                                 const std::vector<int64_t> &pad = {}) {
  size_t n = shape.size();
  std::vector<int64_t> strides(n);
  int64_t s = 1;
  for (size_t k = n; k-- > 0;) {
    strides[order[k]] = s;
    s *= shape[order[k]] + (pad.empty() ? 0 : pad[k]);
  }
  return strides;
}

void fill_random(HostTensor &t, std::mt19937_64 &g) {
  for (auto &b : t.bytes) b = static_cast<unsigned char>(g());
}

int64_t stride_of(const DLTensor &t, int i) {
  if (t.strides) return t.strides[i];
  int64_t s = 1;
  for (int j = t.ndim - 1; j > i; --j) s *= t.shape[j];
  return s;
}

// Reference: copies block sb of (sbuf, st) into block db of (dbuf, dt),
// element by element through the logical indices.
void ref_copy(std::vector<unsigned char> &dbuf, const DLTensor &dt,
              const std::vector<unsigned char> &sbuf, const DLTensor &st, int64_t sb, int64_t db) {
  const size_t esz = st.dtype.bits / 8;
  const bool mla = st.ndim == 3;
  const int64_t halves = mla ? 1 : 2;
  const int first = mla ? 1 : 2;  // first dim inside a block
  const int bdim = mla ? 0 : 1;
  const int64_t e0 = mla ? 1 : st.shape[2], e1 = st.shape[first + (mla ? 0 : 1)],
                e2 = st.shape[first + (mla ? 1 : 2)];
  auto off = [&](const DLTensor &t, int64_t h, int64_t b, int64_t i, int64_t j, int64_t k) {
    int64_t o = b * stride_of(t, bdim);
    if (mla) {
      o += j * stride_of(t, 1) + k * stride_of(t, 2);
    } else {
      o += h * stride_of(t, 0) + i * stride_of(t, 2) + j * stride_of(t, 3) + k * stride_of(t, 4);
    }
    return static_cast<size_t>(o) * esz;
  };
  std::vector<unsigned char> tmp(esz);
  for (int64_t h = 0; h < halves; ++h)
    for (int64_t i = 0; i < e0; ++i)
      for (int64_t j = 0; j < e1; ++j)
        for (int64_t k = 0; k < e2; ++k) {
          std::memcpy(tmp.data(), &sbuf[off(st, h, sb, i, j, k)], esz);
          std::memcpy(&dbuf[off(dt, h, db, i, j, k)], tmp.data(), esz);
        }
}

// One test cache: shape, layout, dtype.
HostTensor make_cache(const std::vector<int64_t> &shape, DLDataType dt, const std::vector<int> &order,
                      const std::vector<int64_t> &pad, std::mt19937_64 &g) {
  HostTensor t(shape, dt, strides_for(shape, order, pad));
  fill_random(t, g);
  return t;
}

std::vector<int64_t> random_pairs(std::mt19937_64 &g, int64_t nb, size_t n) {
  std::vector<int64_t> p;
  for (size_t k = 0; k < n; ++k) {
    p.push_back(static_cast<int64_t>(g() % nb));
    p.push_back(static_cast<int64_t>(g() % nb));
  }
  return p;
}

TEST(HostCopyBlocks, EveryLayoutMatchesReference) {
  std::mt19937_64 g(vt::test_seed());
  const int64_t nb = 7, bs = 4, H = 3, D = 8;
  std::vector<HostTensor> caches;
  // NHD compact float32, HND compact bf16, NHD with padded head rows uint8,
  // a fully permuted layout float16, MLA compact and MLA padded.
  caches.push_back(make_cache({2, nb, bs, H, D}, vt::dl_f32(), {0, 1, 2, 3, 4}, {}, g));
  caches.push_back(make_cache({2, nb, bs, H, D}, vt::dl_bf16(), {0, 1, 3, 2, 4}, {}, g));
  caches.push_back(make_cache({2, nb, bs, H, D}, vt::dl_u8(), {0, 1, 2, 3, 4}, {0, 0, 1, 0, 3}, g));
  caches.push_back(make_cache({2, nb, bs, H, D}, vt::dl_f16(), {1, 4, 0, 3, 2}, {}, g));
  caches.push_back(make_cache({nb, bs, 16}, vt::dl_bf16(), {0, 1, 2}, {}, g));
  caches.push_back(make_cache({nb, bs, 16}, vt::dl_f32(), {0, 1, 2}, {1, 2, 5}, g));

  // Random pairs plus a chain (3 -> 5 then 5 -> 6: 6 must end as old 3) and
  // a self copy.
  std::vector<int64_t> pairs = random_pairs(g, nb, 4);
  for (int64_t v : {3, 5, 5, 6, 2, 2}) pairs.push_back(v);
  const size_t np = pairs.size() / 2;

  std::vector<std::vector<unsigned char>> expect;
  for (auto &c : caches) {
    std::vector<unsigned char> e = c.bytes;
    for (size_t k = 0; k < np; ++k) {
      std::vector<unsigned char> snapshot = e;  // the reference reads before writing
      ref_copy(e, c.t, snapshot, c.t, pairs[2 * k], pairs[2 * k + 1]);
    }
    expect.push_back(std::move(e));
  }
  std::vector<DLTensor *> ptrs;
  for (auto &c : caches) ptrs.push_back(c.dl());
  ASSERT_EQ(vattn::host_copy_blocks(ptrs.data(), ptrs.size(), pairs.data(), np), VATTN_OK)
      << vattn_last_error_message();
  for (size_t i = 0; i < caches.size(); ++i)
    EXPECT_TRUE(caches[i].bytes == expect[i]) << "cache " << i;
}

TEST(HostCopyBlocks, ChainIsSequential) {
  // Worked example: float32 NHD cache, 3 blocks of 1 token, 1 head, 1 dim.
  HostTensor c({2, 3, 1, 1, 1}, vt::dl_f32());
  float *v = c.as<float>();
  const float init[6] = {10, 11, 12, 20, 21, 22};  // K blocks 0..2, V blocks 0..2
  std::copy(init, init + 6, v);
  DLTensor *ptrs[1] = {c.dl()};
  const int64_t pairs[4] = {0, 1, 1, 2};  // 0 -> 1, then 1 (now old 0) -> 2
  ASSERT_EQ(vattn::host_copy_blocks(ptrs, 1, pairs, 2), VATTN_OK);
  const float want[6] = {10, 10, 10, 20, 20, 20};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(v[i], want[i]) << i;
}

TEST(HostCopyBlocks, ZeroPairsAndCudaHostAreFine) {
  std::mt19937_64 g(vt::test_seed());
  HostTensor c = make_cache({2, 3, 2, 2, 4}, vt::dl_f32(), {0, 1, 2, 3, 4}, {}, g);
  c.t.device = DLDevice{kDLCUDAHost, 0};
  auto before = c.bytes;
  DLTensor *ptrs[1] = {c.dl()};
  EXPECT_EQ(vattn::host_copy_blocks(ptrs, 1, nullptr, 0), VATTN_OK);
  EXPECT_TRUE(c.bytes == before);
  const int64_t pairs[2] = {2, 0};
  EXPECT_EQ(vattn::host_copy_blocks(ptrs, 1, pairs, 1), VATTN_OK);
  EXPECT_FALSE(c.bytes == before);
}

TEST(HostSwapBlocks, BetweenLayoutsMatchesReference) {
  std::mt19937_64 g(vt::test_seed());
  const int64_t nb = 6, bs = 3, H = 2, D = 8;
  struct Case {
    std::vector<int64_t> shape;
    DLDataType dt;
    std::vector<int> so, dor;
    std::vector<int64_t> dpad;
  };
  const Case cases[] = {
      {{2, nb, bs, H, D}, vt::dl_bf16(), {0, 1, 2, 3, 4}, {0, 1, 3, 2, 4}, {}},
      {{2, nb, bs, H, D}, vt::dl_f32(), {0, 1, 3, 2, 4}, {0, 1, 3, 2, 4}, {}},
      {{2, nb, bs, H, D}, vt::dl_u8(), {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}, {0, 0, 0, 0, 2}},
      {{nb, bs, 24}, vt::dl_f16(), {0, 1, 2}, {0, 1, 2}, {}},
  };
  for (const Case &cs : cases) {
    HostTensor src = make_cache(cs.shape, cs.dt, cs.so, {}, g);
    HostTensor dst = make_cache(cs.shape, cs.dt, cs.dor, cs.dpad, g);
    std::vector<int64_t> pairs = random_pairs(g, nb, 5);
    const auto src_before = src.bytes;
    std::vector<unsigned char> expect = dst.bytes;
    for (size_t k = 0; k < pairs.size() / 2; ++k)
      ref_copy(expect, dst.t, src.bytes, src.t, pairs[2 * k], pairs[2 * k + 1]);
    ASSERT_EQ(vattn::host_swap_blocks(src.dl(), dst.dl(), pairs.data(), pairs.size() / 2), VATTN_OK)
        << vattn_last_error_message();
    EXPECT_TRUE(dst.bytes == expect);
    EXPECT_TRUE(src.bytes == src_before);
  }
}

// ---- bad inputs: status, message naming the argument, nothing written -----

struct HostBlockCopyBad : ::testing::Test {
  std::mt19937_64 g{vt::test_seed()};
  HostTensor a = make_cache({2, 4, 2, 2, 4}, vt::dl_f32(), {0, 1, 2, 3, 4}, {}, g);
  HostTensor b = make_cache({2, 4, 2, 2, 4}, vt::dl_f32(), {0, 1, 3, 2, 4}, {}, g);
  std::vector<unsigned char> a0 = a.bytes, b0 = b.bytes;
  void expect_unchanged() {
    EXPECT_TRUE(a.bytes == a0);
    EXPECT_TRUE(b.bytes == b0);
  }
};

#define EXPECT_FAIL(expr, needle)                                                         \
  do {                                                                                    \
    EXPECT_EQ((expr), VATTN_ERR_INVALID_ARGUMENT);                                        \
    EXPECT_NE(std::string(vattn_last_error_message()).find(needle), std::string::npos)  \
        << vattn_last_error_message();                                                    \
  } while (0)

TEST_F(HostBlockCopyBad, CopyRejectsBadArguments) {
  DLTensor *ptrs[2] = {a.dl(), b.dl()};
  const int64_t ok[2] = {0, 1};
  EXPECT_FAIL(vattn::host_copy_blocks(nullptr, 1, ok, 1), "'kv_caches'");
  EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, nullptr, 1), "'block_mapping'");
  EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, ok, SIZE_MAX / 2), "'num_pairs'");
  // Valid first pair, bad second pair: nothing may be copied.
  for (int64_t badv : {int64_t(-1), int64_t(4), INT64_MAX, INT64_MIN}) {
    const int64_t p1[4] = {0, 1, 2, badv};
    EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, p1, 2), "pair 1");
    const int64_t p2[4] = {0, 1, badv, 2};
    EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, p2, 2), "block_mapping");
  }
  expect_unchanged();

  DLTensor *with_null[2] = {a.dl(), nullptr};
  EXPECT_FAIL(vattn::host_copy_blocks(with_null, 2, ok, 1), "kv_caches[1]");
  expect_unchanged();
}

TEST_F(HostBlockCopyBad, CopyRejectsBadTensors) {
  const int64_t ok[2] = {0, 1};
  DLTensor bad = b.t;
  DLTensor *ptrs[2] = {a.dl(), &bad};
  int64_t shape4[4] = {2, 4, 2, 8};
  bad.ndim = 4;
  bad.shape = shape4;
  bad.strides = nullptr;
  EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, ok, 1), "kv_caches[1]");
  bad = b.t;
  int64_t shape3k[5] = {3, 4, 2, 2, 4};
  bad.shape = shape3k;
  bad.strides = nullptr;
  EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, ok, 1), "dim 0 must be 2");
  bad = b.t;
  bad.device = DLDevice{kDLCUDA, 0};
  EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, ok, 1), "kv_caches[1]");
  bad = b.t;
  int64_t neg[5] = {64, 16, 4, -8, 1};
  bad.strides = neg;
  EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, ok, 1), "strides[3]");
  bad = b.t;
  int64_t negshape[5] = {2, -4, 2, 2, 4};
  bad.shape = negshape;
  EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, ok, 1), "kv_caches[1]");
  bad = b.t;
  bad.data = nullptr;
  EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, ok, 1), "data is NULL");
  // A second layer with fewer blocks: id 3 is fine for layer 0 only.
  bad = b.t;
  int64_t small[5] = {2, 3, 2, 2, 4};
  bad.shape = small;
  const int64_t p[2] = {3, 0};
  EXPECT_FAIL(vattn::host_copy_blocks(ptrs, 2, p, 1), "kv_caches[1]");
  expect_unchanged();
}

TEST_F(HostBlockCopyBad, SwapRejectsBadArguments) {
  const int64_t ok[2] = {0, 1};
  EXPECT_FAIL(vattn::host_swap_blocks(nullptr, b.dl(), ok, 1), "'src'");
  EXPECT_FAIL(vattn::host_swap_blocks(a.dl(), nullptr, ok, 1), "'dst'");
  EXPECT_FAIL(vattn::host_swap_blocks(a.dl(), b.dl(), nullptr, 1), "'block_mapping'");
  const int64_t out[4] = {0, 1, 0, 4};
  EXPECT_FAIL(vattn::host_swap_blocks(a.dl(), b.dl(), out, 2), "pair 1");
  const int64_t neg[2] = {-1, 0};
  EXPECT_FAIL(vattn::host_swap_blocks(a.dl(), b.dl(), neg, 1), "source block id -1");

  DLTensor d = b.t;
  d.dtype = vt::dl_bf16();
  EXPECT_FAIL(vattn::host_swap_blocks(a.dl(), &d, ok, 1), "dtype");
  d = b.t;
  int64_t other[5] = {2, 4, 2, 1, 4};
  d.shape = other;
  d.strides = nullptr;
  EXPECT_FAIL(vattn::host_swap_blocks(a.dl(), &d, ok, 1), "'dst': shape");
  d = b.t;
  d.device = DLDevice{kDLCUDA, 0};
  EXPECT_FAIL(vattn::host_swap_blocks(a.dl(), &d, ok, 1), "'dst'");
  d = b.t;
  d.byte_offset = 2;  // not a multiple of 4
  EXPECT_FAIL(vattn::host_swap_blocks(a.dl(), &d, ok, 1), "byte_offset");
  expect_unchanged();
}

}  // namespace
