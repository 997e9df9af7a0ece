// cpu_builder.cpp -- see cpu_plan.h.
#include <algorithm>

#include "backends/cpu/cpu_plan.h"
#include "core/error.h"

namespace vattn {
namespace cpu {

CpuBuilder::CpuBuilder(const vattn_builder_options_t &opts)
    : opts_(opts), pool_(std::make_shared<const ThreadPool>(opts.num_threads)) {}

vattn_status_t CpuBuilder::create_plan(std::unique_ptr<PlanImpl> *out) const {
  auto p = std::make_unique<CpuPlan>();
  p->pool = pool_;
  p->block_size = opts_.block_size;
  p->num_heads = opts_.num_heads;
  p->num_kv_heads = opts_.num_kv_heads;
  // A tile has at least one token, so there are at most max_num_tokens.
  const size_t cap = static_cast<size_t>(std::min<int64_t>(opts_.max_num_tokens, 1 << 16));
  p->tiles.reserve(cap);
  p->spare_tiles.reserve(cap);
  *out = std::move(p);
  return VATTN_OK;
}

vattn_status_t CpuBuilder::build(PlanImpl &plan_base, int64_t common_prefix_len, const Metadata &md,
                                 bool /*fast_build*/, BuildMode mode, void * /*stream*/) {
  CpuPlan *plan = dynamic_cast<CpuPlan *>(&plan_base);
  if (!plan) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'plan' was not created by a CPU builder");
  if (mode == BuildMode::kCudagraphCapture)
    return fail(VATTN_ERR_UNSUPPORTED,
                "CPU backend: CUDA-graph capture is not supported (cudagraph support NEVER)");
  const int32_t bs = opts_.block_size;
  if (md.block_size != 0 && md.block_size != bs)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "argument 'md': block_size %d does not match the builder's block_size %d",
                md.block_size, bs);
  if (common_prefix_len > 0) {
    // Pass 1 reads the shared prefix through request 0's row.
    if (md.num_reqs == 0)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument 'common_prefix_len' = %lld needs at least one request",
                  (long long)common_prefix_len);
    if (common_prefix_len / bs > md.block_table_cols)
      return fail(VATTN_ERR_INVALID_ARGUMENT,
                  "argument 'common_prefix_len' = %lld spans more blocks than the block table's "
                  "%lld columns",
                  (long long)common_prefix_len, (long long)md.block_table_cols);
  }

  // Schedule: tiles of up to kTileRows query rows per KV head, built in
  // the plan's spare vector (its capacity is kept from build to build, so
  // a steady state allocates nothing here).
  const int32_t qpkv = std::max(1, opts_.num_heads / opts_.num_kv_heads);
  const int32_t tile_tokens = std::max(1, kTileRows / qpkv);
  std::vector<Tile> &tiles = plan->scratch_tiles;
  tiles.clear();
  for (int64_t r = 0; r < md.num_reqs; ++r) {
    const int32_t qlen = md.query_len(r);
    const int64_t ctx = std::max<int64_t>(md.seq_lens[r] - qlen, 0);
    for (int32_t t0 = 0; t0 < qlen; t0 += tile_tokens) {
      const int32_t n = std::min(tile_tokens, qlen - t0);
      // Causal keys seen by the tile's last token (an upper bound for others).
      // (Fields stored one by one: a whole-struct copy from a temporary
      // stalls on store forwarding.)
      Tile &t = tiles.emplace_back();
      t.req = static_cast<int32_t>(r);
      t.tok_begin = t0;
      t.tok_count = n;
      t.cost = static_cast<int64_t>(n) * (ctx + t0 + n);
    }
  }
  // Most expensive first; ties in generation order (request, first token):
  // a stable LSD radix sort of the inverted costs, 8 bits a pass over only
  // the bits in which the costs differ (two passes for a typical batch),
  // then a gather.  (Comparison sorts cost several times more here.)
  const size_t n_tiles = tiles.size();
  std::vector<uint64_t> &keys = plan->sort_keys;
  std::vector<uint32_t> &order = plan->sort_order, &next = plan->sort_next;
  keys.resize(n_tiles);
  order.resize(n_tiles);
  next.resize(n_tiles);
  uint64_t differ = 0;
  for (size_t i = 0; i < n_tiles; ++i) {
    keys[i] = ~static_cast<uint64_t>(tiles[i].cost);  // ascending key = descending cost
    differ |= keys[i] ^ keys[0];
    order[i] = static_cast<uint32_t>(i);
  }
  if (differ != 0) {
    const int lo = __builtin_ctzll(differ), hi = 64 - __builtin_clzll(differ);
    for (int shift = lo; shift < hi; shift += 8) {
      uint32_t count[257] = {};
      for (size_t i = 0; i < n_tiles; ++i) ++count[((keys[order[i]] >> shift) & 0xff) + 1];
      for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
      for (size_t i = 0; i < n_tiles; ++i) next[count[(keys[order[i]] >> shift) & 0xff]++] = order[i];
      order.swap(next);
    }
  }
  std::vector<Tile> &sorted = plan->spare_tiles;
  sorted.clear();
  for (size_t i = 0; i < n_tiles; ++i) sorted.push_back(tiles[order[i]]);

  // Validated: commit everything at once.  Copy first: an allocation
  // failure in the copy must leave the plan as it was (tests/reliability).
  // (The block table and slot mapping are shared, not copied: metadata.h.)
  Metadata md_copy = md;
  plan->md = std::move(md_copy);
  plan->tiles.swap(sorted);
  plan->common_prefix_len = common_prefix_len;
  plan->built = true;
  return VATTN_OK;
}

}  // namespace cpu
}  // namespace vattn
