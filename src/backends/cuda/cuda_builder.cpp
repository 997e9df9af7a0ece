// cuda_builder.cpp -- the CUDA metadata builder: turns CommonAttentionMetadata
// into a plan of work items for kernels/attention.cuh (see launch.h).
//
// Schedule (host, per build):
//  - rows of request r are (token, head-in-group) pairs, G = H / KVH per
//    token; a tile holds floor(64 / G) whole tokens (so a token's heads are
//    never split across tiles and the merge pass can find them);
//  - causal tiles stop at the last key their last token sees;
//  - when the batch has too few tiles to fill the GPU (decode), each tile's
//    key range is split (flash-decoding) into up to max_num_splits chunks of
//    >= 256 keys, aligned to 64 keys; split tiles write fp32 partials to the
//    plan's workspace and the merge pass combines them;
//  - cascade (common_prefix_len P > 0): one extra request covers every query
//    token against keys [0, P) of request 0's block-table row (non-causal),
//    every real request attends keys [P, seq_len); all partials are merged.
//    If the workspace cannot hold both passes the plan falls back to the
//    equivalent single pass (same result when the prefix blocks are shared,
//    which is what cascade requires).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_backend_impl.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/cuda_util.h"
#include "backends/unit_order.h"
#include "core/cuda_runtime.h"

namespace vattn {
namespace {

constexpr int kMinKeysPerSplit = 256;
constexpr int kSplitAlign = 64;  // multiple of every kernel's key tile
constexpr int kDefaultMaxSplits = 16;

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Decode kernel (kernels/decode.cuh) scheduling: a request whose query
// rows (query_len * G) fit one 16-row item goes to the decode kernel; its
// key range is split so that the kernel's CTAs fill the GPU in as few waves
// as possible (cost model below).
// Parts of at least kDecMinKeysPerSplit keys; parts shorter than
// kDecShortSplitKeys only while the batch's CTAs fit one per SM (a short
// context is latency-bound: a part's chain of dependent loads, not its
// bytes, sets its time, and a second CTA on an SM does not shorten it).
// H100, bf16 D128 unless noted, eager us, 256-key parts -> this rule:
// 1x512 12.4 -> 10.2, 1x1024 12.5 -> 11.2, 2x1024 13.4 -> 12.9, fp8 1x512
// 12.2 -> 10.3, fp8 1x1024 12.4-12.6 -> 10.9, D256 1x1024 17.2-17.3 ->
// 15.2-15.4; long contexts unchanged.  256-key parts on 256 CTAs beat
// 128-key parts (2x2048 15.3 against 16.2, 4x1024 15.4 against 16.1).
constexpr int kDecMinKeysPerSplit = 64;
constexpr int kDecShortSplitKeys = 256;
constexpr int kDecDefaultMaxSplits = 64;
constexpr int64_t kDecCtaOverheadKeys = 128;  // fixed cost of a CTA, in keys
                                              // (VATTN_CUDA_DECODE_CTA_KEYS overrides)
// A tile split into more than kDecMergeRoundParts parts costs its merging
// CTA more rounds of partial loads (kern::merge_split_tile prefetches 16),
// modelled as kDecMergeRoundKeys more keys (VATTN_CUDA_DECODE_MERGE_KEYS
// overrides): 1x8192 then takes 16 parts instead of 32 (21.3 -> 21.1 us).
constexpr int kDecMergeRoundParts = 16;
constexpr int64_t kDecMergeRoundKeys = 256;

struct BuilderCfg {
  vattn_builder_options_t o;
  int32_t num_sms = 0, max_splits = 0;
  bool decode = false;  // decode items scheduled for the decode kernel
  int32_t dec_slots = 0, dec_max_splits = 0;
  // KV heads per decode CTA (kern::decode_kv_heads_per_cta) and the rows a
  // decode item may hold (16, or one head's 8 when a CTA runs two heads).
  int32_t dec_heads = 1, dec_rows = kern::kDecodeRows;
  int64_t dec_cta_keys = kDecCtaOverheadKeys;
  int64_t dec_merge_keys = kDecMergeRoundKeys;
  int32_t group = 1, tokens_per_tile = 1;
  int64_t cap_items = 0, ws_rows = 0, cap_parts = 0;
};

class CudaBuilder final : public BuilderImpl {
 public:
  explicit CudaBuilder(const BuilderCfg &c) : c_(c) {}
  int32_t cudagraph_support() const override { return VATTN_CUDAGRAPH_ALWAYS; }
  int32_t reorder_batch_threshold() const override { return 1; }
  vattn_status_t create_plan(std::unique_ptr<PlanImpl> *out) const override;
  vattn_status_t build(PlanImpl &plan, int64_t common_prefix_len, const Metadata &md,
                       bool fast_build, BuildMode mode, void *stream) override;

