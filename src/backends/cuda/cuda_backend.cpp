// cuda_backend.cpp -- the CUDA backend descriptor and its Backend methods.
//
// Kernels live in kernels/ (raw pointers + sizes + strides + stream); this
// file validates tensors, converts DLPack views into kernel arguments and
// wires the builder / plan / layer (cuda_plan.cpp) and the operations
// (cuda_ops.cpp).
#include "backends/backend.h"
#include "backends/cuda/cuda_backend_impl.h"
#include "core/error.h"

namespace vattn {
namespace {

// Head sizes with compiled kernels (kernels/attention_dispatch.cuh): an
// explicit list, so head_size_multiple is 0.
const int32_t kCudaHeadSizes[] = {64, 80, 96, 112, 128, 256};

vattn_backend_info_t make_info() {
  vattn_backend_info_t in{};
  in.struct_size = sizeof in;
  in.name = "CUDA";
  in.device_type = kDLCUDA;
  // Every forward reads its batch shape from plan buffers on the device and
  // launches a fixed grid, so any batch within the plan's capacity replays
  // in a captured graph (tests/gpu/test_graph.cpp).
  in.cudagraph_support = VATTN_CUDAGRAPH_ALWAYS;
  in.reorder_batch_threshold = 1;
  in.block_size_multiple = 16;
  in.max_head_size = 256;
  in.head_size_multiple = 0;  // explicit list below
  in.dtypes = (1u << VATTN_DTYPE_FLOAT16) | (1u << VATTN_DTYPE_BFLOAT16);
  in.kv_cache_dtypes = (1u << VATTN_KV_CACHE_DTYPE_AUTO) | (1u << VATTN_KV_CACHE_DTYPE_FP8_E4M3) |
                       (1u << VATTN_KV_CACHE_DTYPE_FP8_E5M2);
  in.attn_types = (1u << VATTN_ATTN_DECODER) | (1u << VATTN_ATTN_ENCODER) |
                  (1u << VATTN_ATTN_ENCODER_ONLY) | (1u << VATTN_ATTN_ENCODER_DECODER);
  in.features = VATTN_FEATURE_ALIBI | VATTN_FEATURE_SLIDING_WINDOW | VATTN_FEATURE_SOFT_CAP |
                VATTN_FEATURE_SINKS | VATTN_FEATURE_FP8_KV_CACHE | VATTN_FEATURE_LSE_OUTPUT |
                VATTN_FEATURE_CASCADE | VATTN_FEATURE_KV_SHARING;
  in.head_sizes = kCudaHeadSizes;
  in.num_head_sizes = sizeof kCudaHeadSizes / sizeof kCudaHeadSizes[0];
  return in;
}

class CudaBackend final : public Backend {
 public:
  const vattn_backend_info_t &info() const override {
    static const vattn_backend_info_t in = make_info();
    return in;
  }
  vattn_status_t check_layer(const LayerParams &p) const override {
    VATTN_TRY(Backend::check_layer(p));
    return cuda_check_layer(p);
  }
  vattn_status_t create_builder(const vattn_builder_options_t &o,
                                std::unique_ptr<BuilderImpl> *out) const override {
    return cuda_create_builder(o, out);
  }
  vattn_status_t create_layer(const LayerParams &p, std::unique_ptr<LayerImpl> *out) const override {
    return cuda_create_layer(p, out);
  }
  vattn_status_t reshape_and_cache(const DLTensor *key, const DLTensor *value, DLTensor *kv_cache,
                                   const DLTensor *slot_mapping, int32_t kv_cache_dtype,
                                   float k_scale, float v_scale, void *stream) const override {
    return cuda_reshape_and_cache(key, value, kv_cache, slot_mapping, kv_cache_dtype, k_scale,
                                  v_scale, stream);
  }
  vattn_status_t merge_attn_states(DLTensor *output, DLTensor *output_lse,
                                   const DLTensor *prefix_output, const DLTensor *prefix_lse,
                                   const DLTensor *suffix_output, const DLTensor *suffix_lse,
                                   void *stream) const override {
    return cuda_merge_attn_states(output, output_lse, prefix_output, prefix_lse, suffix_output,
                                  suffix_lse, stream);
  }
  vattn_status_t copy_blocks(DLTensor *const *kv_caches, size_t num_layers,
                             const int64_t *block_mapping, size_t num_pairs,
                             void *stream) const override {
    return cuda_copy_blocks(kv_caches, num_layers, block_mapping, num_pairs, stream);
  }
  vattn_status_t swap_blocks(const DLTensor *src, DLTensor *dst, const int64_t *block_mapping,
                             size_t num_pairs, void *stream) const override {
    return cuda_swap_blocks(src, dst, block_mapping, num_pairs, stream);
  }
};

}  // namespace

const Backend *cuda_backend() {
  static const CudaBackend b;
  return &b;
}

}  // namespace vattn
