// host_bench.cpp -- host-side cost of planning a batch (issue 5 target:
// metadata build for 256 mixed requests <= 20 us on the CI-class CPU).
//
// The batch: 256 requests = 240 decodes at 1-4k context + 16 chunked
// prefills of 64 tokens at 0-2k context, block size 16, shuffled block
// tables of 256 columns.  Measured separately:
//   MetadataCreate   vattn_metadata_create + destroy (validation + copy)
//   SlotMapping      vattn_slot_mapping_compute for the batch's tokens
//   BuilderBuild     vattn_builder_build into a reused plan (CPU backend;
//                    the CUDA builder adds its async H2D copies on top)
//   Total            all three, i.e. the host work of one step.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

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

struct Batch {
  int64_t num_reqs = 256, cols = 256, num_blocks = 0;
  std::vector<int32_t> qsl, seq_lens, table;
  std::vector<int64_t> positions, slots;
  vattn_metadata_desc_t desc{};
  vattn_slot_mapping_args_t sm{};

  Batch() {
    std::mt19937_64 g(42);
    qsl.assign(1, 0);
    for (int64_t r = 0; r < num_reqs; ++r) {
      bool prefill = r >= 240;
      int32_t q = prefill ? 64 : 1;
      int32_t ctx = prefill ? static_cast<int32_t>(g() % 2048) : 1024 + static_cast<int32_t>(g() % 3072);
      seq_lens.push_back(ctx + q);
      qsl.push_back(qsl.back() + q);
      for (int32_t t = 0; t < q; ++t) positions.push_back(ctx + t);
    }
    num_blocks = num_reqs * cols + 1;
    std::vector<int32_t> ids(num_blocks - 1);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i + 1);
    std::shuffle(ids.begin(), ids.end(), g);
    table = ids;
    slots.assign(positions.size(), 0);

    vattn_slot_mapping_args_init(&sm);
    sm.block_table = table.data();
    sm.num_rows = num_reqs;
    sm.row_stride = cols;
    sm.query_start_loc = qsl.data();
    sm.num_reqs = num_reqs;
    sm.positions = positions.data();
    sm.num_tokens = static_cast<int64_t>(positions.size());
    sm.block_size = 16;
    sm.num_cache_blocks = num_blocks;
    CHECK(vattn_slot_mapping_compute(&sm, slots.data(), static_cast<int64_t>(slots.size())));

    vattn_metadata_desc_init(&desc);
    desc.num_reqs = num_reqs;
    desc.num_actual_tokens = qsl.back();
    desc.query_start_loc = qsl.data();
    desc.seq_lens = seq_lens.data();
    desc.block_table = table.data();
    desc.block_table_rows = num_reqs;
    desc.block_table_cols = cols;
    desc.slot_mapping = slots.data();
    desc.slot_mapping_len = static_cast<int64_t>(slots.size());
    desc.block_size = 16;
    desc.num_cache_blocks = num_blocks;
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
