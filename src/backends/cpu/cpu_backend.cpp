// cpu_backend.cpp -- the CPU backend descriptor and its Backend methods.
//
// The CPU backend is the reference implementation: every feature of the
// header is computed here in plain C++ with fp32 accumulation, and the CUDA
// backend is tested against it.  Heavy lifting lives in sibling files
// (cache write, attention, merge, block ops); this file only wires them.
#include "backends/backend.h"
#include "core/error.h"

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

vattn_status_t not_yet(const char *what) {
  return fail(VATTN_ERR_UNSUPPORTED, "CPU backend: %s is not yet implemented", what);
}

class CpuBackend final : public Backend {
 public:
  const vattn_backend_info_t &info() const override {
    static const vattn_backend_info_t in = make_info();
    return in;
  }
  vattn_status_t create_builder(const vattn_builder_options_t &,
                                std::unique_ptr<BuilderImpl> *) const override {
    return not_yet("builder");
  }
  vattn_status_t create_layer(const LayerParams &, std::unique_ptr<LayerImpl> *) const override {
    return not_yet("layer");
  }
  vattn_status_t reshape_and_cache(const DLTensor *, const DLTensor *, DLTensor *, const DLTensor *,
                                   int32_t, float, float, void *) const override {
    return not_yet("reshape_and_cache");
  }
  vattn_status_t merge_attn_states(DLTensor *, DLTensor *, const DLTensor *, const DLTensor *,
                                   const DLTensor *, const DLTensor *, void *) const override {
    return not_yet("merge_attn_states");
  }
  vattn_status_t copy_blocks(DLTensor *const *, size_t, const int64_t *, size_t,
                             void *) const override {
    return not_yet("copy_blocks");
  }
  vattn_status_t swap_blocks(const DLTensor *, DLTensor *, const int64_t *, size_t,
                             void *) const override {
    return not_yet("swap_blocks");
  }
};

}  // namespace

const Backend *cpu_backend() {
  static const CpuBackend b;
  return &b;
}

}  // namespace vattn
