// spec.cpp -- KV cache spec rules (see spec.h).
#include "kv_cache/spec.h"

#include <algorithm>
#include <cstring>

#include "core/options.h"
#include "core/tensor.h"

namespace vattn {

void spec_init(vattn_kv_cache_spec_t *s) {
  std::memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  s->kind = VATTN_KV_SPEC_FULL;
  s->block_size = 16;
  s->num_kv_heads = 8;
  s->head_size = 128;
  s->dtype = VATTN_DTYPE_BFLOAT16;
}

void limits_init(vattn_model_limits_t *l) {
  std::memset(l, 0, sizeof *l);
  l->struct_size = sizeof *l;
  l->max_model_len = 8192;
  l->max_num_batched_tokens = 8192;
  l->max_encoder_len = 0;
  l->dcp_world_size = 1;
  l->pcp_world_size = 1;
}

namespace {

const char *kind_name(int32_t k) {
  switch (k) {
    case VATTN_KV_SPEC_FULL: return "FULL";
    case VATTN_KV_SPEC_SLIDING_WINDOW: return "SLIDING_WINDOW";
    case VATTN_KV_SPEC_CHUNKED_LOCAL: return "CHUNKED_LOCAL";
    case VATTN_KV_SPEC_MLA: return "MLA";
    case VATTN_KV_SPEC_CROSS_ATTENTION: return "CROSS_ATTENTION";
    case VATTN_KV_SPEC_ENCODER_ONLY: return "ENCODER_ONLY";
    default: return "unknown";
  }
}

bool mul_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }

// a + b saturated at INT64_MAX (both non-negative).
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

// Bytes per element of a VATTN_DTYPE_* (0 if unknown).
int64_t dtype_bytes(int32_t d) {
  DLDataType dl;
  return dl_dtype_of(d, &dl) ? static_cast<int64_t>(dl_dtype_bytes(dl)) : 0;
}

// Real page bytes, or -1 when the product overflows int64.
int64_t real_page_or_neg(const vattn_kv_cache_spec_t &s) {
  int64_t p = 0;
  if (s.kind == VATTN_KV_SPEC_MLA && s.mla_fp8_ds) {
    return mul_ok(s.block_size, kFp8DsMlaEntryBytes, &p) ? p : -1;
  }
  const int64_t coef = s.kind == VATTN_KV_SPEC_MLA ? 1 : 2;
  const int64_t esz = dtype_bytes(s.dtype);
  if (!mul_ok(coef, s.block_size, &p) || !mul_ok(p, s.num_kv_heads, &p) ||
      !mul_ok(p, s.head_size, &p) || !mul_ok(p, esz, &p))
    return -1;
  return p;
}

}  // namespace

