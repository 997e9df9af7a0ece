// softmax.cuh -- the score transform, masks and online-softmax step shared by
// attention_kernel (attention.cuh), attention_sm90_kernel (attention_sm90.cuh)
// and decode_kernel (decode.cuh).
//
// Fragment layout (mma.m16n8k16 accumulators): a thread of a warp holds, for
// one 16-row m-tile, rows gq and gq + 8 (gq = lane / 4) and, per 8-key score
// fragment f, keys k0 + 8f + 2tq and + 1 (tq = lane % 4): s[f][e] is row
// e / 2, key k0 + 8f + 2tq + (e & 1).  O accumulators o[df][e] use the same
// row mapping.
//
// Score pipeline (masks: see attention.cuh's header):
//   x = scale * k_scale * (q . k); soft-cap: x = cap * tanh(x / cap);
//   ALiBi: x -= slope * |j - qpos| (= slope * (j - qpos) for causal keys);
//   masked keys -> -inf; logits are kept in base 2 (x * log2 e).  On the
//   plain path (no soft-cap / ALiBi) the scores stay raw until the exp2,
//   whose FFMA applies scale * log2 e and subtracts the row reference.
// The running state per row is (m = a base-2 reference at most
// kLazyRescaleLog2 below the row's maximum logit, l = this thread's partial
// sum of 2^(x - m)); l is reduced over the quad once, at the end.
#pragma once

#include "common.cuh"

namespace vattn {
namespace kern {

// 2^x with the SFU's approximate exp2 (flush-to-zero: results below 2^-126
// become 0, which only drops probabilities already negligible next to the
// row maximum's 1).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Lazy rescaling: the running maximum m of a row is only raised (and O, l
// rescaled) when some row of the warp sees a logit more than this many
// base-2 units above its m; otherwise P = 2^(x - m) <= 2^8 stays well inside
// fp32 / bf16 range and the 2 x D/8 x 4 multiplies of the rescale are skipped.
constexpr float kLazyRescaleLog2 = 8.f;

// Per-item constants of the score transform (uniform over the CTA).
struct ScoreCtx {
  float scale;       // scale * k_scale
  float scale_log2;  // scale * k_scale * log2 e (plain path)
  float softcap;     // > 0: on
  float inv_softcap;
  const float *alibi;
  int kend;          // keys >= kend are masked
  int window_left, window_right;
  bool causal;
  __device__ bool plain() const { return softcap <= 0.f && alibi == nullptr; }
};

// End of the keys a row at query position q may see: kend, capped by
// causality (q + 1) and the right window (q + window_right + 1).
__device__ __forceinline__ int visible_end(const ScoreCtx &c, int q) {
  int hi = c.kend;
  if (c.causal && hi > q + 1) hi = q + 1;
  if (c.window_right >= 0 && c.window_right < hi - q) hi = q + c.window_right + 1;
  return hi;
}

// The kernel-wide fields of a ScoreCtx (causal and kend are per item).
__device__ __forceinline__ ScoreCtx score_ctx_of(const AttnParams &p) {
  ScoreCtx sc;
  sc.scale = p.scale * p.k_scale;
  sc.scale_log2 = sc.scale * kLog2e;
  sc.softcap = p.softcap;
  sc.inv_softcap = p.softcap > 0.f ? 1.f / p.softcap : 0.f;
  sc.alibi = p.alibi;
  sc.kend = 0;
  sc.window_left = p.window_left;
  sc.window_right = p.window_right;
  sc.causal = false;
  return sc;
}

// This thread's two rows of one m-tile.
struct RowCtx {
  int qpos[2];
  float slope[2];
  bool valid[2];
};

// The three stages below are separate loops (each inlined once per call
// site) so that a kernel holds one copy of the rarely used soft-cap / ALiBi
// code and of the masks, instead of one per combination of branches.

// Stage 1: raw Q.K products of keys k0 + 8f + 2tq + (e & 1) -> base-2
// logits (soft-cap and ALiBi applied when on; no masks).  Returns the factor
// still to apply: the plain path (no soft-cap / ALiBi, positive scale)
// leaves s raw and returns scale * log2 e, which softmax_update folds into
// its exp2 argument (one FFMA instead of a multiply and a subtraction; the
// row maximum of raw scores times a positive factor is the maximum logit).
template <int NF>
__device__ __forceinline__ float scores_to_logits(float (&s)[NF][4], const ScoreCtx &c,
                                                  const RowCtx &r, int k0, int tq) {
  if (c.plain()) {
    if (c.scale_log2 > 0.f) return c.scale_log2;
#pragma unroll
    for (int f = 0; f < NF; ++f)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[f][e] *= c.scale_log2;
    return 1.f;
  }
#pragma unroll
  for (int f = 0; f < NF; ++f) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = e >> 1;
      const int j = k0 + f * 8 + 2 * tq + (e & 1);
      float x = s[f][e] * c.scale;
      if (c.softcap > 0.f) x = c.softcap * tanhf(x * c.inv_softcap);
      x -= r.slope[i] * fabsf(static_cast<float>(j - r.qpos[i]));
      s[f][e] = x * kLog2e;
    }
  }
  return 1.f;
}