 private:
  BuilderCfg c_;
};

vattn_status_t CudaBuilder::create_plan(std::unique_ptr<PlanImpl> *out) const {
  const auto &o = c_.o;
  auto plan = std::make_unique<CudaPlan>();
  plan->device = o.device_id;
  plan->num_heads = o.num_heads;
  plan->num_kv_heads = o.num_kv_heads;
  plan->head_size = o.head_size;
  plan->block_size = o.block_size;
  plan->num_sms = c_.num_sms;
  plan->max_num_splits = c_.max_splits;
  plan->dec_heads = c_.dec_heads;
  plan->cap_items = c_.cap_items;
  plan->cap_parts = c_.cap_parts;
  plan->ws_rows = c_.ws_rows;

  CudaPlanLayout &L = plan->lay;
  size_t off = 0;
  auto take = [&](size_t bytes) {
    size_t at = align_up(off, 256);
    off = at + bytes;
    return at;
  };
  L.header = take(8 * sizeof(int32_t));
  L.reqs = take(sizeof(kern::AttnReq) * (o.max_num_reqs + 1));
  L.items = take(sizeof(kern::AttnItem) * c_.cap_items);
  L.tok_parts = take(sizeof(int2) * o.max_num_tokens);
  L.part_list = take(sizeof(int32_t) * c_.cap_parts);
  L.block_table = take(sizeof(int32_t) * static_cast<size_t>(o.max_num_reqs) * o.max_blocks_per_req);
  L.slot_mapping = take(sizeof(int64_t) * o.max_num_tokens);
  // Arrival counters of self-merging decode tiles (one tile per request at
  // most): zeroed below with the rest of the metadata and never uploaded.
  L.merge_ctr = take(sizeof(int32_t) * static_cast<size_t>(o.max_num_reqs) * o.num_kv_heads);
  L.unit_ctr = take(2 * sizeof(int32_t));  // zeroed, never uploaded, like merge_ctr
  L.units = take(sizeof(int32_t) * static_cast<size_t>(c_.cap_items) * o.num_kv_heads);
  L.meta_end = align_up(off, 256);
  const size_t ws = static_cast<size_t>(c_.ws_rows) * o.num_kv_heads;
  L.ws_lse = take(sizeof(float) * ws);
  L.ws_o = take(sizeof(float) * ws * o.head_size);
  L.total = align_up(off, 256);

  DeviceGuard g(o.device_id);
  if (!g.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make CUDA device %d current", o.device_id);
  void *d = nullptr;
  VATTN_CUDA_TRY(cudaMalloc(&d, L.total), "plan device buffers");
  plan->dev = static_cast<char *>(d);
  for (int i = 0; i < 2; ++i) {
    void *h = nullptr;
    VATTN_CUDA_TRY(cudaMallocHost(&h, L.meta_end), "plan pinned staging buffer");
    plan->host_buf[i] = static_cast<char *>(h);
    std::memset(plan->host_buf[i], 0, L.meta_end);
    cudaEvent_t ev = nullptr;
    VATTN_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "plan event");
    plan->events[i] = ev;
  }
  plan->host = plan->host_buf[0];
  // Zero everything once so that a forward on a never-built region reads
  // an empty batch, never garbage.
  VATTN_CUDA_TRY(cudaMemset(plan->dev, 0, L.meta_end), "plan device buffers");
  VATTN_CUDA_TRY(cudaDeviceSynchronize(), "plan device buffers");
  *out = std::move(plan);
  return VATTN_OK;
}

struct TileDesc {
  int32_t req, tok0, ntok, kv_lo, kv_hi, kv_end;
};

vattn_status_t CudaBuilder::build(PlanImpl &pb, int64_t P, const Metadata &md, bool, BuildMode mode,
                                  void *stream_v) {
  CudaPlan *plan = dynamic_cast<CudaPlan *>(&pb);
  if (!plan) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'plan' was not created by a CUDA builder");
  const auto &o = c_.o;
  if (static_cast<int64_t>(md.slot_mapping.size()) > o.max_num_tokens)
    return fail(VATTN_ERR_WORKSPACE_TOO_SMALL,
                "argument 'md': slot mapping of %zu entries exceeds the plan's max_num_tokens %lld",
                md.slot_mapping.size(), (long long)o.max_num_tokens);
  if (md.block_size > 0 && md.block_size != o.block_size)
    return fail(VATTN_ERR_INVALID_ARGUMENT,
                "argument 'md': block_size %d differs from the builder's block_size %d",
                md.block_size, o.block_size);
  const int G = c_.group, tpt = c_.tokens_per_tile;
  const int64_t nreq = md.num_reqs;
  const int64_t real = md.num_real_tokens();
  const int64_t ntok_out = md.num_actual_tokens;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_v);

