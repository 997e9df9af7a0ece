// wgmma.cuh -- Hopper (sm_90a) primitives used by attention_sm90.cuh (and,
// for its mbarriers and TMA loads, by decode.cuh's TMA instance):
// warpgroup MMA (shared-memory matrix descriptors for the 128-byte swizzled
// layout, the fence / commit / wait protocol, m64nNk16 instructions with
// fp32 accumulators and A from registers), and the
// warp-specialisation tools (mbarriers, TMA tensor loads, named barriers,
// the register hand-over between warpgroups).  Only compiled into sm_90a
// code (VATTN_SM90A); other passes (host, sm_80) see none of it, so callers
// guard their uses with VATTN_SM90A.
//
// Shared-memory layout (both operands, every 16-bit type): a tile of R rows
// by 64 elements (128 bytes per row) whose 16-byte chunk c of row r sits at
// chunk c ^ (r % 8), the tile 1024-byte aligned (the hardware applies the
// swizzle to address bits 4-6 from bits 7-9).  Wider rows (head size 128)
// are stored as consecutive such tiles ("column blocks") of R x 64.
//  - K-major operand (K as B of S = Q K^T): rows are N (keys), the
//    k16 step kk starts at block kk / 4, byte (kk % 4) * 32 of the row;
//    stride between 8-row groups (SBO) = 1024, LBO unused.
//  - MN-major operand (V as B of O = P V, transposed): rows are K (keys),
//    elements along N (head dim); SBO = 1024 (8 keys), LBO = the column
//    block stride in bytes (64 dims -> next block).
//
// Accumulator fragments: warp w of the warpgroup owns rows 16w .. 16w + 15;
// d[f][e] is row 16w + lane / 4 + 8 (e / 2), column 8f + 2 (lane % 4) +
// (e % 2) -- the mma.m16n8 layout repeated over N / 8 fragments, which is
// what softmax.cuh works on.  A from registers uses the mma.m16n8k16 A
// fragment layout per warp.
#pragma once

#include <cstdint>

#include "common.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VATTN_SM90A 1
#else
#define VATTN_SM90A 0
#endif

namespace vattn {
namespace kern {

// Descriptor of a 128-byte-swizzled operand starting at shared address
// `saddr` (bytes), with the leading / stride byte offsets described above.
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((saddr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16;
  d |= static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32;
  d |= static_cast<uint64_t>(1) << 62;  // 128-byte swizzle
  return d;
}

#if VATTN_SM90A
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Stores four 8x8 16-bit matrices from mma fragments (the inverse of
// ldmatrix.x4): r[j] is matrix j's fragment (lane l: row l / 4, elements
// 2 (l % 4) .. + 1), lane l gives the shared address of row l % 8 of matrix
// l / 8 (16 bytes).
__device__ __forceinline__ void stmatrix_x4(uint32_t saddr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(saddr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
// threadIdx.x read afresh (volatile asm: not kept live across a loop).  For
// a value ptxas would otherwise hold in a register and, under register
// pressure, spill inside a hot loop: rereading the special register costs
// one S2R instead of a local store and load.
__device__ __forceinline__ int tid_x_now() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
  return t;
}
// Named CTA barrier `id` (1..15) over `count` threads: waits for the count.
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// Arrives on named barrier `id` (counted in its `count`) without waiting.
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// ---- mbarriers (shared memory, 8 bytes, 8-byte aligned), the hand-off
// between a producer warpgroup and the consumer warpgroups.  A barrier
// completes a phase when `count` arrivals have been made; waiters name the
// parity of the phase they wait for (a fresh barrier counts as having
// completed the phase of parity 1, so a first wait on parity 1 passes).
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// An arrival that fires when every cp.async this thread issued before it has
// landed (counted in the barrier's `count`).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Raises the bytes the barrier's current phase waits for (asynchronous
// copies that signal complete_tx on it), without an arrival.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// TMA: the box of tensor map `map` (a __grid_constant__ kernel parameter)
// at coordinates (c0 .. c3) into shared memory at dst, laid out as the map's
// swizzle says; its bytes count as complete_tx on barrier bar.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void *map, int c0, int c1, int c2, int c3,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// tma_load_4d with an L2 cache policy (l2_evict_first_policy()).
__device__ __forceinline__ void tma_load_4d_pol(uint32_t dst, const void *map, int c0, int c1, int c2, int c3,
                                                uint32_t bar, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, "
      "%3, %4, %5}], [%6], %7;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "l"(pol)
      : "memory");
}
// One arrival on bar that also raises the bytes its current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Orders this thread's view of shared memory written through the generic
// proxy (cp.async, st.shared) before its later async-proxy reads (wgmma
// operands) when c holds; predicated, so no branch sits near the wgmma
// issue (ptxas serialises wgmma across some branches).
__device__ __forceinline__ void fence_proxy_async_if(bool c) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %0, 0;\n@p fence.proxy.async.shared::cta;\n}\n" ::"r"(
                   static_cast<int>(c))
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Hands registers between warpgroups (every warp of the warpgroup executes
// it): a producer warpgroup gives up registers the consumers then take.
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
// Keeps the compiler from moving accesses of accumulator registers across
// the asynchronous MMA window.
template <int NF>
__device__ __forceinline__ void wgmma_fence_regs(float (&d)[NF][4]) {
#pragma unroll
  for (int f = 0; f < NF; ++f)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[f][e])::"memory");
}

template <int NF>
__device__ __forceinline__ void wgmma_fence_regs(uint32_t (&a)[NF][4]) {
#pragma unroll
  for (int f = 0; f < NF; ++f)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[f][e])::"memory");
}

