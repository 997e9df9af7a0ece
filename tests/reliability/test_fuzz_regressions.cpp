// test_fuzz_regressions.cpp -- one test per bug the fuzz harnesses found
// (fuzz/README.md lists them).  Run under the ASan/UBSan build by
// scripts/test-sanitizers, where the original bugs aborted.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "test_util.h"
#include "vattn.h"

namespace {

// fuzz_kv_cache: max_memory_usage_bytes of a SLIDING_WINDOW spec with
// block_size 1 and max_model_len = INT64_MAX computed ceil_div(...) + 1 in
// int64 (signed overflow, UB).  Now saturates and reports the overflow.
TEST(FuzzRegression, SlidingWindowMaxMemoryDoesNotOverflow) {
  vattn_kv_cache_spec_t s;
  vattn_kv_cache_spec_init(&s);
  s.kind = VATTN_KV_SPEC_SLIDING_WINDOW;
  s.block_size = 1;
  s.num_kv_heads = 1;
  s.head_size = 1;
  s.dtype = VATTN_DTYPE_FP8_E4M3;
  s.sliding_window = 1;
  vattn_model_limits_t lim;
  vattn_model_limits_init(&lim);
  lim.max_model_len = INT64_MAX;
  lim.max_num_batched_tokens = INT64_MAX;
  int64_t out = -7;
  vattn_status_t st = vattn_kv_cache_spec_max_memory_usage_bytes(&s, &lim, &out);
  EXPECT_EQ(st, VATTN_ERR_INVALID_ARGUMENT) << vattn_last_error_message();
  EXPECT_EQ(out, -7);
  // Just below the edge still works.
  lim.max_model_len = 1 << 20;
  EXPECT_VATTN_OK(vattn_kv_cache_spec_max_memory_usage_bytes(&s, &lim, &out));
  EXPECT_GT(out, 0);
}

}  // namespace

