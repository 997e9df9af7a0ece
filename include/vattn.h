/*
 * vattn.h -- the attention stack of an LLM inference engine, as a C library.
 *
 * vattn does what vLLM's attention layer does (paged KV cache, slot mapping,
 * batch metadata and its builders, attention backends, paged attention
 * kernels) behind this one C99 header.  Everything public is declared here;
 * each section below names the source directory that implements it.
 *
 * Conventions (see docs/api.md for the long form):
 *  - Every function that can fail returns vattn_status_t: VATTN_OK (0) or a
 *    positive, pinned error code.  On failure vattn_last_error_message()
 *    (thread-local) names the offending argument, outputs are left untouched
 *    (a handle out-parameter is set to NULL) and nothing is leaked.  No
 *    exception, assert or abort ever crosses this API, whatever the input.
 *  - Handles are opaque: vattn_x_create(&out, ...) / vattn_x_destroy(x);
 *    destroy(NULL) is a no-op.
 *  - Options structs start with `size_t struct_size` and grow only at the
 *    end.  Fill them with vattn_x_options_init(); NULL options mean defaults.
 *    A struct_size smaller than the first published version or larger than
 *    this library knows is VATTN_ERR_INVALID_ARGUMENT.
 *  - Enum-valued fields are fixed-width integers holding VATTN_* constants.
 *  - Tensors are borrowed DLPack DLTensor* (never retained past the call);
 *    device, dtype, ndim, shape, strides (NULL = compact row-major) and
 *    byte_offset are validated.  Small host-side integer arrays (metadata)
 *    are plain pointers + lengths.
 *  - Plan, then run: metadata building does all allocation and host work;
 *    vattn_layer_forward() allocates nothing, never synchronizes the host,
 *    takes a stream (`void *`, a cudaStream_t; NULL = default stream) and can
 *    be captured in a CUDA graph.
 *
 * Thread safety: functions taking `const T *` may be called concurrently on
 * the same handle from any number of threads.  Functions taking a non-const
 * handle need external synchronization for that handle (one handle per
 * thread or per stream).  The error message is per thread.  Backend
 * descriptors are immutable and live for the life of the process.
 */
#ifndef VATTN_H
#define VATTN_H

#include <stddef.h>
#include <stdint.h>
#include <dlpack/dlpack.h>

#ifndef VATTN_API
#if defined(_WIN32)
#define VATTN_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#define VATTN_API __attribute__((visibility("default")))
#else
#define VATTN_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================
 * 1. Versions, status codes, errors                         (src/api/core)
 * ====================================================================== */

#define VATTN_VERSION_MAJOR 0
#define VATTN_VERSION_MINOR 1
#define VATTN_VERSION_PATCH 0
/* (major << 16) | (minor << 8) | patch */
#define VATTN_VERSION_NUMBER \
  ((VATTN_VERSION_MAJOR << 16) | (VATTN_VERSION_MINOR << 8) | VATTN_VERSION_PATCH)

/* The version of the library actually loaded, as VATTN_VERSION_NUMBER. */
VATTN_API uint32_t vattn_version(void);
/* "MAJOR.MINOR.PATCH"; static storage. */
VATTN_API const char *vattn_version_string(void);

typedef int32_t vattn_status_t;

/* Pinned values: never renumbered, new codes are appended. */
#define VATTN_OK 0
#define VATTN_ERR_INVALID_ARGUMENT 1    /* a argument is malformed or out of range */
#define VATTN_ERR_UNSUPPORTED 2         /* valid, but not supported by this backend/build */
#define VATTN_ERR_OUT_OF_MEMORY 3       /* host or device allocation failed */
#define VATTN_ERR_WORKSPACE_TOO_SMALL 4 /* a caller-provided buffer is too small */
#define VATTN_ERR_CUDA 5                /* the CUDA runtime reported an error */
#define VATTN_ERR_NOT_FOUND 6           /* no backend / item of that name or index */
#define VATTN_ERR_INTERNAL 7            /* a bug in vattn: please report it */
#define VATTN_ERR_NO_DEVICE 8           /* CUDA requested but no usable GPU / built without CUDA */
#define VATTN_ERR_BUFFER_TOO_SMALL VATTN_ERR_WORKSPACE_TOO_SMALL

/* Short static description of a status code ("invalid argument", ...).
 * Unknown codes give "unknown status". Never NULL. */
VATTN_API const char *vattn_status_string(vattn_status_t status);

/* Message of the last failing call on this thread (empty string if the last
 * call succeeded).  Valid until the next vattn call on this thread.  Never
 * NULL. */
VATTN_API const char *vattn_last_error_message(void);

/* Clears this thread's error message. */
VATTN_API void vattn_clear_last_error(void);

/* ========================================================================
 * 2. Constants shared by every section
 * ====================================================================== */

/* Element types (fields named `dtype`). 0 is never a valid dtype. */
#define VATTN_DTYPE_FLOAT32 1
#define VATTN_DTYPE_FLOAT16 2
#define VATTN_DTYPE_BFLOAT16 3
#define VATTN_DTYPE_FP8_E4M3 4 /* stored in DLTensors as uint8 */
#define VATTN_DTYPE_FP8_E5M2 5 /* stored in DLTensors as uint8 */
#define VATTN_DTYPE_UINT8 6    /* raw bytes (e.g. the fp8_ds_mla cache format) */

/* Size in bytes of one element of `dtype`, 0 for an unknown dtype. */
VATTN_API size_t vattn_dtype_size(int32_t dtype);

/* KV cache element types (fields named `kv_cache_dtype`).
 * AUTO = the model dtype; FP8 = e4m3 (as vLLM's "fp8"). */
#define VATTN_KV_CACHE_DTYPE_AUTO 0
#define VATTN_KV_CACHE_DTYPE_FP8_E4M3 1
#define VATTN_KV_CACHE_DTYPE_FP8_E5M2 2

/* Physical KV cache layouts.  The logical per-layer cache shape is always
 * (2, num_blocks, block_size, num_kv_heads, head_size); NHD keeps that order
 * in memory, HND stores (2, num_blocks, num_kv_heads, block_size, head_size).
 * Both run every path.  Speed (CUDA decode, H100, docs/benchmarks.md): with
 * the decode kernel's TMA copies (compute capability 9.0) the two are within
 * 1%.  With its cp.async copies (other GPUs, VATTN_CUDA_SM90_TMA=0), HND
 * was 2-4% faster where a key row of one head is 128 bytes (head size 64 in
 * 16 bits, 128 in fp8), and NHD as fast or faster at 256 bytes and more. */
