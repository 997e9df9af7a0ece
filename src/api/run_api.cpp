// run_api.cpp -- header sections 10-12: builders, plans, layers, forward,
// and the cache/merge operations.  These shims validate handles and option
// structs, then hand over to the backend (src/backends/<name>/).
#include <cmath>
#include <cstring>
#include <memory>

#include "backends/backend.h"
#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/options.h"
#include "core/tensor.h"

extern "C" {

// ---- builder + plan -----------------------------------------------------------

VATTN_API void vattn_builder_options_init(vattn_builder_options_t *o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->num_heads = 32;
  o->num_kv_heads = 8;
  o->head_size = 128;
  o->block_size = 16;
  o->max_num_reqs = 256;
  o->max_num_tokens = 8192;
  o->max_blocks_per_req = 2048;
}

VATTN_API vattn_status_t vattn_builder_create(vattn_builder_t **out, const vattn_backend_t *backend,
                                              const vattn_builder_options_t *opts_in) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(backend);
    vattn_builder_options_t o;
    VATTN_TRY(vattn::read_options(opts_in, &o, vattn_builder_options_init,
                                  VATTN_STRUCT_MIN_SIZE(vattn_builder_options_t, max_num_splits), "opts"));
    VATTN_CHECK_ARG(o.num_heads > 0, "argument 'opts': num_heads = %d must be positive", o.num_heads);
    VATTN_CHECK_ARG(o.num_kv_heads > 0 && o.num_heads % o.num_kv_heads == 0,
                    "argument 'opts': num_kv_heads = %d must be positive and divide num_heads = %d",
                    o.num_kv_heads, o.num_heads);
    VATTN_CHECK_ARG(o.head_size > 0, "argument 'opts': head_size = %d must be positive", o.head_size);
    VATTN_CHECK_ARG(o.block_size > 0, "argument 'opts': block_size = %d must be positive", o.block_size);
    VATTN_CHECK_ARG(o.max_num_reqs > 0, "argument 'opts': max_num_reqs = %d must be positive", o.max_num_reqs);
    VATTN_CHECK_ARG(o.max_num_tokens > 0 && o.max_num_tokens <= (INT64_C(1) << 31),
                    "argument 'opts': max_num_tokens = %lld is out of range", (long long)o.max_num_tokens);
    VATTN_CHECK_ARG(o.max_blocks_per_req > 0, "argument 'opts': max_blocks_per_req = %d must be positive",
                    o.max_blocks_per_req);
    VATTN_CHECK_ARG(o.num_threads >= 0, "argument 'opts': num_threads = %d is negative", o.num_threads);
    VATTN_CHECK_ARG(o.num_sms >= 0, "argument 'opts': num_sms = %d is negative", o.num_sms);
    VATTN_CHECK_ARG(o.max_num_splits >= 0, "argument 'opts': max_num_splits = %d is negative", o.max_num_splits);
    VATTN_CHECK_ARG(o.kv_cache_dtype == VATTN_KV_CACHE_DTYPE_AUTO || o.kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E4M3 ||
                        o.kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E5M2,
                    "argument 'opts': kv_cache_dtype = %d is not a VATTN_KV_CACHE_DTYPE_* value", o.kv_cache_dtype);
    VATTN_CHECK_ARG(o.device_id >= 0, "argument 'opts': device_id = %d is negative", o.device_id);
    auto b = std::make_unique<vattn_builder>();
    b->backend = backend->impl;
    b->opts = o;
    VATTN_TRY(backend->impl->create_builder(o, &b->impl));
    *out = b.release();
    return VATTN_OK;
  });
}

VATTN_API void vattn_builder_destroy(vattn_builder_t *b) {
  vattn::guard_void([&] { delete b; });
}

