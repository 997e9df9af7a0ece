// cpu_plan.h -- the CPU backend's metadata builder and plan.
//
// The plan keeps the host Metadata (PlanImpl::md) and a work schedule: the
// batch's query tokens cut into tiles (request, first token, token count),
// most expensive first so that dynamic scheduling balances the threads.  A
// layer runs every tile once per KV head.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "core/thread_pool.h"

namespace vattn {
namespace cpu {

struct Tile {
  int32_t req = 0;
  int32_t tok_begin = 0;  // first query token within the request
  int32_t tok_count = 0;
  int64_t cost = 0;       // ~ tokens x visible keys, for ordering
};

class CpuPlan final : public PlanImpl {
 public:
  std::shared_ptr<const ThreadPool> pool;
  int32_t block_size = 0;
  int32_t num_heads = 0, num_kv_heads = 0;
  std::vector<Tile> tiles;
  // Scratch space of build (capacity kept between builds): the next
  // schedule (swapped with `tiles`), the unsorted tiles, sort keys and
  // orders.
  std::vector<Tile> spare_tiles, scratch_tiles;
  std::vector<uint64_t> sort_keys;
  std::vector<uint32_t> sort_order, sort_next;
};

class CpuBuilder final : public BuilderImpl {
 public:
  explicit CpuBuilder(const vattn_builder_options_t &opts);
  int32_t cudagraph_support() const override { return VATTN_CUDAGRAPH_NEVER; }
  int32_t reorder_batch_threshold() const override { return 1; }
  vattn_status_t create_plan(std::unique_ptr<PlanImpl> *out) const override;
  vattn_status_t build(PlanImpl &plan, int64_t common_prefix_len, const Metadata &md,
                       bool fast_build, BuildMode mode, void *stream) override;

 private:
  vattn_builder_options_t opts_;
  std::shared_ptr<const ThreadPool> pool_;
};

// Query rows per tile the schedule aims for (tokens x query heads per KV head).
constexpr int32_t kTileRows = 32;

}  // namespace cpu
}  // namespace vattn
