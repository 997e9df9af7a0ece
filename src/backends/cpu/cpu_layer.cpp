// cpu_layer.cpp -- the CPU layer forward: validate, write the new K/V into
// the cache, then attend every (tile, KV head) of the plan's schedule on the
// plan's thread pool.
//
// Semantics per attention type (attention.h has the logit and mask rules):
//  DECODER          keys [0, seq_len) of the request through the paged cache;
//                   causal unless the metadata says causal = 0.
//  ENCODER_DECODER  keys [0, seq_len) (the encoder length) through the cache,
//                   never causal.
//  ENCODER,         keys are the request's own rows of key/value
//  ENCODER_ONLY     (query_start_loc ranges), never causal; no cache.
// Sliding window w (FlashAttention's window (w-1, right)): a key at most w-1
// positions before the query, and after it at most w-1 (ENCODER_ONLY) or 0
// (every other type).
// Cascade (plan common_prefix_len P > 0): pass 1 attends every query to keys
// [0, P) through request 0's block-table row, non-causal, with the sink; pass
// 2 to the request's own keys [P, seq_len), causal; the two (output, LSE)
// pairs are merged as merge_attn_states does.
#include "backends/cpu/cpu_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/attention.h"
#include "backends/cpu/cache_write.h"
#include "backends/cpu/cpu_plan.h"
#include "backends/forward_check.h"
#include "core/error.h"
#include "core/tensor.h"