  DeviceGuard dg(o.device_id);
  if (!dg.ok()) return fail(VATTN_ERR_NO_DEVICE, "cannot make CUDA device %d current", o.device_id);
  // Alternate staging mirrors: the one used two builds ago is normally
  // uploaded long since (its event is complete and the query costs no
  // wait); only a host running two builds ahead of the stream waits here.
  const int slot = plan->slot ^ 1;
  cudaEvent_t slot_ev = static_cast<cudaEvent_t>(plan->events[slot]);
  const cudaError_t q = cudaEventQuery(slot_ev);
  if (q == cudaErrorNotReady)
    VATTN_CUDA_TRY(cudaEventSynchronize(slot_ev), "plan build");
  else if (q != cudaSuccess)
    return cuda_status(q, "plan build");
  plan->host = plan->host_buf[slot];

  const CudaPlanLayout &L = plan->lay;
  kern::AttnReq *reqs = plan->h<kern::AttnReq>(L.reqs);
  for (int64_t r = 0; r < nreq; ++r) {
    kern::AttnReq &q = reqs[r];
    q.q_start = md.query_start_loc[r];
    q.q_len = md.query_len(r);
    q.kv_len = md.seq_lens[r];
    q.q_pos0 = q.kv_len - q.q_len;
    q.bt_row = static_cast<int32_t>(r);
    q.kv_start = md.query_start_loc[r];
    q.causal = md.causal ? 1 : 0;
    q.pad_ = 0;
  }

  // ---- tiles
  std::vector<TileDesc> tiles, dtiles;  // general, decode
  bool cascade = P > 0 && md.causal && real > 0;
  if (cascade && 2 * real * G > c_.ws_rows) cascade = false;  // fall back (see top comment)
  const int64_t kv_floor = cascade ? P : 0;
  const bool use_dec = c_.decode && !cascade;
  for (int64_t r = 0; r < nreq; ++r) {
    const kern::AttnReq &q = reqs[r];
    if (use_dec && q.q_len >= 1 && q.q_len * G <= c_.dec_rows) {
      int64_t hi = q.kv_len;
      if (q.causal) hi = std::min<int64_t>(hi, static_cast<int64_t>(q.q_pos0) + q.q_len);
      hi = std::max<int64_t>(hi, 0);
      dtiles.push_back(TileDesc{static_cast<int32_t>(r), 0, q.q_len, 0, static_cast<int32_t>(hi),
                                q.kv_len});
      continue;
    }
    for (int32_t t0 = 0; t0 < q.q_len; t0 += tpt) {
      const int32_t nt = std::min<int32_t>(tpt, q.q_len - t0);
      int64_t hi = q.kv_len;
      if (q.causal) hi = std::min<int64_t>(hi, static_cast<int64_t>(q.q_pos0) + t0 + nt);
      int64_t lo = std::min<int64_t>(kv_floor, hi);
      tiles.push_back(TileDesc{static_cast<int32_t>(r), t0, nt, static_cast<int32_t>(lo),
                               static_cast<int32_t>(std::max(lo, hi)), q.kv_len});
    }
  }
  if (cascade) {
    kern::AttnReq &v = reqs[nreq];
    v.q_start = 0;
    v.q_len = static_cast<int32_t>(real);
    v.q_pos0 = 0;
    v.kv_len = static_cast<int32_t>(P);
    v.bt_row = 0;
    v.kv_start = 0;
    v.causal = 0;
    v.pad_ = 0;
    for (int32_t t0 = 0; t0 < real; t0 += tpt) {
      const int32_t nt = std::min<int32_t>(tpt, static_cast<int32_t>(real) - t0);
      tiles.push_back(TileDesc{static_cast<int32_t>(nreq), t0, nt, 0, static_cast<int32_t>(P),
                               static_cast<int32_t>(P)});
    }
  }

