// spec.h -- KV cache specs (header section 3): validation, page sizes,
// worst-case memory per request, and merging the specs of one group
// (vLLM kv_cache_interface, era B).
//
// Page size of one block of one layer:
//   attention kinds: 2 * block_size * num_kv_heads * head_size * dtype_size  (K and V)
//   MLA:                 block_size * head_size * dtype_size                  (num_kv_heads 1)
//   MLA fp8_ds_mla:      block_size * 656   (512 fp8 latent + 4 fp32 scales + 64 bf16 rope)
// page_size_padded > 0 replaces that number (it must not be smaller).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace vattn {

// Bytes per token of the fp8_ds_mla cache format, and the only head size
// (kv_lora_rank 512 + rope 64) that format can hold.
constexpr int64_t kFp8DsMlaEntryBytes = 656;
constexpr int32_t kFp8DsMlaHeadSize = 576;

// Defaults of vattn_kv_cache_spec_init: FULL, block 16, 8 KV heads, head
// size 128, bfloat16 (a Llama-3-8B-like layer; page 65536 bytes).
void spec_init(vattn_kv_cache_spec_t *spec);
void limits_init(vattn_model_limits_t *limits);

// Copies the caller's struct (struct_size checked; NULL is an error here
// because a spec has no meaningful "default layer") and validates it.
// `name` is how messages call it ("spec", "specs[3]").
vattn_status_t read_spec(const vattn_kv_cache_spec_t *in, const char *name,
                         vattn_kv_cache_spec_t *out);
// Validates every field of an already-copied spec (see spec.cpp for the rules).
vattn_status_t check_spec(const vattn_kv_cache_spec_t &s, const char *name);

// NULL = defaults; every field validated.
vattn_status_t read_limits(const vattn_model_limits_t *in, vattn_model_limits_t *out);

// For a spec that passed check_spec (never overflows then).
int64_t spec_real_page_bytes(const vattn_kv_cache_spec_t &s);
int64_t spec_page_bytes(const vattn_kv_cache_spec_t &s);  // padded when set
bool spec_is_mla(const vattn_kv_cache_spec_t &s);
// Extent of the innermost cache dim: head_size, or 656 bytes for fp8_ds_mla.
int64_t spec_entry_size(const vattn_kv_cache_spec_t &s);

// Field-by-field equality (struct_size ignored).  The _ignoring_window
// variant also ignores sliding_window and attention_chunk_size when both
// specs are FULL: those are the fields merge() may reconcile.
bool specs_equal(const vattn_kv_cache_spec_t &a, const vattn_kv_cache_spec_t &b);
bool specs_equal_ignoring_window(const vattn_kv_cache_spec_t &a, const vattn_kv_cache_spec_t &b);
// Name of the first field in which a and b differ ("" if equal).
const char *first_difference(const vattn_kv_cache_spec_t &a, const vattn_kv_cache_spec_t &b);

// vLLM max_memory_usage_bytes for one request.
vattn_status_t spec_max_memory_bytes(const vattn_kv_cache_spec_t &s,
                                     const vattn_model_limits_t &lim, int64_t *out);

// Merges valid specs specs[0..n) (n >= 1) of one group.  index_of maps
// member i to the caller's array index (NULL = identity), so that messages
// say "specs[7]".
vattn_status_t merge_specs(const vattn_kv_cache_spec_t *const *specs, size_t n,
                           const size_t *index_of, vattn_kv_cache_spec_t *out);

}  // namespace vattn
