// cpu_ref.h -- independent references for the CPU backend tests: number
// formats (rounding and bit encodings written from the format definitions,
// sharing no code with src/), and a float64 attention oracle over dense K/V.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <vector>

#include "vattn.h"

namespace ct {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- number formats ---------------------------------------------------------------
// A binary float format: `sig` significant bits (implicit one included),
// smallest quantum 2^min_q (the subnormal spacing), largest finite `max`.
struct Format {
  int sig;
  int min_q;
  double max;
  bool saturate;  // beyond max: max (fp8 stores) or inf (fp16/bf16)
};

inline Format format_of(int32_t vattn_dtype) {
  switch (vattn_dtype) {
    case VATTN_DTYPE_FLOAT16: return {11, -24, 65504.0, false};
    case VATTN_DTYPE_BFLOAT16: return {8, -133, 3.3895313892515355e38, false};
    case VATTN_DTYPE_FP8_E4M3: return {4, -9, 448.0, true};
    case VATTN_DTYPE_FP8_E5M2: return {3, -16, 57344.0, true};
    default: return {24, -149, 3.4028234663852886e38, false};
  }
}

// Round to nearest, ties to even, in format f.
inline double round_to(const Format &f, double x) {
  if (x == 0 || std::isnan(x)) return x;
  const double a = std::fabs(x);
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int qe = e - f.sig;
  if (qe < f.min_q) qe = f.min_q;
  double r = std::nearbyint(std::ldexp(a, -qe));
  r = std::ldexp(r, qe);
  if (r > f.max) r = f.saturate ? f.max : kInf;
  return x < 0 ? -r : r;
}
inline double round_to(int32_t dtype, double x) { return round_to(format_of(dtype), x); }

// fp8 decode from the definitions (e4m3fn: bias 7, 3 mantissa bits, no inf,
// S.1111.111 NaN; e5m2: bias 15, 2 mantissa bits, IEEE specials).
inline double fp8_decode(int32_t dtype, uint8_t b) {
  const bool e4 = dtype == VATTN_DTYPE_FP8_E4M3;
  const int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15, emax = e4 ? 15 : 31;
  const int e = (b & 0x7f) >> mb, m = b & ((1 << mb) - 1);
  double v;
  if (e4 && e == emax && m == 7) v = std::nan("");
  else if (!e4 && e == emax) v = m ? std::nan("") : kInf;
  else if (e == 0) v = std::ldexp(m, 1 - bias - mb);
  else v = std::ldexp(1.0 + std::ldexp(m, -mb), e - bias);
  return (b & 0x80) ? -v : v;
}

// Code of an exactly representable fp8 value (looked up among all codes).
inline uint8_t fp8_encode_exact(int32_t dtype, double v) {
  static std::map<double, uint8_t> tab[2];
  auto &t = tab[dtype == VATTN_DTYPE_FP8_E4M3 ? 0 : 1];
  if (t.empty())
    for (int b = 0; b < 256; ++b) {
      double d = fp8_decode(dtype, static_cast<uint8_t>(b));
      if (std::isfinite(d) && !(d == 0 && (b & 0x80))) t.emplace(d, static_cast<uint8_t>(b));
    }
  auto it = t.find(v);
  return it == t.end() ? 0x7f : it->second;
}

inline uint16_t half_encode_exact(double v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (a == 0) return sign;
  if (std::isnan(a)) return sign | 0x7e00;
  if (std::isinf(a)) return sign | 0x7c00;
  int e = 0;
  std::frexp(a, &e);
  const int E = e - 1;  // a in [2^E, 2^(E+1))
  if (E < -14) return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(a, 24)));
  const uint16_t mant = static_cast<uint16_t>(std::ldexp(a, 10 - E) - 1024.0);
  return static_cast<uint16_t>(sign | ((E + 15) << 10) | mant);
}
inline double half_decode(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 0) v = std::ldexp(m, -24);
  else if (e == 31) v = m ? std::nan("") : kInf;
  else v = std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

inline uint16_t bf16_encode_exact(double v) {
  float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
inline double bf16_decode(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case VATTN_DTYPE_FLOAT32: return 4;
    case VATTN_DTYPE_FLOAT16:
    case VATTN_DTYPE_BFLOAT16: return 2;
    default: return 1;
  }
}