namespace vattn {
namespace cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A [T, H, D] tensor as base + element strides.
struct Rows3 {
  char *base = nullptr;
  int64_t s0 = 0, s1 = 0, s2 = 0;
  Elem kind = Elem::F32;
  int64_t es = 4;
  explicit Rows3(const DLTensor *t) {
    base = tensor_data(t);
    s0 = tensor_stride(t, 0);
    s1 = tensor_stride(t, 1);
    s2 = tensor_stride(t, 2);
    kind = elem_of_dl(t->dtype);
    es = static_cast<int64_t>(elem_bytes(kind));
  }
  char *at(int64_t t, int64_t h) const { return base + (t * s0 + h * s1) * es; }
};

// The LSE tensor [H, >= T] float32.
struct Lse {
  float *base = nullptr;
  int64_t s0 = 0, s1 = 0;
  explicit Lse(const DLTensor *t) {
    if (!t) return;
    base = reinterpret_cast<float *>(tensor_data(t));
    s0 = tensor_stride(t, 0);
    s1 = tensor_stride(t, 1);
  }
  void set(int64_t h, int64_t t, float v) const {
    if (base) base[h * s0 + t * s1] = v;
  }
};

struct Ctx {
  const LayerParams *p;
  const CpuPlan *plan;
  const ForwardPlanSummary *sum;
  Rows3 q, out;
  Lse lse;
  // K/V source: the paged cache, or the key/value rows (encoder types).
  // Bases are at head 0; s_head is the element stride between KV heads.
  KvSide k, v;
  int64_t k_s_head = 0, v_s_head = 0;
  Elem kv_kind = Elem::F32;
  int64_t win_left = -1, win_right = -1;
};

// Keys per step when one item covers several KV heads: every head of the
// item advances through the same 64 keys before the next 64, so the item
// sweeps whole cache blocks (all heads of a token are adjacent in NHD).
constexpr int64_t kHeadSweepKeys = 64;

// One work item: a tile of query tokens for KV heads [g0, g0 + ng).
void run_item(const Ctx &c, const Tile &tile, int64_t g0, int64_t ng) {
  const LayerParams &p = *c.p;
  const Metadata &md = c.plan->md;
  const int64_t D = p.head_size, qpkv = p.queries_per_kv();
  const int64_t r = tile.req, nt = tile.tok_count, nq = nt * qpkv, rows = ng * nq;
  const int64_t q_len = md.query_len(r);
  const int64_t row0 = md.query_start_loc[r] + tile.tok_begin;  // first query row
  const int64_t kv_len = c.sum->dense_kv ? q_len : md.seq_lens[r];
  const bool cascade = c.sum->cascade;

  Scratch &scr = Scratch::local();
  auto grow = [](std::vector<float> &v, int64_t n) {
    if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  };
  grow(scr.q, rows * D);
  grow(scr.acc, rows * D);
  grow(scr.m, rows);
  grow(scr.l, rows);
  grow(scr.o1, D);
  if (cascade) {
    grow(scr.acc2, rows * D);
    grow(scr.m2, rows);
    grow(scr.l2, rows);
    grow(scr.o2, D);
  }

  // Queries, pre-scaled: head gi's rows start at gi * nq.
  for (int64_t gi = 0; gi < ng; ++gi)
    for (int64_t t = 0; t < nt; ++t)
      for (int64_t hq = 0; hq < qpkv; ++hq)
        load_row(c.q.at(row0 + t, (g0 + gi) * qpkv + hq), c.q.s2, D, c.q.kind, p.scale,
                 scr.q.data() + (gi * nq + t * qpkv + hq) * D);

  const int64_t es = static_cast<int64_t>(elem_bytes(c.kv_kind));
  auto view = [&](int64_t g, const int32_t *block_row) {
    KvView kv;
    kv.kind = c.kv_kind;
    kv.k = c.k;
    kv.v = c.v;
    kv.k.base += g * c.k_s_head * es;
    kv.v.base += g * c.v_s_head * es;
    if (c.sum->dense_kv) {
      // The request's own rows start at its first query row.
      kv.k.base += md.query_start_loc[r] * c.k.s_tok * es;
      kv.v.base += md.query_start_loc[r] * c.v.s_tok * es;
    } else {
      kv.block_row = block_row;
      kv.block_size = c.plan->block_size;
    }
    return kv;
  };
  auto query = [&](int64_t gi) {
    TileQuery tq;
    tq.q = scr.q.data() + gi * nq * D;
    tq.num_tokens = nt;
    tq.qpkv = static_cast<int32_t>(qpkv);
    tq.pos0 = kv_len - q_len + tile.tok_begin;
    tq.alibi = p.alibi_slopes.empty() ? nullptr : p.alibi_slopes.data() + (g0 + gi) * qpkv;
    tq.soft_cap = p.logits_soft_cap;
    return tq;
  };
  // One attention pass over keys [mr.kv_begin, mr.kv_end) into (acc, m, l).
  auto pass = [&](const MaskRule &mr, const int32_t *block_row, float *acc, float *m, float *l) {
    for (int64_t i = 0; i < rows * D; ++i) acc[i] = 0.f;
    for (int64_t i = 0; i < rows; ++i) {
      m[i] = kNegInf;
      l[i] = 0.f;
    }
    const int64_t step = ng > 1 ? kHeadSweepKeys : std::max<int64_t>(1, mr.kv_end - mr.kv_begin);
    for (int64_t a = mr.kv_begin; a < mr.kv_end; a += step) {
      MaskRule sub = mr;
      sub.kv_begin = a;
      sub.kv_end = std::min(mr.kv_end, a + step);
      for (int64_t gi = 0; gi < ng; ++gi)
        attend_tile(view(g0 + gi, block_row), sub, query(gi), D, scr, acc + gi * nq * D,
                    m + gi * nq, l + gi * nq);
    }
  };

  const bool has_sink = !p.sinks.empty();
  auto head_of = [&](int64_t row) { return (g0 + row / nq) * qpkv + (row % nq) % qpkv; };
  auto emit = [&](int64_t row, const float *o, float lse_v) {
    const int64_t t = (row % nq) / qpkv, h = head_of(row);
    store_row(o, D, c.out.kind, 1.f, c.out.at(row0 + t, h), c.out.s2);
    c.lse.set(h, row0 + t, lse_v);
  };

  if (!cascade) {
    MaskRule mr;
    mr.kv_begin = 0;
    mr.kv_end = kv_len;
    mr.causal = c.sum->causal;
    mr.win_left = c.win_left;
    mr.win_right = c.win_right;
    pass(mr, md.block_row(r), scr.acc.data(), scr.m.data(), scr.l.data());
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t h = head_of(row);
      const float lse_v = finalize_row(scr.acc.data() + row * D, scr.m[row], scr.l[row], has_sink,
                                       has_sink ? p.sinks[h] : 0.f, D, scr.o1.data());
      emit(row, scr.o1.data(), lse_v);
    }
    return;
  }

  // Cascade: prefix pass (request 0's row, non-causal, sink) then suffix pass.
  MaskRule pre;
  pre.kv_begin = 0;
  pre.kv_end = c.plan->common_prefix_len;
  pre.causal = false;
  pass(pre, md.block_row(0), scr.acc.data(), scr.m.data(), scr.l.data());
  MaskRule suf;
  suf.kv_begin = c.plan->common_prefix_len;
  suf.kv_end = kv_len;
  suf.causal = true;
  pass(suf, md.block_row(r), scr.acc2.data(), scr.m2.data(), scr.l2.data());
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t h = head_of(row);
    const float lse1 = finalize_row(scr.acc.data() + row * D, scr.m[row], scr.l[row], has_sink,
                                    has_sink ? p.sinks[h] : 0.f, D, scr.o1.data());
    const float lse2 = finalize_row(scr.acc2.data() + row * D, scr.m2[row], scr.l2[row], false,
                                    0.f, D, scr.o2.data());
    const float lse_v = merge_row(scr.o1.data(), lse1, scr.o2.data(), lse2, D, scr.o1.data());
    emit(row, scr.o1.data(), lse_v);
  }
}

}  // namespace