#define VATTN_LAYOUT_NHD 0
#define VATTN_LAYOUT_HND 1

/* Attention types (vLLM AttentionType). */
#define VATTN_ATTN_DECODER 0         /* causal self-attention through the KV cache */
#define VATTN_ATTN_ENCODER 1         /* non-causal on Q/K/V, no cache (encoder of enc-dec) */
#define VATTN_ATTN_ENCODER_ONLY 2    /* bidirectional, optional two-sided window, no cache */
#define VATTN_ATTN_ENCODER_DECODER 3 /* decoder queries over the cross-attention cache */

/* CUDA-graph support levels of a metadata builder (vLLM AttentionCGSupport,
 * era B).  Ordered: a model with several backends takes the minimum. */
#define VATTN_CUDAGRAPH_NEVER 0
#define VATTN_CUDAGRAPH_UNIFORM_SINGLE_TOKEN_DECODE 1
#define VATTN_CUDAGRAPH_UNIFORM_BATCH 2
#define VATTN_CUDAGRAPH_ALWAYS 3

/* Feature bits (vattn_backend_info_t.features). */
#define VATTN_FEATURE_ALIBI (1u << 0)
#define VATTN_FEATURE_SLIDING_WINDOW (1u << 1)
#define VATTN_FEATURE_SOFT_CAP (1u << 2)
#define VATTN_FEATURE_SINKS (1u << 3)
#define VATTN_FEATURE_FP8_KV_CACHE (1u << 4)
#define VATTN_FEATURE_LSE_OUTPUT (1u << 5)
#define VATTN_FEATURE_CASCADE (1u << 6)
#define VATTN_FEATURE_MLA (1u << 7)
#define VATTN_FEATURE_KV_SHARING (1u << 8)

/* Padding slot in a slot mapping: kernels skip it. */
#define VATTN_PAD_SLOT_ID (-1)

/* Number of CUDA devices usable by this build: 0 when built without CUDA or
 * when no driver/GPU is present (that is not an error). */
VATTN_API vattn_status_t vattn_cuda_device_count(int32_t *out);

/* ========================================================================
 * 3. KV cache specs                                      (src/kv_cache/spec)
 * ====================================================================== */

/* Kinds of KV cache spec (vLLM kv_cache_interface, era B). */
#define VATTN_KV_SPEC_FULL 0
#define VATTN_KV_SPEC_SLIDING_WINDOW 1
#define VATTN_KV_SPEC_CHUNKED_LOCAL 2
#define VATTN_KV_SPEC_MLA 3
#define VATTN_KV_SPEC_CROSS_ATTENTION 4
#define VATTN_KV_SPEC_ENCODER_ONLY 5

/* What one layer keeps in the cache per block. A plain value struct. */
typedef struct vattn_kv_cache_spec {
  size_t struct_size;
  int32_t kind;         /* VATTN_KV_SPEC_* (default FULL) */
  int32_t block_size;   /* tokens per block (default 16) */
  int32_t num_kv_heads; /* (MLA: 1) */
  int32_t head_size;    /* (MLA: kv_lora_rank + rope dim, e.g. 576) */
  int32_t dtype;        /* element type stored in the cache: VATTN_DTYPE_* */
  int32_t sliding_window;       /* SLIDING_WINDOW (and FULL with window at compute time); 0 = none */
  int32_t attention_chunk_size; /* CHUNKED_LOCAL (and FULL); 0 = none */
  int32_t mla_fp8_ds;           /* MLA only: 1 = fp8_ds_mla format, 656 bytes per token */
  int64_t page_size_padded;     /* 0 = none; else overrides page size, must be >= the real one */
} vattn_kv_cache_spec_t;

VATTN_API void vattn_kv_cache_spec_init(vattn_kv_cache_spec_t *spec);

/* Bytes of one block of this spec for one layer (K and V together for
 * attention specs, the latent for MLA). */
VATTN_API vattn_status_t vattn_kv_cache_spec_page_size_bytes(const vattn_kv_cache_spec_t *spec,
                                                             int64_t *out);

/* Limits that size the cache pool (vLLM VllmConfig pieces). */
typedef struct vattn_model_limits {
  size_t struct_size;
  int64_t max_model_len;
  int64_t max_num_batched_tokens;
  int64_t max_encoder_len; /* cross-attention */
  int32_t dcp_world_size;  /* decode context parallel (default 1) */
  int32_t pcp_world_size;  /* prefill context parallel (default 1) */
} vattn_model_limits_t;

VATTN_API void vattn_model_limits_init(vattn_model_limits_t *limits);

/* Worst-case bytes one request needs for this spec (vLLM max_memory_usage_bytes). */
VATTN_API vattn_status_t vattn_kv_cache_spec_max_memory_usage_bytes(
    const vattn_kv_cache_spec_t *spec, const vattn_model_limits_t *limits, int64_t *out);

/* Merges the specs of the layers of one KV cache group (vLLM Spec.merge):
 * all must be equal except that FULL specs may carry at most one distinct
 * sliding_window / attention_chunk_size value, never both. */
VATTN_API vattn_status_t vattn_kv_cache_specs_merge(const vattn_kv_cache_spec_t *specs,
                                                    size_t num_specs, vattn_kv_cache_spec_t *out);

/* ========================================================================
 * 4. Backends: registry, selector, descriptors              (src/backends)
 * ====================================================================== */

/* A backend descriptor: immutable, owned by the library, never destroyed. */
typedef struct vattn_backend vattn_backend_t;

/* What a backend supports. Pointers refer to static storage. */
typedef struct vattn_backend_info {
  size_t struct_size;
  const char *name;              /* "CPU", "CUDA", ... */
  int32_t device_type;           /* kDLCPU or kDLCUDA */
  int32_t cudagraph_support;     /* VATTN_CUDAGRAPH_* */
  int32_t reorder_batch_threshold; /* 0 = does not reorder (vLLM None) */
  int32_t block_size_multiple;   /* supported block sizes: multiples of this (MultipleOf) */
  int32_t max_head_size;
  int32_t head_size_multiple;    /* head sizes: multiples of this up to max_head_size */
  uint32_t dtypes;               /* bit (1u << VATTN_DTYPE_x) per supported q/k/v dtype */
  uint32_t kv_cache_dtypes;      /* bit (1u << VATTN_KV_CACHE_DTYPE_x) */
  uint32_t attn_types;           /* bit (1u << VATTN_ATTN_x) */
  uint32_t features;             /* VATTN_FEATURE_* */
  const int32_t *head_sizes;     /* explicit list of tested head sizes */
  size_t num_head_sizes;
} vattn_backend_info_t;