inline DLDataType dl_of(int32_t dtype) {
  switch (dtype) {
    case VATTN_DTYPE_FLOAT32: return DLDataType{kDLFloat, 32, 1};
    case VATTN_DTYPE_FLOAT16: return DLDataType{kDLFloat, 16, 1};
    case VATTN_DTYPE_BFLOAT16: return DLDataType{kDLBfloat, 16, 1};
    default: return DLDataType{kDLUInt, 8, 1};
  }
}

// Writes an exactly representable value as `dtype` at p.
inline void put(int32_t dtype, void *p, double v) {
  switch (dtype) {
    case VATTN_DTYPE_FLOAT32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case VATTN_DTYPE_FLOAT16: {
      uint16_t h = half_encode_exact(v);
      std::memcpy(p, &h, 2);
      return;
    }
    case VATTN_DTYPE_BFLOAT16: {
      uint16_t h = bf16_encode_exact(v);
      std::memcpy(p, &h, 2);
      return;
    }
    default: *static_cast<uint8_t *>(p) = fp8_encode_exact(dtype, v); return;
  }
}

inline double get(int32_t dtype, const void *p) {
  switch (dtype) {
    case VATTN_DTYPE_FLOAT32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case VATTN_DTYPE_FLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_decode(h);
    }
    case VATTN_DTYPE_BFLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_decode(h);
    }
    default: return fp8_decode(dtype, *static_cast<const uint8_t *>(p));
  }
}

// ---- attention oracle --------------------------------------------------------------
struct OracleParams {
  int H = 0, KVH = 0, D = 0;
  double scale = 0;
  bool causal = true;
  int64_t win_left = -1, win_right = -1;  // -1 = unbounded
  double soft_cap = 0;
  const std::vector<double> *alibi = nullptr;  // [H] or null
  const std::vector<double> *sinks = nullptr;  // [H] or null
};

// One request: q [q_len][H][D], k / v [kv_len][KVH][D] (dense, row-major).
// Writes out [q_len][H][D] and lse [q_len][H].
inline void oracle_request(const OracleParams &p, int64_t q_len, int64_t kv_len,
                           const double *q, const double *k, const double *v, double *out,
                           double *lse) {
  const int qpkv = p.H / p.KVH;
  std::vector<double> s(static_cast<size_t>(kv_len));
  std::vector<char> vis(static_cast<size_t>(kv_len));
  for (int64_t i = 0; i < q_len; ++i) {
    const int64_t pos = kv_len - q_len + i;
    for (int h = 0; h < p.H; ++h) {
      const int g = h / qpkv;
      const double *qi = q + (i * p.H + h) * p.D;
      double mx = -kInf;
      for (int64_t j = 0; j < kv_len; ++j) {
        bool ok = true;
        if (p.causal && j > pos) ok = false;
        if (p.win_left >= 0 && pos - j > p.win_left) ok = false;
        if (p.win_right >= 0 && j - pos > p.win_right) ok = false;
        vis[j] = ok;
        if (!ok) continue;
        const double *kj = k + (j * p.KVH + g) * p.D;
        double d = 0;
        for (int e = 0; e < p.D; ++e) d += qi[e] * kj[e];
        d *= p.scale;
        if (p.soft_cap > 0) d = p.soft_cap * std::tanh(d / p.soft_cap);
        if (p.alibi) d -= (*p.alibi)[h] * std::fabs(static_cast<double>(pos - j));
        s[j] = d;
        mx = std::max(mx, d);
      }
      const bool sink = p.sinks != nullptr;
      if (sink) mx = std::max(mx, (*p.sinks)[h]);
      double *o = out + (i * p.H + h) * p.D;
      for (int e = 0; e < p.D; ++e) o[e] = 0;
      if (mx == -kInf) {
        lse[i * p.H + h] = -kInf;
        continue;
      }
      double den = sink ? std::exp((*p.sinks)[h] - mx) : 0;
      for (int64_t j = 0; j < kv_len; ++j) {
        if (!vis[j]) continue;
        const double w = std::exp(s[j] - mx);
        den += w;
        const double *vj = v + (j * p.KVH + g) * p.D;
        for (int e = 0; e < p.D; ++e) o[e] += w * vj[e];
      }
      for (int e = 0; e < p.D; ++e) o[e] /= den;
      lse[i * p.H + h] = mx + std::log(den);
    }
  }
}

}  // namespace ct