// Stage 2: logits of invisible (row, key) pairs -> -inf.  A row sees the
// keys [lo, hi): lo from the left window, hi from kend, causality and the
// right window (empty for rows past the item), so each score costs one
// unsigned compare: (j - lo) < (hi - lo).
template <int NF>
__device__ __forceinline__ void apply_masks(float (&s)[NF][4], const ScoreCtx &c, const RowCtx &r,
                                            int k0, int tq) {
  int base[2];
  uint32_t span[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int q = r.qpos[i];
    const int hi = visible_end(c, q);
    int lo = 0;
    if (c.window_left >= 0 && q - c.window_left > lo) lo = q - c.window_left;
    span[i] = r.valid[i] && hi > lo ? static_cast<uint32_t>(hi - lo) : 0u;
    base[i] = k0 + 2 * tq - lo;  // key k0 + 2 tq, relative to lo
  }
#pragma unroll
  for (int f = 0; f < NF; ++f)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = e >> 1;
      const bool vis = static_cast<uint32_t>(base[i] + f * 8 + (e & 1)) < span[i];
      s[f][e] = vis ? s[f][e] : -INFINITY;
    }
}

// Stage 3: folds a tile of base-2 logits into the running state: s becomes
// P = 2^(x - m) (unnormalised probabilities, ready to be packed as the A
// operand of P V) and m, l are updated.  Returns true (warp-uniform) when
// the reference m grew (lazy rescaling above), in which case the caller
// must multiply its O rows by alpha (rescale_rows) -- separately, so a
// kernel whose P V product is still in flight can rescale after it lands.
template <int NF>
__device__ __forceinline__ bool softmax_update(float (&s)[NF][4], float (&m)[2], float (&l)[2],
                                               float (&alpha)[2], float pre) {
  // Row maxima as a tree over the fragments (short dependency chains: the
  // kernels run few warps per scheduler, so latency, not issue, bounds them).
  float mx[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float t[NF];
#pragma unroll
    for (int f = 0; f < NF; ++f) t[f] = fmaxf(s[f][2 * i], s[f][2 * i + 1]);
#pragma unroll
    for (int w = 1; w < NF; w *= 2)
#pragma unroll
      for (int f = 0; f + w < NF; f += 2 * w) t[f] = fmaxf(t[f], t[f + w]);
    mx[i] = t[0];
  }
  bool grow = false;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    mx[i] *= pre;  // pre > 0: the maximum logit (-inf stays -inf)
    // m == -inf (nothing visible yet) and mx finite counts as growth.
    grow = grow || mx[i] > m[i] + kLazyRescaleLog2;
  }
  const bool rescale = __any_sync(0xffffffffu, grow);  // warp-uniform
  if (rescale) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float mnew = fmaxf(m[i], mx[i]);
      // mnew == -inf: nothing visible yet; keep everything at zero.
      alpha[i] = mnew == -INFINITY ? 1.f : fast_exp2(m[i] - mnew);
      m[i] = mnew;
      l[i] *= alpha[i];
    }
  }
  // m == -inf: every logit of the row so far is -inf too (P = 0).
  const float nm[2] = {m[0] == -INFINITY ? 0.f : -m[0], m[1] == -INFINITY ? 0.f : -m[1]};
#pragma unroll
  for (int f = 0; f < NF; ++f)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[f][e] = fast_exp2(fmaf(s[f][e], pre, nm[e >> 1]));
  // Row sums as a tree too.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float t[NF];
#pragma unroll
    for (int f = 0; f < NF; ++f) t[f] = s[f][2 * i] + s[f][2 * i + 1];
#pragma unroll
    for (int w = 1; w < NF; w *= 2)
#pragma unroll
      for (int f = 0; f + w < NF; f += 2 * w) t[f] += t[f + w];
    l[i] += t[0];
  }
  return rescale;
}

// O rows (gq, gq + 8) *= alpha.
template <int DF>
__device__ __forceinline__ void rescale_rows(float (&o)[DF][4], const float (&alpha)[2]) {
#pragma unroll
  for (int f = 0; f < DF; ++f) {
    o[f][0] *= alpha[0];
    o[f][1] *= alpha[0];
    o[f][2] *= alpha[1];
    o[f][3] *= alpha[1];
  }
}

// softmax_update + rescale_rows, for kernels whose O is up to date.
template <int NF, int DF>
__device__ __forceinline__ void online_softmax(float (&s)[NF][4], float (&o)[DF][4], float (&m)[2],
                                               float (&l)[2], float pre) {
  float alpha[2];
  if (softmax_update(s, m, l, alpha, pre)) rescale_rows(o, alpha);
}

}  // namespace kern
}  // namespace vattn
