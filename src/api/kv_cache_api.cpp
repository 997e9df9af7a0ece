// kv_cache_api.cpp -- header section 5: KV cache configuration, allocation
// and per-layer views.  This shim reads the options, asks the backend for
// the cache shape and stride orders (src/kv_cache never sees a backend),
// and hands over to vattn::KvCache.
#include <cstring>
#include <new>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/options.h"
#include "kv_cache/kv_cache.h"
#include "kv_cache/spec.h"

struct vattn_kv_cache {
  std::unique_ptr<vattn::KvCache> impl;
};

namespace {

// Validated options plus what they resolve to.
struct Resolved {
  vattn_kv_cache_options_t o;
  DLDevice dev{kDLCPU, 0};
  int32_t layout = VATTN_LAYOUT_NHD;
  const vattn_backend_t *backend = nullptr;
};

// One C handle per registered backend, found by its implementation.
const vattn_backend_t *default_backend(int32_t device_type) {
  const vattn::Backend *want = vattn::backend_for_device(device_type);
  for (size_t i = 0; want && i < vattn_backend_count(); ++i) {
    const vattn_backend_t *h = nullptr;
    vattn_status_t st = vattn_backend_get(i, &h);
    // Out of memory building the handle table is not "no backend": let the
    // guard report it (found by tests/reliability AllocFailure.KvCacheCreate).
    if (st == VATTN_ERR_OUT_OF_MEMORY) throw std::bad_alloc();
    if (st == VATTN_OK && h->impl == want) return h;
  }
  return nullptr;
}

vattn_status_t resolve_options(const vattn_kv_cache_options_t *in, Resolved *r) {
  VATTN_TRY(vattn::read_options(in, &r->o, vattn_kv_cache_options_init,
                                VATTN_STRUCT_MIN_SIZE(vattn_kv_cache_options_t, backend), "opts"));
  const vattn_kv_cache_options_t &o = r->o;
  VATTN_CHECK_ARG(o.device_type == kDLCPU || o.device_type == kDLCUDA,
                  "argument 'opts': device_type = %d must be kDLCPU (%d) or kDLCUDA (%d)",
                  o.device_type, static_cast<int>(kDLCPU), static_cast<int>(kDLCUDA));
  VATTN_CHECK_ARG(o.device_id >= 0, "argument 'opts': device_id = %d is negative", o.device_id);
  VATTN_CHECK_ARG(o.layout == -1 || o.layout == VATTN_LAYOUT_NHD || o.layout == VATTN_LAYOUT_HND,
                  "argument 'opts': layout = %d must be -1 (default), VATTN_LAYOUT_NHD or "
                  "VATTN_LAYOUT_HND",
                  o.layout);
  VATTN_CHECK_ARG(o.zero_fill == 0 || o.zero_fill == 1,
                  "argument 'opts': zero_fill = %d must be 0 or 1", o.zero_fill);
  VATTN_CHECK_ARG(o.num_blocks >= 0, "argument 'opts': num_blocks = %lld is negative",
                  static_cast<long long>(o.num_blocks));
  VATTN_CHECK_ARG(o.memory_budget_bytes >= 0,
                  "argument 'opts': memory_budget_bytes = %lld is negative",
                  static_cast<long long>(o.memory_budget_bytes));
  r->dev = DLDevice{static_cast<DLDeviceType>(o.device_type), o.device_id};
  r->backend = o.backend ? o.backend : default_backend(o.device_type);
  if (!r->backend)
    return vattn::fail(VATTN_ERR_NO_DEVICE,
                       "argument 'opts': this build has no backend for device type %d",
                       o.device_type);
  VATTN_CHECK_ARG(r->backend->impl != nullptr, "argument 'opts': backend is not a vattn backend");
  const vattn_backend_info_t &bi = r->backend->impl->info();
  VATTN_CHECK_ARG(bi.device_type == o.device_type,
                  "argument 'opts': backend %s runs on device type %d, but device_type is %d",
                  bi.name, bi.device_type, o.device_type);
  if (o.layout >= 0) {
    r->layout = o.layout;
  } else {
    VATTN_TRY(vattn_get_kv_cache_layout(&r->layout));
  }
  return VATTN_OK;
}

// Shape and stride orders of group g's tensors, from the backend.
vattn_status_t query_geometry(const vattn_backend_t *b, const vattn_kv_cache_spec_t &s, size_t g,
                              vattn::CacheGeometry *out) {
  vattn::CacheGeometry geo;
  if (vattn::spec_is_mla(s)) {
    // Every MLA backend stores (num_blocks, block_size, entry) compactly, and
    // the layout setting does not apply: no backend query needed (this also
    // lets backends without MLA kernels, like the CPU reference, hold one).
    geo.ndim = 3;
    geo.block_dim = 0;
    geo.shape[1] = s.block_size;
    geo.shape[2] = vattn::spec_entry_size(s);
    for (int l = 0; l < 2; ++l)
      for (int32_t d = 0; d < 3; ++d) geo.order[l][d] = d;
    *out = geo;
    return VATTN_OK;
  }
  const vattn_backend_info_t &bi = b->impl->info();
  if (bi.block_size_multiple > 0 && s.block_size % bi.block_size_multiple != 0)
    return vattn::fail(VATTN_ERR_UNSUPPORTED,
                       "argument 'specs': group %zu has block_size %d, but backend %s needs a "
                       "multiple of %d",
                       g, s.block_size, bi.name, bi.block_size_multiple);
  // A num_blocks no real dim can equal shows where the backend puts it.
  const int64_t kSentinel = (INT64_C(1) << 40) + 7;
  int64_t shape[5];
  int32_t nd = 0;
  VATTN_TRY(vattn_backend_kv_cache_shape(b, kSentinel, s.block_size, s.num_kv_heads, s.head_size, 0,
                                         shape, &nd));
  if (nd < 1 || nd > 5) return vattn::fail(VATTN_ERR_INTERNAL, "backend %s: cache rank %d", bi.name, nd);
  geo.ndim = nd;
  geo.block_dim = -1;
  for (int32_t d = 0; d < nd; ++d) {
    geo.shape[d] = shape[d];
    if (shape[d] == kSentinel) geo.block_dim = d;
  }
  if (geo.block_dim < 0)
    return vattn::fail(VATTN_ERR_INTERNAL, "backend %s: cache shape has no num_blocks dim", bi.name);
  for (int32_t l = 0; l < 2; ++l) {
    int32_t order[6], n = 0;
    VATTN_TRY(vattn_backend_kv_cache_stride_order(b, l, 0, order, &n));
    bool perm = n == nd;
    unsigned seen = 0;
    for (int32_t d = 0; perm && d < nd; ++d) {
      perm = order[d] >= 0 && order[d] < nd && !(seen & (1u << order[d]));
      if (perm) seen |= 1u << order[d];
      geo.order[l][d] = order[d];
    }
    if (!perm)
      return vattn::fail(VATTN_ERR_INTERNAL, "backend %s: stride order is not a permutation", bi.name);
  }
  *out = geo;
  return VATTN_OK;
}

vattn_status_t query_all(const vattn_backend_t *b, const vattn::LayerPlan &plan,
                         std::vector<vattn::CacheGeometry> *out) {
  out->resize(plan.group_specs.size());
  for (size_t g = 0; g < plan.group_specs.size(); ++g)
    VATTN_TRY(query_geometry(b, plan.group_specs[g], g, &(*out)[g]));
  return VATTN_OK;
}

}  // namespace

