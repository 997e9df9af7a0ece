// cpu_harness.h -- builds one random attention problem for the CPU backend
// through the C API (paged cache with a shuffled block table, block 0
// reserved as the null block, context pre-written by the test, new K/V
// written by the forward through the slot mapping), runs it, and checks the
// output and LSE against the float64 oracle (cpu_ref.h), plus the cache
// contents, the padding rows and that nothing past them was touched.
#pragma once

#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cpu_ref.h"
#include "test_util.h"

namespace ct {

struct Config {
  int num_heads = 8, num_kv_heads = 2, head_size = 64, block_size = 16;
  int32_t dtype = VATTN_DTYPE_FLOAT32;
  int32_t kv_cache_dtype = VATTN_KV_CACHE_DTYPE_AUTO;
  int32_t builder_kv_cache_dtype = -1;  // the builder's kv_cache_dtype; -1 = kv_cache_dtype
  int32_t layout = VATTN_LAYOUT_NHD;
  int32_t attn_type = VATTN_ATTN_DECODER;
  int sliding_window = 0;
  float soft_cap = 0.f;
  float scale = 0.f;  // 0 = 1/sqrt(head_size)
  bool alibi = false, sinks = false;
  bool causal = true;
  bool kv_sharing = false;  // layer never writes: the test pre-writes everything
  bool pass_kv = true;      // give key/value (else the cache already holds all K/V)
  bool want_lse = true;
  int pad_tokens = 0;       // num_actual_tokens - real tokens
  int extra_rows = 2;       // output rows past num_actual_tokens (must stay untouched)
  float k_scale = 1.f, v_scale = 1.f;  // powers of two keep x / scale exact
  int64_t common_prefix_len = 0;
  int num_threads = 2;
  double q_range = 2.0;