VATTN_API size_t vattn_backend_count(void);
/* i-th registered backend, in selection order: CUDA (when built with CUDA)
 * first, then CPU, which is always present. */
VATTN_API vattn_status_t vattn_backend_get(size_t index, const vattn_backend_t **out);
/* Backend by case-insensitive name. VATTN_ERR_NOT_FOUND if none. */
VATTN_API vattn_status_t vattn_backend_find(const char *name, const vattn_backend_t **out);
VATTN_API vattn_status_t vattn_backend_get_info(const vattn_backend_t *backend,
                                                vattn_backend_info_t *out);

/* Selector inputs (vLLM get_attn_backend). */
typedef struct vattn_backend_selector {
  size_t struct_size;
  int32_t head_size;
  int32_t dtype;          /* VATTN_DTYPE_* of q/k/v */
  int32_t kv_cache_dtype; /* VATTN_KV_CACHE_DTYPE_* */
  int32_t block_size;
  int32_t use_mla;
  int32_t has_sink;
  int32_t attn_type;      /* VATTN_ATTN_* */
  int32_t device_type;    /* kDLCPU / kDLCUDA; 0 = CUDA if a GPU is usable, else CPU */
  uint32_t features;      /* VATTN_FEATURE_* the caller needs */
} vattn_backend_selector_t;

VATTN_API void vattn_backend_selector_init(vattn_backend_selector_t *sel);

/* Picks the first registered backend that supports everything asked for.
 * The environment variable VATTN_ATTENTION_BACKEND=<name> forces one backend
 * (still checked).  When nothing fits the message lists every backend and
 * why it was rejected; status VATTN_ERR_UNSUPPORTED. */
VATTN_API vattn_status_t vattn_get_attn_backend(const vattn_backend_selector_t *sel,
                                                const vattn_backend_t **out);

/* Logical KV cache shape for one layer: attention backends give rank 5
 * (2, num_blocks, block_size, num_kv_heads, head_size); MLA gives rank 3
 * (num_blocks, block_size, head_size) when use_mla != 0.  shape_out must hold
 * 5 entries. */
VATTN_API vattn_status_t vattn_backend_kv_cache_shape(const vattn_backend_t *backend,
                                                      int64_t num_blocks, int32_t block_size,
                                                      int32_t num_kv_heads, int32_t head_size,
                                                      int32_t use_mla, int64_t *shape_out,
                                                      int32_t *ndim_out);

/* Physical order of the logical dims for a layout (vLLM
 * get_kv_cache_stride_order): NHD (0,1,2,3,4), HND (0,1,3,2,4).  With
 * include_num_layers_dimension the logical shape has a leading num_layers
 * dim and 6 entries are written: NHD (2,0,1,3,4,5), HND (2,4,0,1,3,5).
 * order_out must hold 6 entries. */
VATTN_API vattn_status_t vattn_backend_kv_cache_stride_order(const vattn_backend_t *backend,
                                                             int32_t layout,
                                                             int32_t include_num_layers_dimension,
                                                             int32_t *order_out,
                                                             int32_t *ndim_out);

/* Default layout: VATTN_KV_CACHE_LAYOUT env ("NHD"/"HND") unless overridden
 * by vattn_set_kv_cache_layout(); else NHD.  Not cached: a set takes effect
 * at once (unlike vLLM era B's lru_cache). */
VATTN_API vattn_status_t vattn_get_kv_cache_layout(int32_t *layout_out);
/* layout < 0 removes the override. */
VATTN_API vattn_status_t vattn_set_kv_cache_layout(int32_t layout);

/* ========================================================================
 * 5. KV cache: configuration, allocation, per-layer views (src/kv_cache)
 * ====================================================================== */

typedef struct vattn_kv_cache vattn_kv_cache_t;

typedef struct vattn_kv_cache_options {
  size_t struct_size;
  int32_t device_type;         /* kDLCPU (default) or kDLCUDA */
  int32_t device_id;
  int32_t layout;              /* VATTN_LAYOUT_*, or -1 (default) = vattn_get_kv_cache_layout()
                                  at create time */
  int32_t zero_fill;           /* 1 = zero the memory after allocation (default 1) */
  int64_t num_blocks;          /* > 0: exactly this many blocks per layer */
  int64_t memory_budget_bytes; /* used when num_blocks == 0 */
  const vattn_backend_t *backend; /* shape + stride order; NULL = the device's default */
} vattn_kv_cache_options_t;

VATTN_API void vattn_kv_cache_options_init(vattn_kv_cache_options_t *opts);

/* Blocks per layer that fit in `memory_budget_bytes` when every layer that
 * owns a cache (kv_sharing_target[i] < 0) keeps num_blocks pages of its own
 * page size. kv_sharing_target may be NULL (no sharing). */
VATTN_API vattn_status_t vattn_kv_cache_num_blocks_for_budget(
    const vattn_kv_cache_spec_t *specs, const int32_t *kv_sharing_target, size_t num_layers,
    int64_t memory_budget_bytes, int64_t *out);

/* Allocates the caches of `num_layers` layers.  specs[i] is layer i's spec;
 * kv_sharing_target[i] is -1 (own cache) or the index of an earlier layer
 * with an equal spec whose cache layer i reads (vLLM kv_sharing_target_layer_name).
 * Layers with equal specs form one group. */
VATTN_API vattn_status_t vattn_kv_cache_create(vattn_kv_cache_t **out,
                                               const vattn_kv_cache_spec_t *specs,
                                               const int32_t *kv_sharing_target, size_t num_layers,
                                               const vattn_kv_cache_options_t *opts);

/* Like vattn_kv_cache_create but over caller-owned memory: tensors[i] is
 * layer i's cache in the backend's logical shape (any strides; the layout is
 * read from them), NULL for sharing layers.  The tensors must outlive the
 * handle.  num_blocks is read from the tensors (all equal). */
VATTN_API vattn_status_t vattn_kv_cache_create_from_tensors(
    vattn_kv_cache_t **out, const vattn_kv_cache_spec_t *specs, const int32_t *kv_sharing_target,
    size_t num_layers, const DLTensor *const *tensors, const vattn_kv_cache_options_t *opts);

VATTN_API void vattn_kv_cache_destroy(vattn_kv_cache_t *cache);