  // Longest key ranges first: CTAs start in item order, so the causal
  // tiles near the diagonal end of long prompts do not form a tail.
  std::stable_sort(tiles.begin(), tiles.end(), [](const TileDesc &a, const TileDesc &b) {
    return a.kv_hi - a.kv_lo > b.kv_hi - b.kv_lo;
  });

  // ---- split-KV decision
  const int64_t base = static_cast<int64_t>(tiles.size() + dtiles.size()) * o.num_kv_heads;
  const int64_t target = 2LL * c_.num_sms;
  int want = 1;
  if (!cascade && base > 0 && base < target)
    want = static_cast<int>(std::min<int64_t>(c_.max_splits, (target + base - 1) / base));

  kern::AttnItem *items = plan->h<kern::AttnItem>(L.items);
  int2 *tok_parts = plan->h<int2>(L.tok_parts);
  int32_t *part_list = plan->h<int32_t>(L.part_list);
  int64_t n_items = 0, ws_next = 0;
  struct PartRef {
    int32_t tok, p;
  };
  std::vector<PartRef> parts;
  parts.reserve(64);
  std::vector<int64_t> gen_keys;  // keys a general item visits (causal bound applied)
  gen_keys.reserve(tiles.size() * static_cast<size_t>(want));
  for (const TileDesc &t : tiles) {
    const int32_t rows = t.ntok * G;
    const int64_t range = t.kv_hi - t.kv_lo;
    int s = want;
    if (s > 1) s = static_cast<int>(std::min<int64_t>(s, std::max<int64_t>(1, range / kMinKeysPerSplit)));
    int64_t chunk = range;
    if (s > 1) {
      chunk = ((range + s - 1) / s + kSplitAlign - 1) / kSplitAlign * kSplitAlign;
      s = static_cast<int>((range + chunk - 1) / chunk);
    }
    const bool ws = s > 1 || cascade;
    if (ws && (ws_next + static_cast<int64_t>(s) * rows > c_.ws_rows ||
               n_items + s > c_.cap_items)) {
      if (cascade)  // cannot happen: checked above; keep the invariant loud
        return fail(VATTN_ERR_INTERNAL, "cascade plan exceeds its workspace");
      s = 1;
      chunk = range;
    }
    if (n_items + s > c_.cap_items)
      return fail(VATTN_ERR_INTERNAL, "plan item capacity %lld exceeded", (long long)c_.cap_items);
    const bool use_ws = s > 1 || cascade;
    for (int i = 0; i < s; ++i) {
      kern::AttnItem &it = items[n_items++];
      it.req = t.req;
      it.q_row0 = t.tok0 * G;
      it.num_rows = rows;
      it.kv_begin = static_cast<int32_t>(t.kv_lo + i * chunk);
      // The last chunk runs to kv_len: a non-causal layer over causal
      // metadata (cross / encoder) still sees every key; causal rows are
      // clipped in the kernel.
      it.kv_end = i + 1 == s ? t.kv_end : static_cast<int32_t>(t.kv_lo + (i + 1) * chunk);
      it.ws_base = use_ws ? static_cast<int32_t>(ws_next) : -1;
      it.merge = it.merge_slot = 0;
      gen_keys.push_back(std::max<int64_t>(0, std::min<int64_t>(it.kv_end, t.kv_hi) - it.kv_begin));
      if (use_ws) {
        const int32_t tok_first = reqs[t.req].q_start + t.tok0;
        for (int32_t k = 0; k < t.ntok; ++k) {
          parts.push_back(PartRef{tok_first + k, static_cast<int32_t>(ws_next + k * G)});
        }
        ws_next += rows;
      }
    }
  }
  const int64_t n_gen = n_items;
  // The Hopper kernel's claim order of the general items' units.
  if (!unit_order(&items[0].req, sizeof(kern::AttnItem), gen_keys.data(), n_gen, o.num_kv_heads,
                  plan->h<int32_t>(L.units)))
    return fail(VATTN_ERR_OUT_OF_MEMORY, "plan build: out of host memory");