VATTN_API vattn_status_t vattn_builder_cudagraph_support(const vattn_builder_t *b, int32_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(b);
    VATTN_CHECK_NOT_NULL(out);
    *out = b->impl->cudagraph_support();
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_builder_reorder_batch_threshold(const vattn_builder_t *b, int32_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(b);
    VATTN_CHECK_NOT_NULL(out);
    *out = b->impl->reorder_batch_threshold();
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_plan_create(vattn_plan_t **out, const vattn_builder_t *b) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(b);
    auto p = std::make_unique<vattn_plan>();
    p->backend = b->backend;
    p->builder = b;
    VATTN_TRY(b->impl->create_plan(&p->impl));
    p->impl->max_num_reqs = b->opts.max_num_reqs;
    p->impl->max_num_tokens = b->opts.max_num_tokens;
    p->impl->max_blocks_per_req = b->opts.max_blocks_per_req;
    *out = p.release();
    return VATTN_OK;
  });
}

VATTN_API void vattn_plan_destroy(vattn_plan_t *plan) {
  vattn::guard_void([&] { delete plan; });
}

static vattn_status_t build_common(vattn_builder_t *b, vattn_plan_t *plan, int64_t common_prefix_len,
                                   const vattn_metadata_t *md, bool fast_build, vattn::BuildMode mode,
                                   void *stream) {
  VATTN_CHECK_NOT_NULL(b);
  VATTN_CHECK_NOT_NULL(plan);
  VATTN_CHECK_NOT_NULL(md);
  VATTN_CHECK_ARG(plan->backend == b->backend,
                  "argument 'plan' was created by a builder of another backend");
  VATTN_CHECK_ARG(common_prefix_len >= 0, "argument 'common_prefix_len' = %lld is negative",
                  (long long)common_prefix_len);
  const vattn::Metadata &m = md->md;
  const vattn::PlanImpl &pi = *plan->impl;
  if (m.num_reqs > pi.max_num_reqs || m.num_actual_tokens > pi.max_num_tokens ||
      m.block_table_cols > pi.max_blocks_per_req)
    return vattn::fail(VATTN_ERR_WORKSPACE_TOO_SMALL,
                       "argument 'md' (%lld requests, %lld tokens, %lld blocks per request) exceeds "
                       "the plan's capacity (%d, %lld, %d): raise the builder's max_num_reqs / "
                       "max_num_tokens / max_blocks_per_req",
                       (long long)m.num_reqs, (long long)m.num_actual_tokens,
                       (long long)m.block_table_cols, pi.max_num_reqs, (long long)pi.max_num_tokens,
                       pi.max_blocks_per_req);
  if (common_prefix_len > 0) {
    VATTN_CHECK_ARG(common_prefix_len % b->opts.block_size == 0,
                    "argument 'common_prefix_len' = %lld is not a multiple of block_size %d",
                    (long long)common_prefix_len, b->opts.block_size);
    for (int64_t r = 0; r < m.num_reqs; ++r)
      VATTN_CHECK_ARG(m.num_computed_tokens[r] >= common_prefix_len,
                      "argument 'common_prefix_len' = %lld exceeds request %lld's context of %d tokens",
                      (long long)common_prefix_len, (long long)r, m.num_computed_tokens[r]);
  }
  return b->impl->build(*plan->impl, common_prefix_len, m, fast_build, mode, stream);
}

VATTN_API vattn_status_t vattn_builder_build(vattn_builder_t *b, vattn_plan_t *plan,
                                             int64_t common_prefix_len, const vattn_metadata_t *md,
                                             int32_t fast_build, void *stream) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    return build_common(b, plan, common_prefix_len, md, fast_build != 0, vattn::BuildMode::kNormal, stream);
  });
}

VATTN_API vattn_status_t vattn_builder_build_for_cudagraph_capture(vattn_builder_t *b, vattn_plan_t *plan,
                                                                   const vattn_metadata_t *md, void *stream) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    return build_common(b, plan, 0, md, false, vattn::BuildMode::kCudagraphCapture, stream);
  });
}

