// backend_api.cpp -- header section 4: registry, selector, descriptors,
// KV cache shape / stride order, and the KV cache layout setting.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/backend.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/options.h"

namespace {

// One C handle per registered backend, built once.
const vattn_backend *handle_at(size_t i) {
  static const std::vector<vattn_backend> handles = [] {
    std::vector<vattn_backend> h;
    for (size_t k = 0; k < vattn::backend_count(); ++k) h.push_back(vattn_backend{vattn::backend_at(k)});
    return h;
  }();
  return i < handles.size() ? &handles[i] : nullptr;
}

bool iequal(const char *a, const char *b) {
  for (; *a && *b; ++a, ++b) {
    char x = *a, y = *b;
    if (x >= 'a' && x <= 'z') x = static_cast<char>(x - 32);
    if (y >= 'a' && y <= 'z') y = static_cast<char>(y - 32);
    if (x != y) return false;
  }
  return *a == *b;
}

// -1 = no override.
std::atomic<int32_t> g_layout_override{-1};

int32_t default_device_type() {
  return vattn::cuda_device_count() > 0 && vattn::backend_for_device(kDLCUDA) ? kDLCUDA : kDLCPU;
}

}  // namespace

extern "C" {

VATTN_API size_t vattn_backend_count(void) { return vattn::backend_count(); }

VATTN_API vattn_status_t vattn_backend_get(size_t index, const vattn_backend_t **out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    const vattn_backend *h = handle_at(index);
    if (!h)
      return vattn::fail(VATTN_ERR_NOT_FOUND, "argument 'index' = %zu: only %zu backends", index,
                         vattn::backend_count());
    *out = h;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_backend_find(const char *name, const vattn_backend_t **out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(name);
    std::string names;
    for (size_t i = 0; i < vattn::backend_count(); ++i) {
      const vattn_backend *h = handle_at(i);
      if (iequal(h->impl->info().name, name)) {
        *out = h;
        return VATTN_OK;
      }
      names += (i ? ", " : "") + std::string(h->impl->info().name);
    }
    return vattn::fail(VATTN_ERR_NOT_FOUND, "argument 'name': no backend '%s' (have: %s)", name,
                       names.c_str());
  });
}

VATTN_API vattn_status_t vattn_backend_get_info(const vattn_backend_t *backend,
                                                vattn_backend_info_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(backend);
    VATTN_TRY(vattn::check_out_struct(out, VATTN_STRUCT_MIN_SIZE(vattn_backend_info_t, num_head_sizes), "out"));
    vattn::write_out(out, backend->impl->info());
    return VATTN_OK;
  });
}

VATTN_API void vattn_backend_selector_init(vattn_backend_selector_t *sel) {
  if (!sel) return;
  std::memset(sel, 0, sizeof *sel);
  sel->struct_size = sizeof *sel;
  sel->head_size = 128;
  sel->dtype = VATTN_DTYPE_BFLOAT16;
  sel->kv_cache_dtype = VATTN_KV_CACHE_DTYPE_AUTO;
  sel->block_size = 16;
  sel->attn_type = VATTN_ATTN_DECODER;
  sel->device_type = 0;
}

VATTN_API vattn_status_t vattn_get_attn_backend(const vattn_backend_selector_t *sel_in,
                                                const vattn_backend_t **out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    // The header calls this parameter 'sel': name it so in the message.
    if (sel_in == nullptr) return vattn::fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'sel' is NULL");
    vattn_backend_selector_t sel;
    VATTN_TRY(vattn::read_options(sel_in, &sel, vattn_backend_selector_init,
                                  VATTN_STRUCT_MIN_SIZE(vattn_backend_selector_t, features), "sel"));
    VATTN_CHECK_ARG(sel.device_type == 0 || sel.device_type == kDLCPU || sel.device_type == kDLCUDA,
                    "argument 'sel': device_type %d is not 0, kDLCPU or kDLCUDA", sel.device_type);
    if (sel.device_type == 0) sel.device_type = default_device_type();

    const char *forced = std::getenv("VATTN_ATTENTION_BACKEND");
    std::string why;
    for (size_t i = 0; i < vattn::backend_count(); ++i) {
      const vattn_backend *h = handle_at(i);
      const char *name = h->impl->info().name;
      if (forced && *forced) {
        if (!iequal(forced, name)) continue;
        // A forced backend is still checked, except for the device preference.
        vattn_backend_selector_t s2 = sel;
        s2.device_type = 0;
        std::string r = h->impl->reject_reason(s2);
        if (!r.empty())
          return vattn::fail(VATTN_ERR_UNSUPPORTED,
                             "VATTN_ATTENTION_BACKEND=%s cannot serve this layer: %s", forced,
                             r.c_str());
        if (h->impl->info().device_type == kDLCUDA && vattn::cuda_device_count() == 0)
          return vattn::fail(VATTN_ERR_NO_DEVICE,
                             "VATTN_ATTENTION_BACKEND=%s but no usable CUDA device", forced);
        *out = h;
        return VATTN_OK;
      }
      std::string r = h->impl->reject_reason(sel);
      // A GPU backend cannot serve anything on a machine without a GPU (the
      // forced path above reports this as VATTN_ERR_NO_DEVICE).
      if (r.empty() && h->impl->info().device_type == kDLCUDA && vattn::cuda_device_count() == 0)
        r = "no usable CUDA device";
      if (r.empty()) {
        *out = h;
        return VATTN_OK;
      }
      why += std::string(why.empty() ? "" : "; ") + name + ": " + r;
    }
    if (forced && *forced)
      return vattn::fail(VATTN_ERR_NOT_FOUND, "VATTN_ATTENTION_BACKEND=%s names no backend", forced);
    return vattn::fail(VATTN_ERR_UNSUPPORTED, "no attention backend fits (%s)", why.c_str());
  });
}

