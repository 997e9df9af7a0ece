// host_bench.cpp -- host-side cost of planning a batch (issue 5 target:
// metadata build for 256 mixed requests <= 20 us on the CI-class CPU).
//
// The batch: bench/host_batch.h (256 requests, 240 decodes + 16 prefill
// chunks, block size 16, shuffled 256 x 256 block table).  Measured
// separately:
//   MetadataCreate   vattn_metadata_create + destroy (validation + copy)
//   SlotMapping      vattn_slot_mapping_compute for the batch's tokens
//   BuilderBuild     vattn_builder_build into a reused plan (CPU backend;
//                    the CUDA builder adds its async H2D copies on top)
//   Total            all three, i.e. the host work of one step.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "host_batch.h"
#include "vattn.h"

namespace {

#define CHECK(call)                                                                        \
  do {                                                                                     \
    vattn_status_t st_ = (call);                                                           \
    if (st_ != VATTN_OK) {                                                                 \
      std::fprintf(stderr, "%s: %s\n", #call, vattn_last_error_message());                 \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

// The step (bench/host_batch.h) with its metadata description and the
// slot-mapping arguments that recompute its slots.
struct Batch : HostBatch {
  vattn_metadata_desc_t desc = HostBatch::desc();
  vattn_slot_mapping_args_t sm{};

  Batch() {
    vattn_slot_mapping_args_init(&sm);
    sm.block_table = table.data();
    sm.num_rows = kReqs;
    sm.row_stride = kCols;
    sm.query_start_loc = qsl.data();
    sm.num_reqs = kReqs;
    sm.positions = positions.data();
    sm.num_tokens = static_cast<int64_t>(positions.size());
    sm.block_size = kBlockSize;
    sm.num_cache_blocks = num_blocks;
  }
};

const Batch &batch() {
  static const Batch b;
  return b;
}

void BM_MetadataCreate256Mixed(benchmark::State &state) {
  const Batch &b = batch();
  for (auto _ : state) {
    vattn_metadata_t *md = nullptr;
    CHECK(vattn_metadata_create(&md, &b.desc));
    benchmark::DoNotOptimize(md);
    vattn_metadata_destroy(md);
  }
}
BENCHMARK(BM_MetadataCreate256Mixed)->Unit(benchmark::kMicrosecond);

void BM_SlotMapping256Mixed(benchmark::State &state) {
  Batch b = batch();
  for (auto _ : state) {
    CHECK(vattn_slot_mapping_compute(&b.sm, b.slots.data(), static_cast<int64_t>(b.slots.size())));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_SlotMapping256Mixed)->Unit(benchmark::kMicrosecond);

struct Planner {
  vattn_builder_t *builder = nullptr;
  vattn_plan_t *plan = nullptr;
  Planner() {
    const vattn_backend_t *cpu = nullptr;
    CHECK(vattn_backend_find("CPU", &cpu));
    vattn_builder_options_t o;
    vattn_builder_options_init(&o);
    o.max_num_reqs = 256;
    o.max_num_tokens = 4096;
    o.max_blocks_per_req = 256;
    o.num_threads = 1;
    CHECK(vattn_builder_create(&builder, cpu, &o));
    CHECK(vattn_plan_create(&plan, builder));
  }
  ~Planner() {
    vattn_plan_destroy(plan);
    vattn_builder_destroy(builder);
  }
};

void BM_BuilderBuild256Mixed(benchmark::State &state) {
  const Batch &b = batch();
  Planner p;
  vattn_metadata_t *md = nullptr;
  CHECK(vattn_metadata_create(&md, &b.desc));
  for (auto _ : state) CHECK(vattn_builder_build(p.builder, p.plan, 0, md, 0, nullptr));
  vattn_metadata_destroy(md);
}
BENCHMARK(BM_BuilderBuild256Mixed)->Unit(benchmark::kMicrosecond);

void BM_Total256Mixed(benchmark::State &state) {
  Batch b = batch();
  Planner p;
  for (auto _ : state) {
    CHECK(vattn_slot_mapping_compute(&b.sm, b.slots.data(), static_cast<int64_t>(b.slots.size())));
    vattn_metadata_t *md = nullptr;
    CHECK(vattn_metadata_create(&md, &b.desc));
    CHECK(vattn_builder_build(p.builder, p.plan, 0, md, 0, nullptr));
    vattn_metadata_destroy(md);
  }
}
BENCHMARK(BM_Total256Mixed)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