VATTN_API vattn_status_t vattn_builder_build_for_drafting(vattn_builder_t *b, vattn_plan_t *plan,
                                                          const vattn_metadata_t *md,
                                                          int32_t draft_index, void *stream) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_ARG(draft_index >= 0, "argument 'draft_index' = %d is negative", draft_index);
    return build_common(b, plan, 0, md, true, vattn::BuildMode::kDrafting, stream);
  });
}

// ---- layers ---------------------------------------------------------------------

VATTN_API void vattn_layer_options_init(vattn_layer_options_t *o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->num_heads = 32;
  o->head_size = 128;
  o->num_kv_heads = 0;
  o->scale = 0.f;
  o->dtype = VATTN_DTYPE_BFLOAT16;
  o->kv_cache_dtype = VATTN_KV_CACHE_DTYPE_AUTO;
  o->attn_type = VATTN_ATTN_DECODER;
  o->block_size = 16;
}

static vattn_status_t layer_params_from(const vattn_layer_options_t &o, vattn::LayerParams *p) {
  VATTN_CHECK_ARG(o.num_heads > 0, "argument 'opts': num_heads = %d must be positive", o.num_heads);
  VATTN_CHECK_ARG(o.head_size > 0, "argument 'opts': head_size = %d must be positive", o.head_size);
  int32_t kvh = o.num_kv_heads == 0 ? o.num_heads : o.num_kv_heads;
  VATTN_CHECK_ARG(kvh > 0 && o.num_heads % kvh == 0,
                  "argument 'opts': num_kv_heads = %d must be positive and divide num_heads = %d",
                  o.num_kv_heads, o.num_heads);
  VATTN_CHECK_ARG(std::isfinite(o.scale) && o.scale >= 0.f,
                  "argument 'opts': scale = %g must be finite and >= 0 (0 = 1/sqrt(head_size))",
                  (double)o.scale);
  VATTN_CHECK_ARG(o.dtype == VATTN_DTYPE_FLOAT32 || o.dtype == VATTN_DTYPE_FLOAT16 ||
                      o.dtype == VATTN_DTYPE_BFLOAT16,
                  "argument 'opts': dtype = %d must be FLOAT32, FLOAT16 or BFLOAT16", o.dtype);
  VATTN_CHECK_ARG(o.kv_cache_dtype >= VATTN_KV_CACHE_DTYPE_AUTO &&
                      o.kv_cache_dtype <= VATTN_KV_CACHE_DTYPE_FP8_E5M2,
                  "argument 'opts': kv_cache_dtype = %d is unknown", o.kv_cache_dtype);
  VATTN_CHECK_ARG(o.attn_type >= VATTN_ATTN_DECODER && o.attn_type <= VATTN_ATTN_ENCODER_DECODER,
                  "argument 'opts': attn_type = %d is unknown", o.attn_type);
  VATTN_CHECK_ARG(o.sliding_window >= 0, "argument 'opts': sliding_window = %d is negative",
                  o.sliding_window);
  VATTN_CHECK_ARG(std::isfinite(o.logits_soft_cap) && o.logits_soft_cap >= 0.f,
                  "argument 'opts': logits_soft_cap = %g must be finite and >= 0",
                  (double)o.logits_soft_cap);
  VATTN_CHECK_ARG(o.block_size > 0, "argument 'opts': block_size = %d must be positive", o.block_size);
  p->num_heads = o.num_heads;
  p->head_size = o.head_size;
  p->num_kv_heads = kvh;
  p->scale = o.scale == 0.f ? 1.0f / std::sqrt(static_cast<float>(o.head_size)) : o.scale;
  p->dtype = o.dtype;
  p->kv_cache_dtype = o.kv_cache_dtype;
  p->attn_type = o.attn_type;
  p->sliding_window = o.sliding_window;
  p->logits_soft_cap = o.logits_soft_cap;
  p->kv_sharing = o.kv_sharing != 0;
  p->block_size = o.block_size;
  if (o.alibi_slopes) {
    p->alibi_slopes.assign(o.alibi_slopes, o.alibi_slopes + o.num_heads);
    for (int32_t h = 0; h < o.num_heads; ++h)
      VATTN_CHECK_ARG(std::isfinite(p->alibi_slopes[h]), "argument 'opts': alibi_slopes[%d] is not finite", h);
  }
  if (o.sinks) {
    p->sinks.assign(o.sinks, o.sinks + o.num_heads);
    for (int32_t h = 0; h < o.num_heads; ++h)
      VATTN_CHECK_ARG(!std::isnan(p->sinks[h]), "argument 'opts': sinks[%d] is NaN", h);
  }
  return VATTN_OK;
}

