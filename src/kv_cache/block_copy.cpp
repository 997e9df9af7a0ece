// block_copy.cpp -- host block copy/swap (see block_copy.h for the contract).
//
// A cache is described by its "block geometry": how many halves (K/V = 2,
// MLA = 1), the element strides of the half and block dims, and the shape
// and strides of one block sub-tensor (rank 3 for attention, rank 2 for MLA).
// A copy moves each (half, block) sub-tensor with the fastest loop its
// strides allow: one memmove when both sides are the same dense block, one
// memmove per innermost row when rows are contiguous, else per element.
#include "kv_cache/block_copy.h"

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace vattn {
namespace {

struct BlockGeom {
  int num_halves = 0;       // 2 (K, V) or 1 (MLA latent)
  int64_t num_blocks = 0;
  int64_t half_stride = 0;  // elements between K and V (rank 5 only)
  int64_t block_stride = 0; // elements between consecutive blocks
  int64_t shape[3] = {1, 1, 1};    // one block sub-tensor, padded to rank 3
  int64_t strides[3] = {0, 0, 0};  // its element strides
  size_t esz = 0;
  char *base = nullptr;
};

// Reads and validates one cache tensor.
vattn_status_t read_geom(const DLTensor *t, const std::string &name, BlockGeom *g) {
  VATTN_TRY(check_tensor_generic(t, name.c_str()));
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor '%s' is on device type %d: host block copy needs kDLCPU or kDLCUDAHost "
                "memory",
                name.c_str(), static_cast<int>(t->device.device_type));
  BlockGeom r;
  r.esz = dl_dtype_bytes(t->dtype);
  r.base = tensor_data(t);
  if (t->ndim == 5) {
    if (t->shape[0] != 2)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "tensor '%s': shape %s: dim 0 must be 2 (K and V) for a rank-5 cache "
                  "(2, num_blocks, block_size, num_kv_heads, head_size)",
                  name.c_str(), shape_string(t).c_str());
    r.num_halves = 2;
    r.half_stride = tensor_stride(t, 0);
    r.num_blocks = t->shape[1];
    r.block_stride = tensor_stride(t, 1);
    for (int i = 0; i < 3; ++i) {
      r.shape[i] = t->shape[2 + i];
      r.strides[i] = tensor_stride(t, 2 + i);
    }
  } else if (t->ndim == 3) {
    r.num_halves = 1;
    r.num_blocks = t->shape[0];
    r.block_stride = tensor_stride(t, 0);
    r.shape[0] = 1;
    r.strides[0] = 0;
    for (int i = 0; i < 2; ++i) {
      r.shape[1 + i] = t->shape[1 + i];
      r.strides[1 + i] = tensor_stride(t, 1 + i);
    }
  } else {
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor '%s': has %d dims %s, expected 5 (2, num_blocks, block_size, "
                "num_kv_heads, head_size) or 3 (MLA: num_blocks, block_size, head_size)",
                name.c_str(), t->ndim, shape_string(t).c_str());
  }
  *g = r;
  return VATTN_OK;
}

// True when the sub-tensor's elements fill a contiguous range (in some dim
// order): then it is numel * esz bytes starting at its base.
bool is_dense(const BlockGeom &g) {
  int idx[3] = {0, 1, 2};
  std::sort(idx, idx + 3, [&](int a, int b) { return g.strides[a] < g.strides[b]; });
  int64_t expect = 1;
  for (int k = 0; k < 3; ++k) {
    int i = idx[k];
    if (g.shape[i] == 1) continue;
    if (g.strides[i] != expect) return false;
    expect *= g.shape[i];
  }
  return true;
}

// Copies one block sub-tensor from s (geometry gs) to d (geometry gd).
// Shapes are equal (checked by the callers).  memmove: blocks may alias
// when a caller passes zero strides.
void copy_sub(char *d, const BlockGeom &gd, const char *s, const BlockGeom &gs) {
  const int64_t n0 = gs.shape[0], n1 = gs.shape[1], n2 = gs.shape[2];
  if (n0 == 0 || n1 == 0 || n2 == 0) return;
  const size_t esz = gs.esz;
  const bool same_strides = std::equal(gs.strides, gs.strides + 3, gd.strides);
  if (same_strides && is_dense(gs)) {
    std::memmove(d, s, static_cast<size_t>(n0 * n1 * n2) * esz);
    return;
  }
  const bool rows = (n2 == 1 || (gs.strides[2] == 1 && gd.strides[2] == 1));
  for (int64_t i = 0; i < n0; ++i) {
    for (int64_t j = 0; j < n1; ++j) {
      const char *sr = s + (i * gs.strides[0] + j * gs.strides[1]) * static_cast<int64_t>(esz);
      char *dr = d + (i * gd.strides[0] + j * gd.strides[1]) * static_cast<int64_t>(esz);
      if (rows) {
        std::memmove(dr, sr, static_cast<size_t>(n2) * esz);
      } else {
        for (int64_t k = 0; k < n2; ++k)
          std::memmove(dr + k * gd.strides[2] * static_cast<int64_t>(esz),
                       sr + k * gs.strides[2] * static_cast<int64_t>(esz), esz);
      }
    }
  }
}

