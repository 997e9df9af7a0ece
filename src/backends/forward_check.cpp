// forward_check.cpp -- see forward_check.h.  Messages name the argument as
// the caller spells it ("args.query", "kv_caches[2]", ...).
#include "backends/forward_check.h"

#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace vattn {
namespace {

vattn_status_t check_device(const DLTensor *t, const char *name, const DeviceReq &dev) {
  const int32_t dt = t->device.device_type;
  const bool ok = dt == dev.device_type || (dev.device_type == kDLCPU && dt == kDLCUDAHost);
  if (!ok)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor '%s': is on device type %d but this backend runs on device type %d", name,
                static_cast<int>(dt), static_cast<int>(dev.device_type));
  if (dev.device_id >= 0 && dt == kDLCUDA && t->device.device_id != dev.device_id)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': is on device %d, expected device %d",
                name, static_cast<int>(t->device.device_id), static_cast<int>(dev.device_id));
  return VATTN_OK;
}

vattn_status_t check_generic_on(const DLTensor *t, const char *name, const DeviceReq &dev) {
  VATTN_TRY(check_tensor_generic(t, name));
  return check_device(t, name, dev);
}

bool is_model_float(DLDataType t) {
  return t.lanes == 1 && ((t.code == kDLFloat && (t.bits == 32 || t.bits == 16)) ||
                          (t.code == kDLBfloat && t.bits == 16));
}

// A [>= min_rows, heads, head_size] tensor of dtype `dt`.
vattn_status_t check_rows(const DLTensor *t, const char *name, const DeviceReq &dev, DLDataType dt,
                          int64_t min_rows, int64_t heads, int64_t head_size) {
  VATTN_TRY(check_generic_on(t, name, dev));
  if (t->ndim != 3)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': has %d dims %s, expected 3 [tokens, %lld, %lld]",
                name, t->ndim, shape_string(t).c_str(), (long long)heads, (long long)head_size);
  if (t->shape[0] < min_rows || t->shape[1] != heads || t->shape[2] != head_size)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': shape %s does not match [>= %lld, %lld, %lld]",
                name, shape_string(t).c_str(), (long long)min_rows, (long long)heads,
                (long long)head_size);
  if (!dl_dtype_equal(t->dtype, dt))
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': dtype %s, expected %s", name,
                dl_dtype_name(t->dtype), dl_dtype_name(dt));
  return VATTN_OK;
}

vattn_status_t check_lse(const DLTensor *t, const char *name, const DeviceReq &dev, int64_t heads,
                         int64_t min_tokens, int64_t exact_tokens) {
  VATTN_TRY(check_generic_on(t, name, dev));
  const bool tok_ok = t->ndim == 2 && (exact_tokens >= 0 ? t->shape[1] == exact_tokens
                                                         : t->shape[1] >= min_tokens);
  if (t->ndim != 2 || t->shape[0] != heads || !tok_ok)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': shape %s does not match [%lld, %s%lld]",
                name, shape_string(t).c_str(), (long long)heads, exact_tokens >= 0 ? "" : ">= ",
                (long long)(exact_tokens >= 0 ? exact_tokens : min_tokens));
  if (!dl_dtype_equal(t->dtype, DLDataType{kDLFloat, 32, 1}))
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': dtype %s, expected float32", name,
                dl_dtype_name(t->dtype));
  return VATTN_OK;
}

}  // namespace

int32_t cache_storage_dtype(const LayerParams &p) {
  switch (p.kv_cache_dtype) {
    case VATTN_KV_CACHE_DTYPE_FP8_E4M3: return VATTN_DTYPE_FP8_E4M3;
    case VATTN_KV_CACHE_DTYPE_FP8_E5M2: return VATTN_DTYPE_FP8_E5M2;
    default: return p.dtype;
  }
}

