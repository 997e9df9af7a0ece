// forward_check.h -- validation every backend runs before it touches memory:
// vattn_forward_args_t against the layer (LayerParams) and the built batch
// (Metadata), and the arguments of the stand-alone operations of header
// section 12.  Parameterized by the device the backend runs on, so the CUDA
// backend reuses it unchanged.
//
// Contract: on failure a status + message naming the argument is returned
// and nothing has been written anywhere.  On success the returned summary
// tells the backend what to do (which rows, whether the cache is written /
// read), so backends never re-derive these rules.
#pragma once

#include <cstdint>

#include "backends/backend.h"

namespace vattn {

// Where tensors must live: the backend's device type (kDLCPU also accepts
// kDLCUDAHost, i.e. pinned host memory) and, for CUDA, the device id
// (-1 = any).
struct DeviceReq {
  int32_t device_type = kDLCPU;
  int32_t device_id = -1;
};

// What a validated forward call does.
struct ForwardPlanSummary {
  int64_t num_tokens = 0;       // md.num_actual_tokens: output rows written
  int64_t num_real_tokens = 0;  // query_start_loc[num_reqs]: rows attended
  int64_t num_slots = 0;        // slot mapping entries (K/V rows written)
  bool writes_cache = false;    // new K/V go into kv_cache first
  bool reads_cache = false;     // keys come from kv_cache (decoder, cross)
  bool dense_kv = false;        // keys are key/value rows (encoder types)
  bool causal = false;          // effective causal flag for this layer type
  bool cascade = false;         // plan common_prefix_len > 0
  int64_t num_cache_blocks = 0; // kv_cache.shape[1] when a cache is used
};

// Storage element type of the KV cache for a layer: VATTN_DTYPE_* (the
// layer dtype for AUTO, an fp8 dtype otherwise).
int32_t cache_storage_dtype(const LayerParams &p);

// The whole forward check.  plan_block_size is the block size the plan was
// built for (builder opts.block_size); common_prefix_len the plan's cascade
// setting.
vattn_status_t check_forward(const LayerParams &p, const Metadata &md, int32_t plan_block_size,
                             int64_t common_prefix_len, const vattn_forward_args_t &a,
                             const DeviceReq &dev, ForwardPlanSummary *out);

// A KV cache tensor: rank 5 (2, num_blocks, block_size, num_kv_heads,
// head_size), any non-negative strides; storage dtype `dtype` (VATTN_DTYPE_*,
// fp8 as uint8).  block_size / heads / head_size < 0 = any.
vattn_status_t check_kv_cache_tensor(const DLTensor *t, const char *name, const DeviceReq &dev,
                                     int32_t dtype, int32_t block_size, int32_t num_kv_heads,
                                     int32_t head_size);

// Every entry is -1 or in [0, num_slots_in_cache); names `name`.
vattn_status_t check_slots(const int64_t *slots, int64_t n, int64_t num_slots_in_cache,
                           const char *name);

// reshape_and_cache arguments (section 12).  Sets *num_slots (the slot
// mapping's length).  The slot values are checked only when the slot
// mapping is host memory (slots_on_host); a device backend checks them in
// its kernel.
vattn_status_t check_reshape_and_cache(const DLTensor *key, const DLTensor *value,
                                       const DLTensor *kv_cache, const DLTensor *slot_mapping,
                                       int32_t kv_cache_dtype, const DeviceReq &dev,
                                       bool slots_on_host, int64_t *num_slots);

// merge_attn_states arguments: output/prefix/suffix [T, H, D] of one float
// dtype (f32/f16/bf16), LSEs float32 [H, T]; output_lse may be NULL.
vattn_status_t check_merge(const DLTensor *output, const DLTensor *output_lse,
                           const DLTensor *prefix_output, const DLTensor *prefix_lse,
                           const DLTensor *suffix_output, const DLTensor *suffix_lse,
                           const DeviceReq &dev);

// Dim holding the block index of a cache tensor for block copies: 1 for the
// rank-5 K/V form (2, num_blocks, ...), else 0 (per-K/V or MLA caches).
int block_dim_of(const DLTensor *t);

// copy_blocks: every cache on `dev`, same rank; every id of block_mapping
// ([num_pairs, 2]) within every cache's block count.
vattn_status_t check_copy_blocks(DLTensor *const *kv_caches, size_t num_layers,
                                 const int64_t *block_mapping, size_t num_pairs,
                                 const DeviceReq &dev);

// swap_blocks: same dtype and logical shape (strides may differ); every id
// within the block count.  (The CPU backend itself calls
// kv_cache/block_copy.h, which applies the same rules.)
vattn_status_t check_swap_blocks(const DLTensor *src, const DLTensor *dst,
                                 const int64_t *block_mapping, size_t num_pairs);

}  // namespace vattn