  // ---- decode items: pick one split count s for the batch (each tile uses
  // min(s, range / min_keys) chunks) minimising the modelled time
  // waves(s) * (longest chunk + CTA overhead) (+ the merge cost), within the
  // plan's workspace and item capacity; ties go to fewer splits.
  if (!dtiles.empty()) {
    // Parts shorter than kDecShortSplitKeys need CTAs that fit one per SM;
    // when one part per tile is already more, they are out (and the search
    // below stays as short as with kDecShortSplitKeys parts: host time).
    const int64_t min_ctas = static_cast<int64_t>(dtiles.size()) * (o.num_kv_heads / c_.dec_heads);
    const int64_t min_keys = min_ctas <= c_.num_sms ? kDecMinKeysPerSplit : kDecShortSplitKeys;
    auto split_of = [&](const TileDesc &t, int s, int64_t *chunk) {
      const int64_t range = t.kv_hi - t.kv_lo;
      int st = static_cast<int>(std::min<int64_t>(s, std::max<int64_t>(1, range / min_keys)));
      *chunk = range;
      if (st > 1) {
        // Decode items only need kv_begin % kDecodeKeyAlign == 0: a finer
        // chunk lets the split count fill the resident CTA slots exactly.
        constexpr int A = kern::kDecodeKeyAlign;
        *chunk = ((range + st - 1) / st + A - 1) / A * A;
        st = static_cast<int>((range + *chunk - 1) / *chunk);
      }
      return st;
    };
    int64_t max_range = 0;
    for (const TileDesc &t : dtiles) max_range = std::max<int64_t>(max_range, t.kv_hi - t.kv_lo);
    const int s_cap = static_cast<int>(std::max<int64_t>(
        1, std::min<int64_t>(c_.dec_max_splits, max_range / min_keys)));
    int best_s = 1;
    int64_t best_cost = -1;
    for (int s = 1; s <= s_cap; ++s) {
      int64_t items_s = 0, ws_s = 0, longest = 0;
      int parts = 1;
      bool short_parts = false;
      for (const TileDesc &t : dtiles) {
        int64_t chunk = 0;
        const int st = split_of(t, s, &chunk);
        items_s += st;
        if (st > 1) ws_s += static_cast<int64_t>(st) * t.ntok * G;
        longest = std::max(longest, chunk);
        parts = std::max(parts, st);
        short_parts = short_parts || (st > 1 && chunk < kDecShortSplitKeys);
      }
      if (s > 1 && (n_items + items_s > c_.cap_items || ws_next + ws_s > c_.ws_rows)) break;
      const int64_t ctas = items_s * (o.num_kv_heads / c_.dec_heads);
      if (short_parts && ctas > c_.num_sms) continue;
      const int64_t waves = (ctas + c_.dec_slots - 1) / c_.dec_slots;
      const int64_t merge = parts > kDecMergeRoundParts ? c_.dec_merge_keys : 0;
      const int64_t cost = waves * (longest + c_.dec_cta_keys) + merge;
      if (best_cost < 0 || cost < best_cost) {
        best_cost = cost;
        best_s = s;
      }
    }
    if (n_items + static_cast<int64_t>(dtiles.size()) > c_.cap_items)
      return fail(VATTN_ERR_INTERNAL, "plan item capacity %lld exceeded", (long long)c_.cap_items);
    int32_t merge_slot = 0;
    for (const TileDesc &t : dtiles) {
      int64_t chunk = 0;
      const int s = split_of(t, best_s, &chunk);
      const int32_t rows = t.ntok * G;
      // Split tiles merge themselves in the kernel (the last CTA to finish
      // combines the partials): no merge pass for their tokens.
      const bool self_merge = s > 1 && s <= kern::kMaxSelfMergeParts;
      for (int i = 0; i < s; ++i) {
        kern::AttnItem &it = items[n_items++];
        it.req = t.req;
        it.q_row0 = 0;
        it.num_rows = rows;
        it.kv_begin = static_cast<int32_t>(t.kv_lo + i * chunk);
        it.kv_end = i + 1 == s ? t.kv_end : static_cast<int32_t>(t.kv_lo + (i + 1) * chunk);
        it.ws_base = s > 1 ? static_cast<int32_t>(ws_next) : -1;
        it.merge = self_merge ? (s | (i << 16)) : 0;
        it.merge_slot = self_merge ? merge_slot : 0;
        if (self_merge) {
          ws_next += rows;
        } else if (s > 1) {
          const int32_t tok_first = reqs[t.req].q_start;
          for (int32_t k = 0; k < t.ntok; ++k) {
            parts.push_back(PartRef{tok_first + k, static_cast<int32_t>(ws_next + k * G)});
          }
          ws_next += rows;
        }
      }
      if (self_merge) ++merge_slot;
    }
  }

