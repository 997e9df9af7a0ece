// host_schedule_bench.cpp -- host work of the CUDA builder's build without
// its driver calls (src/backends/cuda/cuda_schedule.h): the schedule, the
// unit order, the merge tables and the staging of the block table and slot
// mapping, into a reused staging buffer, for an H100-shaped builder (132
// SMs, 2 decode CTAs per SM, 32 query / 8 KV heads, head size 128).
// vattn_builder_build adds its copies and an event record on top (about
// 10 us on the GPU machine, docs/benchmarks.md).  Runs without a GPU.
//   Schedule256Mixed      bench/host_batch.h: 240 decodes at 1-4k + 16
//                         prefill chunks of 64 (issue 5's host batch)
//   ScheduleDecode256x2k  256 decodes at 2048 keys
//   ScheduleDecode1x1k    one decode at 1024 keys
//   ScheduleDecode1x128kKv1  one decode at 131072 keys, 8 / 1 heads
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cuda/cuda_schedule.h"
#include "host_batch.h"
#include "metadata/metadata.h"

namespace {

vattn::CudaBuilderCfg h100_cfg(int32_t heads = 32, int32_t kv_heads = 8, int32_t max_blocks = 256) {
  vattn_builder_options_t o;
  vattn_builder_options_init(&o);
  o.num_heads = heads;
  o.num_kv_heads = kv_heads;
  o.head_size = 128;
  o.block_size = 16;
  o.max_num_reqs = 256;
  o.max_num_tokens = 8192;
  o.max_blocks_per_req = max_blocks;
  vattn::CudaDeviceFacts d;  // what cuda_create_builder reads on an H100
  d.num_sms = 132;
  d.rows_per_tile = 128;
  d.dec_ctas_per_sm = 2;
  return vattn::cuda_builder_cfg(o, d);
}

// `seq_lens` / `qsl` / table describe the batch (block size 16).
vattn::Metadata make_md(const vattn_metadata_desc_t &d) {
  vattn::Metadata md;
  if (vattn::metadata_from_desc(d, "desc", &md) != VATTN_OK) {
    std::fprintf(stderr, "metadata: %s\n", vattn_last_error_message());
    std::abort();
  }
  return md;
}

void run(benchmark::State &state, const vattn::Metadata &md, const vattn::CudaBuilderCfg &c = h100_cfg()) {
  const vattn::CudaPlanLayout L = vattn::cuda_plan_layout(c);
  std::vector<char> host(L.meta_end);
  vattn::CudaScheduleScratch scratch;
  vattn::CudaSchedule sc;
  for (auto _ : state) {
    if (vattn::cuda_schedule(c, L, host.data(), md, 0, false, &scratch, &sc) != VATTN_OK) {
      state.SkipWithError(vattn_last_error_message());
      break;
    }
    benchmark::DoNotOptimize(host.data());
    benchmark::ClobberMemory();
  }
  state.counters["items"] = static_cast<double>(sc.n_items);
  state.counters["dec_splits"] = sc.dec_splits;
}

void BM_Schedule256Mixed(benchmark::State &state) {
  static const HostBatch b;
  static const vattn::Metadata md = make_md(b.desc());
  run(state, md);
}

// n decodes at `len` keys, table of `cols` columns (block ids i + 1,
// shuffled rows are irrelevant to the host work).  The metadata keeps its
// own copies of the arrays.
vattn::Metadata decode_md(int64_t n, int32_t len, int64_t cols = 256) {
  std::vector<int32_t> qsl(1, 0), seq(static_cast<size_t>(n), len), table(static_cast<size_t>(n * cols));
  std::vector<int64_t> slots;
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i + 1);
  for (int64_t r = 0; r < n; ++r) {
    qsl.push_back(qsl.back() + 1);
    slots.push_back(int64_t(table[r * cols + (len - 1) / 16]) * 16 + (len - 1) % 16);
  }
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  d.num_reqs = n;
  d.num_actual_tokens = n;
  d.query_start_loc = qsl.data();
  d.seq_lens = seq.data();
  d.block_table = table.data();
  d.block_table_rows = n;
  d.block_table_cols = cols;
  d.slot_mapping = slots.data();
  d.slot_mapping_len = n;
  d.block_size = 16;
  d.num_cache_blocks = static_cast<int64_t>(table.size()) + 1;
  return make_md(d);
}

void BM_ScheduleDecode256x2k(benchmark::State &state) {
  static const vattn::Metadata md = decode_md(256, 2048);
  run(state, md);
}

void BM_ScheduleDecode1x1k(benchmark::State &state) {
  static const vattn::Metadata md = decode_md(1, 1024);
  run(state, md);
}

// One request of 131072 keys on one KV head (8 / 1 heads, a table of 8192
// columns): the longest host row to stage, split up to 128 ways.
void BM_ScheduleDecode1x128kKv1(benchmark::State &state) {
  static const vattn::Metadata md = decode_md(1, 131072, 8192);
  run(state, md, h100_cfg(8, 1, 8192));
}

}  // namespace

BENCHMARK(BM_Schedule256Mixed)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScheduleDecode256x2k)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScheduleDecode1x1k)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScheduleDecode1x128kKv1)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
