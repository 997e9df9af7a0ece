// test_concurrency.cpp -- the header's thread-safety paragraph, exercised:
//  - 8 threads, each with its own metadata / builder / plan / layer / cache
//    tensors, running build + CPU forward in a loop;
//  - 8 threads sharing const handles: one metadata read through every const
//    function (describe, splits, unpadded, local batches, fast prefill,
//    split_attn_metadata), and one layer + plan shared by concurrent
//    forwards (vattn_layer_forward takes both const), each thread writing
//    its own output (the shared batch's cache write is done once up front;
//    the concurrent forwards pass kv_sharing-free layers with key/value NULL
//    so nobody writes the shared cache);
//  - per-thread error messages.
// Meaningful under ThreadSanitizer (build-tsan, see docs/errors.md); under
// the other builds it checks results are identical across threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "test_util.h"
#include "vattn.h"

namespace {

constexpr int kThreads = 8;
constexpr int kIters = 20;

const vattn_backend_t *cpu() {
  const vattn_backend_t *b = nullptr;
  EXPECT_EQ(vattn_backend_find("CPU", &b), VATTN_OK);
  return b;
}

// Batch: request 0 decodes (seq 5), request 1 prefills 3 after 6 cached.
struct Batch {
  int32_t qsl[3] = {0, 1, 4};
  int32_t seq_lens[2] = {5, 9};
  int32_t table[10] = {0, 1, 2, 9, 9, 3, 4, 5, 6, 7};
  int64_t slots[4] = {4, 12, 14, 15};
  int32_t logits[2] = {0, 3};
  vattn_metadata_desc_t d;
  Batch() {
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
    d.num_cache_blocks = 10;
    d.logits_indices_padded = logits;
    d.logits_indices_len = 2;
    d.num_logits_indices = 2;
  }
};

struct Layer {
  vattn_builder_t *builder = nullptr;
  vattn_plan_t *plan = nullptr;
  vattn_layer_t *layer = nullptr;
  void create(int32_t num_threads) {
    vattn_builder_options_t bo;
    vattn_builder_options_init(&bo);
    bo.num_heads = 4;
    bo.num_kv_heads = 2;
    bo.head_size = 16;
    bo.block_size = 2;
    bo.max_num_reqs = 4;
    bo.max_num_tokens = 16;
    bo.max_blocks_per_req = 8;
    bo.num_threads = num_threads;
    ASSERT_VATTN_OK(vattn_builder_create(&builder, cpu(), &bo));
    ASSERT_VATTN_OK(vattn_plan_create(&plan, builder));
    vattn_layer_options_t lo;
    vattn_layer_options_init(&lo);
    lo.num_heads = 4;
    lo.num_kv_heads = 2;
    lo.head_size = 16;
    lo.dtype = VATTN_DTYPE_FLOAT32;
    lo.block_size = 2;
    ASSERT_VATTN_OK(vattn_layer_create(&layer, cpu(), &lo));
  }
  ~Layer() {
    vattn_layer_destroy(layer);
    vattn_plan_destroy(plan);
    vattn_builder_destroy(builder);
  }
};

void fill(vt::HostTensor &t, uint32_t seed) {
  float *p = reinterpret_cast<float *>(t.bytes.data());
  size_t n = t.bytes.size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = float(int32_t(seed >> 8) % 2001 - 1000) / 1000.f;
  }
}

TEST(Concurrency, OwnHandlesPerThread) {
  std::vector<std::vector<float>> results(kThreads);
  std::atomic<int> failures{0};
  auto work = [&](int tid) {
    Batch b;
    Layer L;
    L.create(tid % 3);  // 0 = hardware threads, 1 = inline, 2 = a pool of 2
    vt::HostTensor q({4, 4, 16}, vt::dl_f32()), k({4, 2, 16}, vt::dl_f32()),
        v({4, 2, 16}, vt::dl_f32()), cache({2, 10, 2, 2, 16}, vt::dl_f32()),
        out({4, 4, 16}, vt::dl_f32());
    fill(q, 1), fill(k, 2), fill(v, 3), fill(cache, 4);
    for (int it = 0; it < kIters; ++it) {
      vattn_metadata_t *md = nullptr;
      if (vattn_metadata_create(&md, &b.d) != VATTN_OK) { ++failures; return; }
      if (vattn_builder_build(L.builder, L.plan, 0, md, 0, nullptr) != VATTN_OK) ++failures;
      vattn_forward_args_t a;
      vattn_forward_args_init(&a);
      a.query = &q.t;
      a.key = &k.t;
      a.value = &v.t;
      a.kv_cache = &cache.t;
      a.output = &out.t;
      if (vattn_layer_forward(L.layer, L.plan, &a) != VATTN_OK) ++failures;
      // A failing call sets only this thread's message.
      vattn_metadata_t *bad = nullptr;
      if (vattn_metadata_create(&bad, nullptr) != VATTN_ERR_INVALID_ARGUMENT) ++failures;
      if (std::strstr(vattn_last_error_message(), "desc") == nullptr) ++failures;
      vattn_metadata_destroy(md);
    }
    const float *o = reinterpret_cast<const float *>(out.bytes.data());
    results[tid].assign(o, o + 4 * 4 * 16);
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) ts.emplace_back(work, t);
  for (auto &t : ts) t.join();
  EXPECT_EQ(failures.load(), 0) << vattn_last_error_message();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(results[t], results[0]) << "thread " << t;
}

