// options.h -- reading caller options structs that start with struct_size.
//
// A caller compiled against an older header passes a smaller struct_size:
// the fields it knows are copied, the rest keep their defaults.  A
// struct_size below the first published size, or above the size this
// library knows, is rejected (the caller's header is newer than the library).
#pragma once

#include <cstddef>
#include <cstring>

#include "core/error.h"

namespace vattn {

// Size of T up to and including `last_v1_field`: the smallest struct_size
// ever accepted for T.
#define VATTN_STRUCT_MIN_SIZE(T, last_v1_field) \
  (offsetof(T, last_v1_field) + sizeof(((T *)0)->last_v1_field))

// out = defaults (init), overwritten by the caller's prefix when `in` is
// non-NULL; out->struct_size = sizeof(T) afterwards.
template <class T>
vattn_status_t read_options(const T *in, T *out, void (*init)(T *), size_t min_size,
                            const char *name) {
  init(out);
  if (in == nullptr) return VATTN_OK;
  if (in->struct_size < min_size || in->struct_size > sizeof(T)) {
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "argument '%s': struct_size %zu is not valid (expected %zu..%zu; "
                "initialize it with the matching _init function)",
                name, in->struct_size, min_size, sizeof(T));
  }
  std::memcpy(static_cast<void *>(out), static_cast<const void *>(in), in->struct_size);
  out->struct_size = sizeof(T);
  return VATTN_OK;
}

// Checks an output struct's struct_size before it is written; only the
// caller's prefix is written by write_out().
template <class T>
vattn_status_t check_out_struct(const T *out, size_t min_size, const char *name) {
  if (out == nullptr) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument '%s' is NULL", name);
  if (out->struct_size < min_size || out->struct_size > sizeof(T)) {
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "argument '%s': struct_size %zu is not valid (expected %zu..%zu)", name,
                out->struct_size, min_size, sizeof(T));
  }
  return VATTN_OK;
}

template <class T>
void write_out(T *out, const T &value) {
  size_t n = out->struct_size;
  T tmp = value;
  tmp.struct_size = n;
  std::memcpy(static_cast<void *>(out), static_cast<const void *>(&tmp), n);
}

}  // namespace vattn
