// kv_cache.h -- the KV cache of a model (header section 5): which layers own
// memory, which share another layer's, how layers group, and the per-layer
// tensors.
//
// Layer table (LayerPlan, built by plan_layers):
//  - every layer has a valid spec;
//  - target[i] = -1 (the layer owns its cache) or an earlier layer j < i with
//    target[j] = -1 and an equal spec, whose cache layer i reads;
//  - ENCODER_ONLY layers keep no cache (vLLM gives them none): they own no
//    memory and their tensor has num_blocks 0 and data NULL;
//  - groups: layers whose specs are equal (FULL specs may differ in
//    sliding_window / attention_chunk_size, reconciled by merge_specs) form
//    one group, numbered in order of first appearance; a sharing layer is in
//    its target's group.
//
// Memory: one contiguous allocation per owning layer of num_blocks *
// page_size_bytes (the padded page size when set).  The data sits at its
// start, compact in the physical dim order the backend asked for; any page
// padding is unused space at the end.  The backend's logical shape and
// stride orders come in through CacheGeometry (src/api asks the backend: this
// directory depends on src/core only).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/error.h"
#include "kv_cache/buffer.h"

namespace vattn {

// The logical cache shape of one group and its physical dim orders.
struct CacheGeometry {
  int32_t ndim = 0;       // 1..5 (attention backends: 5; MLA: 3)
  int32_t block_dim = 0;  // index of the num_blocks dim in the logical shape
  int64_t shape[5] = {};  // logical shape; shape[block_dim] is ignored
  // order[layout][i] = logical dim stored at physical position i
  // (layout VATTN_LAYOUT_NHD = 0, VATTN_LAYOUT_HND = 1).
  int32_t order[2][5] = {};
};

struct LayerPlan {
  std::vector<vattn_kv_cache_spec_t> specs;        // per layer, validated
  std::vector<int32_t> target;                     // per layer: -1 or the layer read
  std::vector<int32_t> group;                      // per layer
  std::vector<vattn_kv_cache_spec_t> group_specs;  // per group, merged
  size_t num_layers() const { return specs.size(); }
  // True when layer i has memory of its own.
  bool owns(size_t i) const {
    return target[i] < 0 && specs[i].kind != VATTN_KV_SPEC_ENCODER_ONLY;
  }
};

// Validates specs / sharing and forms the groups.  kv_sharing_target may be
// NULL (no sharing).  Messages name 'specs[i]' / 'kv_sharing_target[i]'.
vattn_status_t plan_layers(const vattn_kv_cache_spec_t *specs, const int32_t *kv_sharing_target,
                           size_t num_layers, LayerPlan *out);

// budget / (sum of the page sizes of the owning layers); fewer than one
// block -> VATTN_ERR_OUT_OF_MEMORY giving the bytes one block needs.
vattn_status_t blocks_for_budget(const LayerPlan &plan, int64_t budget, int64_t *out);

class KvCache {
 public:
  // Allocates num_blocks (> 0) blocks for every owning layer on `dev`, laid
  // out in physical order geom[g].order[layout] for group g.
  static vattn_status_t allocate(LayerPlan plan, const std::vector<CacheGeometry> &geom,
                                 int64_t num_blocks, DLDevice dev, int32_t layout, bool zero_fill,
                                 std::unique_ptr<KvCache> *out);
  // Wraps caller-owned tensors (tensors[i] non-NULL exactly for owning
  // layers); the layout is read from their strides (`preferred_layout`
  // when they fit both).  Messages name 'tensors[i]'.
  static vattn_status_t wrap(LayerPlan plan, const std::vector<CacheGeometry> &geom,
                             const DLTensor *const *tensors, DLDevice dev,
                             int32_t preferred_layout, std::unique_ptr<KvCache> *out);

  size_t num_layers() const { return plan_.num_layers(); }
  size_t num_groups() const { return plan_.group_specs.size(); }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t owned_bytes() const { return owned_bytes_; }
  DLDevice device() const { return dev_; }
  int32_t layout() const { return layout_; }
  int32_t layer_group(size_t layer) const { return plan_.group[layer]; }
  const vattn_kv_cache_spec_t &group_spec(size_t g) const { return plan_.group_specs[g]; }
  // Layer's tensor; shape / strides point into this object.
  void layer_tensor(size_t layer, DLTensor *out) const;

 private:
  struct View {
    void *data = nullptr;
    uint64_t byte_offset = 0;
    int32_t ndim = 0;
    DLDataType dtype{};
    int64_t shape[5] = {};
    int64_t strides[5] = {};
  };
  KvCache() = default;

  LayerPlan plan_;
  std::vector<Buffer> buffers_;  // one per owning layer
  std::vector<View> views_;      // one per layer; sized once, never reallocated
  int64_t num_blocks_ = 0;
  int64_t owned_bytes_ = 0;
  DLDevice dev_{kDLCPU, 0};
  int32_t layout_ = VATTN_LAYOUT_NHD;
};

}  // namespace vattn
