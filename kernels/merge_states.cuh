// merge_states.cuh -- merge_attn_states: out = (wp * P + ws * S) / (wp + ws)
// with wp = exp(lse_p - m), ws = exp(lse_s - m), m = max(lse_p, lse_s);
// out_lse = m + log(wp + ws).  +inf LSE counts as -inf; both -inf copies
// the prefix row and writes -inf.  One warp per (token, head); lanes stride
// the head dim (contiguous), so each access is coalesced.
#pragma once

#include "common.cuh"

namespace vattn {
namespace kern {

template <class T>
__global__ void merge_states_kernel(const MergeStatesParams p) {
  const int64_t total = p.num_tokens * p.num_heads;
  const int lane = threadIdx.x & 31;
  const int64_t wpb = blockDim.x >> 5;
  for (int64_t u = blockIdx.x * wpb + (threadIdx.x >> 5); u < total; u += gridDim.x * wpb) {
    const int64_t t = u / p.num_heads, h = u - t * p.num_heads;
    float lp = p.pre_lse[h * p.pl_sh + t * p.pl_st];
    float ls = p.suf_lse[h * p.sl_sh + t * p.sl_st];
    if (lp == INFINITY) lp = -INFINITY;
    if (ls == INFINITY) ls = -INFINITY;
    const float m = fmaxf(lp, ls);
    const T *pr = static_cast<const T *>(p.pre) + t * p.p_st + h * p.p_sh;
    const T *sr = static_cast<const T *>(p.suf) + t * p.s_st + h * p.s_sh;
    T *o = static_cast<T *>(p.out) + t * p.o_st + h * p.o_sh;
    float a = 1.f, b = 0.f, lse = -INFINITY;
    if (m != -INFINITY) {
      const float wp = expf(lp - m), ws = expf(ls - m);
      const float inv = 1.f / (wp + ws);
      a = wp * inv;
      b = ws * inv;
      lse = logf(wp + ws) + m;
    }
    for (int d = lane; d < p.head_size; d += 32) {
      const float x = Elem<T>::to_f(pr[d]);
      const float y = Elem<T>::to_f(sr[d]);
      o[d] = m == -INFINITY ? pr[d] : Elem<T>::from_f(x * a + y * b);
    }
    if (p.out_lse && lane == 0) p.out_lse[h * p.ol_sh + t * p.ol_st] = lse;
  }
}

}  // namespace kern
}  // namespace vattn
