// backend.cpp -- checks shared by every backend: can a backend serve a
// selector, is a layer configuration within what it declares.
#include "backends/backend.h"

#include "core/error.h"
#include "core/tensor.h"

namespace vattn {

uint32_t LayerParams::features() const {
  uint32_t f = 0;
  if (!alibi_slopes.empty()) f |= VATTN_FEATURE_ALIBI;
  if (sliding_window > 0) f |= VATTN_FEATURE_SLIDING_WINDOW;
  if (logits_soft_cap > 0.f) f |= VATTN_FEATURE_SOFT_CAP;
  if (!sinks.empty()) f |= VATTN_FEATURE_SINKS;
  if (kv_cache_dtype != VATTN_KV_CACHE_DTYPE_AUTO) f |= VATTN_FEATURE_FP8_KV_CACHE;
  if (kv_sharing) f |= VATTN_FEATURE_KV_SHARING;
  return f;
}

namespace {
bool head_size_ok(const vattn_backend_info_t &in, int32_t hs) {
  if (hs <= 0 || hs > in.max_head_size) return false;
  if (in.head_size_multiple > 0) return hs % in.head_size_multiple == 0;
  for (size_t i = 0; i < in.num_head_sizes; ++i)
    if (in.head_sizes[i] == hs) return true;
  return false;
}
}  // namespace

std::string Backend::reject_reason(const vattn_backend_selector_t &sel) const {
  const vattn_backend_info_t &in = info();
  if (sel.device_type != 0 && sel.device_type != in.device_type)
    return format("runs on device type %d, not %d", in.device_type, sel.device_type);
  if (sel.use_mla && !(in.features & VATTN_FEATURE_MLA)) return "no MLA support";
  if (!head_size_ok(in, sel.head_size))
    return format("head size %d unsupported (multiples of %d up to %d)", sel.head_size,
                  in.head_size_multiple, in.max_head_size);
  if (sel.dtype <= 0 || sel.dtype >= 32 || !(in.dtypes & (1u << sel.dtype)))
    return format("dtype %s unsupported", vattn_dtype_name(sel.dtype));
  if (sel.kv_cache_dtype < 0 || sel.kv_cache_dtype >= 32 ||
      !(in.kv_cache_dtypes & (1u << sel.kv_cache_dtype)))
    return format("kv_cache_dtype %d unsupported", sel.kv_cache_dtype);
  if (sel.block_size <= 0 || (in.block_size_multiple > 0 && sel.block_size % in.block_size_multiple))
    return format("block size %d unsupported (must be a positive multiple of %d)", sel.block_size,
                  in.block_size_multiple);
  if (sel.attn_type < 0 || sel.attn_type >= 32 || !(in.attn_types & (1u << sel.attn_type)))
    return format("attention type %d unsupported", sel.attn_type);
  if (sel.has_sink && !(in.features & VATTN_FEATURE_SINKS)) return "no attention sinks";
  uint32_t missing = sel.features & ~in.features;
  if (missing) return format("missing features 0x%x", missing);
  return std::string();
}

vattn_status_t Backend::check_layer(const LayerParams &p) const {
  const vattn_backend_info_t &in = info();
  if (!head_size_ok(in, p.head_size))
    return fail(VATTN_ERR_UNSUPPORTED,
                "backend %s: head_size %d is not supported (multiples of %d up to %d)", in.name,
                p.head_size, in.head_size_multiple, in.max_head_size);
  if (p.dtype <= 0 || p.dtype >= 32 || !(in.dtypes & (1u << p.dtype)))
    return fail(VATTN_ERR_UNSUPPORTED, "backend %s: dtype %s is not supported", in.name,
                vattn_dtype_name(p.dtype));
  if (!(in.kv_cache_dtypes & (1u << p.kv_cache_dtype)))
    return fail(VATTN_ERR_UNSUPPORTED, "backend %s: kv_cache_dtype %d is not supported", in.name,
                p.kv_cache_dtype);
  if (!(in.attn_types & (1u << p.attn_type)))
    return fail(VATTN_ERR_UNSUPPORTED, "backend %s: attn_type %d is not supported", in.name,
                p.attn_type);
  if (p.block_size <= 0 || (in.block_size_multiple > 0 && p.block_size % in.block_size_multiple))
    return fail(VATTN_ERR_UNSUPPORTED,
                "backend %s: block_size %d is not supported (positive multiple of %d)", in.name,
                p.block_size, in.block_size_multiple);
  uint32_t missing = p.features() & ~in.features;
  if (missing)
    return fail(VATTN_ERR_UNSUPPORTED, "backend %s: layer needs unsupported features 0x%x",
                in.name, missing);
  return VATTN_OK;
}

}  // namespace vattn
