// cuda_backend_impl.h -- the pieces of the CUDA backend that
// cuda_backend.cpp wires together (internal to src/backends/cuda).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace vattn {

// Refinements of Backend::check_layer for what the kernels compile
// (head size x dtype x cache dtype x block size).
vattn_status_t cuda_check_layer(const LayerParams &p);
vattn_status_t cuda_create_builder(const vattn_builder_options_t &o,
                                   std::unique_ptr<BuilderImpl> *out);
vattn_status_t cuda_create_layer(const LayerParams &p, std::unique_ptr<LayerImpl> *out);

vattn_status_t cuda_reshape_and_cache(const DLTensor *key, const DLTensor *value,
                                      DLTensor *kv_cache, const DLTensor *slot_mapping,
                                      int32_t kv_cache_dtype, float k_scale, float v_scale,
                                      void *stream);
vattn_status_t cuda_merge_attn_states(DLTensor *output, DLTensor *output_lse,
                                      const DLTensor *prefix_output, const DLTensor *prefix_lse,
                                      const DLTensor *suffix_output, const DLTensor *suffix_lse,
                                      void *stream);
vattn_status_t cuda_copy_blocks(DLTensor *const *kv_caches, size_t num_layers,
                                const int64_t *block_mapping, size_t num_pairs, void *stream);
vattn_status_t cuda_swap_blocks(const DLTensor *src, DLTensor *dst, const int64_t *block_mapping,
                                size_t num_pairs, void *stream);

// vattn_slot_mapping_compute_tensors on CUDA tensors (validated by the API
// layer): asynchronous, -1 for tokens the host variant would reject.
vattn_status_t cuda_slot_mapping_tensors(int32_t device, const int32_t *block_table,
                                         int64_t bt_stride, int64_t bt_cols,
                                         const int32_t *query_start_loc, int64_t num_reqs,
                                         const int64_t *positions, int64_t num_tokens,
                                         int32_t block_size, int64_t num_cache_blocks,
                                         int64_t *slot_mapping, int64_t slot_len, void *stream);

}  // namespace vattn
