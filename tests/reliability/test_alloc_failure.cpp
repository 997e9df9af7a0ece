// test_alloc_failure.cpp -- every create path survives the failure of any
// one host allocation: for N = 1, 2, ... the N-th allocation made on the
// calling thread fails (operator new throws std::bad_alloc, the nothrow
// forms return NULL) until the call succeeds.  Each failing call must return
// VATTN_ERR_OUT_OF_MEMORY with the handle out-parameter NULL and leak
// nothing (the ASan build of scripts/test-sanitizers checks leaks).
//
// Every global operator new / delete is replaced in this executable; the
// library's own calls (libvattn.so) bind to these replacements.  The library
// allocates host memory only through operator new (grep: no malloc family
// in src/), so this covers all of its host allocations.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>
#include <vector>

#include "test_util.h"
#include "vattn.h"

namespace {

// Armed only on the thread that runs the call under test.
thread_local bool t_armed = false;
thread_local long t_count = 0;
thread_local long t_fail_at = 0;
thread_local bool t_failed = false;
thread_local bool t_failed_nothrow = false;

bool should_fail(bool nothrow = false) {
  if (!t_armed) return false;
  if (++t_count == t_fail_at) {
    t_failed = true;
    t_failed_nothrow = nothrow;
    return true;
  }
  return false;
}

void *raw_alloc(std::size_t n, std::size_t align) {
  if (n == 0) n = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(n);
  void *p = nullptr;
  if (posix_memalign(&p, align, n) != 0) return nullptr;
  return p;
}

void *do_new(std::size_t n, std::size_t align) {
  if (should_fail()) throw std::bad_alloc();
  void *p = raw_alloc(n, align);
  if (!p) throw std::bad_alloc();
  return p;
}

void *do_new_nothrow(std::size_t n, std::size_t align) noexcept {
  if (should_fail(true)) return nullptr;
  return raw_alloc(n, align);
}

}  // namespace

// ---- replacements of every global allocation function ------------------------
void *operator new(std::size_t n) { return do_new(n, 0); }
void *operator new[](std::size_t n) { return do_new(n, 0); }
void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return do_new_nothrow(n, 0); }
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return do_new_nothrow(n, 0); }
void *operator new(std::size_t n, std::align_val_t a) { return do_new(n, std::size_t(a)); }
void *operator new[](std::size_t n, std::align_val_t a) { return do_new(n, std::size_t(a)); }
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return do_new_nothrow(n, std::size_t(a));
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  return do_new_nothrow(n, std::size_t(a));
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { std::free(p); }