VATTN_API vattn_status_t vattn_backend_kv_cache_shape(const vattn_backend_t *backend,
                                                      int64_t num_blocks, int32_t block_size,
                                                      int32_t num_kv_heads, int32_t head_size,
                                                      int32_t use_mla, int64_t *shape_out,
                                                      int32_t *ndim_out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(backend);
    VATTN_CHECK_NOT_NULL(shape_out);
    VATTN_CHECK_NOT_NULL(ndim_out);
    VATTN_CHECK_ARG(num_blocks >= 0, "argument 'num_blocks' = %lld is negative", (long long)num_blocks);
    VATTN_CHECK_ARG(num_kv_heads > 0, "argument 'num_kv_heads' = %d must be positive", num_kv_heads);
    VATTN_CHECK_ARG(head_size > 0, "argument 'head_size' = %d must be positive", head_size);
    const vattn_backend_info_t &in = backend->impl->info();
    if (block_size <= 0 || (in.block_size_multiple > 0 && block_size % in.block_size_multiple))
      return vattn::fail(VATTN_ERR_INVALID_ARGUMENT,
                         "argument 'block_size' = %d: block size must be a positive multiple of %d",
                         block_size, in.block_size_multiple);
    if (use_mla) {
      if (!(in.features & VATTN_FEATURE_MLA))
        return vattn::fail(VATTN_ERR_UNSUPPORTED, "backend %s has no MLA cache", in.name);
      shape_out[0] = num_blocks;
      shape_out[1] = block_size;
      shape_out[2] = head_size;
      *ndim_out = 3;
      return VATTN_OK;
    }
    shape_out[0] = 2;
    shape_out[1] = num_blocks;
    shape_out[2] = block_size;
    shape_out[3] = num_kv_heads;
    shape_out[4] = head_size;
    *ndim_out = 5;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_backend_kv_cache_stride_order(const vattn_backend_t *backend,
                                                             int32_t layout,
                                                             int32_t include_num_layers_dimension,
                                                             int32_t *order_out,
                                                             int32_t *ndim_out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(backend);
    VATTN_CHECK_NOT_NULL(order_out);
    VATTN_CHECK_NOT_NULL(ndim_out);
    VATTN_CHECK_ARG(layout == VATTN_LAYOUT_NHD || layout == VATTN_LAYOUT_HND,
                    "argument 'layout' = %d: unknown KV cache layout (NHD=0, HND=1)", layout);
    static const int32_t nhd[5] = {0, 1, 2, 3, 4}, hnd[5] = {0, 1, 3, 2, 4};
    static const int32_t nhd_l[6] = {2, 0, 1, 3, 4, 5}, hnd_l[6] = {2, 4, 0, 1, 3, 5};
    const int32_t *src = include_num_layers_dimension ? (layout == VATTN_LAYOUT_NHD ? nhd_l : hnd_l)
                                                      : (layout == VATTN_LAYOUT_NHD ? nhd : hnd);
    int32_t n = include_num_layers_dimension ? 6 : 5;
    for (int32_t i = 0; i < n; ++i) order_out[i] = src[i];
    *ndim_out = n;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_get_kv_cache_layout(int32_t *layout_out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(layout_out);
    int32_t o = g_layout_override.load();
    if (o >= 0) {
      *layout_out = o;
      return VATTN_OK;
    }
    const char *env = std::getenv("VATTN_KV_CACHE_LAYOUT");
    if (env && *env) {
      if (std::strcmp(env, "NHD") == 0) *layout_out = VATTN_LAYOUT_NHD;
      else if (std::strcmp(env, "HND") == 0) *layout_out = VATTN_LAYOUT_HND;
      else
        return vattn::fail(VATTN_ERR_INVALID_ARGUMENT,
                           "environment VATTN_KV_CACHE_LAYOUT='%s' is not NHD or HND", env);
      return VATTN_OK;
    }
    *layout_out = VATTN_LAYOUT_NHD;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_set_kv_cache_layout(int32_t layout) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_ARG(layout < 0 || layout == VATTN_LAYOUT_NHD || layout == VATTN_LAYOUT_HND,
                    "argument 'layout' = %d: unknown KV cache layout (NHD=0, HND=1, <0 clears)",
                    layout);
    g_layout_override.store(layout < 0 ? -1 : layout);
    return VATTN_OK;
  });
}

}  // extern "C"
