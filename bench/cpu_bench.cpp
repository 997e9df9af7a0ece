// cpu_bench.cpp -- Google Benchmark suite for the CPU backend, through the C
// API only.  Reports, next to a plain multi-threaded memcpy measured in the
// same run:
//   decode:  bytes/s = K+V bytes of every context token read once per step
//   prefill: FLOP/s  = 4 * head_size * (visible (query, key) pairs) * num_heads
// Inputs are random (never zeros); the cache is paged through a shuffled
// block table.  Threads: VATTN_BENCH_THREADS (builder num_threads; default 0
// = the cores in the affinity mask, e.g. `taskset -c 0,1`).
//
//   cpu_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "vattn.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace {

struct Buf {
  std::vector<int64_t> shape, strides;
  std::vector<unsigned char> bytes;
  DLTensor t{};
  Buf(std::vector<int64_t> s, DLDataType dt, std::vector<int64_t> st = {})
      : shape(std::move(s)), strides(std::move(st)) {
    int64_t n = 1;
    for (auto x : shape) n *= x;
    bytes.resize(static_cast<size_t>(n) * dt.bits / 8);
    t.data = bytes.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dt;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
  // Random values in about [-1, 1] (never zeros), 64 bits per step
  // (splitmix64) so that half a gigabyte fills in well under a second.
  void fill_random(std::mt19937 &g) {
    uint64_t x = g();
    auto next = [&x] {
      uint64_t z = (x += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      return z ^ (z >> 31);
    };
    if (t.dtype.bits == 16) {
      // 16-bit patterns: sign, a fixed exponent band, random mantissa.
      const uint64_t base = t.dtype.code == kDLBfloat ? 0x3c003c003c003c00ull : 0x3000300030003000ull;
      const uint64_t mask = 0x83ff83ff83ff83ffull;
      const size_t words = bytes.size() / 8;
      for (size_t i = 0; i < words; ++i) {
        const uint64_t w = base | (next() & mask);
        std::memcpy(bytes.data() + 8 * i, &w, 8);
      }
    } else {
      auto *p = reinterpret_cast<float *>(bytes.data());
      for (size_t i = 0; i < bytes.size() / 4; ++i)
        p[i] = static_cast<float>(static_cast<int64_t>(next() >> 11) - (int64_t(1) << 52)) * 0x1p-52f;
    }
  }
};

struct Setup {
  vattn_builder_t *b = nullptr;
  vattn_plan_t *plan = nullptr;
  vattn_layer_t *layer = nullptr;
  vattn_metadata_t *md = nullptr;
  std::unique_ptr<Buf> q, out, cache;
  vattn_forward_args_t args{};
  double kv_bytes = 0, flops = 0;
  ~Setup() {
    vattn_layer_destroy(layer);
    vattn_plan_destroy(plan);
    vattn_builder_destroy(b);
    vattn_metadata_destroy(md);
  }
};

// B requests of q_len new tokens after ctx cached ones (K/V already cached:
// the forward reads the cache, as a decode step does after its write).
std::unique_ptr<Setup> make(int B, int ctx, int q_len, int H, int KVH, int D, DLDataType dt,
                            int32_t vdt, int threads, bool hnd = false) {
  auto s = std::make_unique<Setup>();
  std::mt19937 g(1234);
  const int bs = 16, seq = ctx + q_len, per = (seq + bs - 1) / bs;
  const int64_t nb = int64_t(B) * per + 1;
  // NHD: compact (2, nb, bs, H, D); HND: physical (2, nb, H, bs, D).
  std::vector<int64_t> st;
  if (hnd) st = {nb * KVH * bs * D, int64_t(KVH) * bs * D, D, int64_t(bs) * D, 1};
  s->cache = std::make_unique<Buf>(std::vector<int64_t>{2, nb, bs, KVH, D}, dt, st);
  s->cache->fill_random(g);
  std::vector<int32_t> ids(static_cast<size_t>(nb - 1));
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), g);
  std::vector<int32_t> qsl{0}, seq_lens, table(ids.begin(), ids.end());
  for (int r = 0; r < B; ++r) {
    qsl.push_back(qsl.back() + q_len);
    seq_lens.push_back(seq);
  }
  std::vector<int64_t> slots(static_cast<size_t>(qsl.back()), -1);
  const int64_t T = qsl.back();
  s->q = std::make_unique<Buf>(std::vector<int64_t>{T, H, D}, dt);
  s->q->fill_random(g);
  s->out = std::make_unique<Buf>(std::vector<int64_t>{T, H, D}, dt);
  vattn_metadata_desc_t d;
  vattn_metadata_desc_init(&d);
  d.num_reqs = B;
  d.num_actual_tokens = T;
  d.query_start_loc = qsl.data();
  d.seq_lens = seq_lens.data();
  d.block_table = table.data();
  d.block_table_rows = B;
  d.block_table_cols = per;
  d.slot_mapping = slots.data();
  d.slot_mapping_len = T;
  d.block_size = bs;
  vattn_metadata_create(&s->md, &d);
  const vattn_backend_t *cpu = nullptr;
  vattn_backend_find("CPU", &cpu);
  vattn_builder_options_t bo;
  vattn_builder_options_init(&bo);
  bo.num_heads = H;
  bo.num_kv_heads = KVH;
  bo.head_size = D;
  bo.block_size = bs;
  bo.num_threads = threads;
  bo.max_num_tokens = std::max<int64_t>(T, 1);
  bo.max_blocks_per_req = per;
  vattn_builder_create(&s->b, cpu, &bo);
  vattn_plan_create(&s->plan, s->b);
  if (vattn_builder_build(s->b, s->plan, 0, s->md, 0, nullptr) != VATTN_OK) return nullptr;
  vattn_layer_options_t lo;
  vattn_layer_options_init(&lo);
  lo.num_heads = H;
  lo.num_kv_heads = KVH;
  lo.head_size = D;
  lo.dtype = vdt;
  lo.block_size = bs;
  vattn_layer_create(&s->layer, cpu, &lo);
  vattn_forward_args_init(&s->args);
  s->args.query = &s->q->t;
  s->args.output = &s->out->t;
  s->args.kv_cache = &s->cache->t;
  s->kv_bytes = double(B) * seq * KVH * D * 2 * (dt.bits / 8);
  // Causal pairs per request: sum over new tokens of (ctx + i + 1).
  const double pairs = double(q_len) * ctx + double(q_len) * (q_len + 1) / 2;
  s->flops = 4.0 * D * H * pairs * B;
  return s;
}

