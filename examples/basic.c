/* basic.c -- the smallest complete vattn program, in C99.
 *
 * Sets up a paged KV cache, describes a mixed batch (one decode, one chunked
 * prefill with cached context, one new prefill), computes its slot mapping,
 * builds CommonAttentionMetadata, splits it into decodes and prefills, then
 * runs one attention layer on the CPU backend and prints a checksum.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vattn.h"

#define CHECK(call)                                                             \
  do {                                                                          \
    vattn_status_t st_ = (call);                                                \
    if (st_ != VATTN_OK) {                                                      \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, vattn_status_string(st_), \
              vattn_last_error_message());                                      \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

enum { NUM_REQS = 3, BLOCK = 16, HEADS = 4, KV_HEADS = 2, HEAD_SIZE = 64, COLS = 4 };

static DLTensor host_tensor(float *data, int ndim, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

int main(void) {
  /* Batch: request 0 decodes its 21st token, request 1 prefills 8 more
   * tokens after 16 cached ones, request 2 is a new 5-token prompt. */
  const int32_t query_lens[NUM_REQS] = {1, 8, 5};
  const int32_t seq_lens[NUM_REQS] = {21, 24, 5};
  const int32_t block_table[NUM_REQS * COLS] = {3, 7, 0, 0, /* req 0: blocks 3, 7 */
                                                5, 1, 0, 0, /* req 1: blocks 5, 1 */
                                                2, 0, 0, 0}; /* req 2: block 2   */
  int32_t query_start_loc[NUM_REQS + 1] = {0};
  int64_t positions[64], slots[64];
  int64_t num_tokens = 0;
  int r, i;
  for (r = 0; r < NUM_REQS; ++r) {
    query_start_loc[r + 1] = query_start_loc[r] + query_lens[r];
    for (i = 0; i < query_lens[r]; ++i) positions[num_tokens++] = seq_lens[r] - query_lens[r] + i;
  }

  /* 1. The KV cache: 2 layers with the same spec, 8 blocks each. */
  vattn_kv_cache_spec_t spec;
  vattn_kv_cache_spec_init(&spec);
  spec.block_size = BLOCK;
  spec.num_kv_heads = KV_HEADS;
  spec.head_size = HEAD_SIZE;
  spec.dtype = VATTN_DTYPE_FLOAT32;
  vattn_kv_cache_spec_t specs[2] = {spec, spec};
  vattn_kv_cache_options_t cache_opts;
  vattn_kv_cache_options_init(&cache_opts);
  cache_opts.num_blocks = 8;
  vattn_kv_cache_t *cache = NULL;
  CHECK(vattn_kv_cache_create(&cache, specs, NULL, 2, &cache_opts));

  /* 2. Slot mapping (v1): token position -> block_table[pos / 16] * 16 + pos % 16. */
  vattn_slot_mapping_args_t sm;
  vattn_slot_mapping_args_init(&sm);
  sm.block_table = block_table;
  sm.num_rows = NUM_REQS;
  sm.row_stride = COLS;
  sm.query_start_loc = query_start_loc;
  sm.num_reqs = NUM_REQS;
  sm.positions = positions;
  sm.num_tokens = num_tokens;
  sm.block_size = BLOCK;
  sm.num_cache_blocks = 8;
  CHECK(vattn_slot_mapping_compute(&sm, slots, num_tokens));
  printf("slot mapping:");
  for (i = 0; i < num_tokens; ++i) printf(" %lld", (long long)slots[i]);
  printf("\n");

  /* 3. CommonAttentionMetadata, validated and copied by the library. */
  vattn_metadata_desc_t desc;
  vattn_metadata_desc_init(&desc);
  desc.num_reqs = NUM_REQS;
  desc.num_actual_tokens = num_tokens;
  desc.query_start_loc = query_start_loc;
  desc.seq_lens = seq_lens;
  desc.block_table = block_table;
  desc.block_table_rows = NUM_REQS;
  desc.block_table_cols = COLS;
  desc.slot_mapping = slots;
  desc.slot_mapping_len = num_tokens;
  desc.block_size = BLOCK;
  desc.num_cache_blocks = 8;
  vattn_metadata_t *md = NULL;
  CHECK(vattn_metadata_create(&md, &desc));

  vattn_decode_prefill_split_t split;
  CHECK(vattn_split_decodes_and_prefills(md, 1, 0, &split));
  printf("decodes %lld (%lld tokens), prefills %lld (%lld tokens)\n", (long long)split.num_decodes,
         (long long)split.num_decode_tokens, (long long)split.num_prefills,
         (long long)split.num_prefill_tokens);

  /* 4. One attention layer on the CPU backend: build a plan, run forward. */
  const vattn_backend_t *cpu = NULL;
  CHECK(vattn_backend_find("CPU", &cpu));
  vattn_builder_options_t bopts;
  vattn_builder_options_init(&bopts);
  bopts.num_heads = HEADS;
  bopts.num_kv_heads = KV_HEADS;
  bopts.head_size = HEAD_SIZE;
  bopts.block_size = BLOCK;
  vattn_builder_t *builder = NULL;
  vattn_plan_t *plan = NULL;
  CHECK(vattn_builder_create(&builder, cpu, &bopts));
  CHECK(vattn_plan_create(&plan, builder));
  CHECK(vattn_builder_build(builder, plan, 0, md, 0, NULL));

  vattn_layer_options_t lopts;
  vattn_layer_options_init(&lopts);
  lopts.num_heads = HEADS;
  lopts.num_kv_heads = KV_HEADS;
  lopts.head_size = HEAD_SIZE;
  lopts.dtype = VATTN_DTYPE_FLOAT32;
  lopts.block_size = BLOCK;
  vattn_layer_t *layer = NULL;
  CHECK(vattn_layer_create(&layer, cpu, &lopts));

  static float q[64 * HEADS * HEAD_SIZE], k[64 * KV_HEADS * HEAD_SIZE],
      v[64 * KV_HEADS * HEAD_SIZE], out[64 * HEADS * HEAD_SIZE];
  srand(7);
  for (i = 0; i < num_tokens * HEADS * HEAD_SIZE; ++i) q[i] = (float)rand() / RAND_MAX - 0.5f;
  for (i = 0; i < num_tokens * KV_HEADS * HEAD_SIZE; ++i) {
    k[i] = (float)rand() / RAND_MAX - 0.5f;
    v[i] = (float)rand() / RAND_MAX - 0.5f;
  }
  int64_t q_shape[3] = {num_tokens, HEADS, HEAD_SIZE}, kv_shape[3] = {num_tokens, KV_HEADS, HEAD_SIZE};
  DLTensor tq = host_tensor(q, 3, q_shape), tk = host_tensor(k, 3, kv_shape),
           tv = host_tensor(v, 3, kv_shape), tout = host_tensor(out, 3, q_shape);
  DLTensor cache0;
  CHECK(vattn_kv_cache_layer_tensor(cache, 0, &cache0));

  vattn_forward_args_t args;
  vattn_forward_args_init(&args);
  args.query = &tq;
  args.key = &tk;
  args.value = &tv;
  args.kv_cache = &cache0;
  args.output = &tout;
  CHECK(vattn_layer_forward(layer, plan, &args));
  double sum = 0;
  for (i = 0; i < num_tokens * HEADS * HEAD_SIZE; ++i) sum += fabs(out[i]);
  printf("attention output: %lld tokens x %d heads x %d, mean |o| = %.6f\n", (long long)num_tokens,
         HEADS, HEAD_SIZE, sum / (num_tokens * HEADS * HEAD_SIZE));

  vattn_layer_destroy(layer);
  vattn_plan_destroy(plan);
  vattn_builder_destroy(builder);
  vattn_metadata_destroy(md);
  vattn_kv_cache_destroy(cache);
  return 0;
}
