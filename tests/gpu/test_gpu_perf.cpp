// test_gpu_perf.cpp -- informational timings (VATTN_GPU_PERF=1 runs them,
// otherwise skipped): a large paged decode batch (bytes of K/V read per
// second, to compare with the device copy ceiling) and a long causal
// prefill (FLOP/s).  Wall-clock over stream synchronizations after warm-up,
// random bf16 data (never zeros), median of 20 runs.  Nothing is asserted
// beyond success: performance tuning is a later issue.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <cstdlib>

#include "gpu_harness.h"

namespace {

struct PerfCase {
  const char *name;
  int reqs, q_len, seq_len;
};

double median_ms(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run_perf(const PerfCase &pc) {
  const int H = 32, KVH = 8, D = 128, bs = 16;
  std::mt19937_64 g(1234);
  const int64_t T = int64_t(pc.reqs) * pc.q_len;
  const int64_t blocks_per_req = (pc.seq_len + bs - 1) / bs;
  const int64_t nb = blocks_per_req * pc.reqs + 1;
  vt::HostTensor q({T, H, D}, vt::dl_bf16()), k({T, KVH, D}, vt::dl_bf16()),
      v({T, KVH, D}, vt::dl_bf16()), out({T, H, D}, vt::dl_bf16());
  vt::HostTensor cache({2, nb, bs, KVH, D}, vt::dl_bf16());
  auto rnd = [&](vt::HostTensor &t) {
    uint16_t *p = t.as<uint16_t>();
    for (size_t i = 0; i < t.nbytes() / 2; ++i) {
      // bf16 in [-1, 1): sign, exponent 0x3E..0x3F range, random mantissa
      p[i] = static_cast<uint16_t>(((g() & 1) << 15) | (0x3C00 + (g() % 0x300)));
    }
  };
  rnd(q);
  rnd(k);
  rnd(v);
  rnd(cache);
  std::vector<int32_t> qsl(1, 0), seq, bt;
  std::vector<int64_t> slots;
  std::vector<int32_t> ids(nb - 1);
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), g);
  for (int r = 0; r < pc.reqs; ++r) {
    qsl.push_back(qsl.back() + pc.q_len);
    seq.push_back(pc.seq_len);
    for (int64_t j = 0; j < blocks_per_req; ++j) bt.push_back(ids[r * blocks_per_req + j]);
    for (int i = 0; i < pc.q_len; ++i) {
      const int64_t pos = pc.seq_len - pc.q_len + i;
      slots.push_back(int64_t(bt[r * blocks_per_req + pos / bs]) * bs + pos % bs);
    }
  }
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  d.num_reqs = pc.reqs;
  d.num_actual_tokens = T;
  d.query_start_loc = qsl.data();
  d.seq_lens = seq.data();
  d.block_table = bt.data();
  d.block_table_rows = pc.reqs;
  d.block_table_cols = blocks_per_req;
  d.slot_mapping = slots.data();
  d.slot_mapping_len = T;
  d.block_size = bs;
  d.num_cache_blocks = nb;
  vattn_metadata_t *md = nullptr;
  ASSERT_VATTN_OK(vattn_metadata_create(&md, &d));
  ct::MdPtr mdp(md);
  vattn_builder_options_t bo;
  vattn_builder_options_init(&bo);
  bo.num_heads = H;
  bo.num_kv_heads = KVH;
  bo.head_size = D;
  bo.block_size = bs;
  bo.max_num_reqs = pc.reqs;
  bo.max_num_tokens = T;
  bo.max_blocks_per_req = static_cast<int32_t>(blocks_per_req);
  vattn_builder_t *b = nullptr;
  ASSERT_VATTN_OK(vattn_builder_create(&b, gt::cuda(), &bo));
  ct::BuilderPtr bp(b);
  vattn_plan_t *pl = nullptr;
  ASSERT_VATTN_OK(vattn_plan_create(&pl, b));
  ct::PlanPtr pp(pl);
  vattn_layer_options_t lo;
  vattn_layer_options_init(&lo);
  lo.num_heads = H;
  lo.num_kv_heads = KVH;
  lo.head_size = D;
  lo.block_size = bs;
  vattn_layer_t *l = nullptr;
  ASSERT_VATTN_OK(vattn_layer_create(&l, gt::cuda(), &lo));
  ct::LayerPtr lp(l);
  gt::DevTensor dq(q), dk(k), dv(v), dout(out), dc(cache);
  gt::CUstream s = nullptr;
  CU_OK(gt::drv().cuStreamCreate(&s, 1));
  ASSERT_VATTN_OK(vattn_builder_build(b, pl, 0, md, 0, s));
  vattn_forward_args_t a;
  vattn_forward_args_init(&a);
  a.query = dq.dl();
  a.key = dk.dl();
  a.value = dv.dl();
  a.kv_cache = dc.dl();
  a.output = dout.dl();
  a.stream = s;
  std::vector<double> ms;
  for (int it = 0; it < 25; ++it) {
    CU_OK(gt::drv().cuStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_VATTN_OK(vattn_layer_forward(l, pl, &a));
    CU_OK(gt::drv().cuStreamSynchronize(s));
    auto t1 = std::chrono::steady_clock::now();
    if (it >= 5) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  gt::drv().cuStreamDestroy(s);
  const double t = median_ms(ms);
  const double kv_bytes = 2.0 * pc.reqs * pc.seq_len * KVH * D * 2;
  double flops = 0;  // causal: each query sees its context + earlier new tokens
  for (int i = 0; i < pc.q_len; ++i) flops += 4.0 * H * D * (pc.seq_len - pc.q_len + i + 1);
  flops *= pc.reqs;
  printf("[perf] %-8s reqs=%d q=%d seq=%d H=%d KVH=%d D=%d bf16: %.3f ms  KV %.0f GB/s  %.1f TFLOP/s\n",
         pc.name, pc.reqs, pc.q_len, pc.seq_len, H, KVH, D, t, kv_bytes / t / 1e6, flops / t / 1e9);
}

// Device copy ceiling (read + write bytes per second) in the same run.
void copy_ceiling() {
  const size_t bytes = size_t(1) << 30;
  gt::CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(gt::drv().cuMemAlloc(&a, bytes), 0);
  ASSERT_EQ(gt::drv().cuMemAlloc(&b, bytes), 0);
  gt::CUstream s = nullptr;
  CU_OK(gt::drv().cuStreamCreate(&s, 1));
  std::vector<double> ms;
  for (int it = 0; it < 15; ++it) {
    CU_OK(gt::drv().cuStreamSynchronize(s));
    auto t0 = std::chrono::steady_clock::now();
    CU_OK(gt::drv().cuMemcpyDtoDAsync(b, a, bytes, s));
    CU_OK(gt::drv().cuStreamSynchronize(s));
    auto t1 = std::chrono::steady_clock::now();
    if (it >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  const double t = median_ms(ms);
  printf("[perf] copy     1 GiB device-to-device: %.3f ms  %.0f GB/s (read + write)\n", t,
         2.0 * bytes / t / 1e6);
  gt::drv().cuStreamDestroy(s);
  gt::drv().cuMemFree(a);
  gt::drv().cuMemFree(b);
}

}  // namespace

TEST(GpuPerf, DecodeAndPrefillTimings) {
  GPU_TEST_REQUIRE();
  const char *e = std::getenv("VATTN_GPU_PERF");
  if (!e || std::atoi(e) == 0) GTEST_SKIP() << "set VATTN_GPU_PERF=1 to run the timings";
  copy_ceiling();
  run_perf({"decode", 64, 1, 4096});
  run_perf({"decode", 8, 1, 32768});
  run_perf({"prefill", 4, 2048, 2048});
}