// One m64nNk16 product with A from registers: D[64 x N] (+)= A[64 x 16]
// B[16 x N], B in shared memory through descriptor db, K-major (TB = 0) or
// MN-major (TB = 1, the transposed-B flag); accumulate == 0 overwrites D.
// Specialised per shape and type below.
template <int N, class T>
struct WgmmaRS;
// D (+)= A B, B K-major.
template <int N, class T>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t db,
                                         int accumulate) {
  WgmmaRS<N, T>::template run<0>(d, a, db, accumulate);
}
// wgmma_rs_tb, issued only where on != 0: equal over the warpgroup, and
// known to ptxas to be warp-uniform (e.g. broadcast by __shfl_sync from
// lane 0; otherwise ptxas serialises every product of the kernel, C7520).
template <int N, class T>
__device__ __forceinline__ void wgmma_rs_tb_if(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t db,
                                               int accumulate, int on);
// D (+)= A B with A from shared memory (descriptor da, K-major: the
// layout above with the 64 rows of the warpgroup's m64 block), B K-major.
template <int N, class T>
struct WgmmaSS;
template <int N, class T>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t da, uint64_t db, int accumulate) {
  WgmmaSS<N, T>::run(d, da, db, accumulate);
}
// D (+)= A B, B MN-major.
template <int N, class T>
__device__ __forceinline__ void wgmma_rs_tb(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t db,
                                            int accumulate = 1) {
  WgmmaRS<N, T>::template run<1>(d, a, db, accumulate);
}

// ---- instances: m64nNk16 products (R = N / 2 accumulator registers per
// thread), bf16 and fp16: A from registers for N = 64, 96, 128, 256 (the
// S products of head sizes 64 / 128 and every P V product), A from shared
// memory for N = 32, 48 (the S products of head size 256, whose Q stays in
// shared memory).  VATTN_WG_D<R>: the accumulator operand list "%0, ...,
// %<R-1>"; VATTN_WG_C<R>: its "+f" constraints; the remaining operands are
// numbered from R on (I0 .. I6 below).
#define VATTN_WG_D16 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define VATTN_WG_C16 \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), \
  "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), \
  "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
  "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
#define VATTN_WG_D24 VATTN_WG_D16 \
  ", %16, %17, %18, %19, %20, %21, %22, %23"
#define VATTN_WG_C24 VATTN_WG_C16, \
  "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), \
  "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3])
#define VATTN_WG_D32 VATTN_WG_D24 \
  ", %24, %25, %26, %27, %28, %29, %30, %31"
#define VATTN_WG_C32 VATTN_WG_C24, \
  "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), \
  "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
#define VATTN_WG_D48 VATTN_WG_D32 \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define VATTN_WG_C48 VATTN_WG_C32, \
  "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), \
  "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), \
  "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), \
  "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3])
