// test_util.h -- helpers shared by the test suites: owning host tensors
// exposed as DLTensor, seeded random fills, poison, and status assertions.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "vattn.h"

namespace vt {

// EXPECT a status and, for errors, a non-empty message mentioning `needle`.
#define EXPECT_VATTN_OK(expr)                                                   \
  do {                                                                          \
    vattn_status_t st_ = (expr);                                                \
    EXPECT_EQ(st_, VATTN_OK) << #expr << ": " << vattn_last_error_message();    \
  } while (0)
#define ASSERT_VATTN_OK(expr)                                                   \
  do {                                                                          \
    vattn_status_t st_ = (expr);                                                \
    ASSERT_EQ(st_, VATTN_OK) << #expr << ": " << vattn_last_error_message();    \
  } while (0)
#define EXPECT_VATTN_ERR(expr, status, needle)                                  \
  do {                                                                          \
    vattn_status_t st_ = (expr);                                                \
    EXPECT_EQ(st_, (status)) << #expr << ": " << vattn_last_error_message();    \
    EXPECT_NE(std::string(vattn_last_error_message()).find(needle), std::string::npos) \
        << "message '" << vattn_last_error_message() << "' lacks '" << (needle) << "'"; \
  } while (0)

inline DLDataType dl_f32() { return DLDataType{kDLFloat, 32, 1}; }
inline DLDataType dl_f16() { return DLDataType{kDLFloat, 16, 1}; }
inline DLDataType dl_bf16() { return DLDataType{kDLBfloat, 16, 1}; }
inline DLDataType dl_u8() { return DLDataType{kDLUInt, 8, 1}; }
inline DLDataType dl_i32() { return DLDataType{kDLInt, 32, 1}; }
inline DLDataType dl_i64() { return DLDataType{kDLInt, 64, 1}; }

// A host tensor that owns its bytes and exposes a DLTensor view.
struct HostTensor {
  std::vector<int64_t> shape, strides;
  std::vector<unsigned char> bytes;
  DLTensor t{};

  HostTensor() = default;
  HostTensor(std::vector<int64_t> shp, DLDataType dt, std::vector<int64_t> strd = {})
      : shape(std::move(shp)), strides(std::move(strd)) {
    int64_t span = 1;
    if (strides.empty()) {
      for (auto s : shape) span *= s;
    } else {
      span = 0;
      for (size_t i = 0; i < shape.size(); ++i) span += (shape[i] - 1) * strides[i];
      span += 1;
      for (auto s : shape) if (s == 0) span = 0;
    }
    bytes.assign(static_cast<size_t>(span) * (dt.bits / 8) + 1, 0);
    t.data = bytes.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dt;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    t.byte_offset = 0;
  }
  HostTensor(const HostTensor &) = delete;
  HostTensor &operator=(const HostTensor &) = delete;
  HostTensor(HostTensor &&o) noexcept { *this = std::move(o); }
  HostTensor &operator=(HostTensor &&o) noexcept {
    shape = std::move(o.shape);
    strides = std::move(o.strides);
    bytes = std::move(o.bytes);
    t = o.t;
    t.data = bytes.data();
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    return *this;
  }
  DLTensor *dl() { return &t; }
  template <class T>
  T *as() { return reinterpret_cast<T *>(bytes.data()); }
  size_t nbytes() const { return bytes.size() - 1; }
};

inline std::mt19937_64 &rng() {
  static std::mt19937_64 g(std::random_device{}());
  return g;
}
// A fresh seed per test, printed so that a failure can be replayed with
// VATTN_TEST_SEED=<seed>.
inline uint64_t test_seed() {
  const char *env = std::getenv("VATTN_TEST_SEED");
  uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  ::testing::Test::RecordProperty("seed", std::to_string(s));
  return s;
}

inline float uniform(std::mt19937_64 &g, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(g);
}

}  // namespace vt
