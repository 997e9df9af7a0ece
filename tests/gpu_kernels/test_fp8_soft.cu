// test_fp8_soft.cu -- fp8 decoding helpers of kernels/common.cuh, some of
// which the library compiles only for GPUs it may not be tested on, run
// here on whatever GPU is present against the test's own decoders, over
// every pair of bytes.  e4m3x2_to_h2_soft (the e4m3 -> f16 conversion of
// GPUs older than sm_89): each lane the exact f16 of the e4m3 value (sign of
// zero included), NaN for 0x7f / 0xff, and the same bits as cuda_fp8.h's
// conversion for every other byte.  fp8x4_to_h2 (the decoding of both
// attention kernels) for e4m3 and e5m2 as compiled for this GPU, each pair
// in both halves of a word: the exact f16 (sign of zero included), NaN
// where the format has one.  fp8_encode_soft (the cache write's
// encoding before sm_89) against cuda_fp8.h's conversion for all 2^32
// floats, both formats.  Skips without a GPU.
// Links the CUDA runtime itself, so it stays out of sanitizer builds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "common.cuh"

namespace {

constexpr uint32_t kPairs = 65536;  // pair i: low byte i & 0xff, high byte i >> 8

__global__ void convert_pairs(uint32_t *soft, uint32_t *hw) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kPairs) return;
  soft[i] = vattn::kern::e4m3x2_to_h2_soft(__byte_perm(i, 0u, 0x4140));  // [b0, 0, b1, 0]
  const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(i), __NV_E4M3);
  hw[i] = static_cast<uint32_t>(r.x) | (static_cast<uint32_t>(r.y) << 16);
}

// fp8x4_to_h2 on the word [pair i, pair i ^ 0xffff]: out[i] = (lo, hi).
template <int KIND>
__global__ void decode_words(uint2 *lohi, uint2 *) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kPairs) return;
  uint2 r;
  vattn::kern::fp8x4_to_h2<KIND>(i | ((i ^ 0xffffu) << 16), r.x, r.y);
  lohi[i] = r;
}

// e5m2 (bias 15, exponent 31: infinity or NaN) as a double.
double e5m2_value(uint32_t b) {
  const double sign = (b & 0x80) ? -1.0 : 1.0;
  const int e = (b >> 2) & 0x1f, m = b & 3;
  if (e == 31) return m ? NAN : sign * INFINITY;
  return sign * (e == 0 ? std::ldexp(m / 4.0, -14) : std::ldexp(1.0 + m / 4.0, e - 15));
}
// e4m3 (bias 7, no infinities, magnitude 0x7f is NaN) as a double.
double e4m3_value(uint32_t b) {
  const double sign = (b & 0x80) ? -1.0 : 1.0;
  const int e = (b >> 3) & 0xf, m = b & 7;
  if ((b & 0x7f) == 0x7f) return NAN;
  return sign * (e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7));
}
// IEEE binary16 bits as a double.
double f16_value(uint32_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return m ? NAN : sign * INFINITY;
  return sign * (e == 0 ? std::ldexp(m / 1024.0, -14) : std::ldexp(1.0 + m / 1024.0, e - 15));
}

// Every float with bits hi << 16 | [0, 65536) per launch row: mismatches
// of fp8_encode_soft against cuda_fp8.h (NaN inputs: any NaN byte) are
// counted in bad[kind] and the first ones kept in first[kind].
__global__ void encode_all(uint32_t hi0, unsigned long long *bad, uint32_t *first) {
  const uint32_t u = ((hi0 + blockIdx.y) << 16) | (blockIdx.x * blockDim.x + threadIdx.x);
  const float x = __uint_as_float(u);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t s4 = vattn::kern::fp8_encode_soft<vattn::kern::kCacheE4M3>(x);
  const uint32_t s5 = vattn::kern::fp8_encode_soft<vattn::kern::kCacheE5M2>(x);
  const uint32_t h4 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  const uint32_t h5 = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
  const bool ok4 = nan ? (s4 & 0x7f) == 0x7f : s4 == h4;
  const bool ok5 = nan ? (s5 & 0x7c) == 0x7c && (s5 & 3) != 0 : s5 == h5;
  if (!ok4 && atomicAdd(&bad[0], 1ull) < 4) first[atomicAdd(&first[8], 1u) & 3] = u;
  if (!ok5 && atomicAdd(&bad[1], 1ull) < 4) first[4 + (atomicAdd(&first[9], 1u) & 3)] = u;
}

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Runs kernel(out, out + kPairs) over every pair into poisoned device
// memory and copies both halves back; false on any CUDA error.
template <class T>
bool run_over_pairs(void (*kernel)(T *, T *), std::vector<T> *out) {
  T *d = nullptr;
  if (cudaMalloc(&d, 2 * kPairs * sizeof(T)) != cudaSuccess) return false;
  bool ok = cudaMemset(d, 0xa5, 2 * kPairs * sizeof(T)) == cudaSuccess;
  if (ok) {
    kernel<<<kPairs / 256, 256>>>(d, d + kPairs);
    ok = cudaGetLastError() == cudaSuccess;
  }
  out->resize(2 * kPairs);
  ok = ok && cudaMemcpy(out->data(), d, out->size() * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess;
  return cudaFree(d) == cudaSuccess && ok;
}

}  // namespace