  std::string str() const {
    std::ostringstream o;
    o << "H=" << num_heads << " KVH=" << num_kv_heads << " D=" << head_size << " bs=" << block_size
      << " dtype=" << dtype << " kv=" << kv_cache_dtype << " plan kv=" << builder_kv_cache_dtype
      << " layout=" << layout
      << " type=" << attn_type << " win=" << sliding_window << " cap=" << soft_cap
      << " alibi=" << alibi << " sinks=" << sinks << " causal=" << causal
      << " share=" << kv_sharing << " pass_kv=" << pass_kv << " pad=" << pad_tokens
      << " cpl=" << common_prefix_len;
    return o.str();
  }
};

// Tolerances of the brief: |got - want| <= atol + rtol * |want|.
inline void tolerances(const Config &c, double *atol, double *rtol) {
  if (c.dtype == VATTN_DTYPE_FLOAT32) {
    *atol = 2e-5;
    *rtol = 1e-5;
  } else {
    *atol = 1e-2;
    *rtol = 1e-2;
  }
}

struct MdDel {
  void operator()(vattn_metadata_t *m) const { vattn_metadata_destroy(m); }
};
struct BuilderDel {
  void operator()(vattn_builder_t *b) const { vattn_builder_destroy(b); }
};
struct PlanDel {
  void operator()(vattn_plan_t *p) const { vattn_plan_destroy(p); }
};
struct LayerDel {
  void operator()(vattn_layer_t *l) const { vattn_layer_destroy(l); }
};
using MdPtr = std::unique_ptr<vattn_metadata_t, MdDel>;
using BuilderPtr = std::unique_ptr<vattn_builder_t, BuilderDel>;
using PlanPtr = std::unique_ptr<vattn_plan_t, PlanDel>;
using LayerPtr = std::unique_ptr<vattn_layer_t, LayerDel>;

// A generator seeded by vt::test_seed(), the seed printed so that a failure
// can be replayed with VATTN_TEST_SEED=<seed>.
inline std::mt19937_64 seeded_rng() {
  const uint64_t s = vt::test_seed();
  std::printf("VATTN_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
  return std::mt19937_64(s);
}

inline const vattn_backend_t *cpu() {
  const vattn_backend_t *b = nullptr;
  vattn_backend_find("CPU", &b);
  return b;
}

// Strides (elements) of the logical (2, nb, bs, H, D) cache for a layout.
inline std::vector<int64_t> cache_strides(int32_t layout, int64_t nb, int64_t bs, int64_t H,
                                          int64_t D) {
  if (layout == VATTN_LAYOUT_HND)  // physical (2, nb, H, bs, D)
    return {nb * H * bs * D, H * bs * D, D, bs * D, 1};
  return {nb * bs * H * D, bs * H * D, H * D, D, 1};
}

// Everything one problem owns.
struct Problem {
  Config c;
  std::vector<int32_t> q_lens, kv_lens;  // kv_lens: seq_lens (decoder) / encoder lens (cross) / q_lens (encoder)
  int64_t T_real = 0, T = 0;
  int32_t cache_dtype = 0;  // storage dtype of the cache
  // Dense effective values (as the kernel must see them).
  std::vector<std::vector<double>> K, V;  // per request [kv_len][KVH][D]
  std::vector<double> Q;                  // [T_real][H][D]
  std::vector<double> alibi, sinks;
  // C-side arrays.
  std::vector<int32_t> qsl, block_table;
  std::vector<int64_t> slots;
  int64_t cols = 0, num_blocks = 0;
  vt::HostTensor q, k, v, cache, out, lse;
  std::vector<unsigned char> cache_before;
  // Where each request's kv positions live (slot per position).
  std::vector<std::vector<int64_t>> pos_slot;
  MdPtr md;
  BuilderPtr builder;
  PlanPtr plan;
  LayerPtr layer;
  vattn_forward_args_t args{};

  bool uses_cache() const {
    return c.attn_type == VATTN_ATTN_DECODER || c.attn_type == VATTN_ATTN_ENCODER_DECODER;
  }
  int64_t cache_off(int kv, int64_t slot, int64_t h, int64_t d) const {
    const int64_t bs = c.block_size;
    const int64_t *s = cache.strides.data();
    return kv * s[0] + (slot / bs) * s[1] + (slot % bs) * s[2] + h * s[3] + d * s[4];
  }
};

// Builds the problem (does not run it).  kv_lens: see Problem.
inline std::unique_ptr<Problem> make_problem(const Config &c, const std::vector<int32_t> &q_lens,
                                             const std::vector<int32_t> &kv_lens_in,
                                             std::mt19937_64 &g) {
  auto P = std::make_unique<Problem>();
  Problem &p = *P;
  p.c = c;
  p.q_lens = q_lens;
  const bool encoder = c.attn_type == VATTN_ATTN_ENCODER || c.attn_type == VATTN_ATTN_ENCODER_ONLY;
  const bool cross = c.attn_type == VATTN_ATTN_ENCODER_DECODER;
  p.kv_lens = encoder ? q_lens : kv_lens_in;
  const int64_t R = static_cast<int64_t>(q_lens.size());
  const int H = c.num_heads, KVH = c.num_kv_heads, D = c.head_size, bs = c.block_size;
  p.cache_dtype = c.kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E4M3   ? VATTN_DTYPE_FP8_E4M3
                  : c.kv_cache_dtype == VATTN_KV_CACHE_DTYPE_FP8_E5M2 ? VATTN_DTYPE_FP8_E5M2
                                                                      : c.dtype;
  const bool fp8 = c.kv_cache_dtype != VATTN_KV_CACHE_DTYPE_AUTO;
  p.qsl.assign(1, 0);
  for (auto ql : q_lens) p.qsl.push_back(p.qsl.back() + ql);
  p.T_real = p.qsl.back();
  p.T = p.T_real + c.pad_tokens;

  auto uni = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); };
  auto model = [&](double x) { return round_to(c.dtype, x); };
  // The value the kernel sees for a K/V element that went through the cache.
  auto through_cache = [&](double x, double scale) {
    return fp8 ? round_to(p.cache_dtype, x / scale) * scale : x;
  };

