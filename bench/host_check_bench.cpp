// host_check_bench.cpp -- per-layer host cost of the forward argument check
// (backends/forward_check.h) for the host_bench batch (bench/host_batch.h:
// 256 requests, block size 16, shuffled 256 x 256 block table): with the maxima that
// vattn_metadata_create measured (the O(1) path every forward takes), and
// with them switched off (the per-entry scan over every block id the
// requests read and every slot, what each layer paid before).  Links the
// internal static library: check_forward is not part of the C API.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/forward_check.h"
#include "host_batch.h"
#include "metadata/metadata.h"

namespace {

struct Setup {
  HostBatch b;
  vattn::Metadata md;
  vattn::LayerParams p;
  int64_t q_shape[3], kv_shape[3], cache_shape[5];
  DLTensor q{}, k{}, cache{};
  char dummy[64] = {};  // shapes only: check_forward reads no tensor data
  vattn_forward_args_t a{};

  Setup() {
    const vattn_metadata_desc_t d = b.desc();
    const int64_t nb = b.num_blocks;
    if (vattn::metadata_from_desc(d, "desc", &md) != VATTN_OK) std::abort();
    p.num_heads = 32;
    p.num_kv_heads = 8;
    p.head_size = 128;
    p.dtype = VATTN_DTYPE_BFLOAT16;
    p.block_size = 16;
    const int64_t T = b.qsl.back();
    const int64_t qs[3] = {T, 32, 128}, ks[3] = {T, 8, 128}, cs[5] = {2, nb, 16, 8, 128};
    std::memcpy(q_shape, qs, sizeof qs);
    std::memcpy(kv_shape, ks, sizeof ks);
    std::memcpy(cache_shape, cs, sizeof cs);
    const DLDataType bf16{kDLBfloat, 16, 1};
    q = DLTensor{dummy, {kDLCPU, 0}, 3, bf16, q_shape, nullptr, 0};
    k = DLTensor{dummy, {kDLCPU, 0}, 3, bf16, kv_shape, nullptr, 0};
    cache = DLTensor{dummy, {kDLCPU, 0}, 5, bf16, cache_shape, nullptr, 0};
    vattn_forward_args_init(&a);
    a.query = a.output = &q;
    a.key = a.value = &k;
    a.kv_cache = &cache;
  }
};

void run(benchmark::State &state, bool use_maxima) {
  static Setup s;
  vattn::Metadata md = s.md;
  if (!use_maxima) md.scan = vattn::Metadata::Scan{};
  vattn::DeviceReq dev;
  vattn::ForwardPlanSummary sum;
  for (auto _ : state) {
    if (vattn::check_forward(s.p, md, 16, 0, s.a, dev, &sum) != VATTN_OK) {
      std::fprintf(stderr, "check_forward: %s\n", vattn_last_error_message());
      std::abort();
    }
    benchmark::DoNotOptimize(sum);
  }
}

void BM_ForwardCheck256Mixed(benchmark::State &state) { run(state, true); }
BENCHMARK(BM_ForwardCheck256Mixed)->Unit(benchmark::kMicrosecond);
void BM_ForwardCheck256MixedPerEntry(benchmark::State &state) { run(state, false); }
BENCHMARK(BM_ForwardCheck256MixedPerEntry)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
