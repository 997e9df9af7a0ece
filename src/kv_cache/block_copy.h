// block_copy.h -- host (CPU memory) block copy and swap over KV caches.
//
// FOR BACKEND AUTHORS: the CPU backend's Backend::copy_blocks and
// Backend::swap_blocks are meant to be one-line calls to these functions,
// passing the C API arguments straight through:
//
//   return vattn::host_copy_blocks(kv_caches, num_layers, block_mapping, num_pairs);
//   return vattn::host_swap_blocks(src, dst, block_mapping, num_pairs);
//
// Both validate everything before touching memory (nothing is written on
// failure) and their messages name the C API arguments ('kv_caches[i]',
// 'src', 'dst', 'block_mapping[k]').
//
// Cache tensors (any non-negative strides, so NHD, HND or any other
// permutation / padding works):
//   attention: logical rank 5 (2, num_blocks, block_size, num_kv_heads, head_size)
//   MLA:       logical rank 3 (num_blocks, block_size, head_size)
// A "block" is every element whose num_blocks index is the block id: the
// K and V halves (rank 5) or the latent rows (rank 3).
//
// block_mapping is host int64 [num_pairs, 2] of (src, dst) pairs.  Pairs are
// applied in order (a later pair sees the effect of an earlier one); a pair
// with src == dst is a no-op.  Memory must be host-accessible (kDLCPU or
// kDLCUDAHost); device memory is the CUDA backend's job.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vattn.h"

namespace vattn {

// For every cache in caches[0..n) and every pair, copies block src to block
// dst inside that cache.  Every id must be in [0, num_blocks) of every cache.
vattn_status_t host_copy_blocks(DLTensor *const *caches, size_t n, const int64_t *pairs,
                                size_t num_pairs);

// Copies block pairs[k][0] of `src` into block pairs[k][1] of `dst`.  src and
// dst must have the same dtype and logical shape (strides may differ).
vattn_status_t host_swap_blocks(const DLTensor *src, DLTensor *dst, const int64_t *pairs,
                                size_t num_pairs);

}  // namespace vattn