TEST(Concurrency, SharedConstMetadata) {
  Batch b;
  vattn_metadata_t *md = nullptr;
  ASSERT_VATTN_OK(vattn_metadata_create(&md, &b.d));
  std::atomic<int> failures{0};
  auto work = [&] {
    for (int it = 0; it < kIters * 5; ++it) {
      vattn_metadata_desc_t d;
      vattn_metadata_desc_init(&d);
      if (vattn_metadata_describe(md, &d) != VATTN_OK || d.num_reqs != 2) ++failures;
      vattn_decode_prefill_split_t s;
      if (vattn_split_decodes_and_prefills(md, 1, 0, &s) != VATTN_OK || s.num_decodes != 1) ++failures;
      vattn_decode_extend_prefill_split_t s3;
      if (vattn_split_decodes_prefills_and_extends(md, 1, &s3) != VATTN_OK) ++failures;
      vattn_metadata_t *o = nullptr;
      if (vattn_metadata_unpadded(md, 4, 2, &o) != VATTN_OK) ++failures;
      vattn_metadata_destroy(o);
      o = nullptr;
      if (vattn_make_local_attention_virtual_batches(4, md, 2, &o) != VATTN_OK) ++failures;
      vattn_metadata_destroy(o);
      o = nullptr;
      if (vattn_make_kv_sharing_fast_prefill_metadata(md, &o) != VATTN_OK) ++failures;
      vattn_metadata_destroy(o);
      vattn_ubatch_slice_t sl[2] = {{0, 1, 0, 1}, {1, 2, 1, 4}};
      vattn_metadata_t *outs[2] = {nullptr, nullptr};
      if (vattn_split_attn_metadata(sl, 2, md, outs) != VATTN_OK) ++failures;
      vattn_metadata_destroy(outs[0]);
      vattn_metadata_destroy(outs[1]);
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) ts.emplace_back(work);
  for (auto &t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  vattn_metadata_destroy(md);
}

TEST(Concurrency, SharedLayerAndPlanForward) {
  Batch b;
  Layer L;
  L.create(2);
  vattn_metadata_t *md = nullptr;
  ASSERT_VATTN_OK(vattn_metadata_create(&md, &b.d));
  ASSERT_VATTN_OK(vattn_builder_build(L.builder, L.plan, 0, md, 0, nullptr));
  vt::HostTensor q({4, 4, 16}, vt::dl_f32()), k({4, 2, 16}, vt::dl_f32()),
      v({4, 2, 16}, vt::dl_f32()), cache({2, 10, 2, 2, 16}, vt::dl_f32()),
      ref({4, 4, 16}, vt::dl_f32());
  fill(q, 5), fill(k, 6), fill(v, 7), fill(cache, 8);
  vattn_forward_args_t a;
  vattn_forward_args_init(&a);
  a.query = &q.t;
  a.key = &k.t;
  a.value = &v.t;
  a.kv_cache = &cache.t;
  a.output = &ref.t;
  ASSERT_VATTN_OK(vattn_layer_forward(L.layer, L.plan, &a));  // writes K/V once
  std::vector<vt::HostTensor> outs;
  for (int t = 0; t < kThreads; ++t) outs.emplace_back(std::vector<int64_t>{4, 4, 16}, vt::dl_f32());
  std::atomic<int> failures{0};
  auto work = [&](int tid) {
    for (int it = 0; it < kIters; ++it) {
      vattn_forward_args_t fa;
      vattn_forward_args_init(&fa);
      fa.query = &q.t;
      fa.kv_cache = &cache.t;  // read only: key/value NULL, nothing written
      fa.output = &outs[tid].t;
      if (vattn_layer_forward(L.layer, L.plan, &fa) != VATTN_OK) ++failures;
    }
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) ts.emplace_back(work, t);
  for (auto &t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(outs[t].bytes, ref.bytes) << "thread " << t;
  vattn_metadata_destroy(md);
}

}  // namespace