vattn_status_t check_kv_cache_tensor(const DLTensor *t, const char *name, const DeviceReq &dev,
                                     int32_t dtype, int32_t block_size, int32_t num_kv_heads,
                                     int32_t head_size) {
  VATTN_TRY(check_generic_on(t, name, dev));
  if (t->ndim != 5 || t->shape[0] != 2 ||
      (block_size >= 0 && t->shape[2] != block_size) ||
      (num_kv_heads >= 0 && t->shape[3] != num_kv_heads) ||
      (head_size >= 0 && t->shape[4] != head_size)) {
    auto dim = [](int32_t v) { return v >= 0 ? std::to_string(v) : std::string("*"); };
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor '%s': shape %s does not match the KV cache shape (2, num_blocks, %s, %s, %s) "
                "(block_size, num_kv_heads, head_size)",
                name, shape_string(t).c_str(), dim(block_size).c_str(), dim(num_kv_heads).c_str(),
                dim(head_size).c_str());
  }
  DLDataType want{};
  if (!dl_dtype_of(dtype, &want))
    return fail(VATTN_ERR_INTERNAL, "tensor '%s': unknown cache dtype %d", name, dtype);
  if (!dl_dtype_equal(t->dtype, want))
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': dtype %s, expected %s (cache dtype %s)",
                name, dl_dtype_name(t->dtype), dl_dtype_name(want), vattn_dtype_name(dtype));
  return VATTN_OK;
}

vattn_status_t check_slots(const int64_t *slots, int64_t n, int64_t num_slots_in_cache,
                           const char *name) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = slots[i];
    if (s == VATTN_PAD_SLOT_ID) continue;
    if (s < 0 || s >= num_slots_in_cache)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument '%s': entry %lld = %lld is outside the cache's %lld slots "
                  "(num_blocks * block_size) and is not -1",
                  name, (long long)i, (long long)s, (long long)num_slots_in_cache);
  }
  return VATTN_OK;
}