typedef struct vattn_kv_cache_info {
  size_t struct_size;
  int64_t num_blocks;
  int64_t total_bytes;   /* bytes owned (0 for caller-owned tensors) */
  int32_t num_layers;
  int32_t num_groups;
  int32_t device_type;
  int32_t device_id;
  int32_t layout;
} vattn_kv_cache_info_t;

VATTN_API vattn_status_t vattn_kv_cache_get_info(const vattn_kv_cache_t *cache,
                                                 vattn_kv_cache_info_t *out);
/* Group index of a layer, and the merged spec of a group. */
VATTN_API vattn_status_t vattn_kv_cache_layer_group(const vattn_kv_cache_t *cache, size_t layer,
                                                    int32_t *group_out);
VATTN_API vattn_status_t vattn_kv_cache_group_spec(const vattn_kv_cache_t *cache, size_t group,
                                                   vattn_kv_cache_spec_t *out);

/* Layer `layer`'s cache as a DLTensor in the logical shape with the
 * physical layout's strides.  out->shape / out->strides point into the
 * handle (valid until destroy).  A sharing layer gets its target's tensor. */
VATTN_API vattn_status_t vattn_kv_cache_layer_tensor(const vattn_kv_cache_t *cache, size_t layer,
                                                     DLTensor *out);

/* ========================================================================
 * 6. Slot mapping                                  (src/metadata/slot_mapping)
 * ====================================================================== */

/* v1: slots of the tokens of a batch from a block table and positions. */
typedef struct vattn_slot_mapping_args {
  size_t struct_size;
  const int32_t *block_table;   /* [num_rows, row_stride] block ids */
  int64_t num_rows;             /* >= num_reqs */
  int64_t row_stride;           /* max_num_blocks_per_req */
  const int32_t *num_blocks_per_row; /* optional [num_rows]: valid entries; else row_stride */
  const int32_t *query_start_loc; /* [num_reqs + 1] */
  int64_t num_reqs;
  const int64_t *positions;     /* [num_tokens] absolute token positions */
  int64_t num_tokens;           /* == query_start_loc[num_reqs] */
  int32_t block_size;
  int64_t num_cache_blocks;     /* block ids must be in [0, num_cache_blocks) */
  int32_t cp_world_size;        /* context parallel (default 1) */
  int32_t cp_rank;
  int32_t cp_interleave;        /* default 1 */
} vattn_slot_mapping_args_t;

VATTN_API void vattn_slot_mapping_args_init(vattn_slot_mapping_args_t *args);

/* Writes slot_mapping[0, num_tokens) and sets [num_tokens, slot_mapping_len)
 * to VATTN_PAD_SLOT_ID.  A position whose block index is beyond the row's
 * valid entries, or a block id outside the cache, is an error (nothing
 * written). */
VATTN_API vattn_status_t vattn_slot_mapping_compute(const vattn_slot_mapping_args_t *args,
                                                    int64_t *slot_mapping,
                                                    int64_t slot_mapping_len);

/* v1 slot mapping from tensors, computed on their device (CUDA-graph
 * friendly: on CUDA nothing is read back and nothing synchronizes).  All four
 * tensors on one device (CPU, or one CUDA device):
 *   block_table      int32 [rows, cols], last dim contiguous (any row stride);
 *                    every row's cols entries count as valid
 *   query_start_loc  int32 [num_reqs + 1], contiguous; rows >= num_reqs
 *   positions        int64 [T], contiguous (T tokens)
 *   slot_mapping     int64 [>= T], contiguous: slot_mapping[i] for i < T, the
 *                    tail [T, len) set to VATTN_PAD_SLOT_ID (-1)
 * block_size > 0; num_cache_blocks >= 0 (0: block ids are not checked).  No
 * context parallelism (use vattn_slot_mapping_compute for that).
 * CPU tensors: exactly vattn_slot_mapping_compute (query_start_loc[num_reqs]
 * must equal T; a block index beyond the row, a negative position or a block
 * id outside [0, num_cache_blocks) is an error and nothing is written).
 * CUDA tensors: asynchronous on `stream`; the shapes are checked on the host
 * but the values are not (that would need a synchronization): a token whose
 * block index is beyond the row, whose position is negative, whose block id is
 * outside [0, num_cache_blocks), or which lies outside [query_start_loc[0],
 * query_start_loc[num_reqs]) gets -1 instead of an error. */
VATTN_API vattn_status_t vattn_slot_mapping_compute_tensors(const DLTensor *block_table,
                                                            const DLTensor *query_start_loc,
                                                            const DLTensor *positions,
                                                            DLTensor *slot_mapping,
                                                            int32_t block_size,
                                                            int64_t num_cache_blocks,
                                                            void *stream);

/* v0 compute_slot_mapping_start_idx: max(0, query_len - sliding_window) for a
 * prompt with a window (sliding_window > 0), else 0. */
VATTN_API vattn_status_t vattn_slot_mapping_v0_start_idx(int32_t is_prompt, int64_t query_len,
                                                         int64_t context_len,
                                                         int64_t sliding_window, int64_t *out);

/* v0 compute_slot_mapping for one sequence: appends to out[*out_len ...].
 * Profile run: seq_len pads.  Else max(0, start_idx - context_len) pads, then
 * block_table[i / block_size] * block_size + i % block_size for i in
 * [max(start_idx, context_len), seq_len).  *out_len is advanced; needing more
 * than out_capacity is VATTN_ERR_BUFFER_TOO_SMALL (nothing written). */
VATTN_API vattn_status_t vattn_slot_mapping_v0_compute(
    int32_t is_profile_run, int64_t seq_len, int64_t context_len, int64_t start_idx,
    int32_t block_size, const int32_t *block_table, int64_t block_table_len,
    int64_t num_cache_blocks, int64_t *out, int64_t out_capacity, int64_t *out_len);

/* ========================================================================
 * 7. CommonAttentionMetadata                         (src/metadata/common)
 * ====================================================================== */

typedef struct vattn_metadata vattn_metadata_t;

/* Host arrays describing one batch.  vattn_metadata_create deep-copies
 * them; vattn_metadata_describe fills one with pointers into the handle. */
