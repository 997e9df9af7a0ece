// cpu_backend.cpp -- the CPU backend descriptor and its Backend methods.
//
// The CPU backend is the reference implementation: every feature of the
// header is computed here in plain C++ with fp32 accumulation, and the CUDA
// backend is tested against it.  Heavy lifting lives in sibling files
// (cache write, attention, merge, block ops); this file only wires them.
#include "backends/backend.h"
#include "backends/cpu/cache_write.h"
#include "backends/cpu/cpu_layer.h"
#include "backends/cpu/cpu_plan.h"
#include "backends/cpu/merge.h"
#include "backends/forward_check.h"
#include "core/error.h"
#include "core/tensor.h"
#include "kv_cache/block_copy.h"

namespace vattn {
namespace {

// Head sizes the test suite runs (any multiple of 8 up to 256 is accepted).
const int32_t kTestedHeadSizes[] = {64, 80, 96, 112, 128, 256};

vattn_backend_info_t make_info() {
  vattn_backend_info_t in{};
  in.struct_size = sizeof in;
  in.name = "CPU";
  in.device_type = kDLCPU;
  in.cudagraph_support = VATTN_CUDAGRAPH_NEVER;  // no graphs on the host
  in.reorder_batch_threshold = 1;
  in.block_size_multiple = 1;  // any block size
  in.max_head_size = 256;
  in.head_size_multiple = 8;
  in.dtypes = (1u << VATTN_DTYPE_FLOAT32) | (1u << VATTN_DTYPE_FLOAT16) | (1u << VATTN_DTYPE_BFLOAT16);
  in.kv_cache_dtypes = (1u << VATTN_KV_CACHE_DTYPE_AUTO) | (1u << VATTN_KV_CACHE_DTYPE_FP8_E4M3) |
                       (1u << VATTN_KV_CACHE_DTYPE_FP8_E5M2);
  in.attn_types = (1u << VATTN_ATTN_DECODER) | (1u << VATTN_ATTN_ENCODER) |
                  (1u << VATTN_ATTN_ENCODER_ONLY) | (1u << VATTN_ATTN_ENCODER_DECODER);
  in.features = VATTN_FEATURE_ALIBI | VATTN_FEATURE_SLIDING_WINDOW | VATTN_FEATURE_SOFT_CAP |
                VATTN_FEATURE_SINKS | VATTN_FEATURE_FP8_KV_CACHE | VATTN_FEATURE_LSE_OUTPUT |
                VATTN_FEATURE_CASCADE | VATTN_FEATURE_KV_SHARING;
  in.head_sizes = kTestedHeadSizes;
  in.num_head_sizes = sizeof kTestedHeadSizes / sizeof kTestedHeadSizes[0];
  return in;
}

DeviceReq host() {
  DeviceReq d;
  d.device_type = kDLCPU;
  return d;
}

class CpuBackend final : public Backend {
 public:
  const vattn_backend_info_t &info() const override {
    static const vattn_backend_info_t in = make_info();
    return in;
  }

  vattn_status_t create_builder(const vattn_builder_options_t &opts,
                                std::unique_ptr<BuilderImpl> *out) const override {
    *out = std::make_unique<cpu::CpuBuilder>(opts);
    return VATTN_OK;
  }

  vattn_status_t create_layer(const LayerParams &p, std::unique_ptr<LayerImpl> *out) const override {
    *out = std::make_unique<cpu::CpuLayer>(p);
    return VATTN_OK;
  }

  vattn_status_t reshape_and_cache(const DLTensor *key, const DLTensor *value, DLTensor *kv_cache,
                                   const DLTensor *slot_mapping, int32_t kv_cache_dtype,
                                   float k_scale, float v_scale, void *) const override {
    int64_t n = 0;
    VATTN_TRY(check_reshape_and_cache(key, value, kv_cache, slot_mapping, kv_cache_dtype, host(),
                                      true, &n));
    const cpu::Elem store =
        kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E4M3   ? cpu::Elem::E4M3
        : kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E5M2 ? cpu::Elem::E5M2
                                                          : cpu::elem_of_dl(key->dtype);
    const int64_t *slots = reinterpret_cast<const int64_t *>(tensor_data(slot_mapping));
    cpu::write_kv_cache(key, value, kv_cache, slots, n, store, k_scale, v_scale,
                        ThreadPool::global());
    return VATTN_OK;
  }

  vattn_status_t merge_attn_states(DLTensor *output, DLTensor *output_lse,
                                   const DLTensor *prefix_output, const DLTensor *prefix_lse,
                                   const DLTensor *suffix_output, const DLTensor *suffix_lse,
                                   void *) const override {
    VATTN_TRY(check_merge(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse,
                          host()));
    cpu::merge_states(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse,
                      ThreadPool::global());
    return VATTN_OK;
  }

  // Block copies are plain host memcpy: the KV cache area's helpers
  // validate every id first and apply the pairs in order.
  vattn_status_t copy_blocks(DLTensor *const *kv_caches, size_t num_layers,
                             const int64_t *block_mapping, size_t num_pairs,
                             void *) const override {
    return host_copy_blocks(kv_caches, num_layers, block_mapping, num_pairs);
  }

  vattn_status_t swap_blocks(const DLTensor *src, DLTensor *dst, const int64_t *block_mapping,
                             size_t num_pairs, void *) const override {
    return host_swap_blocks(src, dst, block_mapping, num_pairs);
  }
};

}  // namespace

const Backend *cpu_backend() {
  static const CpuBackend b;
  return &b;
}

}  // namespace vattn
