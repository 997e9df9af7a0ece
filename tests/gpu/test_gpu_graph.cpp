// test_gpu_graph.cpp -- a forward captured in a CUDA graph replays new
// batches: capture with batch A (build_for_cudagraph_capture), replay;
// rebuild the same plan with batch B (other query / sequence lengths, new
// data in the same device buffers) and replay the same graph; both checked
// against the float64 oracle.  Also: back-to-back builds of one plan with
// no host synchronization (the two staging buffers).
#include "gpu_harness.h"

namespace {

void graph_case(const ct::Config &c, std::mt19937_64 &g) {
  // Same total block count (so the cache tensor has the same strides).
  auto pa = ct::make_problem(c, {1, 20, 16, 1}, {96, 48, 16, 300}, g);
  auto pb = ct::make_problem(c, {5, 1, 7, 1}, {48, 96, 16, 300}, g);
  ASSERT_EQ(pa->num_blocks, pb->num_blocks);
  pb->sinks = pa->sinks;  // the layer (made from A) carries A's parameters
  pb->alibi = pa->alibi;
  gt::GpuObjs o;
  ASSERT_VATTN_OK(gt::make_gpu_objs(*pa, &o));
  gt::CUstream s = nullptr;
  CU_OK(gt::drv().cuStreamCreate(&s, 1));
  gt::GpuArgs ga;
  auto cap = [](const vt::HostTensor &a, const vt::HostTensor &b) {
    return std::max(a.nbytes(), b.nbytes());
  };
  ga.q.init(pa->q, cap(pa->q, pb->q));
  ga.out.init(pa->out, cap(pa->out, pb->out));
  ga.cache.init(pa->cache);
  ga.k.init(pa->k, cap(pa->k, pb->k));
  ga.v.init(pa->v, cap(pa->v, pb->v));
  ga.args = pa->args;
  ga.args.query = ga.q.dl();
  ga.args.output = ga.out.dl();
  ga.args.output_lse = nullptr;
  ga.args.kv_cache = ga.cache.dl();
  ga.args.key = ga.k.dl();
  ga.args.value = ga.v.dl();
  ga.args.stream = s;

  ASSERT_VATTN_OK(vattn_builder_build_for_cudagraph_capture(o.builder.get(), o.plan.get(),
                                                            pa->md.get(), s));
  CU_OK(gt::drv().cuStreamSynchronize(s));
  gt::CUgraph graph = nullptr;
  gt::CUgraphExec exec = nullptr;
  CU_OK(gt::drv().cuStreamBeginCapture(s, 0 /* global */));
  const vattn_status_t st = vattn_layer_forward(o.layer.get(), o.plan.get(), &ga.args);
  CU_OK(gt::drv().cuStreamEndCapture(s, &graph));
  ASSERT_VATTN_OK(st);
  CU_OK(gt::drv().cuGraphInstantiateWithFlags(&exec, graph, 0));

  CU_OK(gt::drv().cuGraphLaunch(exec, s));
  CU_OK(gt::drv().cuStreamSynchronize(s));
  ga.out.download(&pa->out);
  ga.cache.download(&pa->cache);
  EXPECT_EQ(ct::check_problem(*pa), 0) << "graph replay, batch A";

  // Batch B into the same buffers and plan, same graph.
  ga.q.retarget(pb->q);
  ga.out.retarget(pb->out);
  ga.cache.retarget(pb->cache);
  ga.k.retarget(pb->k);
  ga.v.retarget(pb->v);
  ASSERT_VATTN_OK(vattn_builder_build(o.builder.get(), o.plan.get(), 0, pb->md.get(), 0, s));
  CU_OK(gt::drv().cuGraphLaunch(exec, s));
  CU_OK(gt::drv().cuStreamSynchronize(s));
  ga.out.download(&pb->out);
  ga.cache.download(&pb->cache);
  EXPECT_EQ(ct::check_problem(*pb), 0) << "graph replay, batch B";

  gt::drv().cuGraphExecDestroy(exec);
  gt::drv().cuGraphDestroy(graph);
  gt::drv().cuStreamDestroy(s);
}

// Three builds of one plan, each followed by its forward, with no host
// synchronization in between: the builds alternate between the plan's two
// staging buffers (the third reuses the first once its upload is done), and
// every forward must see its own batch.
void back_to_back_case(const ct::Config &c, std::mt19937_64 &g) {
  std::unique_ptr<ct::Problem> ps[3] = {
      ct::make_problem(c, {1, 20, 16, 1}, {96, 48, 16, 300}, g),
      ct::make_problem(c, {5, 1, 7, 1}, {48, 96, 16, 300}, g),
      ct::make_problem(c, {1, 1, 40, 2}, {300, 16, 96, 48}, g)};
  for (int i = 1; i < 3; ++i) {
    ASSERT_EQ(ps[i]->num_blocks, ps[0]->num_blocks);
    ps[i]->sinks = ps[0]->sinks;
    ps[i]->alibi = ps[0]->alibi;
  }
  gt::GpuObjs o;
  ASSERT_VATTN_OK(gt::make_gpu_objs(*ps[0], &o));
  gt::CUstream s = nullptr;
  CU_OK(gt::drv().cuStreamCreate(&s, 1));
  gt::GpuArgs ga[3];
  for (int i = 0; i < 3; ++i) {
    ga[i].init(*ps[i], s);
    ASSERT_VATTN_OK(vattn_builder_build(o.builder.get(), o.plan.get(), 0, ps[i]->md.get(), 0, s));
    ASSERT_VATTN_OK(vattn_layer_forward(o.layer.get(), o.plan.get(), &ga[i].args));
  }
  CU_OK(gt::drv().cuStreamSynchronize(s));
  for (int i = 0; i < 3; ++i) {
    ga[i].download(*ps[i]);
    EXPECT_EQ(ct::check_problem(*ps[i]), 0) << "back-to-back build " << i;
  }
  gt::drv().cuStreamDestroy(s);
}

}  // namespace

TEST(GpuGraph, BackToBackBuildsWithoutSync) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int variant = 0; variant < 2; ++variant) {
    ct::Config c;
    c.dtype = variant == 0 ? VATTN_DTYPE_BFLOAT16 : VATTN_DTYPE_FLOAT16;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.head_size = 128;
    c.kv_cache_dtype = variant == 1 ? VATTN_KV_CACHE_DTYPE_FP8_E4M3 : VATTN_KV_CACHE_DTYPE_AUTO;
    c.num_threads = 8;
    SCOPED_TRACE(c.str());
    back_to_back_case(c, g);
  }
}

TEST(GpuGraph, CaptureAndReplayWithNewMetadata) {
  GPU_TEST_REQUIRE();
  std::mt19937_64 g(vt::test_seed());
  for (int variant = 0; variant < 3; ++variant) {
    ct::Config c;
    c.dtype = variant == 1 ? VATTN_DTYPE_FLOAT16 : VATTN_DTYPE_BFLOAT16;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.head_size = variant == 2 ? 256 : 128;
    c.want_lse = false;  // its stride depends on the token count
    c.pad_tokens = 2;
    c.kv_cache_dtype = variant == 2 ? VATTN_KV_CACHE_DTYPE_FP8_E5M2 : VATTN_KV_CACHE_DTYPE_AUTO;
    c.sinks = variant == 1;
    c.num_threads = 8;
    SCOPED_TRACE(c.str());
    graph_case(c, g);
  }
}
