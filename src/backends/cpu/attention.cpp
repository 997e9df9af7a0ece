// attention.cpp -- see attention.h.
//
// Loop structure of attend_tile: keys are taken in chunks of kKeyChunk.  A
// chunk's K rows are converted to float32 once and shared by every query row
// of the tile (all query heads of the KV head: GQA rows reuse the same K/V
// bytes, which is what makes decode memory-bound rather than load-bound);
// then the chunk's logits update each row's running max / sum, and the V
// rows are converted and accumulated with the row's probabilities.  Inner
// loops run over head_size (a multiple of 8), contiguous in the scratch
// buffers, so the compiler vectorizes them.
#include "backends/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vattn {
namespace cpu {
namespace {

constexpr int64_t kKeyChunk = 32;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Dot product of two float rows of length D (a multiple of 8).  Eight
// partial sums let the compiler keep them in vector lanes without reordering
// float additions itself.
inline float dot(const float *__restrict a, const float *__restrict b, int64_t D) {
  float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t d = 0; d < D; d += 8)
    for (int u = 0; u < 8; ++u) p[u] += a[d + u] * b[d + u];
  return ((p[0] + p[4]) + (p[1] + p[5])) + ((p[2] + p[6]) + (p[3] + p[7]));
}

inline void axpy(float a, const float *__restrict x, float *__restrict y, int64_t D) {
  for (int64_t d = 0; d < D; ++d) y[d] += a * x[d];
}

inline void scale_row(float a, float *__restrict y, int64_t D) {
  for (int64_t d = 0; d < D; ++d) y[d] *= a;
}

template <class T>
void grow(std::vector<T> &v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

Scratch &Scratch::local() {
  thread_local Scratch s;
  return s;
}

void attend_tile(const KvView &kv, const MaskRule &mask, const TileQuery &tq, int64_t D,
                 Scratch &scr, float *acc, float *m, float *l) {
  const int64_t nt = tq.num_tokens, qpkv = tq.qpkv, nq = nt * qpkv;
  if (nq == 0) return;

  // Visible key range [lo_t, hi_t] (inclusive) per token; the tile spans
  // their union.
  thread_local std::vector<int64_t> lo, hi;
  thread_local std::vector<unsigned char> active;
  grow(lo, static_cast<size_t>(nt));
  grow(hi, static_cast<size_t>(nt));
  grow(active, static_cast<size_t>(nq));
  int64_t jmin = std::numeric_limits<int64_t>::max(), jmax = -1;
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t pos = tq.pos0 + t;
    int64_t a = mask.kv_begin, b = mask.kv_end - 1;
    if (mask.causal) b = std::min(b, pos);
    if (mask.win_left >= 0) a = std::max(a, pos - mask.win_left);
    if (mask.win_right >= 0) b = std::min(b, pos + mask.win_right);
    lo[t] = a;
    hi[t] = b;
    if (a <= b) {
      jmin = std::min(jmin, a);
      jmax = std::max(jmax, b);
    }
  }
  if (jmax < jmin) return;  // no token sees any key

  grow(scr.k, static_cast<size_t>(kKeyChunk * D));
  grow(scr.v, static_cast<size_t>(kKeyChunk * D));
  grow(scr.s, static_cast<size_t>(nq * kKeyChunk));
  float *K = scr.k.data(), *V = scr.v.data(), *S = scr.s.data();
  const float cap = tq.soft_cap;

  for (int64_t j0 = jmin; j0 <= jmax; j0 += kKeyChunk) {
    const int64_t j1 = std::min(j0 + kKeyChunk, jmax + 1), nc = j1 - j0;
    for (int64_t c = 0; c < nc; ++c)
      load_row(kv.addr(kv.k, j0 + c), kv.k.s_d, D, kv.kind, kv.k.scale, K + c * D);

    bool any = false;
    for (int64_t t = 0; t < nt; ++t) {
      const bool sees = hi[t] >= j0 && lo[t] < j1;
      const int64_t pos = tq.pos0 + t;
      for (int64_t hq = 0; hq < qpkv; ++hq) {
        const int64_t r = t * qpkv + hq;
        active[r] = 0;
        if (!sees) continue;
        const float *qr = tq.q + r * D;
        float *sr = S + r * kKeyChunk;
        float cmax = kNegInf;
        for (int64_t c = 0; c < nc; ++c) {
          const int64_t j = j0 + c;
          if (j < lo[t] || j > hi[t]) {
            sr[c] = kNegInf;
            continue;
          }
          float x = dot(qr, K + c * D, D);
          if (cap > 0.f) x = cap * std::tanh(x / cap);
          if (tq.alibi) x -= tq.alibi[hq] * std::fabs(static_cast<float>(pos - j));
          sr[c] = x;
          cmax = std::max(cmax, x);
        }
        if (cmax == kNegInf) continue;
        // Online softmax: rescale the running state to the new max.
        const float mnew = std::max(m[r], cmax);
        if (mnew > m[r]) {
          const float alpha = m[r] == kNegInf ? 0.f : std::exp(m[r] - mnew);
          scale_row(alpha, acc + r * D, D);
          l[r] *= alpha;
          m[r] = mnew;
        }
        float sum = 0.f;
        for (int64_t c = 0; c < nc; ++c) {
          const float p = sr[c] == kNegInf ? 0.f : std::exp(sr[c] - mnew);
          sr[c] = p;
          sum += p;
        }
        l[r] += sum;
        active[r] = 1;
        any = true;
      }
    }
    if (!any) continue;
    for (int64_t c = 0; c < nc; ++c)
      load_row(kv.addr(kv.v, j0 + c), kv.v.s_d, D, kv.kind, kv.v.scale, V + c * D);
    for (int64_t r = 0; r < nq; ++r) {
      if (!active[r]) continue;
      const float *pr = S + r * kKeyChunk;
      float *ar = acc + r * D;
      for (int64_t c = 0; c < nc; ++c)
        if (pr[c] != 0.f) axpy(pr[c], V + c * D, ar, D);
    }
  }
}

float finalize_row(const float *acc, float m, float l, bool has_sink, float sink, int64_t D,
                   float *o) {
  const bool sink_on = has_sink && sink != kNegInf;
  if (sink_on && std::isinf(sink)) {  // +inf sink takes all the mass
    for (int64_t d = 0; d < D; ++d) o[d] = 0.f;
    return sink;
  }
  if (m == kNegInf) {  // no visible key
    for (int64_t d = 0; d < D; ++d) o[d] = 0.f;
    return sink_on ? sink : kNegInf;
  }
  float M = m, total = l;
  if (sink_on) {
    M = std::max(m, sink);
    total = l * std::exp(m - M) + std::exp(sink - M);
  }
  const float f = (sink_on ? std::exp(m - M) : 1.f) / total;
  for (int64_t d = 0; d < D; ++d) o[d] = acc[d] * f;
  return M + std::log(total);
}

float merge_row(const float *prefix, float prefix_lse, const float *suffix, float suffix_lse,
                int64_t D, float *out) {
  const float inf = std::numeric_limits<float>::infinity();
  const float p = prefix_lse == inf ? kNegInf : prefix_lse;
  const float s = suffix_lse == inf ? kNegInf : suffix_lse;
  const float mx = std::max(p, s);
  if (mx == kNegInf) {  // both empty: keep the prefix (never 0/0)
    if (out != prefix)
      for (int64_t d = 0; d < D; ++d) out[d] = prefix[d];
    return kNegInf;
  }
  const float wp = std::exp(p - mx), ws = std::exp(s - mx);
  const float inv = 1.f / (wp + ws);
  const float a = wp * inv, b = ws * inv;
  for (int64_t d = 0; d < D; ++d) out[d] = prefix[d] * a + suffix[d] * b;
  return std::log(wp + ws) + mx;
}

}  // namespace cpu
}  // namespace vattn