typedef struct vattn_metadata_desc {
  size_t struct_size;
  int64_t num_reqs;
  int64_t num_actual_tokens;        /* >= query_start_loc[num_reqs] (CUDA-graph padding) */
  const int32_t *query_start_loc;   /* [num_reqs + 1], 0-based, non-decreasing */
  const int32_t *seq_lens;          /* [num_reqs], seq_len >= query_len */
  const int32_t *num_computed_tokens; /* optional [num_reqs]; NULL = seq_lens - query_lens */
  const int32_t *block_table;       /* [block_table_rows, block_table_cols] */
  int64_t block_table_rows;         /* >= num_reqs */
  int64_t block_table_cols;         /* max blocks per request */
  const int64_t *slot_mapping;      /* [slot_mapping_len]; padding entries -1 */
  int64_t slot_mapping_len;
  int32_t causal;                   /* default 1 */
  int32_t max_query_len;            /* -1 = computed */
  int32_t max_seq_len;              /* -1 = computed; may be an upper bound */
  int32_t block_size;               /* 0 = unknown (then block ids are checked only against num_cache_blocks) */
  int64_t num_cache_blocks;         /* 0 = unchecked; else block ids must be < this */
  const int32_t *encoder_seq_lens;  /* optional [num_reqs] (cross-attention) */
  const int32_t *logits_indices_padded; /* optional [logits_indices_len] */
  int64_t logits_indices_len;
  int64_t num_logits_indices;
  const int32_t *dcp_local_seq_lens; /* optional [num_reqs] */
} vattn_metadata_desc_t;

VATTN_API void vattn_metadata_desc_init(vattn_metadata_desc_t *desc);

/* Validates every invariant (docs/errors.md lists them) and copies.  Block
 * ids are checked in the entries requests use (ceil(kv_len / block_size) of
 * each row, the whole row when block_size is 0); other entries are copied
 * as they are and never read.  Plans built from the handle share its block
 * table and slot mapping (no copy per build). */
VATTN_API vattn_status_t vattn_metadata_create(vattn_metadata_t **out,
                                               const vattn_metadata_desc_t *desc);
VATTN_API void vattn_metadata_destroy(vattn_metadata_t *md);
/* Fills *out (its struct_size must be set) with the handle's values; arrays
 * point into the handle and live until it is destroyed. */
VATTN_API vattn_status_t vattn_metadata_describe(const vattn_metadata_t *md,
                                                 vattn_metadata_desc_t *out);
/* unpadded(num_tokens, num_reqs): a copy truncated to the real sizes. */
VATTN_API vattn_status_t vattn_metadata_unpadded(const vattn_metadata_t *md, int64_t num_tokens,
                                                 int64_t num_reqs, vattn_metadata_t **out);

/* ========================================================================
 * 8. Batch utilities                                  (src/metadata/batch)
 * ====================================================================== */

typedef struct vattn_decode_prefill_split {
  int64_t num_decodes, num_prefills;
  int64_t num_decode_tokens, num_prefill_tokens;
} vattn_decode_prefill_split_t;

VATTN_API vattn_status_t vattn_split_decodes_and_prefills(const vattn_metadata_t *md,
                                                          int32_t decode_threshold,
                                                          int32_t require_uniform,
                                                          vattn_decode_prefill_split_t *out);

typedef struct vattn_decode_extend_prefill_split {
  int64_t num_decodes, num_extends, num_prefills;
  int64_t num_decode_tokens, num_extend_tokens, num_prefill_tokens;
} vattn_decode_extend_prefill_split_t;

VATTN_API vattn_status_t vattn_split_decodes_prefills_and_extends(
    const vattn_metadata_t *md, int32_t decode_threshold, vattn_decode_extend_prefill_split_t *out);

/* Era B 3-way reorder (decode -> extend -> prefill) with minimal stable
 * swaps.  Inputs per request: scheduled tokens and computed tokens.
 * Outputs (any may be NULL): swaps[2*k], swaps[2*k+1] = the k-th swap_states(i, j)
 * to apply in order (at most num_reqs swaps, capacity 2*num_reqs entries);
 * order[i] = original index of the request that ends in slot i;
 * *modified = 1 iff anything moved. */
VATTN_API vattn_status_t vattn_reorder_batch_to_split_decodes_and_prefills(
    const int32_t *num_scheduled_tokens, const int32_t *num_computed_tokens, int64_t num_reqs,
    int32_t decode_threshold, int64_t *swaps, int64_t *num_swaps, int64_t *order,
    int32_t *modified);

/* Chunked-local attention virtual batches (vLLM make_local_attention_virtual_batches). */
VATTN_API vattn_status_t vattn_make_local_attention_virtual_batches(int32_t attn_chunk_size,
                                                                   const vattn_metadata_t *md,
                                                                   int32_t block_size,
                                                                   vattn_metadata_t **out);
/* Re-gathers a local block table from another (same-shaped) block table
 * (vLLM's make_block_table closure): out[v * C + p] = block_table[row_v *
 * num_cols + col_{v,p}] for the source rows and clamped columns recorded in
 * local_md (made by the function above; C = its block_table_cols, out_len >=
 * its num_reqs * C).  num_rows / num_cols must cover every gathered entry. */
VATTN_API vattn_status_t vattn_local_attention_update_block_table(const vattn_metadata_t *local_md,
                                                                  const int32_t *block_table,
                                                                  int64_t num_rows, int64_t num_cols,
                                                                  int32_t *out, int64_t out_len);

/* qsl[start : stop + 1] - qsl[start] into out[stop - start + 1]. */
VATTN_API vattn_status_t vattn_slice_query_start_locs(const int32_t *query_start_loc,
                                                      int64_t len, int64_t request_start,
                                                      int64_t request_stop, int32_t *out);

/* A micro-batch: half-open request and token ranges. */
typedef struct vattn_ubatch_slice {
  int64_t request_start, request_stop;
  int64_t token_start, token_stop;
} vattn_ubatch_slice_t;

/* maybe_create_ubatch_slices: writes num_ubatches slices into out and the
 * padded variant into out_padded (either may be NULL).  split_point <= 0 =
 * num_tokens_padded / num_ubatches. */
VATTN_API vattn_status_t vattn_ubatch_slices_create(const int32_t *num_scheduled_tokens,
                                                    int64_t num_reqs, int64_t num_tokens_padded,
                                                    int64_t num_reqs_padded, int32_t num_ubatches,
                                                    int64_t split_point, vattn_ubatch_slice_t *out,
                                                    vattn_ubatch_slice_t *out_padded);

/* split_attn_metadata: out[i] = metadata of slices[i]; never mutates md.
 * On failure no handle is left in out. */
VATTN_API vattn_status_t vattn_split_attn_metadata(const vattn_ubatch_slice_t *slices,
                                                   size_t num_slices, const vattn_metadata_t *md,
                                                   vattn_metadata_t **out);