  if (static_cast<int64_t>(parts.size()) > c_.cap_parts)
    return fail(VATTN_ERR_INTERNAL, "plan part capacity exceeded");
  // The merge pass runs when parts or padding rows exist, and always in a
  // captured graph; without it its tables are never read (a prefill or
  // decode batch without plan-level splits skips two passes over its tokens).
  const bool capture = mode == BuildMode::kCudagraphCapture;
  const bool merge_pass = capture || !parts.empty() || ntok_out > real;
  if (merge_pass) {
    // Counting sort of the parts by token.
    std::vector<int32_t> cnt(static_cast<size_t>(std::max<int64_t>(ntok_out, real)), 0);
    for (const PartRef &pr : parts) ++cnt[pr.tok];
    std::vector<int32_t> start(cnt.size() + 1, 0);
    for (size_t t = 0; t < cnt.size(); ++t) start[t + 1] = start[t] + cnt[t];
    {
      std::vector<int32_t> fillp(start.begin(), start.end() - 1);
      for (const PartRef &pr : parts) part_list[fillp[pr.tok]++] = pr.p;
    }
    for (int64_t t = 0; t < ntok_out; ++t)
      tok_parts[t] = t < real ? int2{start[t], cnt[t]} : int2{0, -1};
  }

  int32_t *hdr = plan->h<int32_t>(L.header);
  hdr[0] = static_cast<int32_t>(n_items);
  hdr[1] = static_cast<int32_t>(ntok_out);
  hdr[2] = static_cast<int32_t>(md.slot_mapping.size());
  hdr[3] = static_cast<int32_t>(n_gen);
  for (int i = 4; i < 8; ++i) hdr[i] = 0;

  // Block table: the blocks each request reads, ceil(seq_len / block_size)
  // (kernels never use an entry past them; the cascade pass reads row 0's
  // first P keys), not whole rows: a serving engine's table is as wide as
  // its longest possible request.  `width` is the widest such prefix.
  int32_t *bt = plan->h<int32_t>(L.block_table);
  const int64_t cols = std::min<int64_t>(md.block_table_cols, o.max_blocks_per_req);
  int64_t width = 0;
  for (int64_t r = 0; r < nreq; ++r) {
    const int64_t need = (static_cast<int64_t>(md.seq_lens[r]) + o.block_size - 1) / o.block_size;
    const int64_t used = std::min<int64_t>(cols, need);
    std::memcpy(bt + r * o.max_blocks_per_req, md.block_row(r), sizeof(int32_t) * used);
    width = std::max(width, used);
  }
  int64_t *sm = plan->h<int64_t>(L.slot_mapping);
  if (!md.slot_mapping.empty())
    std::memcpy(sm, md.slot_mapping.data(), sizeof(int64_t) * md.slot_mapping.size());