vattn_status_t check_spec(const vattn_kv_cache_spec_t &s, const char *name) {
  VATTN_CHECK_ARG(s.kind >= VATTN_KV_SPEC_FULL && s.kind <= VATTN_KV_SPEC_ENCODER_ONLY,
                  "argument '%s': kind = %d is not a VATTN_KV_SPEC_* value", name, s.kind);
  VATTN_CHECK_ARG(s.block_size > 0, "argument '%s': block_size = %d must be positive", name,
                  s.block_size);
  VATTN_CHECK_ARG(s.num_kv_heads > 0, "argument '%s': num_kv_heads = %d must be positive", name,
                  s.num_kv_heads);
  VATTN_CHECK_ARG(s.head_size > 0, "argument '%s': head_size = %d must be positive", name,
                  s.head_size);
  DLDataType dl;
  VATTN_CHECK_ARG(dl_dtype_of(s.dtype, &dl), "argument '%s': dtype = %d is not a VATTN_DTYPE_* value",
                  name, s.dtype);
  const bool mla = s.kind == VATTN_KV_SPEC_MLA;
  VATTN_CHECK_ARG(!mla || s.num_kv_heads == 1,
                  "argument '%s': num_kv_heads = %d, but an MLA spec has exactly 1 (the latent)",
                  name, s.num_kv_heads);
  VATTN_CHECK_ARG(s.mla_fp8_ds == 0 || s.mla_fp8_ds == 1,
                  "argument '%s': mla_fp8_ds = %d must be 0 or 1", name, s.mla_fp8_ds);
  if (s.mla_fp8_ds) {
    VATTN_CHECK_ARG(mla, "argument '%s': mla_fp8_ds = 1 is only valid for kind MLA (kind is %s)",
                    name, kind_name(s.kind));
    VATTN_CHECK_ARG(s.dtype == VATTN_DTYPE_UINT8 || s.dtype == VATTN_DTYPE_FP8_E4M3,
                    "argument '%s': the fp8_ds_mla format stores bytes: dtype must be UINT8 or "
                    "FP8_E4M3, not %s",
                    name, vattn_dtype_name(s.dtype));
    VATTN_CHECK_ARG(s.head_size == kFp8DsMlaHeadSize,
                    "argument '%s': the fp8_ds_mla format needs head_size %d (kv_lora_rank 512 + "
                    "rope 64), not %d",
                    name, kFp8DsMlaHeadSize, s.head_size);
  }
  VATTN_CHECK_ARG(s.sliding_window >= 0, "argument '%s': sliding_window = %d is negative", name,
                  s.sliding_window);
  VATTN_CHECK_ARG(s.attention_chunk_size >= 0,
                  "argument '%s': attention_chunk_size = %d is negative", name,
                  s.attention_chunk_size);
  if (s.kind == VATTN_KV_SPEC_SLIDING_WINDOW)
    VATTN_CHECK_ARG(s.sliding_window > 0,
                    "argument '%s': a SLIDING_WINDOW spec needs sliding_window > 0", name);
  else
    VATTN_CHECK_ARG(s.sliding_window == 0 || s.kind == VATTN_KV_SPEC_FULL,
                    "argument '%s': sliding_window = %d is only meaningful for kinds FULL and "
                    "SLIDING_WINDOW (kind is %s)",
                    name, s.sliding_window, kind_name(s.kind));
  if (s.kind == VATTN_KV_SPEC_CHUNKED_LOCAL)
    VATTN_CHECK_ARG(s.attention_chunk_size > 0,
                    "argument '%s': a CHUNKED_LOCAL spec needs attention_chunk_size > 0", name);
  else
    VATTN_CHECK_ARG(s.attention_chunk_size == 0 || s.kind == VATTN_KV_SPEC_FULL,
                    "argument '%s': attention_chunk_size = %d is only meaningful for kinds FULL "
                    "and CHUNKED_LOCAL (kind is %s)",
                    name, s.attention_chunk_size, kind_name(s.kind));
  VATTN_CHECK_ARG(!(s.sliding_window > 0 && s.attention_chunk_size > 0),
                  "argument '%s': sliding_window and attention_chunk_size cannot both be set", name);
  const int64_t real = real_page_or_neg(s);
  VATTN_CHECK_ARG(real > 0,
                  "argument '%s': the page size (block_size %d * num_kv_heads %d * head_size %d * "
                  "%lld bytes) overflows int64",
                  name, s.block_size, s.num_kv_heads, s.head_size,
                  static_cast<long long>(dtype_bytes(s.dtype)));
  VATTN_CHECK_ARG(s.page_size_padded == 0 || s.page_size_padded >= real,
                  "argument '%s': page_size_padded = %lld must be 0 or >= the real page size %lld",
                  name, static_cast<long long>(s.page_size_padded), static_cast<long long>(real));
  return VATTN_OK;
}

vattn_status_t read_spec(const vattn_kv_cache_spec_t *in, const char *name,
                         vattn_kv_cache_spec_t *out) {
  if (in == nullptr) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument '%s' is NULL", name);
  VATTN_TRY(read_options(in, out, spec_init, VATTN_STRUCT_MIN_SIZE(vattn_kv_cache_spec_t, page_size_padded),
                         name));
  return check_spec(*out, name);
}