VATTN_API vattn_status_t vattn_make_kv_sharing_fast_prefill_metadata(const vattn_metadata_t *md,
                                                                     vattn_metadata_t **out);

/* View of query [T, H, D] as [B, T/B, H, D] (out shares data; out->shape and
 * out->strides point at shape_buf[4] and strides_buf[4]). */
VATTN_API vattn_status_t vattn_reshape_query_for_spec_decode(const DLTensor *query,
                                                             int64_t batch_size, DLTensor *out,
                                                             int64_t *shape_buf,
                                                             int64_t *strides_buf);
/* Inverse: [B, L, H, D] -> [B*L, H, D]; 3-D input returned as is. */
VATTN_API vattn_status_t vattn_reshape_attn_output_for_spec_decode(const DLTensor *output,
                                                                   DLTensor *out,
                                                                   int64_t *shape_buf,
                                                                   int64_t *strides_buf);

VATTN_API vattn_status_t vattn_use_cascade_attention(
    int64_t common_prefix_len, const int32_t *query_lens, int64_t num_reqs, int32_t num_q_heads,
    int32_t num_kv_heads, int32_t use_alibi, int32_t use_sliding_window,
    int32_t use_local_attention, int32_t num_sms, int32_t dcp_world_size, int32_t *out);

/* Greedy packing of consecutive requests into chunks whose seq_len sum is
 * <= workspace_size: out[2k], out[2k+1] = (start, end) + request_offset. */
VATTN_API vattn_status_t vattn_split_prefill_chunks(const int32_t *seq_lens, int64_t num_reqs,
                                                    int64_t workspace_size,
                                                    int64_t request_offset, int64_t *out,
                                                    int64_t out_capacity_pairs,
                                                    int64_t *num_chunks);

/* dcp_rank >= 0: out[num_reqs] for that rank; dcp_rank < 0: out[num_reqs *
 * dcp_size] row-major for every rank. */
VATTN_API vattn_status_t vattn_get_dcp_local_seq_lens(const int32_t *seq_lens, int64_t num_reqs,
                                                      int32_t dcp_size, int32_t dcp_rank,
                                                      int32_t interleave, int32_t *out);

typedef struct vattn_per_layer_params {
  int32_t window_left;     /* sliding_window - 1, or -1 */
  float logits_soft_cap;   /* 0 = none */
  float sm_scale;
  int32_t has_sinks;
} vattn_per_layer_params_t;

typedef struct vattn_global_params {
  vattn_per_layer_params_t params; /* the first layer's */
  int32_t has_same_window_lefts;
  int32_t has_same_all_params;
} vattn_global_params_t;

/* Era B/C semantics: never fails on mismatch, reports it in the flags.
 * num_layers == 0 is VATTN_ERR_INVALID_ARGUMENT ("no attention layers"). */
VATTN_API vattn_status_t vattn_infer_global_hyperparameters(const vattn_per_layer_params_t *layers,
                                                            size_t num_layers,
                                                            vattn_global_params_t *out);

/* ========================================================================
 * 9. v0 metadata: per-sequence builder and CUDA-graph state (src/metadata/v0)
 * ====================================================================== */

/* vLLM v0 AttentionMetadata (prefills first, then decodes). */
typedef struct vattn_v0_metadata vattn_v0_metadata_t;
typedef struct vattn_v0_builder vattn_v0_builder_t;

typedef struct vattn_v0_builder_options {
  size_t struct_size;
  int32_t block_size;
  int32_t sliding_window;        /* 0 = none */
  int32_t chunked_prefill_enabled;
  int64_t num_cache_blocks;      /* 0 = unchecked */
  int32_t max_blocks_per_seq;    /* width of the CUDA-graph block table */
} vattn_v0_builder_options_t;

VATTN_API void vattn_v0_builder_options_init(vattn_v0_builder_options_t *opts);
VATTN_API vattn_status_t vattn_v0_builder_create(vattn_v0_builder_t **out,
                                                 const vattn_v0_builder_options_t *opts);
VATTN_API void vattn_v0_builder_destroy(vattn_v0_builder_t *b);

/* One sequence of a sequence group (vLLM _add_seq_group). */
typedef struct vattn_v0_seq {
  size_t struct_size;
  int32_t is_prompt;
  int64_t token_len;             /* tokens fed this step */
  int64_t seq_len;               /* orig seq len */
  int64_t curr_seq_len;
  int64_t query_len;
  int64_t context_len;
  int32_t curr_sliding_window_blocks; /* 0 = whole table */
  int32_t prefix_cache_hit;
  const int32_t *block_table;    /* NULL = no table (profile run) */
  int64_t block_table_len;
} vattn_v0_seq_t;

VATTN_API void vattn_v0_seq_init(vattn_v0_seq_t *seq);
VATTN_API vattn_status_t vattn_v0_builder_add_seq(vattn_v0_builder_t *b, const vattn_v0_seq_t *seq);
/* build(seq_lens, query_lens, cuda_graph_pad_size, batch_size); resets the builder. */
VATTN_API vattn_status_t vattn_v0_builder_build(vattn_v0_builder_t *b, const int32_t *seq_lens,
                                                const int32_t *query_lens, int64_t num_seqs,
                                                int64_t cuda_graph_pad_size, int64_t batch_size,
                                                vattn_v0_metadata_t **out);

typedef struct vattn_v0_metadata_desc {
  size_t struct_size;
  int64_t num_prefills, num_prefill_tokens, num_decode_tokens;
  int64_t num_seqs;                 /* rows of seq_lens / block_tables */
  const int64_t *slot_mapping; int64_t slot_mapping_len;
  const int32_t *seq_lens;          /* [num_seqs] */
  const int32_t *context_lens;      /* [num_seqs] */
  const int32_t *query_start_loc;   /* [num_seqs + 1] */
  const int32_t *seq_start_loc;     /* [num_seqs + 1] */
  const int32_t *block_tables;      /* [num_seqs, block_tables_cols] (0-padded) */
  int64_t block_tables_cols;
  int32_t max_query_len, max_prefill_seq_len, max_decode_seq_len, max_decode_query_len;
  int32_t use_cuda_graph;
  /* encoder-decoder */
  const int32_t *encoder_seq_lens; int64_t num_encoder_tokens; int32_t max_encoder_seq_len;
  const int32_t *cross_block_tables; int64_t cross_block_tables_cols;
} vattn_v0_metadata_desc_t;