  // Dense K/V per request (model-rounded raw values kept in Kraw/Vraw).
  std::vector<std::vector<double>> Kraw(R), Vraw(R);
  p.K.resize(R);
  p.V.resize(R);
  for (int64_t r = 0; r < R; ++r) {
    const size_t n = static_cast<size_t>(p.kv_lens[r]) * KVH * D;
    Kraw[r].resize(n);
    Vraw[r].resize(n);
    for (size_t i = 0; i < n; ++i) {
      Kraw[r][i] = model(uni(-1, 1));
      Vraw[r][i] = model(uni(-1, 1));
    }
  }
  // Cascade: the shared prefix is the same physical blocks, so equal values.
  const int64_t cpl = c.common_prefix_len;
  for (int64_t r = 1; r < R && cpl > 0; ++r)
    for (int64_t i = 0; i < cpl * KVH * D; ++i) {
      Kraw[r][i] = Kraw[0][i];
      Vraw[r][i] = Vraw[0][i];
    }
  for (int64_t r = 0; r < R; ++r) {
    p.K[r].resize(Kraw[r].size());
    p.V[r].resize(Vraw[r].size());
    for (size_t i = 0; i < Kraw[r].size(); ++i) {
      p.K[r][i] = encoder ? Kraw[r][i] : through_cache(Kraw[r][i], c.k_scale);
      p.V[r][i] = encoder ? Vraw[r][i] : through_cache(Vraw[r][i], c.v_scale);
    }
  }
  p.Q.resize(static_cast<size_t>(p.T_real) * H * D);
  for (auto &x : p.Q) x = model(uni(-c.q_range, c.q_range));
  if (c.alibi) {
    p.alibi.resize(H);
    for (auto &x : p.alibi) x = static_cast<float>(uni(0.01, 0.5));
  }
  if (c.sinks) {
    p.sinks.resize(H);
    for (auto &x : p.sinks) x = static_cast<float>(uni(-2, 2));
  }

