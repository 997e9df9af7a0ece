// attention.h -- the CPU attention kernel: one tile of query rows (tokens x
// the query heads of one KV head) against the keys of one sequence, with an
// online (streaming) softmax in float32.
//
// Logit of query row (token t, head h) for key j, in this order:
//   s = scale * <q, k_j>                 (q pre-multiplied by scale)
//   s = cap * tanh(s / cap)              (soft-cap, when cap > 0)
//   s = s - slope_h * |pos_t - j|        (ALiBi; = slope * (j - pos) for causal keys)
// where pos_t is the query's absolute position aligned bottom-right:
// pos_t = kv_len - q_len + t (= context_len + t for decoder attention).
// Key j is visible iff kv_begin <= j < kv_end and
//   (!causal || j <= pos) and (win_left < 0 || pos - j <= win_left) and
//   (win_right < 0 || j - pos <= win_right).
// A sink logit (per head) joins only the softmax denominator.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/elem.h"

namespace vattn {
namespace cpu {

// Keys or values of one KV head of one sequence: element (j, d) lives at
//   paged: base + (block_row[j / block_size] * s_blk + (j % block_size) * s_tok + d * s_d) * esize
//   dense: base + (j * s_tok + d * s_d) * esize
struct KvSide {
  const char *base = nullptr;
  int64_t s_blk = 0, s_tok = 0, s_d = 1;  // element strides
  float scale = 1.f;                      // dequantization (fp8), else 1
};

struct KvView {
  KvSide k, v;
  const int32_t *block_row = nullptr;  // paged: block ids; nullptr: dense rows
  int64_t block_size = 1;
  Elem kind = Elem::F32;

  const char *addr(const KvSide &s, int64_t j) const {
    const int64_t es = static_cast<int64_t>(elem_bytes(kind));
    if (!block_row) return s.base + j * s.s_tok * es;
    return s.base + (static_cast<int64_t>(block_row[j / block_size]) * s.s_blk +
                     (j % block_size) * s.s_tok) * es;
  }
};

struct MaskRule {
  int64_t kv_begin = 0, kv_end = 0;
  bool causal = false;
  int64_t win_left = -1, win_right = -1;  // -1 = unbounded
};

// One tile: nq = num_tokens * qpkv rows, row r = (token r / qpkv, head
// offset r % qpkv).
struct TileQuery {
  const float *q = nullptr;      // [nq][D], already multiplied by the softmax scale
  int64_t num_tokens = 0;
  int32_t qpkv = 1;
  int64_t pos0 = 0;              // position of token 0
  const float *alibi = nullptr;  // [qpkv] slopes of this group's heads, or nullptr
  float soft_cap = 0.f;
};

// Per-thread buffers, grown on first use and then reused.
struct Scratch {
  std::vector<float> q, k, v, s, acc, acc2, m, l, m2, l2, o1, o2;
  static Scratch &local();
};

// Accumulates keys into the running state of each row: acc[nq][D]
// (unnormalized, relative to m), m[nq] (running max, -inf = nothing yet),
// l[nq] (sum of exp(s - m)).  The caller initializes acc = 0, m = -inf, l = 0.
void attend_tile(const KvView &kv, const MaskRule &mask, const TileQuery &tq, int64_t D,
                 Scratch &scr, float *acc, float *m, float *l);

// Which build of attend_tile runs: the AVX2 + FMA + F16C one when the CPU
// has them (unless the environment sets VATTN_CPU_KERNEL=baseline), else
// the baseline one.  force_kernel(0 / 1) pins one for tests (1 only takes
// effect where available), force_kernel(-1) restores the automatic choice.
bool kernel_avx2_available();
void force_kernel(int which);
const char *kernel_name();

// Turns a row's state into its normalized output o[D] and returns its LSE
// (natural log of the denominator, sink included).  No visible key and no
// sink: o = 0, LSE = -inf.
float finalize_row(const float *acc, float m, float l, bool has_sink, float sink, int64_t D,
                   float *o);

// merge_attn_states for one row: o = weighted prefix / suffix (+inf LSE is
// treated as -inf; both -inf -> prefix row, -inf).  Returns the merged LSE.
// `out` may alias either input.
float merge_row(const float *prefix, float prefix_lse, const float *suffix, float suffix_lse,
                int64_t D, float *out);

}  // namespace cpu
}  // namespace vattn
