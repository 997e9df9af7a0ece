// test_dtype.cpp -- core/dtype.h conversions against references written
// from the format definitions (frexp/ldexp arithmetic, no bit tricks):
// every fp16 / bf16 / fp8 code decodes exactly; encoding rounds to nearest
// even, saturates fp8 (incl. inf) and overflows fp16/bf16 to inf; NaN stays
// NaN; fp8 round trips of uniform values stay within half a step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/dtype.h"
#include "test_util.h"

namespace {

// Round to nearest even with `sig` significant bits, quantum >= 2^min_q.
double ref_round(double x, int sig, int min_q, double max, bool saturate) {
  if (x == 0 || std::isnan(x)) return x;
  const double a = std::fabs(x);
  if (std::isinf(a)) return std::copysign(saturate ? max : a, x);
  int e = 0;
  std::frexp(a, &e);
  int qe = std::max(e - sig, min_q);
  double r = std::ldexp(std::nearbyint(std::ldexp(a, -qe)), qe);
  if (r > max) r = saturate ? max : std::numeric_limits<double>::infinity();
  return std::copysign(r, x);
}

double ref_fp8(bool e4m3, uint8_t b) {
  const int mb = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, emax = e4m3 ? 15 : 31;
  const int e = (b & 0x7f) >> mb, m = b & ((1 << mb) - 1);
  double v;
  if (e4m3 && e == emax && m == 7) return std::nan("");
  if (!e4m3 && e == emax) {
    if (m) return std::nan("");
    v = std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(m, 1 - bias - mb);
  } else {
    v = std::ldexp((1 << mb) + m, e - bias - mb);
  }
  return (b & 0x80) ? -v : v;
}

double ref_half(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) {
    if (m) return std::nan("");
    v = std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(m, -24);
  } else {
    v = std::ldexp(1024 + m, e - 25);
  }
  return (h & 0x8000) ? -v : v;
}

TEST(Dtype, Fp8DecodeEveryCode) {
  for (int b = 0; b < 256; ++b) {
    const double e4 = ref_fp8(true, static_cast<uint8_t>(b)), e5 = ref_fp8(false, static_cast<uint8_t>(b));
    const float g4 = vattn::fp8_e4m3_to_float(static_cast<uint8_t>(b));
    const float g5 = vattn::fp8_e5m2_to_float(static_cast<uint8_t>(b));
    if (std::isnan(e4)) EXPECT_TRUE(std::isnan(g4)) << b;
    else EXPECT_EQ(g4, e4) << b;
    if (std::isnan(e5)) EXPECT_TRUE(std::isnan(g5)) << b;
    else EXPECT_EQ(g5, e5) << b;
  }
  EXPECT_EQ(vattn::fp8_e4m3_to_float(0x7e), 448.f);
  EXPECT_EQ(vattn::fp8_e5m2_to_float(0x7b), 57344.f);
}

TEST(Dtype, Fp8EncodeRoundTripsEveryFiniteCode) {
  for (int b = 0; b < 256; ++b) {
    const float v4 = vattn::fp8_e4m3_to_float(static_cast<uint8_t>(b));
    if (!std::isnan(v4)) {
      EXPECT_EQ(vattn::fp8_e4m3_to_float(vattn::float_to_fp8_e4m3(v4)), v4) << b;
    }
    const float v5 = vattn::fp8_e5m2_to_float(static_cast<uint8_t>(b));
    if (std::isfinite(v5)) {
      EXPECT_EQ(vattn::fp8_e5m2_to_float(vattn::float_to_fp8_e5m2(v5)), v5) << b;
    }
  }
}