  // Tensors: q / out with extra rows, k / v rows.
  const DLDataType mdt = dl_of(c.dtype);
  const int64_t rows = p.T + c.extra_rows;
  p.q = vt::HostTensor({rows, H, D}, mdt);
  p.out = vt::HostTensor({rows, H, D}, mdt);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t i = 0; i < int64_t(H) * D; ++i) {
      const double x = t < p.T_real ? p.Q[t * H * D + i] : model(uni(-1, 1));
      put(c.dtype, p.q.bytes.data() + (t * H * D + i) * dtype_bytes(c.dtype), x);
    }
  // Output and LSE poisoned with NaN.
  for (int64_t i = 0; i < rows * H * D; ++i)
    put(c.dtype, p.out.bytes.data() + i * dtype_bytes(c.dtype), std::nan(""));
  if (c.want_lse) {
    p.lse = vt::HostTensor({H, p.T + c.extra_rows}, vt::dl_f32());
    for (int64_t i = 0; i < H * (p.T + c.extra_rows); ++i) p.lse.as<float>()[i] = NAN;
  }

  // Paged cache: block ids from a shuffled pool, 0 reserved (never used).
  std::vector<int64_t> need(R);
  int64_t total = 0, maxb = 0;
  for (int64_t r = 0; r < R; ++r) {
    need[r] = (p.kv_lens[r] + bs - 1) / bs;
    total += need[r];
    maxb = std::max(maxb, need[r]);
  }
  p.cols = maxb + 1;
  p.num_blocks = total + 3;
  std::vector<int32_t> ids;
  for (int64_t b = 1; b < p.num_blocks; ++b) ids.push_back(static_cast<int32_t>(b));
  std::shuffle(ids.begin(), ids.end(), g);
  p.block_table.assign(static_cast<size_t>(std::max<int64_t>(R, 1) * p.cols), 0);
  size_t next = 0;
  const int64_t shared = cpl / bs;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < need[r]; ++j)
      p.block_table[r * p.cols + j] =
          (r > 0 && j < shared) ? p.block_table[j] : ids[next++];
  p.pos_slot.resize(R);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < p.kv_lens[r]; ++j)
      p.pos_slot[r].push_back(int64_t(p.block_table[r * p.cols + j / bs]) * bs + j % bs);

  if (p.uses_cache()) {
    auto st = cache_strides(c.layout, p.num_blocks, bs, KVH, D);
    p.cache = vt::HostTensor({2, p.num_blocks, bs, KVH, D}, dl_of(p.cache_dtype), st);
    // Unused slots hold NaN: a kernel that reads past seq_len fails loudly.
    const size_t es = dtype_bytes(p.cache_dtype);
    if (fp8) {
      std::fill(p.cache.bytes.begin(), p.cache.bytes.end() - 1, 0x7f);  // fp8 NaN
    } else {
      for (size_t i = 0; i + es <= p.cache.nbytes(); i += es)
        put(p.cache_dtype, &p.cache.bytes[i], std::nan(""));
    }
  }

  // Which positions the forward writes (the rest the test pre-writes).
  const bool writes = p.uses_cache() && c.pass_kv && !c.kv_sharing;
  int64_t kv_rows = 0;  // rows of the key/value tensors
  for (int64_t r = 0; r < R; ++r) {
    const int64_t first_new = cross ? 0 : p.kv_lens[r] - q_lens[r];
    for (int64_t j = 0; j < p.kv_lens[r]; ++j) {
      const bool by_forward = writes && j >= first_new;
      if (by_forward || !p.uses_cache()) continue;
      for (int kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < KVH; ++h)
          for (int64_t d = 0; d < D; ++d) {
            const double x = (kv ? p.V[r] : p.K[r])[(j * KVH + h) * D + d];
            const double sc = kv ? c.v_scale : c.k_scale;
            put(p.cache_dtype,
                p.cache.bytes.data() + p.cache_off(kv, p.pos_slot[r][j], h, d) * dtype_bytes(p.cache_dtype),
                fp8 ? x / sc : x);
          }
    }
    kv_rows += cross ? p.kv_lens[r] : q_lens[r];
  }

  // Slot mapping: decoder = one per query token (+ -1 padding); cross =
  // one per encoder token.
  if (cross) {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < p.kv_lens[r]; ++j) p.slots.push_back(p.pos_slot[r][j]);
  } else if (!encoder) {
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = p.kv_lens[r] - q_lens[r]; j < p.kv_lens[r]; ++j) p.slots.push_back(p.pos_slot[r][j]);
    for (int i = 0; i < c.pad_tokens; ++i) p.slots.push_back(-1);
  } else {
    p.slots.assign(static_cast<size_t>(p.T), -1);
  }

  // key / value rows: the new tokens (decoder), all encoder tokens (cross),
  // or the request's own rows (encoder types).  Padding rows are garbage.
  if (c.pass_kv || encoder || c.kv_sharing) {
    const int64_t n = (encoder ? p.T : std::max<int64_t>(kv_rows, p.T)) + 1;
    p.k = vt::HostTensor({n, KVH, D}, mdt);
    p.v = vt::HostTensor({n, KVH, D}, mdt);
    int64_t row = 0;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t first = (encoder || cross) ? 0 : p.kv_lens[r] - q_lens[r];
      for (int64_t j = first; j < p.kv_lens[r]; ++j, ++row)
        for (int64_t i = 0; i < int64_t(KVH) * D; ++i) {
          // kv_sharing: values the layer must NOT write anywhere.
          const double kx = c.kv_sharing ? model(uni(-1, 1)) : Kraw[r][j * KVH * D + i];
          const double vx = c.kv_sharing ? model(uni(-1, 1)) : Vraw[r][j * KVH * D + i];
          put(c.dtype, p.k.bytes.data() + (row * KVH * D + i) * dtype_bytes(c.dtype), kx);
          put(c.dtype, p.v.bytes.data() + (row * KVH * D + i) * dtype_bytes(c.dtype), vx);
        }
    }
    for (; row < n; ++row)
      for (int64_t i = 0; i < int64_t(KVH) * D; ++i) {
        put(c.dtype, p.k.bytes.data() + (row * KVH * D + i) * dtype_bytes(c.dtype), model(uni(-1, 1)));
        put(c.dtype, p.v.bytes.data() + (row * KVH * D + i) * dtype_bytes(c.dtype), model(uni(-1, 1)));
      }
  }
  p.cache_before = p.cache.bytes;

  // Metadata.
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  d.num_reqs = R;
  d.num_actual_tokens = p.T;
  d.query_start_loc = p.qsl.data();
  std::vector<int32_t> seq_lens(p.kv_lens);
  d.seq_lens = seq_lens.data();
  d.block_table = p.block_table.data();
  d.block_table_rows = std::max<int64_t>(R, 1);
  d.block_table_cols = p.cols;
  d.slot_mapping = p.slots.data();
  d.slot_mapping_len = static_cast<int64_t>(p.slots.size());
  d.causal = c.causal ? 1 : 0;
  d.block_size = bs;
  d.num_cache_blocks = p.num_blocks;
  if (cross) d.encoder_seq_lens = seq_lens.data();
  vattn_metadata_t *m = nullptr;
  EXPECT_VATTN_OK(vattn_metadata_create(&m, &d));
  p.md.reset(m);

  vattn_builder_options_t bo;
  vattn_builder_options_init(&bo);
  bo.num_heads = H;
  bo.num_kv_heads = KVH;
  bo.head_size = D;
  bo.block_size = bs;
  bo.num_threads = c.num_threads;
  bo.kv_cache_dtype = c.builder_kv_cache_dtype >= 0 ? c.builder_kv_cache_dtype : c.kv_cache_dtype;
  vattn_builder_t *b = nullptr;
  EXPECT_VATTN_OK(vattn_builder_create(&b, cpu(), &bo));
  p.builder.reset(b);
  vattn_plan_t *pl = nullptr;
  EXPECT_VATTN_OK(vattn_plan_create(&pl, b));
  p.plan.reset(pl);

  vattn_layer_options_t lo;
  vattn_layer_options_init(&lo);
  lo.num_heads = H;
  lo.num_kv_heads = KVH;
  lo.head_size = D;
  lo.scale = c.scale;
  lo.dtype = c.dtype;
  lo.kv_cache_dtype = c.kv_cache_dtype;
  lo.attn_type = c.attn_type;
  lo.sliding_window = c.sliding_window;
  lo.logits_soft_cap = c.soft_cap;
  std::vector<float> af(p.alibi.begin(), p.alibi.end()), sf(p.sinks.begin(), p.sinks.end());
  lo.alibi_slopes = c.alibi ? af.data() : nullptr;
  lo.sinks = c.sinks ? sf.data() : nullptr;
  lo.kv_sharing = c.kv_sharing;
  lo.block_size = bs;
  vattn_layer_t *l = nullptr;
  EXPECT_VATTN_OK(vattn_layer_create(&l, cpu(), &lo));
  p.layer.reset(l);

  vattn_forward_args_init(&p.args);
  p.args.query = p.q.dl();
  p.args.output = p.out.dl();
  p.args.output_lse = c.want_lse ? p.lse.dl() : nullptr;
  p.args.kv_cache = p.uses_cache() ? p.cache.dl() : nullptr;
  if (!p.k.bytes.empty() && (c.pass_kv || encoder || c.kv_sharing)) {
    p.args.key = p.k.dl();
    p.args.value = p.v.dl();
  }
  p.args.k_scale = c.k_scale;
  p.args.v_scale = c.v_scale;
  return P;
}