namespace {

// fuzz_metadata: make_local_attention_virtual_batches with attn_chunk_size =
// INT32_MAX and block_size 1 built a virtual block table of 2^31 columns per
// virtual batch (8 GiB+ per row) before any check: a hostile chunk size
// exhausted host memory.  Now refused up front with INVALID_ARGUMENT.
TEST(FuzzRegression, LocalVirtualBatchesHugeChunkIsRefused) {
  const int32_t qsl[] = {0, 3, 4};
  const int32_t seq_lens[] = {5, 9};
  const int32_t table[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const int64_t slots[] = {2, 3, 4, 18};  // request 0 positions 2..4, request 1 position 8
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  d.num_reqs = 2;
  d.num_actual_tokens = 4;
  d.query_start_loc = qsl;
  d.seq_lens = seq_lens;
  d.block_table = table;
  d.block_table_rows = 2;
  d.block_table_cols = 5;
  d.slot_mapping = slots;
  d.slot_mapping_len = 4;
  d.block_size = 2;
  vattn_metadata_t *md = nullptr;
  ASSERT_VATTN_OK(vattn_metadata_create(&md, &d));
  vattn_metadata_t *out = reinterpret_cast<vattn_metadata_t *>(&d);  // must become NULL
  EXPECT_VATTN_ERR(vattn_make_local_attention_virtual_batches(INT32_MAX - 1, md, 2, &out),
                   VATTN_ERR_INVALID_ARGUMENT, "attn_chunk_size");
  EXPECT_EQ(out, nullptr);
  // A normal chunk still works.
  EXPECT_VATTN_OK(vattn_make_local_attention_virtual_batches(4, md, 2, &out));
  EXPECT_NE(out, nullptr);
  vattn_metadata_destroy(out);
  vattn_metadata_destroy(md);
}

}  // namespace

namespace {

// fuzz_metadata: use_cascade_attention estimated CTA waves in int64:
// num_reqs * num_kv_heads * ... * tiles and cdiv(common_prefix_len, 128)
// overflowed (signed overflow, UB) for huge prefix lengths / head counts.
TEST(FuzzRegression, UseCascadeAttentionHugeSizesDoNotOverflow) {
  std::vector<int32_t> qlens(64, 1);
  int32_t out = -1;
  EXPECT_VATTN_OK(vattn_use_cascade_attention(INT64_MAX, qlens.data(), 64, 1 << 30, 1 << 29, 0, 0,
                                              0, 1, 1, &out));
  EXPECT_TRUE(out == 0 || out == 1);
  EXPECT_VATTN_OK(vattn_use_cascade_attention(INT64_MAX - 5, qlens.data(), 64, INT32_MAX, 1, 0, 0,
                                              0, INT32_MAX, 1, &out));
  EXPECT_TRUE(out == 0 || out == 1);
  // An ordinary decision is unchanged: long shared prefix, many decodes, GQA.
  EXPECT_VATTN_OK(vattn_use_cascade_attention(4096, qlens.data(), 64, 32, 8, 0, 0, 0, 132, 1, &out));
  EXPECT_TRUE(out == 0 || out == 1);
}

}  // namespace

namespace {

// fuzz_v0: vattn_v0_builder_build with cuda_graph_pad_size = INT64_MAX threw
// std::length_error out of vector::insert (reported as VATTN_ERR_INTERNAL;
// a large-but-smaller pad would have tried to allocate it), and seq_lens /
// query_lens whose totals pass INT32_MAX overflowed the int32 prefix sums.
TEST(FuzzRegression, V0BuildRejectsHugePadAndOverflowingTotals) {
  vattn_v0_builder_options_t o;
  vattn_v0_builder_options_init(&o);
  o.block_size = 4;
  o.max_blocks_per_seq = 4;
  auto add_decodes = [&](vattn_v0_builder_t *b) {
    const int32_t table[] = {1, 2};
    for (int i = 0; i < 2; ++i) {
      vattn_v0_seq_t s;
      vattn_v0_seq_init(&s);
      s.is_prompt = 0;
      s.seq_len = s.curr_seq_len = 6;
      s.context_len = 5;
      s.query_len = s.token_len = 1;
      s.block_table = table;
      s.block_table_len = 2;
      ASSERT_VATTN_OK(vattn_v0_builder_add_seq(b, &s));
    }
  };
  vattn_v0_builder_t *b = nullptr;
  ASSERT_VATTN_OK(vattn_v0_builder_create(&b, &o));
  add_decodes(b);
  const int32_t seq_lens[] = {6, 6}, query_lens[] = {1, 1};
  vattn_v0_metadata_t *md = reinterpret_cast<vattn_v0_metadata_t *>(&o);
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b, seq_lens, query_lens, 2, INT64_MAX, 2, &md),
                   VATTN_ERR_INVALID_ARGUMENT, "cuda_graph_pad_size");
  EXPECT_EQ(md, nullptr);
  // Found by fuzz_v0 (10M run): a pad of ~2^28 slots allocated gigabytes.
  md = reinterpret_cast<vattn_v0_metadata_t *>(&o);
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b, seq_lens, query_lens, 2, INT64_C(1) << 28, 2, &md),
                   VATTN_ERR_INVALID_ARGUMENT, "cuda_graph_pad_size");
  EXPECT_EQ(md, nullptr);
  md = reinterpret_cast<vattn_v0_metadata_t *>(&o);
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b, seq_lens, query_lens, 2, 0, INT64_C(1) << 28, &md),
                   VATTN_ERR_INVALID_ARGUMENT, "batch_size");
  EXPECT_EQ(md, nullptr);
  vattn_v0_builder_destroy(b);

  b = nullptr;
  ASSERT_VATTN_OK(vattn_v0_builder_create(&b, &o));
  add_decodes(b);
  const int32_t big_seq[] = {INT32_MAX, INT32_MAX}, big_q[] = {1, INT32_MAX};
  md = nullptr;
  EXPECT_VATTN_ERR(vattn_v0_builder_build(b, big_seq, big_q, 2, -1, 2, &md),
                   VATTN_ERR_INVALID_ARGUMENT, "overflow");
  EXPECT_EQ(md, nullptr);
  vattn_v0_builder_destroy(b);
}

}  // namespace
