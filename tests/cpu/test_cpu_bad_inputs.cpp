// test_cpu_bad_inputs.cpp -- every forward argument that can be wrong:
// status, a message naming the argument, and nothing written (output, LSE
// and cache bytes unchanged).
#include <thread>

#include "cpu_harness.h"

namespace {

using ct::Config;

std::mt19937_64 seeded() { return ct::seeded_rng(); }

struct Snapshot {
  std::vector<unsigned char> out, lse, cache;
  explicit Snapshot(ct::Problem &p) : out(p.out.bytes), lse(p.lse.bytes), cache(p.cache.bytes) {}
  void expect_same(ct::Problem &p, const char *what) const {
    EXPECT_EQ(out, p.out.bytes) << what << ": output written";
    EXPECT_EQ(lse, p.lse.bytes) << what << ": lse written";
    EXPECT_EQ(cache, p.cache.bytes) << what << ": cache written";
  }
};

std::unique_ptr<ct::Problem> built(const Config &c, std::mt19937_64 &g) {
  auto p = ct::make_problem(c, {3, 1}, {20, 9}, g);
  EXPECT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), 0, p->md.get(), 0, nullptr));
  return p;
}

// Runs forward with `mutate` applied to a copy of the args and expects
// status + needle and no write.
template <class F>
void expect_rejected(ct::Problem &p, vattn_status_t st, const char *needle, F mutate) {
  Snapshot s(p);
  vattn_forward_args_t a = p.args;
  mutate(a);
  EXPECT_VATTN_ERR(vattn_layer_forward(p.layer.get(), p.plan.get(), &a), st, needle);
  s.expect_same(p, needle);
}

TEST(CpuBadInputs, QueryOutputLse) {
  auto g = seeded();
  auto p = built(Config{}, g);
  const int64_t T = p->T, H = 8, D = 64;
  vt::HostTensor wrong_heads({T, H - 1, D}, vt::dl_f32()), few_rows({T - 1, H, D}, vt::dl_f32());
  vt::HostTensor wrong_dtype({T, H, D}, vt::dl_bf16()), wrong_d({T, H, D + 8}, vt::dl_f32());
  vt::HostTensor lse_short({H, T - 1}, vt::dl_f32()), lse_f16({H, T}, vt::dl_f16());
  vt::HostTensor lse_t({T, H}, vt::dl_f32()), q2d({T, H * D}, vt::dl_f32());
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.query", [&](auto &a) { a.query = nullptr; });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.query", [&](auto &a) { a.query = wrong_heads.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.query", [&](auto &a) { a.query = few_rows.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.query", [&](auto &a) { a.query = wrong_dtype.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.query", [&](auto &a) { a.query = q2d.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.output", [&](auto &a) { a.output = nullptr; });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.output", [&](auto &a) { a.output = wrong_d.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.output", [&](auto &a) { a.output = wrong_dtype.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.output_lse", [&](auto &a) { a.output_lse = lse_short.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.output_lse", [&](auto &a) { a.output_lse = lse_f16.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.output_lse", [&](auto &a) { a.output_lse = lse_t.dl(); });
  // Wrong device, negative shape, misaligned offset.
  DLTensor on_gpu = *p->q.dl();
  on_gpu.device = DLDevice{kDLCUDA, 0};
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.query", [&](auto &a) { a.query = &on_gpu; });
  int64_t neg[3] = {T, -H, D};
  DLTensor negt = *p->out.dl();
  negt.shape = neg;
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.output", [&](auto &a) { a.output = &negt; });
  DLTensor mis = *p->q.dl();
  mis.byte_offset = 2;
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.query", [&](auto &a) { a.query = &mis; });
  // Sizes whose element count or byte span overflows int64.
  int64_t huge[3] = {INT64_C(1) << 60, H, D};
  DLTensor big = *p->q.dl();
  big.shape = huge;
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.query", [&](auto &a) { a.query = &big; });
  int64_t huge_strides[3] = {INT64_C(1) << 62, D, 1};
  DLTensor far = *p->out.dl();
  far.strides = huge_strides;
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.output", [&](auto &a) { a.output = &far; });
  // A NULL data pointer on a non-empty tensor.
  DLTensor nodata = *p->q.dl();
  nodata.data = nullptr;
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.query", [&](auto &a) { a.query = &nodata; });
}

TEST(CpuBadInputs, CacheAndKeyValue) {
  auto g = seeded();
  auto p = built(Config{}, g);
  const int64_t nb = p->num_blocks, T = p->T;
  vt::HostTensor cache_bs({2, nb, 8, 2, 64}, vt::dl_f32()), cache_heads({2, nb, 16, 4, 64}, vt::dl_f32());
  vt::HostTensor cache_hd({2, nb, 16, 2, 32}, vt::dl_f32()), cache_u8({2, nb, 16, 2, 64}, vt::dl_u8());
  vt::HostTensor cache_4d({nb, 16, 2, 64}, vt::dl_f32()), cache_3kv({3, nb, 16, 2, 64}, vt::dl_f32());
  vt::HostTensor k_short({T - 1, 2, 64}, vt::dl_f32()), k_heads({T + 1, 3, 64}, vt::dl_f32());
  vt::HostTensor k_f16({T + 1, 2, 64}, vt::dl_f16());
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.kv_cache", [&](auto &a) { a.kv_cache = nullptr; });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.kv_cache", [&](auto &a) { a.kv_cache = cache_bs.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.kv_cache", [&](auto &a) { a.kv_cache = cache_heads.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.kv_cache", [&](auto &a) { a.kv_cache = cache_hd.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.kv_cache", [&](auto &a) { a.kv_cache = cache_u8.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.kv_cache", [&](auto &a) { a.kv_cache = cache_4d.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.kv_cache", [&](auto &a) { a.kv_cache = cache_3kv.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.value", [&](auto &a) { a.value = nullptr; });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.key", [&](auto &a) { a.key = nullptr; });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.key", [&](auto &a) { a.key = k_short.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.value", [&](auto &a) { a.value = k_heads.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.key", [&](auto &a) { a.key = k_f16.dl(); });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "k_scale", [&](auto &a) { a.k_scale = 0.f; });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "v_scale", [&](auto &a) { a.v_scale = -1.f; });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args", [&](auto &a) { a.struct_size = 3; });
  // A view of the cache with fewer blocks: the plan's slots fall outside.
  int64_t small_shape[5] = {2, 1, 16, 2, 64};
  DLTensor small = *p->cache.dl();
  small.shape = small_shape;
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "slot_mapping", [&](auto &a) { a.kv_cache = &small; });
  // Without K/V no slot is written; the block table is still checked.
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "block_table", [&](auto &a) {
    a.kv_cache = &small;
    a.key = a.value = nullptr;
  });
}

TEST(CpuBadInputs, PlanAndLayerMismatches) {
  auto g = seeded();
  auto p = ct::make_problem(Config{}, {2}, {10}, g);
  // Not built yet.
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "plan", [](auto &) {});
  ASSERT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), 0, p->md.get(), 0, nullptr));
  // A layer whose block size differs from the plan's.
  vattn_layer_options_t lo;
  vattn_layer_options_init(&lo);
  lo.num_heads = 8;
  lo.num_kv_heads = 2;
  lo.head_size = 64;
  lo.dtype = VATTN_DTYPE_FLOAT32;
  lo.block_size = 8;
  vattn_layer_t *l = nullptr;
  ASSERT_VATTN_OK(vattn_layer_create(&l, ct::cpu(), &lo));
  ct::LayerPtr lp(l);
  Snapshot s(*p);
  EXPECT_VATTN_ERR(vattn_layer_forward(l, p->plan.get(), &p->args), VATTN_ERR_INVALID_ARGUMENT, "block_size");
  s.expect_same(*p, "block size");
  EXPECT_VATTN_ERR(vattn_layer_forward(nullptr, p->plan.get(), &p->args), VATTN_ERR_INVALID_ARGUMENT, "layer");
  EXPECT_VATTN_ERR(vattn_layer_forward(l, nullptr, &p->args), VATTN_ERR_INVALID_ARGUMENT, "plan");
  EXPECT_VATTN_ERR(vattn_layer_forward(l, p->plan.get(), nullptr), VATTN_ERR_INVALID_ARGUMENT, "args");
}