VATTN_API vattn_status_t vattn_layer_create(vattn_layer_t **out, const vattn_backend_t *backend,
                                            const vattn_layer_options_t *opts_in) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    *out = nullptr;
    VATTN_CHECK_NOT_NULL(backend);
    vattn_layer_options_t o;
    VATTN_TRY(vattn::read_options(opts_in, &o, vattn_layer_options_init,
                                  VATTN_STRUCT_MIN_SIZE(vattn_layer_options_t, block_size), "opts"));
    auto l = std::make_unique<vattn_layer>();
    l->backend = backend->impl;
    VATTN_TRY(layer_params_from(o, &l->params));
    VATTN_TRY(backend->impl->check_layer(l->params));
    VATTN_TRY(backend->impl->create_layer(l->params, &l->impl));
    *out = l.release();
    return VATTN_OK;
  });
}

VATTN_API void vattn_layer_destroy(vattn_layer_t *layer) {
  vattn::guard_void([&] { delete layer; });
}

VATTN_API void vattn_forward_args_init(vattn_forward_args_t *a) {
  if (!a) return;
  std::memset(a, 0, sizeof *a);
  a->struct_size = sizeof *a;
  a->k_scale = 1.f;
  a->v_scale = 1.f;
}

VATTN_API vattn_status_t vattn_layer_forward(const vattn_layer_t *layer, const vattn_plan_t *plan,
                                             const vattn_forward_args_t *args_in) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(layer);
    VATTN_CHECK_NOT_NULL(plan);
    VATTN_CHECK_NOT_NULL(args_in);
    vattn_forward_args_t a;
    VATTN_TRY(vattn::read_options(args_in, &a, vattn_forward_args_init,
                                  VATTN_STRUCT_MIN_SIZE(vattn_forward_args_t, stream), "args"));
    VATTN_CHECK_ARG(plan->backend == layer->backend,
                    "argument 'plan' belongs to backend %s but the layer to backend %s",
                    plan->backend->info().name, layer->backend->info().name);
    VATTN_CHECK_ARG(plan->impl->built, "argument 'plan' has not been built (call vattn_builder_build)");
    VATTN_CHECK_ARG(std::isfinite(a.k_scale) && a.k_scale > 0.f, "argument 'args': k_scale = %g must be finite and > 0",
                    (double)a.k_scale);
    VATTN_CHECK_ARG(std::isfinite(a.v_scale) && a.v_scale > 0.f, "argument 'args': v_scale = %g must be finite and > 0",
                    (double)a.v_scale);
    return layer->impl->forward(*plan->impl, a);
  });
}

// ---- operations (section 12) ------------------------------------------------------

static vattn_status_t backend_of(const DLTensor *t, const char *name, const vattn::Backend **out) {
  VATTN_TRY(vattn::check_tensor_generic(t, name));
  const vattn::Backend *b = vattn::backend_for_device(t->device.device_type);
  if (!b)
    return vattn::fail(VATTN_ERR_NO_DEVICE, "tensor '%s' is on device type %d but this build has no backend for it",
                       name, static_cast<int>(t->device.device_type));
  if (t->device.device_type == kDLCUDA)
    VATTN_TRY(vattn::cuda_require_device(t->device.device_id, name));
  *out = b;
  return VATTN_OK;
}