  // ---- upload (asynchronous on the build's stream)
  auto up = [&](size_t off, size_t bytes) -> vattn_status_t {
    if (bytes == 0) return VATTN_OK;
    return cuda_status(cudaMemcpyAsync(plan->dev + off, plan->host + off, bytes,
                                       cudaMemcpyHostToDevice, stream),
                       "plan upload");
  };
  // The header and the requests are adjacent: one copy (each copy is a
  // driver call of a microsecond or two on the host).
  VATTN_TRY(up(L.header, L.reqs + sizeof(kern::AttnReq) * (nreq + (cascade ? 1 : 0)) - L.header));
  VATTN_TRY(up(L.items, sizeof(kern::AttnItem) * n_items));
  VATTN_TRY(up(L.units, sizeof(int32_t) * n_gen * o.num_kv_heads));
  if (merge_pass) {
    VATTN_TRY(up(L.tok_parts, sizeof(int2) * ntok_out));
    VATTN_TRY(up(L.part_list, sizeof(int32_t) * parts.size()));
  }
  if (nreq > 0 && width > 0) {  // rows of `width` entries, one 2-D copy
    const size_t pitch = sizeof(int32_t) * static_cast<size_t>(o.max_blocks_per_req);
    VATTN_CUDA_TRY(cudaMemcpy2DAsync(plan->dev + L.block_table, pitch, plan->host + L.block_table, pitch,
                                     sizeof(int32_t) * static_cast<size_t>(width), static_cast<size_t>(nreq),
                                     cudaMemcpyHostToDevice, stream),
                   "plan upload");
  }
  VATTN_TRY(up(L.slot_mapping, sizeof(int64_t) * md.slot_mapping.size()));
  VATTN_CUDA_TRY(cudaEventRecord(slot_ev, stream), "plan upload");
  plan->slot = slot;

  // ---- grids (host-side launch shapes; the kernels read counts on device)
  auto clampi = [](int64_t v, int64_t lo, int64_t hi) {
    return static_cast<int32_t>(std::max(lo, std::min(hi, v)));
  };
  const int64_t attn_floor = capture ? (4LL * c_.num_sms + o.num_kv_heads - 1) / o.num_kv_heads : 1;
  // General items first: a captured graph launches both kernels with these
  // floors, each reading its item range on the device.
  const int64_t n_dec = n_items - n_gen;
  plan->grid_attn = clampi(std::max<int64_t>(n_gen, attn_floor), 1, 65535);
  const int64_t dec_floor =
      capture ? (2LL * c_.dec_slots * c_.dec_heads + o.num_kv_heads - 1) / o.num_kv_heads : 1;
  plan->grid_dec = clampi(std::max<int64_t>(n_dec, dec_floor), 1, 65535);
  const int64_t merge_units = ntok_out * o.num_heads;  // one CTA per (token, head)
  plan->grid_merge = clampi(capture ? 16LL * c_.num_sms : merge_units, 1, 16LL * c_.num_sms);
  plan->num_gen_items = static_cast<int32_t>(n_gen);
  plan->capture = capture;
  plan->needs_merge = merge_pass;
  plan->grid_cache = clampi(capture ? o.max_num_tokens : static_cast<int64_t>(md.slot_mapping.size()),
                            1, o.max_num_tokens);
  plan->num_items = static_cast<int32_t>(n_items);
  plan->cascade_active = cascade;
  plan->md = md;
  plan->common_prefix_len = P;
  plan->built = true;
  return VATTN_OK;
}

}  // namespace

CudaPlan::~CudaPlan() {
  DeviceGuard g(device);
  for (int i = 0; i < 2; ++i) {
    if (events[i]) (void)cudaEventSynchronize(static_cast<cudaEvent_t>(events[i]));
    if (events[i]) (void)cudaEventDestroy(static_cast<cudaEvent_t>(events[i]));
    if (host_buf[i]) (void)cudaFreeHost(host_buf[i]);
  }
  if (dev) (void)cudaFree(dev);
}