VATTN_API void vattn_v0_metadata_desc_init(vattn_v0_metadata_desc_t *desc);
VATTN_API vattn_status_t vattn_v0_metadata_create(vattn_v0_metadata_t **out,
                                                  const vattn_v0_metadata_desc_t *desc);
VATTN_API vattn_status_t vattn_v0_metadata_describe(const vattn_v0_metadata_t *md,
                                                    vattn_v0_metadata_desc_t *out);
VATTN_API void vattn_v0_metadata_destroy(vattn_v0_metadata_t *md);

/* get_num_prefill_decode_query_kv_tokens: out3 = {prefill query tokens,
 * prefill kv tokens, decode query tokens}. */
VATTN_API vattn_status_t vattn_v0_get_num_prefill_decode_query_kv_tokens(
    const vattn_v0_metadata_t *md, int32_t attn_type, int64_t *out3);

/* get_seq_len_block_table_args: pointers into md (block_table NULL for
 * encoder attention). */
VATTN_API vattn_status_t vattn_v0_get_seq_len_block_table_args(
    const vattn_v0_metadata_t *md, int32_t is_prompt, int32_t attn_type,
    const int32_t **seq_lens_out, int64_t *num_seqs_out, int32_t *max_seq_len_out,
    const int32_t **block_table_out, int64_t *block_table_cols_out);

/* CUDA-graph state (vLLM CommonAttentionState): persistent input buffers
 * for up to max_batch_size decodes: slot mapping (all PAD), seq lens (all
 * 1) and block tables [max_batch_size, max_blocks_per_seq] (zeros). */
typedef struct vattn_graph_state vattn_graph_state_t;
VATTN_API vattn_status_t vattn_graph_state_create(vattn_graph_state_t **out,
                                                  int64_t max_batch_size,
                                                  int32_t max_blocks_per_seq,
                                                  int32_t max_seq_len_to_capture);
VATTN_API void vattn_graph_state_destroy(vattn_graph_state_t *st);
/* Metadata for a captured decode batch of batch_size: views of the buffers. */
VATTN_API vattn_status_t vattn_graph_state_metadata_for_batch(const vattn_graph_state_t *st,
                                                              int64_t batch_size,
                                                              vattn_v0_metadata_t **out);
/* Copies a real decode batch's slot mapping, seq lens and block tables into
 * the persistent buffers (prefix of batch_size rows; the rest keep padding). */
VATTN_API vattn_status_t vattn_graph_state_prepare_replay(vattn_graph_state_t *st,
                                                          const vattn_v0_metadata_t *md);

/* ========================================================================
 * 10. Metadata builder and plan (v1)             (src/backends/<backend>)
 * ====================================================================== */

/* A builder turns CommonAttentionMetadata into a plan that a layer runs.
 * A plan owns persistent buffers (on the backend's device) sized at its
 * creation: it can be built again with new metadata without reallocating,
 * which is what CUDA-graph replay needs.  Builders are per KV cache group. */
typedef struct vattn_builder vattn_builder_t;
typedef struct vattn_plan vattn_plan_t;

typedef struct vattn_builder_options {
  size_t struct_size;
  int32_t device_id;
  int32_t num_heads;          /* query heads of the layers this builder serves */
  int32_t num_kv_heads;
  int32_t head_size;
  int32_t block_size;
  int32_t max_num_reqs;       /* plan capacity (default 256) */
  int64_t max_num_tokens;     /* plan capacity (default 8192) */
  int32_t max_blocks_per_req; /* plan capacity (default 2048) */
  int32_t num_threads;        /* CPU backend: worker threads, 0 = hardware */
  int32_t num_sms;            /* CUDA: 0 = query the device */
  int32_t max_num_splits;     /* split-KV bound, 0 = backend default */
  /* The KV cache element type of the layers this builder's plans serve
   * (VATTN_KV_CACHE_DTYPE_*, default AUTO).  CUDA shapes its decode work for
   * it: at head size 64 with an even number of KV heads and an fp8 cache, a
   * decode CTA runs two adjacent KV heads, and decode requests of more than
   * 8 query rows (q_len * num_heads / num_kv_heads) go to the general kernel.
   * H100, fp8 head size 64, against AUTO: 32x4096 18% faster, 8x8192 11%,
   * 128x1024 10%; one 32768-token request the same, 4x8192 2% slower.  On
   * compute capability 9.0 at head size 256 it also sizes the general work
   * items: 128 query rows for a 16-bit cache (the Hopper kernel), 64 for
   * fp8.  A plan runs correctly on any cache kind; only its speed follows
   * this field.  (Added after max_num_splits: callers whose struct_size
   * ends before it get AUTO.) */
  int32_t kv_cache_dtype;
} vattn_builder_options_t;

VATTN_API void vattn_builder_options_init(vattn_builder_options_t *opts);
VATTN_API vattn_status_t vattn_builder_create(vattn_builder_t **out,
                                              const vattn_backend_t *backend,
                                              const vattn_builder_options_t *opts);
VATTN_API void vattn_builder_destroy(vattn_builder_t *b);
/* CUDA-graph support level and reorder threshold of this builder. */
VATTN_API vattn_status_t vattn_builder_cudagraph_support(const vattn_builder_t *b, int32_t *out);
VATTN_API vattn_status_t vattn_builder_reorder_batch_threshold(const vattn_builder_t *b,
                                                               int32_t *out);

VATTN_API vattn_status_t vattn_plan_create(vattn_plan_t **out, const vattn_builder_t *b);
VATTN_API void vattn_plan_destroy(vattn_plan_t *plan);

/* build(common_prefix_len, metadata, fast_build) into `plan`.  Metadata
 * larger than the plan's capacity is VATTN_ERR_WORKSPACE_TOO_SMALL.
 * common_prefix_len > 0 turns on cascade attention (must be a multiple of
 * block_size and pass vattn_use_cascade_attention's basic rules).  CUDA:
 * copies go asynchronously on `stream` from one of two pinned staging
 * buffers that alternate; the host waits only when the buffer it needs is
 * still being uploaded, i.e. when it runs two builds of this plan ahead of
 * `stream`. */
VATTN_API vattn_status_t vattn_builder_build(vattn_builder_t *b, vattn_plan_t *plan,
                                             int64_t common_prefix_len, const vattn_metadata_t *md,
                                             int32_t fast_build, void *stream);