TEST(Fp8Soft, E4m3PairsExact) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no GPU";
  std::vector<uint32_t> out;
  ASSERT_TRUE(run_over_pairs(convert_pairs, &out));
  int nans = 0, bad = 0;
  for (uint32_t i = 0; i < kPairs && bad < 20; ++i) {
    for (int lane = 0; lane < 2; ++lane) {
      const uint32_t b = lane ? i >> 8 : i & 0xff;
      const uint32_t got = (out[i] >> (16 * lane)) & 0xffff, hw = (out[kPairs + i] >> (16 * lane)) & 0xffff;
      const double want = e4m3_value(b), v = f16_value(got);
      bool ok;
      if (std::isnan(want)) {
        ok = std::isnan(v) && (got >> 15) == (b >> 7);
        nans += ok;
      } else {
        ok = v == want && (got >> 15) == (b >> 7) && got == hw;
      }
      if (!ok) {
        ++bad;
        ADD_FAILURE() << "pair " << i << " lane " << lane << " byte 0x" << std::hex << b << ": got 0x" << got
                      << " (" << std::dec << v << "), want " << want << ", cuda_fp8.h 0x" << std::hex << hw;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(nans, 2 * 2 * 256);  // 0x7f and 0xff in each lane, against every other byte
}

// Both halves of a word decode their own pair: every pair in the low half
// and, with the word's other pair, in the high half.
TEST(Fp8Soft, WordDecodeExact) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no GPU";
  for (int kind = 0; kind < 2; ++kind) {
    std::vector<uint2> out;
    ASSERT_TRUE(run_over_pairs(kind ? decode_words<vattn::kern::kCacheE5M2> : decode_words<vattn::kern::kCacheE4M3>,
                               &out));
    int bad = 0, nans = 0;
    for (uint32_t i = 0; i < kPairs && bad < 20; ++i)
      for (int half = 0; half < 2; ++half) {
        const uint32_t pair = half ? i ^ 0xffffu : i, h2 = half ? out[i].y : out[i].x;
        for (int lane = 0; lane < 2; ++lane) {
          const uint32_t b = lane ? pair >> 8 : pair & 0xff, got = (h2 >> (16 * lane)) & 0xffff;
          const double want = kind ? e5m2_value(b) : e4m3_value(b), v = f16_value(got);
          // (NaN: any NaN; sm_89's e4m3 conversion gives 0x7fff for 0xff.)
          const bool ok = std::isnan(want) ? std::isnan(v) : v == want && (got >> 15) == (b >> 7);
          nans += ok && std::isnan(want);
          if (!ok) {
            ++bad;
            ADD_FAILURE() << (kind ? "e5m2" : "e4m3") << " word pair " << i << " half " << half << " byte 0x"
                          << std::hex << b << ": got 0x" << got << std::dec << " (" << v << "), want " << want;
          }
        }
      }
    EXPECT_EQ(bad, 0);
    // NaN bytes: e4m3 0x7f / 0xff; e5m2 exponent 31 with a nonzero mantissa, 6 bytes.
    EXPECT_EQ(nans, 2 * 2 * (kind ? 6 : 2) * 256);
  }
}

TEST(Fp8Soft, EncodeMatchesCudaFp8ForEveryFloat) {
  if (!have_gpu()) GTEST_SKIP() << "skipped: no GPU";
  unsigned long long *bad = nullptr;
  uint32_t *first = nullptr;
  ASSERT_EQ(cudaMalloc(&bad, 2 * sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&first, 10 * sizeof(uint32_t)), cudaSuccess);
  ASSERT_EQ(cudaMemset(bad, 0, 2 * sizeof(unsigned long long)), cudaSuccess);
  ASSERT_EQ(cudaMemset(first, 0, 10 * sizeof(uint32_t)), cudaSuccess);
  for (uint32_t hi0 = 0; hi0 < 65536; hi0 += 4096) {  // 4096 rows of 65536 floats per launch
    encode_all<<<dim3(256, 4096), 256>>>(hi0, bad, first);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  }
  unsigned long long nbad[2] = {1, 1};
  uint32_t f[10] = {};
  ASSERT_EQ(cudaMemcpy(nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(f, first, sizeof(f), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(bad);
  cudaFree(first);
  EXPECT_EQ(nbad[0], 0ull) << "e4m3, first float bits 0x" << std::hex << f[0] << " 0x" << f[1];
  EXPECT_EQ(nbad[1], 0ull) << "e5m2, first float bits 0x" << std::hex << f[4] << " 0x" << f[5];
}
