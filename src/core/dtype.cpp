// dtype.cpp -- the fp8 encoder (decoding is a constexpr table in dtype.h).
#include "core/dtype.h"

#include <cmath>

namespace vattn {
namespace detail {

uint8_t float_to_fp8(float x, int mbits, int bias, float max_finite, uint8_t max_code,
                     uint8_t nan_code) {
  const uint8_t sign = (f32_bits(x) >> 31) ? 0x80 : 0x00;
  if (std::isnan(x)) return static_cast<uint8_t>(sign | nan_code);
  float a = std::fabs(x);
  if (a >= max_finite) return static_cast<uint8_t>(sign | max_code);  // saturate (also inf)
  if (a == 0.0f) return sign;

  // Quantum (distance between neighbours) at a's binade; below the smallest
  // normal binade the quantum stays that of the subnormals.
  const int emin = 1 - bias;  // exponent of the smallest normal
  int e2 = 0;
  std::frexp(a, &e2);  // a in [2^(e2-1), 2^e2)
  int e = e2 - 1;
  if (e < emin) e = emin;
  const float quantum = std::ldexp(1.0f, e - mbits);
  // a / quantum is exact (power-of-two scaling); nearbyint rounds to nearest
  // even in the default FP environment.
  const float q = std::nearbyint(a / quantum);
  const float v = q * quantum;  // rounded magnitude, may have moved up a binade
  if (v > max_finite) return static_cast<uint8_t>(sign | max_code);
  if (v == 0.0f) return sign;

  int ev2 = 0;
  std::frexp(v, &ev2);
  const int ev = ev2 - 1;
  uint32_t field;
  if (ev < emin) {
    // Subnormal: exponent field 0, mantissa counts quanta of 2^(emin - mbits).
    field = static_cast<uint32_t>(std::ldexp(v, mbits - emin));
  } else {
    const uint32_t mant = static_cast<uint32_t>(std::ldexp(v, mbits - ev)) - (1u << mbits);
    field = (static_cast<uint32_t>(ev + bias) << mbits) | mant;
  }
  return static_cast<uint8_t>(sign | field);
}

}  // namespace detail
}  // namespace vattn