// Copies block `sb` of s into block `db` of d (every half).
void copy_block(const BlockGeom &gd, int64_t db, const BlockGeom &gs, int64_t sb) {
  const int64_t esz = static_cast<int64_t>(gs.esz);
  for (int h = 0; h < gs.num_halves; ++h) {
    const char *s = gs.base + (h * gs.half_stride + sb * gs.block_stride) * esz;
    char *d = gd.base + (h * gd.half_stride + db * gd.block_stride) * esz;
    if (s == d && std::equal(gs.strides, gs.strides + 3, gd.strides)) continue;
    copy_sub(d, gd, s, gs);
  }
}

vattn_status_t check_pairs_ptr(const int64_t *pairs, size_t num_pairs) {
  if (num_pairs > 0 && pairs == nullptr)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'block_mapping' is NULL but num_pairs = %zu",
                num_pairs);
  if (num_pairs > SIZE_MAX / (2 * sizeof(int64_t)))
    return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'num_pairs' = %zu is too large", num_pairs);
  return VATTN_OK;
}

// Every id of every pair must be a block of a cache with `num_blocks` blocks.
vattn_status_t check_pair_ids(const int64_t *pairs, size_t num_pairs, int64_t num_blocks,
                              const char *cache_name) {
  for (size_t k = 0; k < num_pairs; ++k) {
    for (int side = 0; side < 2; ++side) {
      int64_t id = pairs[2 * k + side];
      if (id < 0 || id >= num_blocks)
        return fail(VATTN_ERR_INVALID_ARGUMENT,
                    "argument 'block_mapping': pair %zu = (%lld, %lld): %s block id %lld is out "
                    "of range [0, %lld) of '%s'",
                    k, static_cast<long long>(pairs[2 * k]), static_cast<long long>(pairs[2 * k + 1]),
                    side == 0 ? "source" : "destination", static_cast<long long>(id),
                    static_cast<long long>(num_blocks), cache_name);
    }
  }
  return VATTN_OK;
}

}  // namespace

vattn_status_t host_copy_blocks(DLTensor *const *caches, size_t n, const int64_t *pairs,
                                size_t num_pairs) {
  if (caches == nullptr) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'kv_caches' is NULL");
  VATTN_TRY(check_pairs_ptr(pairs, num_pairs));
  std::vector<BlockGeom> geoms(n);
  for (size_t i = 0; i < n; ++i) {
    std::string name = format("kv_caches[%zu]", i);
    VATTN_TRY(read_geom(caches[i], name, &geoms[i]));
    VATTN_TRY(check_pair_ids(pairs, num_pairs, geoms[i].num_blocks, name.c_str()));
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < num_pairs; ++k)
      copy_block(geoms[i], pairs[2 * k + 1], geoms[i], pairs[2 * k]);
  return VATTN_OK;
}

vattn_status_t host_swap_blocks(const DLTensor *src, DLTensor *dst, const int64_t *pairs,
                                size_t num_pairs) {
  BlockGeom gs, gd;
  VATTN_TRY(read_geom(src, "src", &gs));
  VATTN_TRY(read_geom(dst, "dst", &gd));
  if (!dl_dtype_equal(src->dtype, dst->dtype))
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'dst': dtype %s differs from src's %s",
                dl_dtype_name(dst->dtype), dl_dtype_name(src->dtype));
  bool same_shape = src->ndim == dst->ndim;
  for (int i = 0; same_shape && i < src->ndim; ++i) same_shape = src->shape[i] == dst->shape[i];
  if (!same_shape)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'dst': shape %s differs from src's %s",
                shape_string(dst).c_str(), shape_string(src).c_str());
  VATTN_TRY(check_pairs_ptr(pairs, num_pairs));
  VATTN_TRY(check_pair_ids(pairs, num_pairs, gs.num_blocks, "src"));
  for (size_t k = 0; k < num_pairs; ++k) copy_block(gd, pairs[2 * k + 1], gs, pairs[2 * k]);
  return VATTN_OK;
}

}  // namespace vattn