vattn_status_t check_forward(const LayerParams &p, const Metadata &md, int32_t plan_block_size,
                             int64_t common_prefix_len, const vattn_forward_args_t &a,
                             const DeviceReq &dev, ForwardPlanSummary *out) {
  ForwardPlanSummary s;
  s.num_tokens = md.num_actual_tokens;
  s.num_real_tokens = md.num_real_tokens();
  s.num_slots = static_cast<int64_t>(md.slot_mapping.size());
  s.cascade = common_prefix_len > 0;

  DLDataType dt{};
  if (!dl_dtype_of(p.dtype, &dt))
    return fail(VATTN_ERR_INTERNAL, "layer dtype %d has no DLPack type", p.dtype);
  VATTN_TRY(check_rows(a.query, "args.query", dev, dt, s.num_tokens, p.num_heads, p.head_size));
  VATTN_TRY(check_rows(a.output, "args.output", dev, dt, s.num_tokens, p.num_heads, p.head_size));
  if (a.output_lse)
    VATTN_TRY(check_lse(a.output_lse, "args.output_lse", dev, p.num_heads, s.num_tokens, -1));

  const bool cross = p.attn_type == VATTN_ATTN_ENCODER_DECODER;
  if (p.attn_type == VATTN_ATTN_DECODER || cross) {
    s.reads_cache = true;
    s.causal = !cross && md.causal;
    if (p.block_size != plan_block_size)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument 'plan': built for block_size %d but the layer's block_size is %d",
                  plan_block_size, p.block_size);
    if (!a.kv_cache)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument 'args.kv_cache' is NULL (required by decoder and cross attention)");
    VATTN_TRY(check_kv_cache_tensor(a.kv_cache, "args.kv_cache", dev, cache_storage_dtype(p),
                                    plan_block_size, p.num_kv_heads, p.head_size));
    s.num_cache_blocks = a.kv_cache->shape[1];
    if (!p.kv_sharing) {
      if ((a.key == nullptr) != (a.value == nullptr))
        return fail(VATTN_ERR_INVALID_ARGUMENT,
                    "argument '%s' is NULL but '%s' is not (give both or neither)",
                    a.key ? "args.value" : "args.key", a.key ? "args.key" : "args.value");
      s.writes_cache = a.key != nullptr;
    }
    if (s.writes_cache) {
      VATTN_TRY(check_rows(a.key, "args.key", dev, dt, s.num_slots, p.num_kv_heads, p.head_size));
      VATTN_TRY(check_rows(a.value, "args.value", dev, dt, s.num_slots, p.num_kv_heads, p.head_size));
      // check_metadata measured the largest slot: O(1) when it fits.
      const int64_t cache_slots = s.num_cache_blocks * plan_block_size;
      if (!md.scan.slots_valid || md.scan.max_slot >= cache_slots)
        VATTN_TRY(check_slots(md.slot_mapping.data(), s.num_slots, cache_slots,
                              "plan.slot_mapping"));
    }
    // Every block a request reads must be in the table and in the cache.
    // check_metadata measured the largest id over the entries each request
    // needs (for this block size, or over whole rows): then this is O(1)
    // per layer; otherwise (or to name a bad entry) every entry is checked.
    const Metadata::Scan &sc = md.scan;
    const bool scan_fits =
        sc.blocks_valid && (sc.block_size == plan_block_size || sc.block_size == 0) &&
        (static_cast<int64_t>(sc.max_seq_len) + plan_block_size - 1) / plan_block_size <=
            md.block_table_cols &&
        sc.max_block_id < s.num_cache_blocks;
    for (int64_t r = 0; !scan_fits && r < md.num_reqs; ++r) {
      const int64_t kv_len = md.seq_lens[r];
      const int64_t need = (kv_len + plan_block_size - 1) / plan_block_size;
      if (need > md.block_table_cols)
        return fail(VATTN_ERR_INVALID_ARGUMENT,
                    "argument 'plan': request %lld needs %lld blocks for %lld tokens but the "
                    "block table has %lld columns",
                    (long long)r, (long long)need, (long long)kv_len, (long long)md.block_table_cols);
      const int32_t *row = md.block_row(r);
      for (int64_t j = 0; j < need; ++j)
        if (row[j] < 0 || row[j] >= s.num_cache_blocks)
          return fail(VATTN_ERR_INVALID_ARGUMENT,
                      "argument 'plan': block_table[%lld][%lld] = %d is outside args.kv_cache's "
                      "%lld blocks",
                      (long long)r, (long long)j, row[j], (long long)s.num_cache_blocks);
    }
  } else {
    // Encoder types attend over their own K/V rows; no cache is involved.
    s.dense_kv = true;
    s.causal = false;
    if (!a.key || !a.value)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument '%s' is NULL (encoder attention reads K/V directly)",
                  a.key ? "args.value" : "args.key");
    VATTN_TRY(check_rows(a.key, "args.key", dev, dt, s.num_real_tokens, p.num_kv_heads, p.head_size));
    VATTN_TRY(check_rows(a.value, "args.value", dev, dt, s.num_real_tokens, p.num_kv_heads, p.head_size));
  }

  if (s.cascade) {
    if (p.attn_type != VATTN_ATTN_DECODER)
      return fail(VATTN_ERR_UNSUPPORTED,
                  "argument 'plan': cascade attention (common_prefix_len %lld) needs a decoder layer",
                  (long long)common_prefix_len);
    if (!p.alibi_slopes.empty())
      return fail(VATTN_ERR_UNSUPPORTED,
                  "argument 'plan': cascade attention (common_prefix_len %lld) does not support ALiBi "
                  "(layer alibi_slopes set)",
                  (long long)common_prefix_len);
    if (p.sliding_window > 0)
      return fail(VATTN_ERR_UNSUPPORTED,
                  "argument 'plan': cascade attention (common_prefix_len %lld) does not support a "
                  "sliding window (layer sliding_window %d)",
                  (long long)common_prefix_len, p.sliding_window);
    if (!s.causal)
      return fail(VATTN_ERR_UNSUPPORTED,
                  "argument 'plan': cascade attention needs causal metadata");
  }
  *out = s;
  return VATTN_OK;
}

