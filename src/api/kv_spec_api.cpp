// kv_spec_api.cpp -- header section 3: KV cache specs (page size, worst-case
// memory per request, merge).  The rules live in src/kv_cache/spec.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/options.h"
#include "kv_cache/spec.h"

namespace {

// Reads specs[0..n) with messages naming "specs[i]".
vattn_status_t read_spec_array(const vattn_kv_cache_spec_t *specs, size_t n,
                               std::vector<vattn_kv_cache_spec_t> *out) {
  VATTN_CHECK_NOT_NULL(specs);
  VATTN_CHECK_ARG(n > 0, "argument 'num_specs' is 0");
  VATTN_CHECK_ARG(n <= INT32_MAX, "argument 'num_specs' = %zu is too large", n);
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::string name = vattn::format("specs[%zu]", i);
    VATTN_TRY(vattn::read_spec(&specs[i], name.c_str(), &(*out)[i]));
  }
  return VATTN_OK;
}

}  // namespace

extern "C" {

VATTN_API void vattn_kv_cache_spec_init(vattn_kv_cache_spec_t *spec) {
  vattn::guard_void([&] {
    if (spec) vattn::spec_init(spec);
  });
}

VATTN_API void vattn_model_limits_init(vattn_model_limits_t *limits) {
  vattn::guard_void([&] {
    if (limits) vattn::limits_init(limits);
  });
}

VATTN_API vattn_status_t vattn_kv_cache_spec_page_size_bytes(const vattn_kv_cache_spec_t *spec,
                                                             int64_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    vattn_kv_cache_spec_t s;
    VATTN_TRY(vattn::read_spec(spec, "spec", &s));
    *out = vattn::spec_page_bytes(s);
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_kv_cache_spec_max_memory_usage_bytes(
    const vattn_kv_cache_spec_t *spec, const vattn_model_limits_t *limits, int64_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_CHECK_NOT_NULL(out);
    vattn_kv_cache_spec_t s;
    VATTN_TRY(vattn::read_spec(spec, "spec", &s));
    vattn_model_limits_t lim;
    VATTN_TRY(vattn::read_limits(limits, &lim));
    int64_t bytes = 0;
    VATTN_TRY(vattn::spec_max_memory_bytes(s, lim, &bytes));
    *out = bytes;
    return VATTN_OK;
  });
}

VATTN_API vattn_status_t vattn_kv_cache_specs_merge(const vattn_kv_cache_spec_t *specs,
                                                    size_t num_specs, vattn_kv_cache_spec_t *out) {
  return vattn::guard(__func__, [&]() -> vattn_status_t {
    VATTN_TRY(vattn::check_out_struct(
        out, VATTN_STRUCT_MIN_SIZE(vattn_kv_cache_spec_t, page_size_padded), "out"));
    std::vector<vattn_kv_cache_spec_t> v;
    VATTN_TRY(read_spec_array(specs, num_specs, &v));
    std::vector<const vattn_kv_cache_spec_t *> ptrs(v.size());
    for (size_t i = 0; i < v.size(); ++i) ptrs[i] = &v[i];
    vattn_kv_cache_spec_t merged;
    VATTN_TRY(vattn::merge_specs(ptrs.data(), ptrs.size(), nullptr, &merged));
    vattn::write_out(out, merged);
    return VATTN_OK;
  });
}

}  // extern "C"