vattn_status_t CpuLayer::forward(const PlanImpl &plan_base, const vattn_forward_args_t &a) const {
  const CpuPlan *plan = dynamic_cast<const CpuPlan *>(&plan_base);
  if (!plan) return fail(VATTN_ERR_INVALID_ARGUMENT, "argument 'plan' was not built by a CPU builder");
  const Metadata &md = plan->md;
  ForwardPlanSummary sum;
  DeviceReq dev;
  dev.device_type = kDLCPU;
  VATTN_TRY(check_forward(p_, md, plan->block_size, plan->common_prefix_len, a, dev, &sum));

  const ThreadPool &pool = *plan->pool;
  if (sum.writes_cache)
    write_kv_cache(a.key, a.value, a.kv_cache, md.slot_mapping.data(), sum.num_slots,
                   elem_of(cache_storage_dtype(p_)), a.k_scale, a.v_scale, pool);

  Ctx c{&p_, plan, &sum, Rows3(a.query), Rows3(a.output), Lse(a.output_lse), {}, {}};
  if (sum.dense_kv) {
    const Rows3 k(a.key), v(a.value);
    c.k = KvSide{k.base, 0, k.s0, k.s2, 1.f};
    c.v = KvSide{v.base, 0, v.s0, v.s2, 1.f};
    c.k_s_head = k.s1;
    c.v_s_head = v.s1;
    c.kv_kind = k.kind;
  } else {
    // Logical cache (2, num_blocks, block_size, H, D): K at index 0, V at 1.
    const DLTensor *kc = a.kv_cache;
    const int64_t es = static_cast<int64_t>(dl_dtype_bytes(kc->dtype));
    const bool fp8 = p_.kv_cache_dtype != VATTN_KV_CACHE_DTYPE_AUTO;
    const int64_t s0 = tensor_stride(kc, 0), s1 = tensor_stride(kc, 1), s2 = tensor_stride(kc, 2),
                  s3 = tensor_stride(kc, 3), s4 = tensor_stride(kc, 4);
    c.k = KvSide{tensor_data(kc), s1, s2, s4, fp8 ? a.k_scale : 1.f};
    c.v = KvSide{tensor_data(kc) + s0 * es, s1, s2, s4, fp8 ? a.v_scale : 1.f};
    c.k_s_head = c.v_s_head = s3;
    c.kv_kind = elem_of(cache_storage_dtype(p_));
  }
  if (p_.sliding_window > 0) {
    c.win_left = p_.sliding_window - 1;
    c.win_right = p_.attn_type == VATTN_ATTN_ENCODER_ONLY ? p_.sliding_window - 1 : 0;
  }

  // Items: tiles x groups of KV heads.  Whole-request items read the cache
  // most sequentially; groups are halved until there are about four items
  // per thread (a single long decode still spreads over every thread).
  const int64_t kvh = p_.num_kv_heads;
  const std::vector<Tile> &tiles = plan->tiles;
  const int64_t ntiles = static_cast<int64_t>(tiles.size());
  int64_t per = kvh;
  while (per > 1 && per % 2 == 0 && ntiles * (kvh / per) < 4 * pool.size()) per /= 2;
  const int64_t groups = kvh / per;
  pool.parallel_for(ntiles * groups, [&](int64_t i) {
    run_item(c, tiles[i / groups], (i % groups) * per, per);
  });

  // Padding rows [real, num_actual_tokens): zeros and -inf LSE.
  for (int64_t t = sum.num_real_tokens; t < sum.num_tokens; ++t)
    for (int64_t h = 0; h < p_.num_heads; ++h) {
      char *row = c.out.at(t, h);
      for (int64_t d = 0; d < p_.head_size; ++d)
        std::memset(row + d * c.out.s2 * c.out.es, 0, static_cast<size_t>(c.out.es));
      c.lse.set(h, t, kNegInf);
    }
  return VATTN_OK;
}

}  // namespace cpu
}  // namespace vattn