TEST(Dtype, Fp8EncodeRoundsSaturatesAndKeepsNan) {
  std::mt19937_64 g(vt::test_seed());
  for (int i = 0; i < 200000; ++i) {
    // Log-uniform magnitudes across the whole range, both signs, plus
    // exact midpoints between neighbours (ties to even).
    float x = std::ldexp(vt::uniform(g, 1.f, 2.f), static_cast<int>(g() % 40) - 22);
    if (g() % 2) x = -x;
    const double w4 = ref_round(x, 4, -9, 448.0, true), w5 = ref_round(x, 3, -16, 57344.0, true);
    ASSERT_EQ(vattn::fp8_e4m3_to_float(vattn::float_to_fp8_e4m3(x)), w4) << x;
    ASSERT_EQ(vattn::fp8_e5m2_to_float(vattn::float_to_fp8_e5m2(x)), w5) << x;
  }
  for (int b = 0; b < 0x7e; ++b) {  // midpoints of neighbouring e4m3 codes
    const float lo = vattn::fp8_e4m3_to_float(static_cast<uint8_t>(b));
    const float hi = vattn::fp8_e4m3_to_float(static_cast<uint8_t>(b + 1));
    const float mid = (lo + hi) / 2;
    const uint8_t want = (b % 2 == 0) ? static_cast<uint8_t>(b) : static_cast<uint8_t>(b + 1);
    EXPECT_EQ(vattn::float_to_fp8_e4m3(mid), want) << "between codes " << b << " and " << b + 1;
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(vattn::float_to_fp8_e4m3(1e6f), 0x7e);
  EXPECT_EQ(vattn::float_to_fp8_e4m3(-inf), 0xfe);
  EXPECT_EQ(vattn::float_to_fp8_e4m3(464.f), 0x7e);
  EXPECT_EQ(vattn::float_to_fp8_e5m2(inf), 0x7b);
  EXPECT_EQ(vattn::float_to_fp8_e5m2(-1e9f), 0xfb);
  EXPECT_TRUE(std::isnan(vattn::fp8_e4m3_to_float(vattn::float_to_fp8_e4m3(std::nanf("")))));
  EXPECT_TRUE(std::isnan(vattn::fp8_e5m2_to_float(vattn::float_to_fp8_e5m2(std::nanf("")))));
  EXPECT_EQ(vattn::float_to_fp8_e4m3(-0.f), 0x80);
  // Below half the smallest subnormal: zero; just above: the subnormal.
  EXPECT_EQ(vattn::float_to_fp8_e4m3(std::ldexp(1.f, -11)), 0x00);
  EXPECT_EQ(vattn::float_to_fp8_e4m3(std::ldexp(1.5f, -10)), 0x01);
}

// vLLM's conversion test: uniform in [-224, 224], round trip within
// atol 1e-3 + rtol 0.1 (half an e4m3 step is 6.25% relative).
TEST(Dtype, Fp8UniformRoundTripTolerance) {
  std::mt19937_64 g(vt::test_seed());
  for (int i = 0; i < 100000; ++i) {
    const float x = vt::uniform(g, -224.f, 224.f);
    const float y = vattn::fp8_e4m3_to_float(vattn::float_to_fp8_e4m3(x));
    ASSERT_LE(std::fabs(y - x), 1e-3 + 0.0625 * std::fabs(x)) << x;
  }
}

TEST(Dtype, HalfEveryCodeAndRounding) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = ref_half(static_cast<uint16_t>(h));
    const float got = vattn::half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      ASSERT_TRUE(std::isnan(vattn::half_to_float(vattn::float_to_half(got))));
      continue;
    }
    ASSERT_EQ(got, want) << h;
    ASSERT_EQ(vattn::float_to_half(got), h) << h;  // exact values round trip bit for bit
  }
  std::mt19937_64 g(vt::test_seed());
  for (int i = 0; i < 300000; ++i) {
    uint32_t u = static_cast<uint32_t>(g());
    float x;
    std::memcpy(&x, &u, 4);
    if (std::isnan(x)) continue;
    const double want = ref_round(x, 11, -24, 65504.0, false);
    const float got = vattn::half_to_float(vattn::float_to_half(x));
    ASSERT_EQ(got, want) << x;
  }
  EXPECT_EQ(vattn::float_to_half(65519.f), 0x7bff);
  EXPECT_EQ(vattn::float_to_half(65520.f), 0x7c00);  // ties to even -> inf
}

TEST(Dtype, Bf16RoundingAndSpecials) {
  std::mt19937_64 g(vt::test_seed());
  for (int i = 0; i < 300000; ++i) {
    uint32_t u = static_cast<uint32_t>(g());
    float x;
    std::memcpy(&x, &u, 4);
    const float got = vattn::bf16_to_float(vattn::float_to_bf16(x));
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(got));
      continue;
    }
    ASSERT_EQ(got, ref_round(x, 8, -133, 3.3895313892515355e38, false)) << x;
  }
  EXPECT_EQ(vattn::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(vattn::float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
}

}  // namespace
