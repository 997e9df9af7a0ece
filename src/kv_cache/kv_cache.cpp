// kv_cache.cpp -- allocation / wrapping of the per-layer caches and their
// views (see kv_cache.h for the layout rules).
#include "kv_cache/kv_cache.h"

#include <string>

#include "core/tensor.h"
#include "kv_cache/spec.h"

namespace vattn {
namespace {

// Element type of a spec's cache tensor (fp8 and fp8_ds_mla are bytes).
DLDataType cache_dtype(const vattn_kv_cache_spec_t &s) {
  DLDataType d{kDLUInt, 8, 1};
  if (!(spec_is_mla(s) && s.mla_fp8_ds)) dl_dtype_of(s.dtype, &d);
  return d;
}

// Logical shape of a group's tensors with `nb` blocks.
void fill_shape(const CacheGeometry &g, int64_t nb, int64_t *shape) {
  for (int32_t d = 0; d < g.ndim; ++d) shape[d] = g.shape[d];
  shape[g.block_dim] = nb;
}

// Element strides of `shape` stored compactly in physical order `order`
// (order[k] = logical dim at physical position k; the last is fastest).
void compact_strides(int32_t ndim, const int64_t *shape, const int32_t *order, int64_t *strides) {
  int64_t s = 1;
  for (int32_t k = ndim - 1; k >= 0; --k) {
    strides[order[k]] = s;
    s *= shape[order[k]];
  }
}

// Does tensor t have the compact strides of `order`?  Dims of extent 1 can
// carry any stride (DLPack producers differ there).
bool has_order(const DLTensor *t, const int32_t *order) {
  int64_t want[5];
  compact_strides(t->ndim, t->shape, order, want);
  for (int32_t d = 0; d < t->ndim; ++d)
    if (t->shape[d] > 1 && tensor_stride(t, d) != want[d]) return false;
  return true;
}

const char *layout_name(int32_t l) { return l == VATTN_LAYOUT_HND ? "HND" : "NHD"; }

}  // namespace

vattn_status_t KvCache::allocate(LayerPlan plan, const std::vector<CacheGeometry> &geom,
                                 int64_t num_blocks, DLDevice dev, int32_t layout, bool zero_fill,
                                 std::unique_ptr<KvCache> *out) {
  if (num_blocks <= 0 || geom.size() != plan.group_specs.size() ||
      (layout != VATTN_LAYOUT_NHD && layout != VATTN_LAYOUT_HND))
    return fail(VATTN_ERR_INTERNAL, "KvCache::allocate: inconsistent arguments");
  const size_t n = plan.num_layers();
  std::unique_ptr<KvCache> c(new KvCache());
  c->views_.resize(n);
  c->num_blocks_ = num_blocks;
  c->dev_ = dev;
  c->layout_ = layout;

  // Sizes first (every check before the first allocation).
  std::vector<int64_t> bytes(n, 0);
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!plan.owns(i)) continue;
    const vattn_kv_cache_spec_t &s = plan.specs[i];
    const int64_t page = spec_page_bytes(s);
    if (__builtin_mul_overflow(num_blocks, page, &bytes[i]) || bytes[i] > INT64_MAX / 16 ||
        __builtin_add_overflow(total, bytes[i], &total) || total > INT64_MAX / 16)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument 'opts': num_blocks = %lld: %lld blocks of %lld bytes per layer "
                  "(specs[%zu]) overflow the addressable size",
                  static_cast<long long>(num_blocks), static_cast<long long>(num_blocks),
                  static_cast<long long>(page), i);
    const CacheGeometry &g = geom[plan.group[i]];
    int64_t shape[5];
    fill_shape(g, num_blocks, shape);
    int64_t numel = 1;
    for (int32_t d = 0; d < g.ndim; ++d) numel *= shape[d];
    if (numel * static_cast<int64_t>(dl_dtype_bytes(cache_dtype(s))) > bytes[i])
      return fail(VATTN_ERR_INTERNAL,
                  "the backend's cache shape for specs[%zu] needs more than its page size", i);
  }

  c->buffers_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const vattn_kv_cache_spec_t &s = plan.specs[i];
    const CacheGeometry &g = geom[plan.group[i]];
    View &v = c->views_[i];
    if (plan.target[i] >= 0) {
      v = c->views_[plan.target[i]];  // target < i: already built
      continue;
    }
    v.ndim = g.ndim;
    v.dtype = cache_dtype(s);
    const bool owns = plan.owns(i);
    fill_shape(g, owns ? num_blocks : 0, v.shape);
    compact_strides(g.ndim, v.shape, g.order[layout], v.strides);
    if (!owns) continue;  // ENCODER_ONLY: no cache, data NULL
    Buffer b;
    std::string what = format("layer %zu's cache", i);
    VATTN_TRY(Buffer::allocate(dev, bytes[i], zero_fill, what.c_str(), &b));
    v.data = b.data();
    c->buffers_.push_back(std::move(b));
  }
  c->owned_bytes_ = total;
  c->plan_ = std::move(plan);
  *out = std::move(c);
  return VATTN_OK;
}