inline double scale_of(const Config &c) {
  return c.scale != 0.f ? static_cast<double>(c.scale)
                        : static_cast<double>(1.0f / std::sqrt(static_cast<float>(c.head_size)));
}

// Runs the oracle and compares; returns the number of mismatches.
inline int64_t check_problem(Problem &p) {
  const Config &c = p.c;
  const int H = c.num_heads, KVH = c.num_kv_heads, D = c.head_size;
  double atol, rtol;
  tolerances(c, &atol, &rtol);
  OracleParams op;
  op.H = H;
  op.KVH = KVH;
  op.D = D;
  op.scale = scale_of(c);
  op.causal = c.attn_type == VATTN_ATTN_DECODER && c.causal;
  if (c.sliding_window > 0) {
    op.win_left = c.sliding_window - 1;
    op.win_right = c.attn_type == VATTN_ATTN_ENCODER_ONLY ? c.sliding_window - 1 : 0;
  }
  op.soft_cap = c.soft_cap;
  op.alibi = c.alibi ? &p.alibi : nullptr;
  op.sinks = c.sinks ? &p.sinks : nullptr;
  const size_t es = dtype_bytes(c.dtype);
  int64_t bad = 0;
  auto report = [&](const std::string &what) {
    if (bad++ < 5) ADD_FAILURE() << what << " [" << c.str() << "]";
  };
  for (size_t r = 0; r < p.q_lens.size(); ++r) {
    const int64_t ql = p.q_lens[r], kl = p.kv_lens[r];
    std::vector<double> o(static_cast<size_t>(ql) * H * D), l(static_cast<size_t>(ql) * H);
    oracle_request(op, ql, kl, p.Q.data() + int64_t(p.qsl[r]) * H * D, p.K[r].data(), p.V[r].data(),
                   o.data(), l.data());
    for (int64_t i = 0; i < ql; ++i) {
      const int64_t t = p.qsl[r] + i;
      for (int h = 0; h < H; ++h) {
        for (int d = 0; d < D; ++d) {
          const double got = get(c.dtype, p.out.bytes.data() + ((t * H + h) * D + d) * es);
          const double want = o[(i * H + h) * D + d];
          if (!(std::fabs(got - want) <= atol + rtol * std::fabs(want))) {
            std::ostringstream s;
            s << "output req " << r << " tok " << i << " head " << h << " dim " << d << ": got " << got
              << " want " << want;
            report(s.str());
          }
        }
        if (c.want_lse) {
          const double got = p.lse.as<float>()[h * (p.T + c.extra_rows) + t];
          const double want = l[i * H + h];
          const bool ok = (std::isinf(want) && got == want) ||
                          std::fabs(got - want) <= 1e-4 + 1e-5 * std::fabs(want);
          if (!ok) {
            std::ostringstream s;
            s << "lse req " << r << " tok " << i << " head " << h << ": got " << got << " want " << want;
            report(s.str());
          }
        }
      }
    }
  }
  // Padding rows: zeros and -inf; rows past num_actual_tokens untouched (NaN).
  for (int64_t t = p.T_real; t < p.T + c.extra_rows; ++t)
    for (int h = 0; h < H; ++h) {
      for (int d = 0; d < D; ++d) {
        const double got = get(c.dtype, p.out.bytes.data() + ((t * H + h) * D + d) * es);
        const bool ok = t < p.T ? got == 0.0 : std::isnan(got);
        if (!ok) report("padding/untouched output row " + std::to_string(t) + " = " + std::to_string(got));
      }
      if (c.want_lse) {
        const float got = p.lse.as<float>()[h * (p.T + c.extra_rows) + t];
        const bool ok = t < p.T ? (std::isinf(got) && got < 0) : std::isnan(got);
        if (!ok) report("padding/untouched lse row " + std::to_string(t));
      }
    }
  // Cache: new K/V at their slots (decoder / cross); sharing: unchanged.
  if (p.uses_cache()) {
    if (c.kv_sharing || !c.pass_kv) {
      if (p.cache.bytes != p.cache_before) report("cache changed although the layer must not write it");
    } else {
      const bool cross = c.attn_type == VATTN_ATTN_ENCODER_DECODER;
      const bool fp8 = c.kv_cache_dtype != VATTN_KV_CACHE_DTYPE_AUTO;
      const size_t ces = dtype_bytes(p.cache_dtype);
      for (size_t r = 0; r < p.q_lens.size(); ++r)
        for (int64_t j = cross ? 0 : p.kv_lens[r] - p.q_lens[r]; j < p.kv_lens[r]; ++j)
          for (int kv = 0; kv < 2; ++kv)
            for (int h = 0; h < KVH; ++h)
              for (int d = 0; d < D; ++d) {
                const double want = (kv ? p.V[r] : p.K[r])[(j * KVH + h) * D + d];
                const double sc = fp8 ? (kv ? c.v_scale : c.k_scale) : 1.0;
                const double got =
                    get(p.cache_dtype, p.cache.bytes.data() + p.cache_off(kv, p.pos_slot[r][j], h, d) * ces) * sc;
                if (got != want) {
                  std::ostringstream s;
                  s << "cache req " << r << " pos " << j << " kv " << kv << " head " << h << " dim " << d
                    << ": got " << got << " want " << want;
                  report(s.str());
                }
              }
    }
  }
  return bad;
}