extern "C" {

VATTN_API void vattn_kv_cache_options_init(vattn_kv_cache_options_t *opts) {
  if (!opts) return;
  std::memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
  opts->device_type = kDLCPU;
  opts->device_id = 0;
  opts->layout = -1;  // vattn_get_kv_cache_layout() at create time
  opts->zero_fill = 1;
  opts->num_blocks = 0;
  opts->memory_budget_bytes = 0;
  opts->backend = nullptr;
}

VATTN_API vattn_status_t vattn_kv_cache_num_blocks_for_budget(const vattn_kv_cache_spec_t *specs,
                                                              const int32_t *kv_sharing_target,
                                                              size_t num_layers,
                                                              int64_t memory_budget_bytes,
                                                              int64_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    VATTN_CHECK_ARG(memory_budget_bytes >= 0, "argument 'memory_budget_bytes' = %lld is negative",
                    static_cast<long long>(memory_budget_bytes));
    vattn::LayerPlan plan;
    VATTN_TRY(vattn::plan_layers(specs, kv_sharing_target, num_layers, &plan));
    int64_t nb = 0;
    VATTN_TRY(vattn::blocks_for_budget(plan, memory_budget_bytes, &nb));
    *out = nb;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_kv_cache_create(vattn_kv_cache_t **out,
                                               const vattn_kv_cache_spec_t *specs,
                                               const int32_t *kv_sharing_target, size_t num_layers,
                                               const vattn_kv_cache_options_t *opts) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    vattn::LayerPlan plan;
    VATTN_TRY(vattn::plan_layers(specs, kv_sharing_target, num_layers, &plan));
    Resolved r;
    VATTN_TRY(resolve_options(opts, &r));
    int64_t nb = r.o.num_blocks;
    if (nb == 0) {
      VATTN_CHECK_ARG(r.o.memory_budget_bytes > 0,
                      "argument 'opts': num_blocks and memory_budget_bytes are both 0 (set one)");
      VATTN_TRY(vattn::blocks_for_budget(plan, r.o.memory_budget_bytes, &nb));
    }
    std::vector<vattn::CacheGeometry> geom;
    VATTN_TRY(query_all(r.backend, plan, &geom));
    if (r.dev.device_type == kDLCUDA) VATTN_TRY(vattn::cuda_require_device(r.dev.device_id, "opts"));
    auto h = std::make_unique<vattn_kv_cache>();
    VATTN_TRY(vattn::KvCache::allocate(std::move(plan), geom, nb, r.dev, r.layout,
                                       r.o.zero_fill != 0, &h->impl));
    *out = h.release();
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_kv_cache_create_from_tensors(
    vattn_kv_cache_t **out, const vattn_kv_cache_spec_t *specs, const int32_t *kv_sharing_target,
    size_t num_layers, const DLTensor *const *tensors, const vattn_kv_cache_options_t *opts) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    vattn::LayerPlan plan;
    VATTN_TRY(vattn::plan_layers(specs, kv_sharing_target, num_layers, &plan));
    VATTN_CHECK_NOT_NULL(tensors);
    Resolved r;
    VATTN_TRY(resolve_options(opts, &r));
    std::vector<vattn::CacheGeometry> geom;
    VATTN_TRY(query_all(r.backend, plan, &geom));
    if (r.dev.device_type == kDLCUDA) VATTN_TRY(vattn::cuda_require_device(r.dev.device_id, "opts"));
    auto h = std::make_unique<vattn_kv_cache>();
    VATTN_TRY(vattn::KvCache::wrap(std::move(plan), geom, tensors, r.dev, r.layout, &h->impl));
    *out = h.release();
    return VATTN_OK;
  });
}

