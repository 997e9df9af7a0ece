// cache_kernels.cuh -- KV cache writes (reshape_and_cache_flash), the v1 slot
// mapping, and block copies.
//
// reshape_and_cache: one thread moves VEC consecutive elements of one
// (token, head) row of K or V: VEC = 8 gives 16-byte loads of 16-bit input
// (rows and strides aligned, checked by the host), VEC = 1 is the fallback
// for odd strides.  Work units are (token, head, chunk) in a grid-stride
// loop so the grid never depends on the batch (graph replay).
#pragma once

#include <type_traits>

#include "common.cuh"

namespace vattn {
namespace kern {

template <class T, int CACHE, int VEC>
__global__ void cache_write_kernel(CacheWriteParams p) {
  const int64_t num_tokens = p.num_tokens_dev ? static_cast<int64_t>(*p.num_tokens_dev) : p.num_tokens;
  const int chunks = p.head_size / VEC;
  const int64_t per_tok = static_cast<int64_t>(p.num_heads) * chunks;
  const int64_t total = num_tokens * per_tok;
  using CT = typename std::conditional<CACHE == kCacheAuto, T, uint8_t>::type;
  const float inv_k = 1.f / p.k_scale, inv_v = 1.f / p.v_scale;
  (void)inv_k;
  (void)inv_v;
  for (int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; u < total;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = u / per_tok;
    const int64_t rem = u - t * per_tok;
    const int h = static_cast<int>(rem / chunks);
    const int d0 = static_cast<int>(rem - static_cast<int64_t>(h) * chunks) * VEC;
    const int64_t slot = p.slot_mapping[t];
    if (slot < 0 || slot >= p.num_slots) continue;  // padding / out of range: never written
    const int64_t blk = slot / p.block_size, off = slot - blk * p.block_size;
    const T *ks = static_cast<const T *>(p.key) + t * p.k_stride_tok + h * p.k_stride_head + d0;
    const T *vs = static_cast<const T *>(p.value) + t * p.v_stride_tok + h * p.v_stride_head + d0;
    CT *kd = static_cast<CT *>(p.k_cache) + blk * p.kc_stride_block + off * p.kc_stride_tok +
             h * p.kc_stride_head + d0;
    CT *vd = static_cast<CT *>(p.v_cache) + blk * p.vc_stride_block + off * p.vc_stride_tok +
             h * p.vc_stride_head + d0;
    if constexpr (CACHE == kCacheAuto) {
      if constexpr (VEC == 8) {
        *reinterpret_cast<uint4 *>(kd) = *reinterpret_cast<const uint4 *>(ks);
        *reinterpret_cast<uint4 *>(vd) = *reinterpret_cast<const uint4 *>(vs);
      } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          kd[i] = ks[i];
          vd[i] = vs[i];
        }
      }
    } else {
      T kin[VEC], vin[VEC];
      if constexpr (VEC == 8) {
        *reinterpret_cast<uint4 *>(kin) = *reinterpret_cast<const uint4 *>(ks);
        *reinterpret_cast<uint4 *>(vin) = *reinterpret_cast<const uint4 *>(vs);
      } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          kin[i] = ks[i];
          vin[i] = vs[i];
        }
      }
      uint8_t ko[VEC], vo[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        // x / scale with IEEE division (not x * (1/scale)) to match the CPU.
        ko[i] = fp8_encode<CACHE>(Elem<T>::to_f(kin[i]) / p.k_scale);
        vo[i] = fp8_encode<CACHE>(Elem<T>::to_f(vin[i]) / p.v_scale);
      }
      if constexpr (VEC == 8) {
        *reinterpret_cast<uint2 *>(kd) = *reinterpret_cast<const uint2 *>(ko);
        *reinterpret_cast<uint2 *>(vd) = *reinterpret_cast<const uint2 *>(vo);
      } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          kd[i] = ko[i];
          vd[i] = vo[i];
        }
      }
    }
  }
}

// One thread per token; tokens past num_tokens (up to slot_len) get PAD, and
// so does every token the host variant would reject (see launch.h).
__global__ void slot_mapping_kernel(const int32_t *block_table, int64_t bt_stride,
                                    const int32_t *num_blocks_per_row, int64_t max_blocks,
                                    const int32_t *qsl, int64_t num_reqs,
                                    const int64_t *positions, int64_t num_tokens,
                                    int32_t block_size, int64_t num_cache_blocks, int64_t *slot,
                                    int64_t slot_len) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < slot_len;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (i >= num_tokens || i < qsl[0] || i >= qsl[num_reqs]) {
      slot[i] = -1;
      continue;
    }
    // Request of token i: last r with qsl[r] <= i (binary search).
    int64_t lo = 0, hi = num_reqs - 1;
    while (lo < hi) {
      int64_t mid = (lo + hi + 1) / 2;
      if (qsl[mid] <= i) lo = mid; else hi = mid - 1;
    }
    const int64_t pos = positions[i];
    const int64_t bi = pos / block_size;
    const int64_t nb = num_blocks_per_row ? num_blocks_per_row[lo] : max_blocks;
    if (pos < 0 || bi >= nb) {
      slot[i] = -1;
      continue;
    }
    const int64_t id = block_table[lo * bt_stride + bi];
    if (id < 0 || (num_cache_blocks > 0 && id >= num_cache_blocks)) {
      slot[i] = -1;
      continue;
    }
    slot[i] = id * block_size + pos % block_size;
  }
}

// grid: (num_pairs, 2 [K, V]); the block's rows (token, head) are split over
// the threads, each row copied in 16-byte words when aligned.
__global__ void copy_blocks_kernel(CopyBlocksParams p) {
  const int pair = blockIdx.x, kv = blockIdx.y;
  const int64_t src = p.pairs[2 * pair], dst = p.pairs[2 * pair + 1];
  const char *s = p.cache + kv * p.s_kv + src * p.s_block;
  char *d = p.cache + kv * p.s_kv + dst * p.s_block;
  const int rows = p.block_size * p.num_heads;
  if (p.vec16) {
    const int64_t words = p.row_bytes / 16;
    const int64_t total = rows * words;
    for (int64_t u = threadIdx.x; u < total; u += blockDim.x) {
      const int64_t r = u / words, w = u - r * words;
      const int64_t tok = r / p.num_heads, h = r - tok * p.num_heads;
      const int64_t off = tok * p.s_tok + h * p.s_head + w * 16;
      *reinterpret_cast<uint4 *>(d + off) = *reinterpret_cast<const uint4 *>(s + off);
    }
  } else {
    const int64_t total = rows * p.row_bytes;
    for (int64_t u = threadIdx.x; u < total; u += blockDim.x) {
      const int64_t r = u / p.row_bytes, b = u - r * p.row_bytes;
      const int64_t tok = r / p.num_heads, h = r - tok * p.num_heads;
      const int64_t off = tok * p.s_tok + h * p.s_head + b;
      d[off] = s[off];
    }
  }
}

}  // namespace kern
}  // namespace vattn