/* Metadata for a capture: checks it matches the builder's CUDA-graph level. */
VATTN_API vattn_status_t vattn_builder_build_for_cudagraph_capture(vattn_builder_t *b,
                                                                   vattn_plan_t *plan,
                                                                   const vattn_metadata_t *md,
                                                                   void *stream);
/* Build for a speculative draft step (fast_build, no cascade). */
VATTN_API vattn_status_t vattn_builder_build_for_drafting(vattn_builder_t *b, vattn_plan_t *plan,
                                                          const vattn_metadata_t *md,
                                                          int32_t draft_index, void *stream);

/* ========================================================================
 * 11. Attention layer                             (src/backends/<backend>)
 * ====================================================================== */

typedef struct vattn_layer vattn_layer_t;

typedef struct vattn_layer_options {
  size_t struct_size;
  int32_t num_heads;
  int32_t head_size;
  int32_t num_kv_heads;        /* 0 = num_heads; num_heads % num_kv_heads == 0 */
  float scale;                 /* softmax scale; 0 = 1/sqrt(head_size) */
  int32_t dtype;               /* q/k/v/output dtype VATTN_DTYPE_* (default BFLOAT16) */
  int32_t kv_cache_dtype;      /* VATTN_KV_CACHE_DTYPE_* */
  int32_t attn_type;           /* VATTN_ATTN_* */
  int32_t sliding_window;      /* 0 = none; tokens within the window incl. self */
  float logits_soft_cap;       /* 0 = none; s -> cap * tanh(s / cap) */
  const float *alibi_slopes;   /* [num_heads] or NULL; copied */
  const float *sinks;          /* [num_heads] or NULL; copied */
  int32_t kv_sharing;          /* 1 = reads another layer's cache, never writes it */
  int32_t block_size;          /* cache block size (default 16) */
} vattn_layer_options_t;

VATTN_API void vattn_layer_options_init(vattn_layer_options_t *opts);
/* Unsupported head size / dtype / block size / feature combinations are
 * refused here (VATTN_ERR_UNSUPPORTED), never discovered in a kernel. */
VATTN_API vattn_status_t vattn_layer_create(vattn_layer_t **out, const vattn_backend_t *backend,
                                            const vattn_layer_options_t *opts);
VATTN_API void vattn_layer_destroy(vattn_layer_t *layer);

typedef struct vattn_forward_args {
  size_t struct_size;
  const DLTensor *query;   /* [>= num_actual_tokens, num_heads, head_size] */
  const DLTensor *key;     /* [>= slot_mapping_len, num_kv_heads, head_size] or NULL */
  const DLTensor *value;   /* same shape as key, or NULL */
  DLTensor *kv_cache;      /* logical (2, num_blocks, block_size, num_kv_heads, head_size); NULL for encoder / encoder-only */
  DLTensor *output;        /* [>= num_actual_tokens, num_heads, head_size], layer dtype */
  DLTensor *output_lse;    /* optional [num_heads, >= num_actual_tokens] float32 */
  float k_scale;           /* fp8 cache: stored = x / k_scale (default 1) */
  float v_scale;
  void *stream;            /* cudaStream_t for CUDA, ignored on CPU */
} vattn_forward_args_t;

VATTN_API void vattn_forward_args_init(vattn_forward_args_t *args);

/* Writes the new K/V into the cache through the plan's slot mapping (unless
 * kv_sharing or K/V are NULL), then attends every query token of the batch
 * (decodes, chunked prefills, prefills with cached context, mixed) and writes
 * output rows [0, num_actual_tokens) (padding rows past the real token count
 * are written as zeros).  Cascade is used when the plan was built with
 * common_prefix_len > 0.  The plan's block ids and slots are checked against
 * args->kv_cache on every call, in O(1) from the maxima measured by
 * vattn_metadata_create (a per-entry scan only when those do not prove them
 * in range, e.g. metadata created with num_cache_blocks = 0).
 * CUDA: the plan also holds the device workspace of split-KV partials and
 * the kernels' work counters, so forwards that share a plan must run in
 * order on the device (one stream, as the layers of a step do, or streams
 * ordered by events); forwards on unordered streams need a plan each. */
VATTN_API vattn_status_t vattn_layer_forward(const vattn_layer_t *layer, const vattn_plan_t *plan,
                                             const vattn_forward_args_t *args);

/* ========================================================================
 * 12. Cache and merge operations           (src/backends/<backend>/ops)
 * Dispatched on the device of the tensors (CPU or CUDA).
 * ====================================================================== */

/* reshape_and_cache_flash: key/value [T', H, D] (T' >= slot count) into the
 * cache (logical 5-D, any strides) at slot_mapping[i] (int64 [T] on the
 * cache's device); slot -1 is skipped; fp8 caches (uint8) store x / scale,
 * saturated. Slots >= num_blocks * block_size are an error on CPU; on CUDA
 * they are skipped (never written, not reported: checking them would need a
 * synchronization). */
VATTN_API vattn_status_t vattn_reshape_and_cache(const DLTensor *key, const DLTensor *value,
                                                 DLTensor *kv_cache, const DLTensor *slot_mapping,
                                                 int32_t kv_cache_dtype, float k_scale,
                                                 float v_scale, void *stream);

/* merge_attn_states: output[T,H,D] = softmax-weighted merge of two partial
 * results; LSEs are float32 [H, T].  Both -inf gives the prefix output and
 * -inf LSE; +inf is treated as -inf. output_lse may be NULL. */
VATTN_API vattn_status_t vattn_merge_attn_states(DLTensor *output, DLTensor *output_lse,
                                                 const DLTensor *prefix_output,
                                                 const DLTensor *prefix_lse,
                                                 const DLTensor *suffix_output,
                                                 const DLTensor *suffix_lse, void *stream);

/* copy_blocks: for every layer cache and every pair (src, dst) of
 * block_mapping (host int64 [num_pairs, 2]) copies block src to dst in K and V. */
VATTN_API vattn_status_t vattn_copy_blocks(DLTensor *const *kv_caches, size_t num_layers,
                                           const int64_t *block_mapping, size_t num_pairs,
                                           void *stream);

/* swap_blocks: copies whole blocks between two caches of the same shape
 * (CPU<->CUDA, CUDA<->CUDA same device, CPU<->CPU); asynchronous on stream
 * when a GPU is involved (host side should be pinned for true overlap). */
VATTN_API vattn_status_t vattn_swap_blocks(const DLTensor *src, DLTensor *dst,
                                           const int64_t *block_mapping, size_t num_pairs,
                                           void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VATTN_H */
