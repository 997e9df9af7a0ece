// Header section 12 (block operations) over caches from section 5:
// vattn_copy_blocks / vattn_swap_blocks on CPU caches in NHD and HND
// layouts, checked in logical coordinates against a reference copy.
#include <cstring>
#include <random>
#include <vector>

#include "test_util.h"

namespace {

struct Cache {
  vattn_kv_cache_t *h = nullptr;
  ~Cache() { vattn_kv_cache_destroy(h); }
};

// Creates `layers` float32 layers (block 4, 2 heads, head 8) of nb blocks.
void make(Cache *c, size_t layers, int64_t nb, int32_t layout) {
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  s.block_size = 4;
  s.num_kv_heads = 2;
  s.head_size = 8;
  s.dtype = VATTN_DTYPE_FLOAT32;
  std::vector<vattn_kv_cache_spec_t> specs(layers, s);
  vattn_kv_cache_options_t o;
  vattn_kv_cache_options_init(&o);
  o.num_blocks = nb;
  o.layout = layout;
  ASSERT_EQ(vattn_kv_cache_create(&c->h, specs.data(), nullptr, layers, &o), VATTN_OK)
      << vattn_last_error_message();
}

DLTensor view(const Cache &c, size_t layer) {
  DLTensor t;
  EXPECT_EQ(vattn_kv_cache_layer_tensor(c.h, layer, &t), VATTN_OK);
  return t;
}

float &el(const DLTensor &t, int64_t kv, int64_t b, int64_t s, int64_t h, int64_t d) {
  const int64_t off = kv * t.strides[0] + b * t.strides[1] + s * t.strides[2] + h * t.strides[3] + d * t.strides[4];
  return static_cast<float *>(t.data)[off];
}

// Logical copy of the whole tensor, as [kv][b][s][h][d].
std::vector<float> logical(const DLTensor &t) {
  std::vector<float> v;
  for (int64_t kv = 0; kv < 2; ++kv)
    for (int64_t b = 0; b < t.shape[1]; ++b)
      for (int64_t s = 0; s < t.shape[2]; ++s)
        for (int64_t h = 0; h < t.shape[3]; ++h)
          for (int64_t d = 0; d < t.shape[4]; ++d) v.push_back(el(t, kv, b, s, h, d));
  return v;
}

void fill(const DLTensor &t, std::mt19937_64 &g) {
  for (int64_t kv = 0; kv < 2; ++kv)
    for (int64_t b = 0; b < t.shape[1]; ++b)
      for (int64_t s = 0; s < t.shape[2]; ++s)
        for (int64_t h = 0; h < t.shape[3]; ++h)
          for (int64_t d = 0; d < t.shape[4]; ++d) el(t, kv, b, s, h, d) = vt::uniform(g, -3.f, 3.f);
}

// Reference: copies logical block sb of `src` into block db of `dst` (both
// logical arrays of the same shape).
void ref_copy(std::vector<float> &dst, const std::vector<float> &src, int64_t nb, int64_t per_block,
              int64_t sb, int64_t db) {
  for (int64_t kv = 0; kv < 2; ++kv)
    for (int64_t i = 0; i < per_block; ++i)
      dst[(kv * nb + db) * per_block + i] = src[(kv * nb + sb) * per_block + i];
}

TEST(BlockOps, CopyBlocksThroughCacheViews) {
  std::mt19937_64 g(vt::test_seed());
  const int64_t nb = 6, per_block = 4 * 2 * 8;
  for (int32_t layout : {VATTN_LAYOUT_NHD, VATTN_LAYOUT_HND}) {
    Cache c;
    make(&c, 3, nb, layout);
    std::vector<DLTensor> ts;
    std::vector<std::vector<float>> want;
    for (size_t l = 0; l < 3; ++l) {
      ts.push_back(view(c, l));
      fill(ts.back(), g);
      want.push_back(logical(ts.back()));
    }
    std::vector<int64_t> pairs;
    for (int k = 0; k < 5; ++k) {
      pairs.push_back(static_cast<int64_t>(g() % nb));
      pairs.push_back(static_cast<int64_t>(g() % nb));
    }
    for (auto &w : want)
      for (size_t k = 0; k < pairs.size() / 2; ++k) {
        const std::vector<float> before = w;
        ref_copy(w, before, nb, per_block, pairs[2 * k], pairs[2 * k + 1]);
      }
    std::vector<DLTensor *> ptrs;
    for (auto &t : ts) ptrs.push_back(&t);
    ASSERT_VATTN_OK(vattn_copy_blocks(ptrs.data(), ptrs.size(), pairs.data(), pairs.size() / 2, nullptr));
    for (size_t l = 0; l < 3; ++l) EXPECT_TRUE(logical(ts[l]) == want[l]) << "layer " << l;
  }
}

TEST(BlockOps, SwapBlocksBetweenLayouts) {
  std::mt19937_64 g(vt::test_seed());
  const int64_t nb = 5, per_block = 4 * 2 * 8;
  Cache a, b;
  make(&a, 1, nb, VATTN_LAYOUT_NHD);
  make(&b, 1, nb, VATTN_LAYOUT_HND);
  DLTensor ta = view(a, 0), tb = view(b, 0);
  fill(ta, g);
  fill(tb, g);
  const std::vector<float> la = logical(ta);
  std::vector<float> want = logical(tb);
  const int64_t pairs[6] = {0, 4, 3, 1, 2, 2};
  for (int k = 0; k < 3; ++k) ref_copy(want, la, nb, per_block, pairs[2 * k], pairs[2 * k + 1]);
  ASSERT_VATTN_OK(vattn_swap_blocks(&ta, &tb, pairs, 3, nullptr));
  EXPECT_TRUE(logical(tb) == want);
  EXPECT_TRUE(logical(ta) == la);
}

TEST(BlockOps, BadArgumentsLeaveCachesUnchanged) {
  std::mt19937_64 g(vt::test_seed());
  Cache a, b;
  make(&a, 1, 4, VATTN_LAYOUT_NHD);
  make(&b, 1, 3, VATTN_LAYOUT_NHD);
  DLTensor ta = view(a, 0), tb = view(b, 0);
  fill(ta, g);
  fill(tb, g);
  const std::vector<float> la = logical(ta), lb = logical(tb);
  DLTensor *ptrs[2] = {&ta, &tb};
  const int64_t ok[2] = {0, 1}, bad[4] = {0, 1, 2, 3};  // block 3 exists only in a
  EXPECT_VATTN_ERR(vattn_copy_blocks(nullptr, 1, ok, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "kv_caches");
  EXPECT_VATTN_ERR(vattn_copy_blocks(ptrs, 0, ok, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "num_layers");
  EXPECT_VATTN_ERR(vattn_copy_blocks(ptrs, 2, nullptr, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "block_mapping");
  EXPECT_VATTN_ERR(vattn_copy_blocks(ptrs, 2, bad, 2, nullptr), VATTN_ERR_INVALID_ARGUMENT, "block_mapping");
  EXPECT_NE(std::string(vattn_last_error_message()).find("kv_caches[1]"), std::string::npos);
  EXPECT_VATTN_ERR(vattn_swap_blocks(&ta, &tb, ok, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "'dst'");
  EXPECT_VATTN_ERR(vattn_swap_blocks(nullptr, &tb, ok, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "src");
  const int64_t neg[2] = {-1, 0};
  EXPECT_VATTN_ERR(vattn_swap_blocks(&ta, &ta, neg, 1, nullptr), VATTN_ERR_INVALID_ARGUMENT, "block_mapping");
  EXPECT_TRUE(logical(ta) == la);
  EXPECT_TRUE(logical(tb) == lb);
}

}  // namespace
