// bench_report.h -- small helpers of vattn-bench: order statistics of a
// sample of timings and a minimal JSON writer (objects, numbers, strings).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace vbench {

struct Stats {
  double median = 0, p10 = 0, p90 = 0, mean = 0, min = 0, max = 0;
  size_t n = 0;
};

// Linear interpolation between order statistics (numpy's default).
inline double quantile_sorted(const std::vector<double> &s, double q) {
  if (s.empty()) return 0;
  const double pos = q * static_cast<double>(s.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - static_cast<double>(lo));
}

inline Stats stats_of(std::vector<double> v) {
  Stats st;
  st.n = v.size();
  if (v.empty()) return st;
  std::sort(v.begin(), v.end());
  st.median = quantile_sorted(v, 0.5);
  st.p10 = quantile_sorted(v, 0.1);
  st.p90 = quantile_sorted(v, 0.9);
  st.min = v.front();
  st.max = v.back();
  double s = 0;
  for (double x : v) s += x;
  st.mean = s / static_cast<double>(v.size());
  return st;
}

// Builds a JSON document as text.  Keys/values are appended in order; the
// caller opens and closes objects.  Non-finite numbers become null.
class Json {
 public:
  Json &open(const char *key = nullptr) {
    sep();
    if (key) put_key(key);
    s_ += '{';
    first_ = true;
    return *this;
  }
  Json &close() {
    s_ += '}';
    first_ = false;
    return *this;
  }
  Json &num(const char *key, double v) {
    sep();
    put_key(key);
    if (!std::isfinite(v)) {
      s_ += "null";
    } else {
      char b[64];
      if (v == std::floor(v) && std::fabs(v) < 9e15)
        std::snprintf(b, sizeof b, "%.0f", v);
      else
        std::snprintf(b, sizeof b, "%.6g", v);
      s_ += b;
    }
    return *this;
  }
  Json &boolean(const char *key, bool v) {
    sep();
    put_key(key);
    s_ += v ? "true" : "false";
    return *this;
  }
  Json &str(const char *key, const std::string &v) {
    sep();
    put_key(key);
    put_string(v);
    return *this;
  }
  const std::string &text() const { return s_; }

 private:
  void sep() {
    if (!first_) s_ += ',';
    first_ = false;
  }
  void put_key(const char *k) {
    put_string(k);
    s_ += ':';
  }
  void put_string(const std::string &v) {
    s_ += '"';
    for (unsigned char c : v) {
      if (c == '"' || c == '\\') {
        s_ += '\\';
        s_ += static_cast<char>(c);
      } else if (c < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        s_ += b;
      } else {
        s_ += static_cast<char>(c);
      }
    }
    s_ += '"';
  }
  std::string s_;
  bool first_ = true;
};

}  // namespace vbench