void run(benchmark::State &st, Setup *s) {
  if (!s) {
    st.SkipWithError("setup failed");
    return;
  }
  for (auto _ : st) {
    if (vattn_layer_forward(s->layer, s->plan, &s->args) != VATTN_OK) {
      st.SkipWithError(vattn_last_error_message());
      return;
    }
    benchmark::ClobberMemory();
  }
}

// Builder threads: VATTN_BENCH_THREADS, default 0 (= the usable cores).
int bench_threads() {
  const char *e = std::getenv("VATTN_BENCH_THREADS");
  return e ? std::atoi(e) : 0;
}

const DLDataType kBf16{kDLBfloat, 16, 1}, kF16{kDLFloat, 16, 1}, kF32{kDLFloat, 32, 1};

void BM_Decode(benchmark::State &st) {
  const int B = int(st.range(0)), ctx = int(st.range(1)), dtc = int(st.range(2));
  const bool hnd = st.range(3) != 0;
  const DLDataType dt = dtc == 0 ? kBf16 : dtc == 1 ? kF16 : kF32;
  const int32_t vdt = dtc == 0 ? VATTN_DTYPE_BFLOAT16 : dtc == 1 ? VATTN_DTYPE_FLOAT16 : VATTN_DTYPE_FLOAT32;
  auto s = make(B, ctx, 1, 32, 8, 128, dt, vdt, bench_threads(), hnd);
  run(st, s.get());
  if (s) st.counters["bytes/s"] = benchmark::Counter(s->kv_bytes, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Prefill(benchmark::State &st) {
  const int B = int(st.range(0)), L = int(st.range(1)), D = int(st.range(2));
  auto s = make(B, 0, L, 32 * 128 / D, 8, D, kBf16, VATTN_DTYPE_BFLOAT16, bench_threads());
  run(st, s.get());
  if (s) st.counters["FLOP/s"] = benchmark::Counter(s->flops, benchmark::Counter::kIsIterationInvariantRate);
}

// Cores this process may use (what the backend's pool uses for 0 threads).
int usable_cores() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Plain memcpy over the usable cores, 256 MiB, for the bandwidth ceiling.
void BM_Memcpy(benchmark::State &st) {
  const size_t n = size_t(256) << 20;
  const int T = usable_cores();
  std::vector<unsigned char> a(n, 1), b(n, 2);
  for (auto _ : st) {
    std::vector<std::thread> th;
    for (int t = 0; t < T; ++t)
      th.emplace_back([&, t] {
        const size_t lo = n * t / T, hi = n * (t + 1) / T;
        std::memcpy(b.data() + lo, a.data() + lo, hi - lo);
      });
    for (auto &x : th) x.join();
    benchmark::DoNotOptimize(b.data());
  }
  // Bytes read (the decode counter also counts bytes read only).
  st.counters["bytes/s"] = benchmark::Counter(double(n), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
// Decode: (requests, context, dtype 0=bf16 1=f16 2=f32, layout 0=NHD 1=HND),
// 32 q heads / 8 kv heads / D 128.
// 8 x 2048 reads 64 MiB (bf16), 32 x 4096 reads 512 MiB: beyond any L3.
BENCHMARK(BM_Decode)
    ->Args({8, 2048, 0, 0})->Args({8, 2048, 0, 1})->Args({32, 4096, 0, 0})->Args({32, 4096, 0, 1})
    ->Args({8, 2048, 1, 0})->Args({8, 2048, 2, 0})
    ->Unit(benchmark::kMillisecond)->UseRealTime();
// Prefill: (requests, tokens, head_size), bf16, causal.
BENCHMARK(BM_Prefill)->Args({1, 512, 128})->Args({4, 256, 64})->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