#define VATTN_WG_D64 VATTN_WG_D48 \
  ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define VATTN_WG_C64 VATTN_WG_C48, \
  "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), \
  "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), \
  "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), \
  "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
#define VATTN_WG_D128 VATTN_WG_D64 \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
  ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" \
  ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
  ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define VATTN_WG_C128 VATTN_WG_C64, \
  "+f"(d[16][0]), "+f"(d[16][1]), "+f"(d[16][2]), "+f"(d[16][3]), \
  "+f"(d[17][0]), "+f"(d[17][1]), "+f"(d[17][2]), "+f"(d[17][3]), \
  "+f"(d[18][0]), "+f"(d[18][1]), "+f"(d[18][2]), "+f"(d[18][3]), \
  "+f"(d[19][0]), "+f"(d[19][1]), "+f"(d[19][2]), "+f"(d[19][3]), \
  "+f"(d[20][0]), "+f"(d[20][1]), "+f"(d[20][2]), "+f"(d[20][3]), \
  "+f"(d[21][0]), "+f"(d[21][1]), "+f"(d[21][2]), "+f"(d[21][3]), \
  "+f"(d[22][0]), "+f"(d[22][1]), "+f"(d[22][2]), "+f"(d[22][3]), \
  "+f"(d[23][0]), "+f"(d[23][1]), "+f"(d[23][2]), "+f"(d[23][3]), \
  "+f"(d[24][0]), "+f"(d[24][1]), "+f"(d[24][2]), "+f"(d[24][3]), \
  "+f"(d[25][0]), "+f"(d[25][1]), "+f"(d[25][2]), "+f"(d[25][3]), \
  "+f"(d[26][0]), "+f"(d[26][1]), "+f"(d[26][2]), "+f"(d[26][3]), \
  "+f"(d[27][0]), "+f"(d[27][1]), "+f"(d[27][2]), "+f"(d[27][3]), \
  "+f"(d[28][0]), "+f"(d[28][1]), "+f"(d[28][2]), "+f"(d[28][3]), \
  "+f"(d[29][0]), "+f"(d[29][1]), "+f"(d[29][2]), "+f"(d[29][3]), \
  "+f"(d[30][0]), "+f"(d[30][1]), "+f"(d[30][2]), "+f"(d[30][3]), \
  "+f"(d[31][0]), "+f"(d[31][1]), "+f"(d[31][2]), "+f"(d[31][3])
// The product of one shape and type, A from registers; I0 .. I7: the
// operand numbers after the accumulators (the four A registers, the B
// descriptor, the accumulate flag, the transposed-B immediate, run_if's
// guard).  VATTN_WG_RS_TEXT: the instruction, predicate p = accumulate.
#define VATTN_WG_RS_TEXT(N, PT, DREGS, I0, I1, I2, I3, I4, I6)                                     \
  "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PT "." PT " {" DREGS "}, {%" I0 ", %" I1 ", %" I2 \
  ", %" I3 "}, %" I4 ", p, 1, 1, %" I6 ";\n}\n"