vattn_status_t KvCache::wrap(LayerPlan plan, const std::vector<CacheGeometry> &geom,
                             const DLTensor *const *tensors, DLDevice dev,
                             int32_t preferred_layout, std::unique_ptr<KvCache> *out) {
  if (geom.size() != plan.group_specs.size())
    return fail(VATTN_ERR_INTERNAL, "KvCache::wrap: inconsistent arguments");
  VATTN_CHECK_NOT_NULL(tensors);
  const size_t n = plan.num_layers();
  int64_t nb = -1;
  size_t nb_at = 0;
  int32_t layout = -1;
  size_t layout_at = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string name = format("tensors[%zu]", i);
    const DLTensor *t = tensors[i];
    if (!plan.owns(i)) {
      VATTN_CHECK_ARG(t == nullptr,
                      "argument '%s' must be NULL: layer %zu %s", name.c_str(), i,
                      plan.target[i] >= 0 ? "reads another layer's cache (kv_sharing_target)"
                                          : "is ENCODER_ONLY and keeps no cache");
      continue;
    }
    VATTN_TRY(check_tensor_generic(t, name.c_str()));
    VATTN_CHECK_ARG(t->device.device_type == dev.device_type &&
                        (dev.device_type == kDLCPU || t->device.device_id == dev.device_id),
                    "tensor '%s' is on device (type %d, id %d) but the cache is on (type %d, id %d)",
                    name.c_str(), static_cast<int>(t->device.device_type), t->device.device_id,
                    static_cast<int>(dev.device_type), dev.device_id);
    const vattn_kv_cache_spec_t &s = plan.specs[i];
    const CacheGeometry &g = geom[plan.group[i]];
    VATTN_CHECK_ARG(dl_dtype_equal(t->dtype, cache_dtype(s)),
                    "tensor '%s': dtype %s, but specs[%zu] stores %s", name.c_str(),
                    dl_dtype_name(t->dtype), i, dl_dtype_name(cache_dtype(s)));
    int64_t want[5];
    fill_shape(g, t->ndim == g.ndim ? t->shape[g.block_dim] : 0, want);
    bool shape_ok = t->ndim == g.ndim;
    for (int32_t d = 0; shape_ok && d < g.ndim; ++d) shape_ok = t->shape[d] == want[d];
    if (!shape_ok) {
      std::string w = "[";
      for (int32_t d = 0; d < g.ndim; ++d)
        w += (d ? ", " : "") + (d == g.block_dim ? std::string("num_blocks") : std::to_string(want[d]));
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "tensor '%s': shape %s does not match the cache shape %s of specs[%zu]",
                  name.c_str(), shape_string(t).c_str(), (w + "]").c_str(), i);
    }
    const int64_t tnb = t->shape[g.block_dim];
    VATTN_CHECK_ARG(tnb > 0, "tensor '%s': num_blocks (dim %d) is 0", name.c_str(), g.block_dim);
    if (nb < 0) {
      nb = tnb;
      nb_at = i;
    }
    VATTN_CHECK_ARG(tnb == nb, "tensor '%s' has %lld blocks but tensors[%zu] has %lld",
                    name.c_str(), static_cast<long long>(tnb), nb_at, static_cast<long long>(nb));
    const bool m[2] = {has_order(t, g.order[VATTN_LAYOUT_NHD]), has_order(t, g.order[VATTN_LAYOUT_HND])};
    VATTN_CHECK_ARG(m[0] || m[1],
                    "tensor '%s': strides describe neither the NHD nor the HND layout of shape %s "
                    "(the cache must be compact in one of them)",
                    name.c_str(), shape_string(t).c_str());
    if (layout >= 0) {
      VATTN_CHECK_ARG(m[layout],
                      "tensor '%s' is laid out as %s but tensors[%zu] as %s: all layers must "
                      "share one layout",
                      name.c_str(), layout_name(1 - layout), layout_at, layout_name(layout));
    } else if (m[0] != m[1]) {
      layout = m[0] ? VATTN_LAYOUT_NHD : VATTN_LAYOUT_HND;
      layout_at = i;
    }
  }

  std::unique_ptr<KvCache> c(new KvCache());
  c->views_.resize(n);
  c->num_blocks_ = nb < 0 ? 0 : nb;
  c->dev_ = dev;
  c->layout_ = layout >= 0 ? layout : preferred_layout;
  for (size_t i = 0; i < n; ++i) {
    View &v = c->views_[i];
    if (plan.target[i] >= 0) {
      v = c->views_[plan.target[i]];
      continue;
    }
    const CacheGeometry &g = geom[plan.group[i]];
    v.ndim = g.ndim;
    v.dtype = cache_dtype(plan.specs[i]);
    if (!plan.owns(i)) {
      fill_shape(g, 0, v.shape);
      compact_strides(g.ndim, v.shape, g.order[c->layout_], v.strides);
      continue;
    }
    const DLTensor *t = tensors[i];
    v.data = t->data;
    v.byte_offset = t->byte_offset;
    for (int32_t d = 0; d < g.ndim; ++d) {
      v.shape[d] = t->shape[d];
      v.strides[d] = tensor_stride(t, d);
    }
  }
  c->plan_ = std::move(plan);
  *out = std::move(c);
  return VATTN_OK;
}

void KvCache::layer_tensor(size_t layer, DLTensor *out) const {
  const View &v = views_[layer];
  out->data = v.data;
  out->device = dev_;
  out->ndim = v.ndim;
  out->dtype = v.dtype;
  out->shape = const_cast<int64_t *>(v.shape);
  out->strides = const_cast<int64_t *>(v.strides);
  out->byte_offset = v.byte_offset;
}

}  // namespace vattn
