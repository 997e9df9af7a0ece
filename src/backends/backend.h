// backend.h -- the internal interface every attention backend implements
// (as ggml-backend does), and the registry that lists them.
//
// A backend is a process-lifetime singleton.  The C API (src/api) validates
// handles and option structs, then calls these virtuals; backends validate
// tensors against the plan (shared checks in backends/forward_check.h).
//
// Objects:
//   Backend      -- descriptor + factory + stateless cache/merge operations
//   BuilderImpl  -- per KV-cache group; turns Metadata into a PlanImpl
//   PlanImpl     -- persistent buffers for one batch (rebuilt in place)
//   LayerImpl    -- one attention layer's fixed parameters + forward()
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "metadata/metadata.h"
#include "vattn.h"

namespace vattn {

// vattn_layer_options_t after defaults, validation and copies of the arrays.
struct LayerParams {
  int32_t num_heads = 0;
  int32_t head_size = 0;
  int32_t num_kv_heads = 0;  // never 0 here
  float scale = 0.f;         // never 0 here
  int32_t dtype = VATTN_DTYPE_BFLOAT16;
  int32_t kv_cache_dtype = VATTN_KV_CACHE_DTYPE_AUTO;
  int32_t attn_type = VATTN_ATTN_DECODER;
  int32_t sliding_window = 0;      // 0 = none
  float logits_soft_cap = 0.f;     // 0 = none
  std::vector<float> alibi_slopes; // empty or [num_heads]
  std::vector<float> sinks;        // empty or [num_heads]
  bool kv_sharing = false;
  int32_t block_size = 16;

  int32_t queries_per_kv() const { return num_heads / num_kv_heads; }
  uint32_t features() const;  // VATTN_FEATURE_* bits this layer uses
};

enum class BuildMode { kNormal, kCudagraphCapture, kDrafting };

// A built batch.  Every backend keeps the host copy of the metadata it was
// built from (`md`); device backends add their persistent device buffers.
class PlanImpl {
 public:
  virtual ~PlanImpl() = default;
  Metadata md;                    // host copy of the last build
  bool built = false;
  int64_t common_prefix_len = 0;  // > 0: cascade attention
  // Capacity fixed at creation (builder options).
  int32_t max_num_reqs = 0;
  int64_t max_num_tokens = 0;
  int32_t max_blocks_per_req = 0;
};

class BuilderImpl {
 public:
  virtual ~BuilderImpl() = default;
  virtual int32_t cudagraph_support() const = 0;       // VATTN_CUDAGRAPH_*
  virtual int32_t reorder_batch_threshold() const = 0; // 0 = none
  virtual vattn_status_t create_plan(std::unique_ptr<PlanImpl> *out) const = 0;
  // Writes `md` into `plan` (no reallocation of persistent buffers).
  virtual vattn_status_t build(PlanImpl &plan, int64_t common_prefix_len, const Metadata &md,
                               bool fast_build, BuildMode mode, void *stream) = 0;
};

class LayerImpl {
 public:
  virtual ~LayerImpl() = default;
  virtual vattn_status_t forward(const PlanImpl &plan, const vattn_forward_args_t &args) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const vattn_backend_info_t &info() const = 0;

  // Empty when this backend can serve the selector; else why not (one line).
  virtual std::string reject_reason(const vattn_backend_selector_t &sel) const;
  // Checks a layer configuration against info(): VATTN_ERR_UNSUPPORTED with
  // a message naming the unsupported field.  Backends may refine.
  virtual vattn_status_t check_layer(const LayerParams &p) const;

  virtual vattn_status_t create_builder(const vattn_builder_options_t &opts,
                                        std::unique_ptr<BuilderImpl> *out) const = 0;
  virtual vattn_status_t create_layer(const LayerParams &p,
                                      std::unique_ptr<LayerImpl> *out) const = 0;

  // Operations of header section 12, tensors already generically valid and
  // on this backend's device (swap_blocks: at least one side is).
  virtual vattn_status_t reshape_and_cache(const DLTensor *key, const DLTensor *value,
                                           DLTensor *kv_cache, const DLTensor *slot_mapping,
                                           int32_t kv_cache_dtype, float k_scale, float v_scale,
                                           void *stream) const = 0;
  virtual vattn_status_t merge_attn_states(DLTensor *output, DLTensor *output_lse,
                                           const DLTensor *prefix_output,
                                           const DLTensor *prefix_lse,
                                           const DLTensor *suffix_output,
                                           const DLTensor *suffix_lse, void *stream) const = 0;
  virtual vattn_status_t copy_blocks(DLTensor *const *kv_caches, size_t num_layers,
                                     const int64_t *block_mapping, size_t num_pairs,
                                     void *stream) const = 0;
  virtual vattn_status_t swap_blocks(const DLTensor *src, DLTensor *dst,
                                     const int64_t *block_mapping, size_t num_pairs,
                                     void *stream) const = 0;
};

// ---- registry (backends/registry.cpp) ------------------------------------
size_t backend_count();
const Backend *backend_at(size_t i);  // nullptr when out of range
// The backend that runs on tensors of this DLPack device type (CPU for
// kDLCPU/kDLCUDAHost, CUDA for kDLCUDA); nullptr if not built.
const Backend *backend_for_device(int32_t device_type);

// Defined by each backend.
const Backend *cpu_backend();
#ifdef VATTN_WITH_CUDA
const Backend *cuda_backend();
#endif

}  // namespace vattn

// C handles (opaque in vattn.h).
struct vattn_backend {
  const vattn::Backend *impl;
};
struct vattn_builder {
  const vattn::Backend *backend;
  vattn_builder_options_t opts;
  std::unique_ptr<vattn::BuilderImpl> impl;
};
struct vattn_plan {
  const vattn::Backend *backend;
  const vattn_builder *builder;
  std::unique_ptr<vattn::PlanImpl> impl;
};
struct vattn_layer {
  const vattn::Backend *backend;
  vattn::LayerParams params;
  std::unique_ptr<vattn::LayerImpl> impl;
};