#define VATTN_WGMMA_SHAPE(N, TY, PT, DREGS, CONS, I0, I1, I2, I3, I4, I5, I6, I7)                  \
  template <>                                                                                       \
  struct WgmmaRS<N, TY> {                                                                           \
    template <int TB>                                                                               \
    __device__ __forceinline__ static void run(float (&d)[N / 8][4], const uint32_t (&a)[4],        \
                                               uint64_t db, int accumulate) {                       \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" I5 ", 0;\n"                                 \
                   VATTN_WG_RS_TEXT(N, PT, DREGS, I0, I1, I2, I3, I4, I6)                           \
                   : CONS                                                                           \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(TB)); \
    }                                                                                               \
    /* run under guard predicate q = on (no branch) */                                              \
    template <int TB>                                                                               \
    __device__ __forceinline__ static void run_if(float (&d)[N / 8][4], const uint32_t (&a)[4],     \
                                                  uint64_t db, int accumulate, int on) {            \
      asm volatile("{\n.reg .pred p, q;\nsetp.ne.b32 p, %" I5 ", 0;\nsetp.ne.b32 q, %" I7 ", 0;\n@q " \
                   VATTN_WG_RS_TEXT(N, PT, DREGS, I0, I1, I2, I3, I4, I6)                           \
                   : CONS                                                                           \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(TB), \
                     "r"(on));                                                                      \
    }                                                                                               \
  };
// A from shared memory (descriptor da, K-major), B K-major (descriptor
// db); I0 .. I2: the two descriptors and the accumulate flag.
#define VATTN_WGMMA_SS_SHAPE(N, TY, PT, DREGS, CONS, I0, I1, I2)                                  \
  template <>                                                                                     \
  struct WgmmaSS<N, TY> {                                                                         \
    __device__ __forceinline__ static void run(float (&d)[N / 8][4], uint64_t da, uint64_t db,    \
                                               int accumulate) {                                  \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" I2 ", 0;\n"                               \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PT "." PT " {" DREGS "}, %" I0 \
                   ", %" I1 ", p, 1, 1, 0, 0;\n}\n"                                                 \
                   : CONS                                                                         \
                   : "l"(da), "l"(db), "r"(accumulate));                                          \
    }                                                                                             \
  };
VATTN_WGMMA_SHAPE(64, __nv_bfloat16, "bf16", VATTN_WG_D32, VATTN_WG_C32, "32", "33", "34", "35", "36", "37", "38", "39")
VATTN_WGMMA_SHAPE(64, __half, "f16", VATTN_WG_D32, VATTN_WG_C32, "32", "33", "34", "35", "36", "37", "38", "39")
VATTN_WGMMA_SHAPE(96, __nv_bfloat16, "bf16", VATTN_WG_D48, VATTN_WG_C48, "48", "49", "50", "51", "52", "53", "54", "55")
VATTN_WGMMA_SHAPE(96, __half, "f16", VATTN_WG_D48, VATTN_WG_C48, "48", "49", "50", "51", "52", "53", "54", "55")
VATTN_WGMMA_SHAPE(128, __nv_bfloat16, "bf16", VATTN_WG_D64, VATTN_WG_C64, "64", "65", "66", "67", "68", "69", "70", "71")
VATTN_WGMMA_SHAPE(128, __half, "f16", VATTN_WG_D64, VATTN_WG_C64, "64", "65", "66", "67", "68", "69", "70", "71")
VATTN_WGMMA_SHAPE(256, __nv_bfloat16, "bf16", VATTN_WG_D128, VATTN_WG_C128, "128", "129", "130", "131", "132", "133", "134", "135")
VATTN_WGMMA_SHAPE(256, __half, "f16", VATTN_WG_D128, VATTN_WG_C128, "128", "129", "130", "131", "132", "133", "134", "135")
VATTN_WGMMA_SS_SHAPE(32, __nv_bfloat16, "bf16", VATTN_WG_D16, VATTN_WG_C16, "16", "17", "18")
VATTN_WGMMA_SS_SHAPE(32, __half, "f16", VATTN_WG_D16, VATTN_WG_C16, "16", "17", "18")
VATTN_WGMMA_SS_SHAPE(48, __nv_bfloat16, "bf16", VATTN_WG_D24, VATTN_WG_C24, "24", "25", "26")
VATTN_WGMMA_SS_SHAPE(48, __half, "f16", VATTN_WG_D24, VATTN_WG_C24, "24", "25", "26")
template <int N, class T>
__device__ __forceinline__ void wgmma_rs_tb_if(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t db,
                                               int accumulate, int on) {
  WgmmaRS<N, T>::template run_if<1>(d, a, db, accumulate, on);
}
#undef VATTN_WGMMA_SHAPE
#undef VATTN_WG_RS_TEXT
#undef VATTN_WGMMA_SS_SHAPE
#undef VATTN_WG_D16
#undef VATTN_WG_C16
#undef VATTN_WG_D24
#undef VATTN_WG_C24
#undef VATTN_WG_D32
#undef VATTN_WG_C32
#undef VATTN_WG_D48
#undef VATTN_WG_C48
#undef VATTN_WG_D64
#undef VATTN_WG_C64
#undef VATTN_WG_D128
#undef VATTN_WG_C128
#endif  // VATTN_SM90A

}  // namespace kern
}  // namespace vattn