namespace {

// Runs `call` with the N-th allocation failing for N = 1, 2, ... until it
// succeeds.  `call` returns the status and sets *handle_null to whether its
// handle out-parameter(s) are all NULL; `cleanup` destroys a success.
// `after_failure` (optional) runs, unarmed, after each call that failed
// with OUT_OF_MEMORY: it checks that the failure committed nothing.
// Returns the number of allocations the successful call made.
long exhaust(const char *what, const std::function<vattn_status_t(bool *handle_null)> &call,
             const std::function<void()> &cleanup,
             const std::function<void(long n)> &after_failure = {}) {
  for (long n = 1; n < 100000; ++n) {
    bool handle_null = false;
    t_count = 0;
    t_fail_at = n;
    t_failed = false;
    t_failed_nothrow = false;
    t_armed = true;
    vattn_status_t st = call(&handle_null);
    t_armed = false;
    // A failed nothrow allocation may be handled (std::stable_sort falls back
    // to an in-place sort): success is fine then, keep going.
    if (t_failed && t_failed_nothrow && st == VATTN_OK) {
      cleanup();
      continue;
    }
    if (!t_failed) {
      EXPECT_EQ(st, VATTN_OK) << what << ": " << vattn_last_error_message();
      cleanup();
      return n - 1;
    }
    EXPECT_EQ(st, VATTN_ERR_OUT_OF_MEMORY)
        << what << " with allocation " << n << " failing: " << vattn_last_error_message();
    EXPECT_TRUE(handle_null) << what << " with allocation " << n << " failing left a handle";
    if (st == VATTN_OK) cleanup();
    else if (after_failure) after_failure(n);
    if (::testing::Test::HasFailure()) return -1;
  }
  ADD_FAILURE() << what << ": never succeeded";
  return -1;
}

// A small valid batch: request 0 decodes (seq 5), request 1 prefills 3
// tokens after 6 cached ones (seq 9); block size 2, 10 blocks.
struct SmallBatch {
  int32_t qsl[3] = {0, 1, 4};
  int32_t seq_lens[2] = {5, 9};
  int32_t table[10] = {0, 1, 2, 9, 9, 3, 4, 5, 6, 7};
  int64_t slots[4] = {4, 12, 14, 15};
  vattn_metadata_desc_t d;
  SmallBatch() {
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
  }
};

const vattn_backend_t *cpu() {
  const vattn_backend_t *b = nullptr;
  EXPECT_EQ(vattn_backend_find("CPU", &b), VATTN_OK);
  return b;
}

TEST(AllocFailure, MetadataCreateAndDerived) {
  SmallBatch sb;
  vattn_metadata_t *md = nullptr;
  exhaust("vattn_metadata_create", [&](bool *hn) {
    auto st = vattn_metadata_create(&md, &sb.d);
    *hn = md == nullptr;
    return st;
  }, [] {});
  ASSERT_NE(md, nullptr);

  vattn_metadata_t *out = nullptr;
  exhaust("vattn_metadata_unpadded", [&](bool *hn) {
    auto st = vattn_metadata_unpadded(md, 4, 2, &out);
    *hn = out == nullptr;
    return st;
  }, [&] { vattn_metadata_destroy(out); out = nullptr; });

  exhaust("vattn_make_local_attention_virtual_batches", [&](bool *hn) {
      auto st = vattn_make_local_attention_virtual_batches(4, md, 2, &out);
      *hn = out == nullptr;
      return st;
    }, [&] { vattn_metadata_destroy(out); out = nullptr; });

  {
    int32_t logits[2] = {0, 3};
    SmallBatch sb2;
    sb2.d.logits_indices_padded = logits;
    sb2.d.logits_indices_len = 2;
    sb2.d.num_logits_indices = 2;
    vattn_metadata_t *md2 = nullptr;
    ASSERT_VATTN_OK(vattn_metadata_create(&md2, &sb2.d));
    exhaust("vattn_make_kv_sharing_fast_prefill_metadata", [&](bool *hn) {
      auto st = vattn_make_kv_sharing_fast_prefill_metadata(md2, &out);
      *hn = out == nullptr;
      return st;
    }, [&] { vattn_metadata_destroy(out); out = nullptr; });
    vattn_metadata_destroy(md2);
  }

  {
    vattn_ubatch_slice_t slices[2] = {{0, 1, 0, 1}, {1, 2, 1, 4}};
    vattn_metadata_t *outs[2] = {nullptr, nullptr};
    exhaust("vattn_split_attn_metadata", [&](bool *hn) {
      auto st = vattn_split_attn_metadata(slices, 2, md, outs);
      *hn = outs[0] == nullptr && outs[1] == nullptr;
      return st;
    }, [&] {
      vattn_metadata_destroy(outs[0]);
      vattn_metadata_destroy(outs[1]);
      outs[0] = outs[1] = nullptr;
    });
  }
  vattn_metadata_destroy(md);
}

TEST(AllocFailure, KvCacheCreate) {
  vattn_kv_cache_spec_t specs[3];
  for (auto &s : specs) {
    vattn_kv_cache_spec_init(&s);
    s.block_size = 4;
    s.num_kv_heads = 2;
    s.head_size = 8;
    s.dtype = VATTN_DTYPE_FLOAT16;
  }
  specs[2].kind = VATTN_KV_SPEC_SLIDING_WINDOW;
  specs[2].sliding_window = 8;
  int32_t share[3] = {-1, 0, -1};
  vattn_kv_cache_options_t o;
  vattn_kv_cache_options_init(&o);
  o.num_blocks = 6;
  vattn_kv_cache_t *c = nullptr;
  long n = exhaust("vattn_kv_cache_create", [&](bool *hn) {
    auto st = vattn_kv_cache_create(&c, specs, share, 3, &o);
    *hn = c == nullptr;
    return st;
  }, [&] { vattn_kv_cache_destroy(c); c = nullptr; });
  EXPECT_GT(n, 0);
  o.num_blocks = 0;
  o.memory_budget_bytes = 1 << 16;
  exhaust("vattn_kv_cache_create (budget)", [&](bool *hn) {
    auto st = vattn_kv_cache_create(&c, specs, nullptr, 3, &o);
    *hn = c == nullptr;
    return st;
  }, [&] { vattn_kv_cache_destroy(c); c = nullptr; });
}

TEST(AllocFailure, BuilderPlanLayerForward) {
  const vattn_backend_t *b = cpu();
  ASSERT_NE(b, nullptr);
  vattn_builder_options_t bo;
  vattn_builder_options_init(&bo);
  bo.num_heads = 4;
  bo.num_kv_heads = 2;
  bo.head_size = 8;
  bo.block_size = 2;
  bo.max_num_reqs = 4;
  bo.max_num_tokens = 16;
  bo.max_blocks_per_req = 8;
  bo.num_threads = 2;
  vattn_builder_t *builder = nullptr;
  exhaust("vattn_builder_create", [&](bool *hn) {
    auto st = vattn_builder_create(&builder, b, &bo);
    *hn = builder == nullptr;
    return st;
  }, [] {});
  ASSERT_NE(builder, nullptr);
  vattn_plan_t *plan = nullptr;
  exhaust("vattn_plan_create", [&](bool *hn) {
    auto st = vattn_plan_create(&plan, builder);
    *hn = plan == nullptr;
    return st;
  }, [] {});
  ASSERT_NE(plan, nullptr);
  SmallBatch sb;
  vattn_metadata_t *md = nullptr;
  ASSERT_VATTN_OK(vattn_metadata_create(&md, &sb.d));
  exhaust("vattn_builder_build", [&](bool *hn) {
    *hn = true;
    return vattn_builder_build(builder, plan, 0, md, 0, nullptr);
  }, [] {});

  float alibi[4] = {0.5f, 0.25f, 0.125f, 0.0625f}, sinks[4] = {0.f, 1.f, 2.f, 3.f};
  vattn_layer_options_t lo;
  vattn_layer_options_init(&lo);
  lo.num_heads = 4;
  lo.num_kv_heads = 2;
  lo.head_size = 8;
  lo.dtype = VATTN_DTYPE_FLOAT32;
  lo.block_size = 2;
  lo.alibi_slopes = alibi;
  lo.sinks = sinks;
  vattn_layer_t *layer = nullptr;
  exhaust("vattn_layer_create", [&](bool *hn) {
    auto st = vattn_layer_create(&layer, b, &lo);
    *hn = layer == nullptr;
    return st;
  }, [] {});
  ASSERT_NE(layer, nullptr);

  // The forward pass, with every allocation failing from the first: it
  // must either not allocate (the header's promise) or report OOM cleanly.
  vt::HostTensor q({4, 4, 8}, vt::dl_f32()), k({4, 2, 8}, vt::dl_f32()), v({4, 2, 8}, vt::dl_f32());
  vt::HostTensor cache({2, 10, 2, 2, 8}, vt::dl_f32()), out({4, 4, 8}, vt::dl_f32());
  vattn_forward_args_t a;
  vattn_forward_args_init(&a);
  a.query = &q.t;
  a.key = &k.t;
  a.value = &v.t;
  a.kv_cache = &cache.t;
  a.output = &out.t;
  exhaust("vattn_layer_forward", [&](bool *hn) {
    *hn = true;
    return vattn_layer_forward(layer, plan, &a);
  }, [] {});
  vattn_layer_destroy(layer);
  vattn_metadata_destroy(md);
  vattn_plan_destroy(plan);
  vattn_builder_destroy(builder);
}

// A build that fails on an allocation leaves the plan as it was: built for
// the previous batch, and a forward through it gives bit for bit the output
// it gave before.  Swept over the normal, cascade and drafting builds of a
// different batch (one request, 2 new tokens after 6 cached, so that a
// half-committed plan -- new metadata with old tiles or the reverse -- would
// either be refused or attend to other keys).
TEST(AllocFailure, FailedBuildLeavesPlanUnchanged) {
  const vattn_backend_t *b = cpu();
  ASSERT_NE(b, nullptr);
  vattn_builder_options_t bo;
  vattn_builder_options_init(&bo);
  bo.num_heads = 4;
  bo.num_kv_heads = 2;
  bo.head_size = 8;
  bo.block_size = 2;
  bo.max_num_reqs = 4;
  bo.max_num_tokens = 16;
  bo.max_blocks_per_req = 8;
  bo.num_threads = 2;
  vattn_builder_t *builder = nullptr;
  ASSERT_VATTN_OK(vattn_builder_create(&builder, b, &bo));
  vattn_plan_t *plan = nullptr;
  ASSERT_VATTN_OK(vattn_plan_create(&plan, builder));
  vattn_layer_options_t lo;
  vattn_layer_options_init(&lo);
  lo.num_heads = 4;
  lo.num_kv_heads = 2;
  lo.head_size = 8;
  lo.dtype = VATTN_DTYPE_FLOAT32;
  lo.block_size = 2;
  vattn_layer_t *layer = nullptr;
  ASSERT_VATTN_OK(vattn_layer_create(&layer, b, &lo));

  SmallBatch sa;  // the batch the plan keeps
  vattn_metadata_t *md_a = nullptr;
  ASSERT_VATTN_OK(vattn_metadata_create(&md_a, &sa.d));
  int32_t qsl_b[2] = {0, 2}, seq_b[1] = {8}, table_b[5] = {5, 6, 7, 8, 9};
  int64_t slots_b[2] = {16, 17};
  vattn_metadata_desc_t db;  // the batch whose build fails
  vattn_metadata_desc_init(&db);
  db.num_reqs = 1;
  db.num_actual_tokens = 2;
  db.query_start_loc = qsl_b;
  db.seq_lens = seq_b;
  db.block_table = table_b;
  db.block_table_rows = 1;
  db.block_table_cols = 5;
  db.slot_mapping = slots_b;
  db.slot_mapping_len = 2;
  db.block_size = 2;
  db.num_cache_blocks = 10;
  vattn_metadata_t *md_b = nullptr;
  ASSERT_VATTN_OK(vattn_metadata_create(&md_b, &db));

  vt::HostTensor q({4, 4, 8}, vt::dl_f32()), k({4, 2, 8}, vt::dl_f32()), v({4, 2, 8}, vt::dl_f32());
  vt::HostTensor cache({2, 10, 2, 2, 8}, vt::dl_f32()), out({4, 4, 8}, vt::dl_f32());
  vt::HostTensor lse({4, 4}, vt::dl_f32());
  auto fill = [](vt::HostTensor &t, int seed) {
    float *f = reinterpret_cast<float *>(t.bytes.data());
    for (size_t i = 0; i < t.bytes.size() / sizeof(float); ++i)
      f[i] = float(int((i * 7 + size_t(seed) * 13) % 17) - 8) / 8.f;
  };
  fill(q, 1);
  fill(k, 2);
  fill(v, 3);
  fill(cache, 4);
  vattn_forward_args_t a;
  vattn_forward_args_init(&a);
  a.query = &q.t;
  a.key = &k.t;
  a.value = &v.t;
  a.kv_cache = &cache.t;
  a.output = &out.t;
  a.output_lse = &lse.t;
  auto forward = [&](std::vector<unsigned char> *o, std::vector<unsigned char> *l) {
    std::fill(out.bytes.begin(), out.bytes.end(), 0);
    std::fill(lse.bytes.begin(), lse.bytes.end(), 0);
    vattn_status_t st = vattn_layer_forward(layer, plan, &a);
    *o = out.bytes;
    *l = lse.bytes;
    return st;
  };
  auto build_a = [&] { return vattn_builder_build(builder, plan, 0, md_a, 0, nullptr); };
  ASSERT_VATTN_OK(build_a());
  std::vector<unsigned char> ref_out, ref_lse;
  ASSERT_VATTN_OK(forward(&ref_out, &ref_lse));  // writes K/V into the cache (idempotent)
  ASSERT_VATTN_OK(forward(&ref_out, &ref_lse));

  struct Case {
    const char *what;
    std::function<vattn_status_t()> build;
  } cases[] = {
      {"vattn_builder_build (other batch)",
       [&] { return vattn_builder_build(builder, plan, 0, md_b, 0, nullptr); }},
      {"vattn_builder_build (other batch, cascade)",
       [&] { return vattn_builder_build(builder, plan, 2, md_b, 1, nullptr); }},
      {"vattn_builder_build_for_drafting (other batch)",
       [&] { return vattn_builder_build_for_drafting(builder, plan, md_b, 0, nullptr); }},
  };
  for (const Case &c : cases) {
    long failures = 0;
    exhaust(c.what, [&](bool *hn) {
      *hn = true;
      return c.build();
    }, [&] {
      // It succeeded (or survived a failed nothrow allocation): back to batch A.
      ASSERT_VATTN_OK(build_a());
    }, [&](long n) {
      ++failures;
      std::vector<unsigned char> o, l;
      vattn_status_t st = forward(&o, &l);
      ASSERT_EQ(st, VATTN_OK) << c.what << " with allocation " << n
                              << " failing left the plan unusable: " << vattn_last_error_message();
      EXPECT_EQ(o, ref_out) << c.what << " with allocation " << n
                            << " failing changed the plan (output differs)";
      EXPECT_EQ(l, ref_lse) << c.what << " with allocation " << n
                            << " failing changed the plan (LSE differs)";
    });
    EXPECT_GT(failures, 0) << c.what << " allocates nothing: the sweep tests nothing";
    ASSERT_VATTN_OK(build_a());
  }
  // And a plan built for B really answers differently (the check has teeth).
  ASSERT_VATTN_OK(vattn_builder_build(builder, plan, 0, md_b, 0, nullptr));
  std::vector<unsigned char> o, l;
  vattn_status_t st = forward(&o, &l);
  EXPECT_TRUE(st != VATTN_OK || o != ref_out || l != ref_lse);

  vattn_layer_destroy(layer);
  vattn_metadata_destroy(md_a);
  vattn_metadata_destroy(md_b);
  vattn_plan_destroy(plan);
  vattn_builder_destroy(builder);
}

TEST(AllocFailure, V0BuilderMetadataGraphState) {
  vattn_v0_builder_options_t o;
  vattn_v0_builder_options_init(&o);
  o.block_size = 4;
  o.max_blocks_per_seq = 4;
  vattn_v0_builder_t *b = nullptr;
  exhaust("vattn_v0_builder_create", [&](bool *hn) {
    auto st = vattn_v0_builder_create(&b, &o);
    *hn = b == nullptr;
    return st;
  }, [&] { vattn_v0_builder_destroy(b); b = nullptr; });

  // add_seq + build as one unit (a failed add_seq leaves the builder as it was).
  const int32_t table[] = {1, 2};
  const int32_t seq_lens[] = {6, 6}, query_lens[] = {1, 1};
  vattn_v0_metadata_t *md = nullptr;
  exhaust("vattn_v0_builder_add_seq + build", [&](bool *hn) {
    vattn_v0_builder_t *bb = nullptr;
    vattn_status_t st = vattn_v0_builder_create(&bb, &o);
    for (int i = 0; i < 2 && st == VATTN_OK; ++i) {
      vattn_v0_seq_t s;
      vattn_v0_seq_init(&s);
      s.seq_len = s.curr_seq_len = 6;
      s.context_len = 5;
      s.query_len = s.token_len = 1;
      s.block_table = table;
      s.block_table_len = 2;
      st = vattn_v0_builder_add_seq(bb, &s);
    }
    if (st == VATTN_OK) st = vattn_v0_builder_build(bb, seq_lens, query_lens, 2, -1, 2, &md);
    vattn_v0_builder_destroy(bb);
    *hn = md == nullptr;
    return st;
  }, [] {});
  ASSERT_NE(md, nullptr);

  vattn_v0_metadata_desc_t d;
  vattn_v0_metadata_desc_init(&d);
  ASSERT_VATTN_OK(vattn_v0_metadata_describe(md, &d));
  vattn_v0_metadata_t *md2 = nullptr;
  exhaust("vattn_v0_metadata_create", [&](bool *hn) {
    auto st = vattn_v0_metadata_create(&md2, &d);
    *hn = md2 == nullptr;
    return st;
  }, [&] { vattn_v0_metadata_destroy(md2); md2 = nullptr; });

  vattn_graph_state_t *gs = nullptr;
  exhaust("vattn_graph_state_create", [&](bool *hn) {
    auto st = vattn_graph_state_create(&gs, 4, 4, 64);
    *hn = gs == nullptr;
    return st;
  }, [] {});
  ASSERT_NE(gs, nullptr);
  exhaust("vattn_graph_state_prepare_replay", [&](bool *hn) {
    *hn = true;
    return vattn_graph_state_prepare_replay(gs, md);
  }, [] {});
  vattn_v0_metadata_t *gm = nullptr;
  exhaust("vattn_graph_state_metadata_for_batch", [&](bool *hn) {
    auto st = vattn_graph_state_metadata_for_batch(gs, 2, &gm);
    *hn = gm == nullptr;
    return st;
  }, [&] { vattn_v0_metadata_destroy(gm); gm = nullptr; });
  vattn_graph_state_destroy(gs);
  vattn_v0_metadata_destroy(md);
}

}  // namespace