VATTN_API void vattn_kv_cache_destroy(vattn_kv_cache_t *cache) {
  vattn::guard_void([&] { delete cache; });
}

VATTN_API vattn_status_t vattn_kv_cache_get_info(const vattn_kv_cache_t *cache,
                                                 vattn_kv_cache_info_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(cache);
    VATTN_TRY(vattn::check_out_struct(out, VATTN_STRUCT_MIN_SIZE(vattn_kv_cache_info_t, layout),
                                      "out"));
    const vattn::KvCache &c = *cache->impl;
    vattn_kv_cache_info_t in;
    std::memset(&in, 0, sizeof in);
    in.struct_size = sizeof in;
    in.num_blocks = c.num_blocks();
    in.total_bytes = c.owned_bytes();
    in.num_layers = static_cast<int32_t>(c.num_layers());
    in.num_groups = static_cast<int32_t>(c.num_groups());
    in.device_type = c.device().device_type;
    in.device_id = c.device().device_id;
    in.layout = c.layout();
    vattn::write_out(out, in);
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_kv_cache_layer_group(const vattn_kv_cache_t *cache, size_t layer,
                                                    int32_t *group_out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(cache);
    VATTN_CHECK_NOT_NULL(group_out);
    if (layer >= cache->impl->num_layers())
      return vattn::fail(VATTN_ERR_NOT_FOUND, "argument 'layer' = %zu: the cache has %zu layers",
                         layer, cache->impl->num_layers());
    *group_out = cache->impl->layer_group(layer);
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_kv_cache_group_spec(const vattn_kv_cache_t *cache, size_t group,
                                                   vattn_kv_cache_spec_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(cache);
    VATTN_TRY(vattn::check_out_struct(
        out, VATTN_STRUCT_MIN_SIZE(vattn_kv_cache_spec_t, page_size_padded), "out"));
    if (group >= cache->impl->num_groups())
      return vattn::fail(VATTN_ERR_NOT_FOUND, "argument 'group' = %zu: the cache has %zu groups",
                         group, cache->impl->num_groups());
    vattn::write_out(out, cache->impl->group_spec(group));
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_kv_cache_layer_tensor(const vattn_kv_cache_t *cache, size_t layer,
                                                     DLTensor *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(cache);
    VATTN_CHECK_NOT_NULL(out);
    if (layer >= cache->impl->num_layers())
      return vattn::fail(VATTN_ERR_NOT_FOUND, "argument 'layer' = %zu: the cache has %zu layers",
                         layer, cache->impl->num_layers());
    cache->impl->layer_tensor(layer, out);
    return VATTN_OK;
  });
}

}  // extern "C"
