// host_batch.h -- the step both host benchmarks plan (host_bench.cpp,
// host_check_bench.cpp): 256 requests = 240 decodes at 1-4k context + 16
// chunked prefills of 64 tokens at 0-2k context, block size 16, a shuffled
// 256 x 256 block table over blocks 1 .. 65536 (block 0 unused), and the
// slot of every query token.  Deterministic (seed 42).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "vattn.h"

struct HostBatch {
  static constexpr int64_t kReqs = 256, kCols = 256, kBlockSize = 16;
  int64_t num_blocks = kReqs * kCols + 1;
  std::vector<int32_t> qsl{0}, seq_lens, table;
  std::vector<int64_t> positions, slots;

  HostBatch() {
    std::mt19937_64 g(42);
    for (int64_t r = 0; r < kReqs; ++r) {
      const bool prefill = r >= 240;
      const int32_t q = prefill ? 64 : 1;
      const int32_t ctx = prefill ? static_cast<int32_t>(g() % 2048) : 1024 + static_cast<int32_t>(g() % 3072);
      seq_lens.push_back(ctx + q);
      qsl.push_back(qsl.back() + q);
      for (int32_t t = 0; t < q; ++t) positions.push_back(ctx + t);
    }
    table.resize(static_cast<size_t>(num_blocks - 1));
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i + 1);
    std::shuffle(table.begin(), table.end(), g);
    for (int64_t r = 0; r < kReqs; ++r)
      for (int32_t t = qsl[r]; t < qsl[r + 1]; ++t)
        slots.push_back(int64_t(table[r * kCols + positions[t] / kBlockSize]) * kBlockSize +
                        positions[t] % kBlockSize);
  }

  // The metadata description of the step (points into this object).
  vattn_metadata_desc_t desc() const {
    vattn_metadata_desc_t d;
    vattn_metadata_desc_init(&d);
    d.num_reqs = kReqs;
    d.num_actual_tokens = qsl.back();
    d.query_start_loc = qsl.data();
    d.seq_lens = seq_lens.data();
    d.block_table = table.data();
    d.block_table_rows = kReqs;
    d.block_table_cols = kCols;
    d.slot_mapping = slots.data();
    d.slot_mapping_len = static_cast<int64_t>(slots.size());
    d.block_size = kBlockSize;
    d.num_cache_blocks = num_blocks;
    return d;
  }
};