vattn_status_t read_limits(const vattn_model_limits_t *in, vattn_model_limits_t *out) {
  VATTN_TRY(read_options(in, out, limits_init,
                         VATTN_STRUCT_MIN_SIZE(vattn_model_limits_t, pcp_world_size), "limits"));
  VATTN_CHECK_ARG(out->max_model_len > 0, "argument 'limits': max_model_len = %lld must be positive",
                  static_cast<long long>(out->max_model_len));
  VATTN_CHECK_ARG(out->max_num_batched_tokens > 0,
                  "argument 'limits': max_num_batched_tokens = %lld must be positive",
                  static_cast<long long>(out->max_num_batched_tokens));
  VATTN_CHECK_ARG(out->max_encoder_len >= 0, "argument 'limits': max_encoder_len = %lld is negative",
                  static_cast<long long>(out->max_encoder_len));
  VATTN_CHECK_ARG(out->dcp_world_size >= 1, "argument 'limits': dcp_world_size = %d must be >= 1",
                  out->dcp_world_size);
  VATTN_CHECK_ARG(out->pcp_world_size >= 1, "argument 'limits': pcp_world_size = %d must be >= 1",
                  out->pcp_world_size);
  return VATTN_OK;
}

int64_t spec_real_page_bytes(const vattn_kv_cache_spec_t &s) { return real_page_or_neg(s); }

int64_t spec_page_bytes(const vattn_kv_cache_spec_t &s) {
  return s.page_size_padded > 0 ? s.page_size_padded : real_page_or_neg(s);
}

bool spec_is_mla(const vattn_kv_cache_spec_t &s) { return s.kind == VATTN_KV_SPEC_MLA; }

int64_t spec_entry_size(const vattn_kv_cache_spec_t &s) {
  return spec_is_mla(s) && s.mla_fp8_ds ? kFp8DsMlaEntryBytes : s.head_size;
}

const char *first_difference(const vattn_kv_cache_spec_t &a, const vattn_kv_cache_spec_t &b) {
  if (a.kind != b.kind) return "kind";
  if (a.block_size != b.block_size) return "block_size";
  if (a.num_kv_heads != b.num_kv_heads) return "num_kv_heads";
  if (a.head_size != b.head_size) return "head_size";
  if (a.dtype != b.dtype) return "dtype";
  if (a.mla_fp8_ds != b.mla_fp8_ds) return "mla_fp8_ds";
  if (a.page_size_padded != b.page_size_padded) return "page_size_padded";
  if (a.sliding_window != b.sliding_window) return "sliding_window";
  if (a.attention_chunk_size != b.attention_chunk_size) return "attention_chunk_size";
  return "";
}

bool specs_equal(const vattn_kv_cache_spec_t &a, const vattn_kv_cache_spec_t &b) {
  return *first_difference(a, b) == '\0';
}

bool specs_equal_ignoring_window(const vattn_kv_cache_spec_t &a, const vattn_kv_cache_spec_t &b) {
  const char *d = first_difference(a, b);
  if (*d == '\0') return true;
  if (a.kind != VATTN_KV_SPEC_FULL || b.kind != VATTN_KV_SPEC_FULL) return false;
  // Window fields are compared last: anything before them differs for real.
  return std::strcmp(d, "sliding_window") == 0 || std::strcmp(d, "attention_chunk_size") == 0;
}