vattn_status_t check_reshape_and_cache(const DLTensor *key, const DLTensor *value,
                                       const DLTensor *kv_cache, const DLTensor *slot_mapping,
                                       int32_t kv_cache_dtype, const DeviceReq &dev,
                                       bool slots_on_host, int64_t *num_slots) {
  VATTN_TRY(check_generic_on(kv_cache, "kv_cache", dev));
  VATTN_TRY(check_generic_on(key, "key", dev));
  VATTN_TRY(check_generic_on(slot_mapping, "slot_mapping", dev));
  if (!is_model_float(key->dtype))
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'key': dtype %s, expected float32, float16 or bfloat16",
                dl_dtype_name(key->dtype));
  if (slot_mapping->ndim != 1 || !dl_dtype_equal(slot_mapping->dtype, DLDataType{kDLInt, 64, 1}))
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor 'slot_mapping': must be a 1-D int64 tensor (got %d dims %s, dtype %s)",
                slot_mapping->ndim, shape_string(slot_mapping).c_str(),
                dl_dtype_name(slot_mapping->dtype));
  const int64_t n = slot_mapping->shape[0];
  if (kv_cache->ndim != 5)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor 'kv_cache': has %d dims %s, expected 5 (2, num_blocks, block_size, "
                "num_kv_heads, head_size)",
                kv_cache->ndim, shape_string(kv_cache).c_str());
  const int64_t heads = kv_cache->shape[3], hs = kv_cache->shape[4];
  VATTN_TRY(check_rows(key, "key", dev, key->dtype, n, heads, hs));
  VATTN_TRY(check_rows(value, "value", dev, key->dtype, n, heads, hs));
  int32_t store = VATTN_DTYPE_FLOAT32;
  if (kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E4M3) store = VATTN_DTYPE_FP8_E4M3;
  else if (kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E5M2) store = VATTN_DTYPE_FP8_E5M2;
  else if (key->dtype.code == kDLBfloat) store = VATTN_DTYPE_BFLOAT16;
  else if (key->dtype.bits == 16) store = VATTN_DTYPE_FLOAT16;
  VATTN_TRY(check_kv_cache_tensor(kv_cache, "kv_cache", dev, store, -1, -1, -1));
  const int64_t cache_slots = kv_cache->shape[1] * kv_cache->shape[2];
  if (slots_on_host) {
    if (!tensor_is_contiguous(slot_mapping) && n > 1)
      return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'slot_mapping': must be contiguous");
    const int64_t *slots = reinterpret_cast<const int64_t *>(tensor_data(slot_mapping));
    VATTN_TRY(check_slots(slots, n, cache_slots, "slot_mapping"));
  }
  *num_slots = n;
  return VATTN_OK;
}

vattn_status_t check_merge(const DLTensor *output, const DLTensor *output_lse,
                           const DLTensor *prefix_output, const DLTensor *prefix_lse,
                           const DLTensor *suffix_output, const DLTensor *suffix_lse,
                           const DeviceReq &dev) {
  VATTN_TRY(check_generic_on(output, "output", dev));
  if (output->ndim != 3)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'output': has %d dims %s, expected 3 [T, H, D]",
                output->ndim, shape_string(output).c_str());
  if (!is_model_float(output->dtype))
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "tensor 'output': dtype %s, expected float32, float16 or bfloat16",
                dl_dtype_name(output->dtype));
  const int64_t T = output->shape[0], H = output->shape[1], D = output->shape[2];
  auto same = [&](const DLTensor *t, const char *name) -> vattn_status_t {
    VATTN_TRY(check_generic_on(t, name, dev));
    if (t->ndim != 3 || t->shape[0] != T || t->shape[1] != H || t->shape[2] != D)
      return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': shape %s does not match output's %s",
                  name, shape_string(t).c_str(), shape_string(output).c_str());
    if (!dl_dtype_equal(t->dtype, output->dtype))
      return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': dtype %s, expected %s (output's)", name,
                  dl_dtype_name(t->dtype), dl_dtype_name(output->dtype));
    return VATTN_OK;
  };
  VATTN_TRY(same(prefix_output, "prefix_output"));
  VATTN_TRY(same(suffix_output, "suffix_output"));
  VATTN_TRY(check_lse(prefix_lse, "prefix_lse", dev, H, T, T));
  VATTN_TRY(check_lse(suffix_lse, "suffix_lse", dev, H, T, T));
  if (output_lse) VATTN_TRY(check_lse(output_lse, "output_lse", dev, H, T, T));
  return VATTN_OK;
}