vattn_status_t cuda_create_builder(const vattn_builder_options_t &o,
                                   std::unique_ptr<BuilderImpl> *out) {
  VATTN_TRY(cuda_require_device(o.device_id, "argument 'opts': device_id"));
  const int32_t G = o.num_heads / o.num_kv_heads;
  if (G > kern::kAttnRowsPerTile)
    return fail(VATTN_ERR_UNSUPPORTED,
                "argument 'opts': %d query heads per KV head; the CUDA backend supports at most %d",
                G, kern::kAttnRowsPerTile);
  if (o.block_size % 16)
    return fail(VATTN_ERR_UNSUPPORTED,
                "argument 'opts': block_size %d is not a multiple of 16 (CUDA backend)", o.block_size);
  BuilderCfg c;
  c.o = o;
  c.group = G;
  c.tokens_per_tile = kern::attention_rows_per_tile(o.head_size) / G;
  c.num_sms = o.num_sms;
  if (c.num_sms == 0) {
    int n = 0;
    VATTN_CUDA_TRY(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, o.device_id),
                   "querying the SM count");
    c.num_sms = n > 0 ? n : 1;
  }
  c.max_splits = o.max_num_splits > 0 ? o.max_num_splits : kDefaultMaxSplits;
  // VATTN_CUDA_DECODE_KERNEL=0 routes decode requests to attention_kernel.
  const char *dk = std::getenv("VATTN_CUDA_DECODE_KERNEL");
  c.decode = G <= kern::kDecodeRows && o.block_size % kern::kDecodeKeyAlign == 0 &&
             !(dk && std::strcmp(dk, "0") == 0);
  // The decode CTA shape for the cache kind the caller named.
  c.dec_heads = kern::decode_kv_heads_per_cta(o.head_size, cache_kind_of(o.kv_cache_dtype), o.num_kv_heads, G);
  c.dec_rows = kern::kDecodeRows / c.dec_heads;
  // Resident decode CTAs (the cost model's wave size): from the occupancy
  // API when the decode kernel serves this head size.
  int32_t per_sm = o.head_size >= 256 ? 1 : 2;
  if (c.decode && kern::decode_supported(kern::kBF16, kern::kCacheAuto, o.head_size)) {
    int32_t n = 0;
    if (kern::decode_ctas_per_sm(o.head_size, c.dec_heads, &n) == cudaSuccess && n > 0) per_sm = n;
    (void)cudaGetLastError();  // a failed query leaves the default; clear it
  }
  c.dec_slots = c.num_sms * per_sm;
  c.dec_max_splits = o.max_num_splits > 0 ? o.max_num_splits : kDecDefaultMaxSplits;
  // Two-head CTAs split a request half as far by default: each part holds
  // twice the bytes per key, and a merge of 64 parts costs more than it
  // gains (H100, fp8 D64 eager us, cap 64 / 32 / 16, one-head plan:
  // 1x32768 29.4-29.7 / 27.7-27.8 / 38.7-38.9, 27.6-27.7; 8x8192 38.3-38.4
  // / 38.3-38.5 / 38.3, 42.5-42.9; 4x8192 26.9 / 27.0-27.1 / 26.0, 26.4-26.5).
  if (c.dec_heads == 2 && o.max_num_splits <= 0) c.dec_max_splits = kDecDefaultMaxSplits / 2;
  if (const char *ck = std::getenv("VATTN_CUDA_DECODE_CTA_KEYS")) c.dec_cta_keys = std::max(0L, std::atol(ck));
  if (const char *mk = std::getenv("VATTN_CUDA_DECODE_MERGE_KEYS")) c.dec_merge_keys = std::max(0L, std::atol(mk));
  const int64_t tiles_bound = o.max_num_tokens / c.tokens_per_tile + o.max_num_reqs + 2;
  c.cap_items = 2 * tiles_bound + 4LL * c.num_sms + 2LL * c.dec_slots + 64;
  c.ws_rows = std::max<int64_t>({static_cast<int64_t>(o.max_num_reqs) * c.max_splits,
                                 2 * std::min<int64_t>(o.max_num_tokens, 4096),
                                 c.decode ? 2LL * c.dec_slots : 0}) * G;
  c.cap_parts = c.ws_rows;
  *out = std::make_unique<CudaBuilder>(c);
  return VATTN_OK;
}

}  // namespace vattn