TEST(CpuBadInputs, EncoderNeedsKeyValue) {
  auto g = seeded();
  Config c;
  c.attn_type = VATTN_ATTN_ENCODER;
  auto p = ct::make_problem(c, {4, 2}, {}, g);
  ASSERT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), 0, p->md.get(), 0, nullptr));
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.key", [](auto &a) { a.key = nullptr; });
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.value", [](auto &a) { a.value = nullptr; });
  vt::HostTensor k_short({5, 2, 64}, vt::dl_f32());
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "args.key", [&](auto &a) { a.key = k_short.dl(); });
}

TEST(CpuBadInputs, BuildRejects) {
  auto g = seeded();
  auto p = ct::make_problem(Config{}, {2, 1}, {10, 30}, g);
  EXPECT_VATTN_ERR(vattn_builder_build_for_cudagraph_capture(p->builder.get(), p->plan.get(), p->md.get(), nullptr),
                   VATTN_ERR_UNSUPPORTED, "CUDA-graph");
  // Metadata built for another block size.
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  ASSERT_VATTN_OK(vattn_metadata_describe(p->md.get(), &d));
  d.block_size = 32;
  d.num_cache_blocks = 0;
  vattn_metadata_t *m = nullptr;
  ASSERT_VATTN_OK(vattn_metadata_create(&m, &d));
  ct::MdPtr mp(m);
  EXPECT_VATTN_ERR(vattn_builder_build(p->builder.get(), p->plan.get(), 0, m, 0, nullptr),
                   VATTN_ERR_INVALID_ARGUMENT, "block_size");
  // The plan stays unbuilt after a failed build.
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "plan", [](auto &) {});
  // Drafting builds are ordinary builds on the CPU.
  ASSERT_VATTN_OK(vattn_builder_build_for_drafting(p->builder.get(), p->plan.get(), p->md.get(), 0, nullptr));
  ASSERT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args));
  EXPECT_EQ(ct::check_problem(*p), 0);
}