VATTN_API vattn_status_t vattn_reshape_and_cache(const DLTensor *key, const DLTensor *value,
                                                 DLTensor *kv_cache, const DLTensor *slot_mapping,
                                                 int32_t kv_cache_dtype, float k_scale, float v_scale,
                                                 void *stream) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    const vattn::Backend *b = nullptr;
    VATTN_TRY(backend_of(kv_cache, "kv_cache", &b));
    VATTN_TRY(vattn::check_tensor_generic(key, "key"));
    VATTN_TRY(vattn::check_tensor_generic(value, "value"));
    VATTN_TRY(vattn::check_tensor_generic(slot_mapping, "slot_mapping"));
    VATTN_CHECK_ARG(kv_cache_dtype >= VATTN_KV_CACHE_DTYPE_AUTO && kv_cache_dtype <= VATTN_KV_CACHE_DTYPE_FP8_E5M2,
                    "argument 'kv_cache_dtype' = %d is unknown", kv_cache_dtype);
    VATTN_CHECK_ARG(std::isfinite(k_scale) && k_scale > 0.f, "argument 'k_scale' = %g must be finite and > 0",
                    (double)k_scale);
    VATTN_CHECK_ARG(std::isfinite(v_scale) && v_scale > 0.f, "argument 'v_scale' = %g must be finite and > 0",
                    (double)v_scale);
    return b->reshape_and_cache(key, value, kv_cache, slot_mapping, kv_cache_dtype, k_scale, v_scale, stream);
  });
}

VATTN_API vattn_status_t vattn_merge_attn_states(DLTensor *output, DLTensor *output_lse,
                                                 const DLTensor *prefix_output, const DLTensor *prefix_lse,
                                                 const DLTensor *suffix_output, const DLTensor *suffix_lse,
                                                 void *stream) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    const vattn::Backend *b = nullptr;
    VATTN_TRY(backend_of(output, "output", &b));
    if (output_lse) VATTN_TRY(vattn::check_tensor_generic(output_lse, "output_lse"));
    VATTN_TRY(vattn::check_tensor_generic(prefix_output, "prefix_output"));
    VATTN_TRY(vattn::check_tensor_generic(prefix_lse, "prefix_lse"));
    VATTN_TRY(vattn::check_tensor_generic(suffix_output, "suffix_output"));
    VATTN_TRY(vattn::check_tensor_generic(suffix_lse, "suffix_lse"));
    return b->merge_attn_states(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse, stream);
  });
}

VATTN_API vattn_status_t vattn_copy_blocks(DLTensor *const *kv_caches, size_t num_layers,
                                           const int64_t *block_mapping, size_t num_pairs, void *stream) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(kv_caches);
    VATTN_CHECK_ARG(num_layers > 0, "argument 'num_layers' is 0");
    VATTN_CHECK_ARG(num_pairs == 0 || block_mapping != nullptr, "argument 'block_mapping' is NULL");
    const vattn::Backend *b = nullptr;
    VATTN_TRY(backend_of(kv_caches[0], "kv_caches[0]", &b));
    return b->copy_blocks(kv_caches, num_layers, block_mapping, num_pairs, stream);
  });
}

VATTN_API vattn_status_t vattn_swap_blocks(const DLTensor *src, DLTensor *dst, const int64_t *block_mapping,
                                           size_t num_pairs, void *stream) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    const vattn::Backend *bs = nullptr, *bd = nullptr;
    VATTN_TRY(backend_of(src, "src", &bs));
    VATTN_TRY(backend_of(dst, "dst", &bd));
    VATTN_CHECK_ARG(num_pairs == 0 || block_mapping != nullptr, "argument 'block_mapping' is NULL");
    // A GPU on either side: the CUDA backend moves the bytes.
    const vattn::Backend *b = bs->info().device_type == kDLCUDA ? bs : bd;
    return b->swap_blocks(src, dst, block_mapping, num_pairs, stream);
  });
}

}  // extern "C"