vattn_status_t spec_max_memory_bytes(const vattn_kv_cache_spec_t &s,
                                     const vattn_model_limits_t &lim, int64_t *out) {
  const int64_t page = spec_page_bytes(s);
  const int64_t bs = s.block_size;
  int64_t blocks = 0;
  switch (s.kind) {
    case VATTN_KV_SPEC_FULL:
    case VATTN_KV_SPEC_MLA: {
      // Context parallelism spreads a request's tokens over dcp * pcp ranks.
      int64_t len = lim.max_model_len;
      const int64_t cp = static_cast<int64_t>(lim.dcp_world_size) * lim.pcp_world_size;
      if (cp > 1) len = ceil_div(len, cp);
      blocks = ceil_div(len, bs);
      break;
    }
    case VATTN_KV_SPEC_SLIDING_WINDOW: {
      if (lim.dcp_world_size != 1)
        return fail(VATTN_ERR_UNSUPPORTED,
                    "argument 'limits': dcp_world_size = %d: decode context parallel does not "
                    "support sliding window specs",
                    lim.dcp_world_size);
      const int64_t tokens =
          std::min(sat_add(s.sliding_window - 1, lim.max_num_batched_tokens), lim.max_model_len);
      // +1: the window need not start on a block boundary.
      blocks = sat_add(ceil_div(tokens, bs), 1);
      break;
    }
    case VATTN_KV_SPEC_CHUNKED_LOCAL: {
      const int64_t tokens =
          std::min(sat_add(s.attention_chunk_size, lim.max_num_batched_tokens), lim.max_model_len);
      blocks = ceil_div(tokens, bs);
      break;
    }
    case VATTN_KV_SPEC_CROSS_ATTENTION:
      blocks = ceil_div(lim.max_encoder_len, bs);
      break;
    case VATTN_KV_SPEC_ENCODER_ONLY:
      blocks = 0;  // no cache at all
      break;
    default:
      return fail(VATTN_ERR_INTERNAL, "spec kind %d passed validation", s.kind);
  }
  int64_t bytes;
  if (!mul_ok(blocks, page, &bytes))
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "argument 'limits': %lld blocks of %lld bytes overflow int64",
                static_cast<long long>(blocks), static_cast<long long>(page));
  *out = bytes;
  return VATTN_OK;
}

vattn_status_t merge_specs(const vattn_kv_cache_spec_t *const *specs, size_t n,
                           const size_t *index_of, vattn_kv_cache_spec_t *out) {
  if (n == 0) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'num_specs' is 0");
  auto idx = [&](size_t i) { return index_of ? index_of[i] : i; };
  const vattn_kv_cache_spec_t &first = *specs[0];
  for (size_t i = 1; i < n; ++i) {
    if (!specs_equal_ignoring_window(first, *specs[i]))
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument 'specs': All layers in the same KV cache group must be the same "
                  "(specs[%zu] differs from specs[%zu] in %s)",
                  idx(i), idx(0), first_difference(first, *specs[i]));
  }
  vattn_kv_cache_spec_t m = first;
  m.struct_size = sizeof m;
  if (first.kind == VATTN_KV_SPEC_FULL) {
    // Each of the two compute-time fields may carry one distinct non-zero
    // value across the group; a group cannot carry both.
    int64_t window = 0, chunk = 0;
    size_t window_at = 0, chunk_at = 0;
    for (size_t i = 0; i < n; ++i) {
      const int32_t w = specs[i]->sliding_window, c = specs[i]->attention_chunk_size;
      if (w > 0) {
        if (window > 0 && w != window)
          return fail(VATTN_ERR_INVALID_ARGUMENT,
                      "argument 'specs': All attention layers in the same KV cache group must "
                      "have the same window size (specs[%zu] has sliding_window %d, specs[%zu] "
                      "has %lld)",
                      idx(i), w, idx(window_at), static_cast<long long>(window));
        if (window == 0) window_at = i;
        window = w;
      }
      if (c > 0) {
        if (chunk > 0 && c != chunk)
          return fail(VATTN_ERR_INVALID_ARGUMENT,
                      "argument 'specs': All attention layers in the same KV cache group must "
                      "have the same attention chunk size (specs[%zu] has attention_chunk_size "
                      "%d, specs[%zu] has %lld)",
                      idx(i), c, idx(chunk_at), static_cast<long long>(chunk));
        if (chunk == 0) chunk_at = i;
        chunk = c;
      }
    }
    if (window > 0 && chunk > 0)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument 'specs': a KV cache group cannot mix sliding window and chunked "
                  "local attention (specs[%zu] has sliding_window %lld, specs[%zu] has "
                  "attention_chunk_size %lld)",
                  idx(window_at), static_cast<long long>(window), idx(chunk_at),
                  static_cast<long long>(chunk));
    m.sliding_window = static_cast<int32_t>(window);
    m.attention_chunk_size = static_cast<int32_t>(chunk);
  }
  *out = m;
  return VATTN_OK;
}

}  // namespace vattn