// The forward pass checks the plan's block table against the cache from
// the maxima measured when the metadata was created (O(1) per layer), and
// falls back to the per-entry check when they do not prove it safe: a
// table never checked against a cache, ids past this cache, whole-row
// scans (block_size 0) with a bad id in a column no request reads.
TEST(CpuBadInputs, PlanBlockTableCheckedAgainstCache) {
  auto g = seeded();
  Config cfg;
  cfg.pass_kv = false;  // read-only on the cache: slots are not involved
  auto p = ct::make_problem(cfg, {3, 1, 2}, {40, 17, 33}, g);
  const int64_t bs = cfg.block_size, R = 3;
  auto rebuilt = [&](const std::vector<int32_t> &table, int32_t md_block_size, int64_t ncb) {
    vattn_metadata_desc_t d;
    vattn_metadata_desc_init(&d);
    ASSERT_VATTN_OK(vattn_metadata_describe(p->md.get(), &d));
    d.block_table = table.data();
    d.block_size = md_block_size;
    d.num_cache_blocks = ncb;
    std::vector<int64_t> slots(p->slots);
    if (ncb == 0) slots.assign(slots.size(), -1);  // not needed without K/V
    d.slot_mapping = slots.data();
    vattn_metadata_t *m = nullptr;
    ASSERT_VATTN_OK(vattn_metadata_create(&m, &d));
    ct::MdPtr mp(m);
    ASSERT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), 0, m, 0, nullptr));
  };
  const int64_t last_need = (33 + bs - 1) / bs;  // request 2 reads this many blocks
  const std::string last = "block_table[2][" + std::to_string(last_need - 1) + "]";
  for (int32_t md_bs : {0, (int32_t)bs}) {
    SCOPED_TRACE(md_bs);
    for (int32_t bad : {-1, (int32_t)p->num_blocks, INT32_MAX}) {
      std::vector<int32_t> t = p->block_table;
      t[2 * p->cols + last_need - 1] = bad;
      rebuilt(t, md_bs, 0);  // no cache size: the ids are not checked at create
      expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, last.c_str(), [](auto &) {});
    }
    // A bad id in a column no request reads is never looked at.
    if (p->cols > last_need) {
      std::vector<int32_t> t = p->block_table;
      for (int64_t r = 0; r < R; ++r) t[r * p->cols + p->cols - 1] = (int32_t)p->num_blocks + 5;
      t[2 * p->cols + p->cols - 1] = -9;
      rebuilt(t, md_bs, 0);
      ASSERT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args));
      EXPECT_EQ(ct::check_problem(*p), 0);
    }
    // A valid table checked only at forward time.
    rebuilt(p->block_table, md_bs, 0);
    ASSERT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args));
    EXPECT_EQ(ct::check_problem(*p), 0);
  }
  // Valid for the cache it was created for, not for a smaller view of it.
  rebuilt(p->block_table, (int32_t)bs, p->num_blocks);
  int32_t max_id = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < (p->kv_lens[r] + bs - 1) / bs; ++c)
      max_id = std::max(max_id, p->block_table[r * p->cols + c]);
  int64_t view_shape[5] = {2, max_id, bs, cfg.num_kv_heads, cfg.head_size};
  DLTensor view = *p->cache.dl();
  view.shape = view_shape;
  expect_rejected(*p, VATTN_ERR_INVALID_ARGUMENT, "is outside args.kv_cache's", [&](auto &a) { a.kv_cache = &view; });
  view_shape[1] = max_id + 1;
  ASSERT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args));
  vattn_forward_args_t a = p->args;
  a.kv_cache = &view;
  EXPECT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &a));
}

// const layer + const plan may be used from several threads at once.
TEST(CpuConcurrency, ConcurrentForwardsOnOnePlan) {
  auto g = seeded();
  Config c;
  c.pass_kv = false;  // read-only on the cache
  auto p = ct::make_problem(c, {5, 1, 9}, {40, 30, 9}, g);
  ASSERT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), 0, p->md.get(), 0, nullptr));
  std::vector<vt::HostTensor> outs;
  for (int i = 0; i < 4; ++i) outs.emplace_back(p->out.shape, vt::dl_f32());
  std::vector<vattn_status_t> st(4, -1);
  std::vector<std::thread> th;
  for (int i = 0; i < 4; ++i)
    th.emplace_back([&, i] {
      vattn_forward_args_t a = p->args;
      a.output = outs[i].dl();
      a.output_lse = nullptr;
      for (int k = 0; k < 5; ++k) st[i] = vattn_layer_forward(p->layer.get(), p->plan.get(), &a);
    });
  for (auto &t : th) t.join();
  ASSERT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args));
  EXPECT_EQ(ct::check_problem(*p), 0);
  const size_t n = static_cast<size_t>(p->T * 8 * 64 * 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(st[i], VATTN_OK);
    EXPECT_EQ(std::memcmp(outs[i].bytes.data(), p->out.bytes.data(), n), 0) << "thread " << i;
  }
}

}  // namespace