int block_dim_of(const DLTensor *t) { return t->ndim == 5 && t->shape[0] == 2 ? 1 : 0; }

vattn_status_t check_copy_blocks(DLTensor *const *kv_caches, size_t num_layers,
                                 const int64_t *block_mapping, size_t num_pairs,
                                 const DeviceReq &dev) {
  for (size_t l = 0; l < num_layers; ++l) {
    const std::string name = "kv_caches[" + std::to_string(l) + "]";
    VATTN_TRY(check_generic_on(kv_caches[l], name.c_str(), dev));
    if (kv_caches[l]->ndim < 1)
      return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': is a scalar, expected a cache",
                  name.c_str());
    if (kv_caches[l]->ndim != kv_caches[0]->ndim)
      return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor '%s': has %d dims but kv_caches[0] has %d",
                  name.c_str(), kv_caches[l]->ndim, kv_caches[0]->ndim);
    const int64_t nb = kv_caches[l]->shape[block_dim_of(kv_caches[l])];
    for (size_t i = 0; i < 2 * num_pairs; ++i)
      if (block_mapping[i] < 0 || block_mapping[i] >= nb)
        return fail(VATTN_ERR_INVALID_ARGUMENT,
                    "argument 'block_mapping': entry [%zu][%zu] = %lld is outside %s's %lld blocks",
                    i / 2, i % 2, (long long)block_mapping[i], name.c_str(), (long long)nb);
  }
  return VATTN_OK;
}

vattn_status_t check_swap_blocks(const DLTensor *src, const DLTensor *dst,
                                 const int64_t *block_mapping, size_t num_pairs) {
  if (src->ndim < 1 || src->ndim != dst->ndim)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'dst': has %d dims but 'src' has %d", dst->ndim,
                src->ndim);
  if (!dl_dtype_equal(src->dtype, dst->dtype))
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'dst': dtype %s differs from src's %s",
                dl_dtype_name(dst->dtype), dl_dtype_name(src->dtype));
  const int bd = block_dim_of(src);
  if (block_dim_of(dst) != bd)
    return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'dst': shape %s is not a cache like src's %s",
                shape_string(dst).c_str(), shape_string(src).c_str());
  for (int i = 0; i < src->ndim; ++i)
    if (src->shape[i] != dst->shape[i])
      return fail(VATTN_ERR_INVALID_ARGUMENT, "tensor 'dst': shape %s differs from src's %s",
                  shape_string(dst).c_str(), shape_string(src).c_str());
  const int64_t nbs = src->shape[bd], nbd = dst->shape[bd];
  for (size_t i = 0; i < num_pairs; ++i) {
    const int64_t s = block_mapping[2 * i], d = block_mapping[2 * i + 1];
    if (s < 0 || s >= nbs)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument 'block_mapping': entry [%zu][0] = %lld is outside src's %lld blocks", i,
                  (long long)s, (long long)nbs);
    if (d < 0 || d >= nbd)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument 'block_mapping': entry [%zu][1] = %lld is outside dst's %lld blocks", i,
                  (long long)d, (long long)nbd);
  }
  return VATTN_OK;
}

}  // namespace vattn