// Builds, builds the plan (with the config's common_prefix_len), runs and
// checks one problem.
inline void run_case(const Config &c, const std::vector<int32_t> &q_lens,
                     const std::vector<int32_t> &kv_lens, std::mt19937_64 &g) {
  auto p = make_problem(c, q_lens, kv_lens, g);
  ASSERT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), c.common_prefix_len,
                                      p->md.get(), 0, nullptr));
  ASSERT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args));
  EXPECT_EQ(check_problem(*p), 0) << c.str();
}

// A random mixed batch: decodes, chunked prefills with context, prefills.
inline void random_batch(std::mt19937_64 &g, int num_reqs, int max_ctx, int max_q,
                         std::vector<int32_t> *q_lens, std::vector<int32_t> *seq_lens) {
  q_lens->clear();
  seq_lens->clear();
  for (int r = 0; r < num_reqs; ++r) {
    const int kind = static_cast<int>(g() % 3);
    int q = kind == 0 ? 1 : 1 + static_cast<int>(g() % max_q);
    int ctx = kind == 2 ? 0 : static_cast<int>(g() % (max_ctx + 1));
    if (q + ctx == 0) q = 1;
    q_lens->push_back(q);
    seq_lens->push_back(q + ctx);
  }
}

}  // namespace ct
