// vattn-bench -- times vattn's attention and cache-write paths through the
// public C API only (include/vattn.h), on the CUDA or the CPU backend.
//
// Workloads (one per run):
//   decode       B requests, each 1 new query token over a context of L keys
//   prefill      B requests of L new tokens each (causal by default), no context
//   mixed        D decodes (context Ld) + P chunked prefills of Q tokens after Lp
//                cached tokens, decodes first (vLLM's reordered batch)
//   cache-write  vattn_reshape_and_cache of B x L new tokens into the paged cache
//
// Method: the KV cache is paged with blocks drawn from a random permutation
// of all blocks; every input is random (never zeros).  The inputs (Q, the
// cache blocks used, block tables / slot mappings, outputs) exist in several
// copies that together exceed --rotate-mb (default 256 MB, 5x an H100's L2),
// and run i uses copy i % copies, so consecutive runs never hit in L2.
// After warm-up every run is timed on its own (CUDA events on the GPU,
// steady_clock on the CPU); the median, p10 and p90 are reported.  The device
// copy ceiling is measured in the same process (cudaMemcpy device to device,
// bytes read + written; on the CPU a multi-threaded memcpy).  On CUDA the
// eager median is also set against a plain streaming read of the workload's
// byte count, timed the same way (the "read" line, JSON "read_ref"): the
// reachable floor where the copy ceiling is not (small shapes).  Achieved
// bandwidth counts the bytes the kernel must move at least once: decode =
// K+V of every context token + Q + O; prefill is rated in TFLOP/s of
// 4 * head_size * num_heads * (visible (q, k) pairs) against a stated matrix
// rate (--matrix-tflops).  --graph also captures each copy's
// vattn_layer_forward in a CUDA graph and times the replays.  --check first
// runs a small shape of the same kind on this backend and on the CPU backend
// with identical inputs and refuses to time if the outputs disagree.
//
// Run `vattn-bench --help` for the options.  Exit status: 0 ok, 1 check
// failed, 2 usage or API error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_report.h"
#include "bench_values.h"
#include "vattn.h"

#ifdef VATTN_BENCH_CUDA
#include <cuda_runtime_api.h>
extern "C" int vbench_fill_device(void *base, long long n, int kind, unsigned long long seed,
                                  float scale, void *stream);
extern "C" int vbench_read_device(const void *base, long long bytes, void *sink, void *stream);
#endif

namespace {

using vbench::Json;
using vbench::Stats;

[[noreturn]] void die(const char *fmt, const char *a = "", const char *b = "") {
  std::fprintf(stderr, "vattn-bench: ");
  std::fprintf(stderr, fmt, a, b);
  std::fprintf(stderr, "\n");
  std::exit(2);
}

#define VCHECK(call)                                                                         \
  do {                                                                                       \
    vattn_status_t st_ = (call);                                                             \
    if (st_ != VATTN_OK) die("%s failed: %s", #call, (std::string(vattn_status_string(st_)) + ": " + \
                                                      vattn_last_error_message()).c_str());  \
  } while (0)

#ifdef VATTN_BENCH_CUDA
#define CUCHECK(call)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) die("%s failed: %s", #call, cudaGetErrorString(e_));              \
  } while (0)

// The timed part of every CUDA measurement here: `iters` runs of launch(i)
// on st, each between two events recorded back to back (no host sync
// between runs), microseconds per run.  Warm-up is the caller's.
template <class F>
std::vector<double> time_event_pairs(cudaStream_t st, int iters, F launch) {
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(iters));
  for (auto &e : ev) CUCHECK(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    CUCHECK(cudaEventRecord(ev[2 * i], st));
    launch(i);
    CUCHECK(cudaEventRecord(ev[2 * i + 1], st));
  }
  CUCHECK(cudaStreamSynchronize(st));
  std::vector<double> us;
  us.reserve(iters);
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    CUCHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    us.push_back(ms * 1e3);
  }
  for (auto e : ev) (void)cudaEventDestroy(e);
  return us;
}
#endif

// ---- options -----------------------------------------------------------------------
struct Options {
  std::string device;  // "" = cuda when a GPU is usable, else cpu
  std::string workload = "decode";
  int64_t batch = 8, len = 1024;
  int64_t len_min = 0;  // decode: contexts drawn from [len_min, len] (0 = all len)
  int heads = 32, kv_heads = 8, head_size = 128, block_size = 16;
  std::string dtype = "bf16", kv_dtype = "auto", layout = "nhd";
  std::string block_order = "shuffled";  // or "sequential": each copy's blocks in request order,
                                         // or "window:W": shuffled inside windows of W blocks,
                                         // or "sorted": shuffled, each request's blocks then
                                         // in address order
  int64_t block_window = 0;              // W of "window:W"
  int causal = 1;
  int prefills = 4, chunk = 512, prefill_ctx = 2048, decodes = 128, decode_ctx = 2048;
  int iters = 100, warmup = 10;
  double rotate_mb = -1;  // -1 = 256 on CUDA, 64 on CPU
  bool graph = false, write_kv = false, check = false, check_only = false;
  std::string json, label;
  double matrix_tflops = -1;  // -1 = default for the device, 0 = none
  int threads = 0;
  int max_splits = 0;  // builder max_num_splits (0 = its default)
  int table_cols = 0;  // block-table width (0 = the batch's longest request; vLLM: max_model_len / block)
  uint64_t seed = 20261121;
  double check_tol = 0;  // 0 = default for the dtypes
  bool quiet = false;
};

void usage(int rc) {
  std::FILE *f = rc ? stderr : stdout;
  std::fprintf(f,
      "usage: vattn-bench [options]\n"
      "  --device cpu|cuda            backend (default: cuda when a GPU is usable)\n"
      "  --workload decode|prefill|mixed|cache-write   (default decode)\n"
      "  --batch B --len L            requests and their length: decode context / prefill\n"
      "                               length / cache-write tokens per request (default 8, 1024)\n"
      "  --len-min M                  decode only: each request's context drawn uniformly from\n"
      "                               [M, L] (--seed; serving batches mix lengths); default all L\n"
      "  --heads H --kv-heads K --head-size D --block-size S   (default 32 8 128 16)\n"
      "  --dtype bf16|fp16|fp32       q/k/v/output dtype (default bf16)\n"
      "  --kv-dtype auto|fp8|fp8_e5m2 KV cache dtype (default auto; fp8 = e4m3)\n"
      "  --layout nhd|hnd             KV cache layout (default nhd)\n"
      "  --block-order shuffled|sequential|sorted|window:W   cache blocks drawn from a random\n"
      "                               permutation (default), in request order (what paging\n"
      "                               costs), or shuffled only inside runs of W consecutive\n"
      "                               blocks (what the shuffle costs at which scale), or\n"
      "                               sorted (shuffled, then each request's row ascending:\n"
      "                               random placement visited in address order)\n"
      "  --causal 0|1                 prefill mask (default 1)\n"
      "  --prefills P --chunk Q --prefill-ctx C --decodes N --decode-ctx C\n"
      "                               mixed batch (default 4 x 512 after 2048, 128 at 2048)\n"
      "  --write-kv                   also pass new K/V to the forward (timed cache write)\n"
      "  --iters N --warmup N         timed runs (>= 50 recommended; default 100) / warm-up\n"
      "  --rotate-mb MB               input copies span at least this much (default 256 GPU, 64 CPU)\n"
      "  --graph                      also time CUDA-graph replays of the captured forward\n"
      "  --check                      compare a small shape of this workload with the CPU\n"
      "                               backend first; refuse to time on mismatch\n"
      "  --check-only                 only the check\n"
      "  --check-tol X                relative L2 tolerance of the check (default 1e-2; fp32 1e-4)\n"
      "  --matrix-tflops X            stated matrix rate for prefill %% (default 800 on H100/H200)\n"
      "  --threads N                  CPU backend worker threads (0 = all)\n"
      "  --max-splits N               builder max_num_splits: split-KV cap (0 = default)\n"
      "  --table-cols N               block-table width (builder max_blocks_per_req; 0 = the longest\n"
      "                               request's blocks; a serving engine's is max_model_len / block)\n"
      "  --seed S  --label NAME  --json FILE  --quiet\n");
  std::exit(rc);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) die("option %s needs a value", a.c_str());
      return argv[++i];
    };
    auto ival = [&]() -> long long {
      std::string v = val();
      char *end = nullptr;
      long long x = std::strtoll(v.c_str(), &end, 10);
      if (!end || *end) die("option %s: '%s' is not an integer", a.c_str(), v.c_str());
      return x;
    };
    auto fval = [&]() -> double {
      std::string v = val();
      char *end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (!end || *end) die("option %s: '%s' is not a number", a.c_str(), v.c_str());
      return x;
    };
    if (a == "--help" || a == "-h") usage(0);
    else if (a == "--device") o.device = val();
    else if (a == "--workload") o.workload = val();
    else if (a == "--batch") o.batch = ival();
    else if (a == "--len") o.len = ival();
    else if (a == "--len-min") o.len_min = ival();
    else if (a == "--heads") o.heads = static_cast<int>(ival());
    else if (a == "--kv-heads") o.kv_heads = static_cast<int>(ival());
    else if (a == "--head-size") o.head_size = static_cast<int>(ival());
    else if (a == "--block-size") o.block_size = static_cast<int>(ival());
    else if (a == "--dtype") o.dtype = val();
    else if (a == "--kv-dtype") o.kv_dtype = val();
    else if (a == "--layout") o.layout = val();
    else if (a == "--block-order") o.block_order = val();
    else if (a == "--causal") o.causal = static_cast<int>(ival());
    else if (a == "--prefills") o.prefills = static_cast<int>(ival());
    else if (a == "--chunk") o.chunk = static_cast<int>(ival());
    else if (a == "--prefill-ctx") o.prefill_ctx = static_cast<int>(ival());
    else if (a == "--decodes") o.decodes = static_cast<int>(ival());
    else if (a == "--decode-ctx") o.decode_ctx = static_cast<int>(ival());
    else if (a == "--write-kv") o.write_kv = true;
    else if (a == "--iters") o.iters = static_cast<int>(ival());
    else if (a == "--warmup") o.warmup = static_cast<int>(ival());
    else if (a == "--rotate-mb") o.rotate_mb = fval();
    else if (a == "--graph") o.graph = true;
    else if (a == "--check") o.check = true;
    else if (a == "--check-only") o.check = o.check_only = true;
    else if (a == "--check-tol") o.check_tol = fval();
    else if (a == "--matrix-tflops") o.matrix_tflops = fval();
    else if (a == "--threads") o.threads = static_cast<int>(ival());
    else if (a == "--max-splits") o.max_splits = static_cast<int>(ival());
    else if (a == "--table-cols") o.table_cols = static_cast<int>(ival());
    else if (a == "--seed") o.seed = static_cast<uint64_t>(ival());
    else if (a == "--label") o.label = val();
    else if (a == "--json") o.json = val();
    else if (a == "--quiet") o.quiet = true;
    else {
      std::fprintf(stderr, "vattn-bench: unknown option '%s'\n", a.c_str());
      usage(2);
    }
  }
  const std::string &w = o.workload;
  if (w != "decode" && w != "prefill" && w != "mixed" && w != "cache-write")
    die("--workload '%s': expected decode, prefill, mixed or cache-write", w.c_str());
  if (o.batch < 1 || o.len < 1) die("--batch and --len must be >= 1");
  if (o.len_min < 0 || o.len_min > o.len) die("--len-min must be in [0, --len]");
  if (o.len_min > 0 && o.workload != "decode") die("--len-min applies to --workload decode only");
  if (o.heads < 1 || o.kv_heads < 1 || o.heads % o.kv_heads) die("--heads must be a multiple of --kv-heads");
  if (o.head_size < 1 || o.block_size < 1) die("--head-size and --block-size must be >= 1");
  if (o.iters < 1 || o.warmup < 0) die("--iters must be >= 1 and --warmup >= 0");
  if (o.max_splits < 0) die("--max-splits must be >= 0");
  if (o.table_cols < 0) die("--table-cols must be >= 0");
  if (o.block_order.rfind("window:", 0) == 0) {
    char *end = nullptr;
    const char *w = o.block_order.c_str() + 7;
    const long long v = std::strtoll(w, &end, 10);
    if (!*w || !end || *end || v < 1)
      die("--block-order '%s': W of window:W must be an integer >= 1", o.block_order.c_str());
    o.block_window = v;
  } else if (o.block_order != "shuffled" && o.block_order != "sequential" && o.block_order != "sorted") {
    die("--block-order '%s': expected shuffled, sequential, sorted or window:W", o.block_order.c_str());
  }
  if (o.prefills < 0 || o.decodes < 0 || o.prefills + o.decodes < 1 || o.chunk < 1 ||
      o.prefill_ctx < 0 || o.decode_ctx < 1)
    die("mixed batch: need prefills + decodes >= 1, --chunk >= 1, --decode-ctx >= 1");
  return o;
}

// ---- dtypes ------------------------------------------------------------------------
struct Types {
  int32_t dtype = VATTN_DTYPE_BFLOAT16;          // q/k/v/o
  int32_t kv_cache_dtype = VATTN_KV_CACHE_DTYPE_AUTO;
  int32_t cache_dtype = VATTN_DTYPE_BFLOAT16;    // spec dtype of the cache
  int32_t elem = vbench::kBF16, cache_elem = vbench::kBF16;
  DLDataType dl{kDLBfloat, 16, 1};
  size_t es = 2, kv_es = 2;
};

Types types_of(const Options &o) {
  Types t;
  if (o.dtype == "bf16") {
    t.dtype = VATTN_DTYPE_BFLOAT16, t.elem = vbench::kBF16, t.dl = {kDLBfloat, 16, 1}, t.es = 2;
  } else if (o.dtype == "fp16") {
    t.dtype = VATTN_DTYPE_FLOAT16, t.elem = vbench::kF16, t.dl = {kDLFloat, 16, 1}, t.es = 2;
  } else if (o.dtype == "fp32") {
    t.dtype = VATTN_DTYPE_FLOAT32, t.elem = vbench::kF32, t.dl = {kDLFloat, 32, 1}, t.es = 4;
  } else {
    die("--dtype '%s': expected bf16, fp16 or fp32", o.dtype.c_str());
  }
  if (o.kv_dtype == "auto") {
    t.kv_cache_dtype = VATTN_KV_CACHE_DTYPE_AUTO, t.cache_dtype = t.dtype, t.cache_elem = t.elem,
    t.kv_es = t.es;
  } else if (o.kv_dtype == "fp8" || o.kv_dtype == "fp8_e4m3") {
    t.kv_cache_dtype = VATTN_KV_CACHE_DTYPE_FP8_E4M3, t.cache_dtype = VATTN_DTYPE_FP8_E4M3,
    t.cache_elem = vbench::kE4M3, t.kv_es = 1;
  } else if (o.kv_dtype == "fp8_e5m2") {
    t.kv_cache_dtype = VATTN_KV_CACHE_DTYPE_FP8_E5M2, t.cache_dtype = VATTN_DTYPE_FP8_E5M2,
    t.cache_elem = vbench::kE5M2, t.kv_es = 1;
  } else {
    die("--kv-dtype '%s': expected auto, fp8 or fp8_e5m2", o.kv_dtype.c_str());
  }
  return t;
}

// ---- the batch -----------------------------------------------------------------------
struct Req {
  int32_t q = 1, seq = 1;  // new tokens, total tokens (context = seq - q)
};

std::vector<Req> requests_of(const Options &o) {
  std::vector<Req> r;
  const int32_t L = static_cast<int32_t>(o.len);
  if (o.workload == "decode") {
    r.assign(o.batch, Req{1, L});
    if (o.len_min > 0) {  // mixed contexts, fixed by --seed
      std::mt19937_64 g(o.seed * 7 + 11);
      for (Req &q : r) q.seq = static_cast<int32_t>(o.len_min + static_cast<int64_t>(g() % (o.len - o.len_min + 1)));
    }
  } else if (o.workload == "prefill" || o.workload == "cache-write") {
    r.assign(o.batch, Req{L, L});
  } else {  // mixed: decodes first
    for (int i = 0; i < o.decodes; ++i) r.push_back(Req{1, o.decode_ctx});
    for (int i = 0; i < o.prefills; ++i) r.push_back(Req{o.chunk, o.prefill_ctx + o.chunk});
  }
  return r;
}

// A small batch of the same kind for --check (exercises split-KV, partial
// blocks, GQA, the cache write).
std::vector<Req> check_requests_of(const Options &o) {
  auto cap = [](int64_t x, int64_t hi) { return static_cast<int32_t>(std::max<int64_t>(1, std::min(x, hi))); };
  std::vector<Req> r;
  if (o.workload == "decode") {
    r = {Req{1, cap(o.len, 2100)}, Req{1, cap(o.len, 257)}, Req{1, cap(o.len, 17)}};
  } else if (o.workload == "prefill") {
    r = {Req{cap(o.len, 300), cap(o.len, 300)}, Req{cap(o.len, 77), cap(o.len, 77)}};
  } else if (o.workload == "cache-write") {
    r = {Req{cap(o.len, 100), cap(o.len, 100)}, Req{cap(o.len, 37), cap(o.len, 37)}};
  } else {
    if (o.decodes > 0) r = {Req{1, cap(o.decode_ctx, 1000)}, Req{1, cap(o.decode_ctx, 50)}};
    if (o.prefills > 0) {
      int32_t q = cap(o.chunk, 100);
      r.push_back(Req{q, q + static_cast<int32_t>(std::min(o.prefill_ctx, 200))});
      r.push_back(Req{cap(o.chunk, 37), cap(o.chunk, 37)});
    }
  }
  return r;
}

struct Work {
  double bytes = 0, flops = 0, kv_bytes = 0;
  int64_t tokens = 0, keys = 0;
};

Work work_of(const Options &o, const Types &t, const std::vector<Req> &reqs) {
  Work w;
  const double H = o.heads, K = o.kv_heads, D = o.head_size;
  double pairs = 0;
  for (const Req &r : reqs) {
    w.tokens += r.q;
    w.keys += r.seq;
    const double q = r.q, ctx = r.seq - r.q;
    if (o.workload == "prefill" && !o.causal) pairs += q * r.seq;
    else pairs += q * ctx + q * (q + 1) / 2;
  }
  const double T = static_cast<double>(w.tokens);
  if (o.workload == "cache-write") {
    w.bytes = T * K * D * 2 * (t.es + t.kv_es) + T * 8;  // read K,V; write cache; slots
    return w;
  }
  w.kv_bytes = static_cast<double>(w.keys) * K * D * 2 * t.kv_es;
  w.bytes = w.kv_bytes + 2 * T * H * D * t.es;  // + Q read + O write
  if (o.write_kv) w.bytes += T * K * D * 2 * (t.es + t.kv_es);
  w.flops = 4 * D * H * pairs;
  return w;
}

// ---- memory on the host or the device ---------------------------------------------------
struct Mem {
  void *p = nullptr;
  size_t bytes = 0;
  bool cuda = false;
  Mem() = default;
  Mem(size_t n, bool on_cuda) : bytes(n), cuda(on_cuda) {
    if (n == 0) return;
    if (on_cuda) {
#ifdef VATTN_BENCH_CUDA
      CUCHECK(cudaMalloc(&p, n));
#endif
    } else {
      p = std::malloc(n);
      if (!p) die("out of host memory");
    }
  }
  Mem(const Mem &) = delete;
  Mem &operator=(const Mem &) = delete;
  Mem(Mem &&m) noexcept { *this = std::move(m); }
  Mem &operator=(Mem &&m) noexcept {
    std::swap(p, m.p);
    std::swap(bytes, m.bytes);
    std::swap(cuda, m.cuda);
    return *this;
  }
  ~Mem() {
    if (!p) return;
#ifdef VATTN_BENCH_CUDA
    if (cuda) {
      (void)cudaFree(p);
      return;
    }
#endif
    std::free(p);
  }
};

void upload(void *dst, const void *src, size_t n, bool cuda) {
  if (!n) return;
#ifdef VATTN_BENCH_CUDA
  if (cuda) {
    CUCHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    return;
  }
#endif
  std::memcpy(dst, src, n);
}
void download(void *dst, const void *src, size_t n, bool cuda) {
  if (!n) return;
#ifdef VATTN_BENCH_CUDA
  if (cuda) {
    CUCHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

// Random fill of n elements of `kind` (value depends on (seed, element index)).
void fill_random(void *p, int64_t n, int32_t kind, uint64_t seed, bool cuda, void *stream) {
  if (n <= 0) return;
#ifdef VATTN_BENCH_CUDA
  if (cuda) {
    int e = vbench_fill_device(p, n, kind, seed, 1.0f, stream);
    if (e) die("random fill kernel failed: %s", cudaGetErrorString(static_cast<cudaError_t>(e)));
    CUCHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    return;
  }
#endif
  (void)stream;
  for (int64_t i = 0; i < n; ++i) vbench::store_elem(p, i, kind, vbench::uniform_pm1(seed, i));
}

DLTensor tensor(void *data, DLDevice dev, DLDataType dt, int ndim, int64_t *shape) {
  DLTensor t;
  std::memset(&t, 0, sizeof t);
  t.data = data;
  t.device = dev;
  t.ndim = ndim;
  t.dtype = dt;
  t.shape = shape;
  return t;
}

// Elements spanned by a (possibly strided) tensor, and its element strides.
int64_t span_elems(const DLTensor &t, int64_t *strides_out) {
  int64_t span = 1;
  int64_t compact = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    const int64_t s = t.strides ? t.strides[i] : compact;
    strides_out[i] = s;
    compact *= t.shape[i];
    if (t.shape[i] == 0) return 0;
    span += (t.shape[i] - 1) * s;
  }
  return span;
}

// ---- one backend instance of the benchmark: cache, plans, buffers --------------------------
struct Setup {
  bool cuda = false;
  int copies = 1;
  bool with_kv = false;  // forward gets new K/V (cache write inside the forward)
  bool host_values = false;  // values from the logical index (identical across backends)
};

struct Bench {
  const Options &o;
  Types t;
  Setup s;
  std::vector<Req> reqs;
  DLDevice dev{kDLCPU, 0};
  const vattn_backend_t *backend = nullptr;
  vattn_kv_cache_t *cache = nullptr;
  DLTensor cache_view{};
  int64_t cache_strides[5] = {0, 0, 0, 0, 0};
  int64_t cache_span = 0;
  vattn_builder_t *builder = nullptr;
  vattn_layer_t *layer = nullptr;
  std::vector<vattn_plan_t *> plans;
  std::vector<vattn_metadata_t *> mds;
  int64_t T = 0, blocks_per_copy = 0, num_blocks = 0;
  int32_t max_blocks = 1;
  std::vector<Mem> q, k, v, out, slots_dev;
  int64_t q_shape[3], kv_shape[3], slot_shape[1];
  std::vector<DLTensor> tq, tk, tv, to, ts;
  std::vector<std::vector<int64_t>> slot_maps;
  void *stream = nullptr;
#ifdef VATTN_BENCH_CUDA
  std::vector<cudaGraphExec_t> graphs;
#endif

  Bench(const Options &opts, const std::vector<Req> &r, const Setup &setup, void *strm)
      : o(opts), t(types_of(opts)), s(setup), reqs(r), stream(strm) {}
  Bench(const Bench &) = delete;
  Bench &operator=(const Bench &) = delete;

  ~Bench() {
#ifdef VATTN_BENCH_CUDA
    for (auto g : graphs) (void)cudaGraphExecDestroy(g);
#endif
    for (auto p : plans) vattn_plan_destroy(p);
    for (auto m : mds) vattn_metadata_destroy(m);
    vattn_layer_destroy(layer);
    vattn_builder_destroy(builder);
    vattn_kv_cache_destroy(cache);
  }

  bool attention() const { return o.workload != "cache-write"; }

  // Bytes of one copy (for the rotation count): the cache blocks it owns + its buffers.
  static int64_t per_copy_bytes(const Options &o, const Types &t, const std::vector<Req> &reqs,
                                bool with_kv) {
    int64_t blocks = 0, T = 0;
    for (const Req &r : reqs) {
      blocks += (r.seq + o.block_size - 1) / o.block_size;
      T += r.q;
    }
    int64_t b = blocks * o.block_size * o.kv_heads * o.head_size * 2 * static_cast<int64_t>(t.kv_es);
    const bool attn = o.workload != "cache-write";
    if (attn) b += 2 * T * o.heads * o.head_size * static_cast<int64_t>(t.es);
    if (!attn || with_kv) b += 2 * T * o.kv_heads * o.head_size * static_cast<int64_t>(t.es);
    return b;
  }

  void init() {
    if (reqs.empty() || reqs.size() > (size_t(1) << 24)) die("the batch must have 1 to 2^24 requests");
    dev = DLDevice{s.cuda ? kDLCUDA : kDLCPU, 0};
    // Backend through the selector: an unsupported combination is reported here.
    vattn_backend_selector_t sel;
    vattn_backend_selector_init(&sel);
    sel.head_size = o.head_size;
    sel.dtype = t.dtype;
    sel.kv_cache_dtype = t.kv_cache_dtype;
    sel.block_size = o.block_size;
    sel.device_type = dev.device_type;
    VCHECK(vattn_get_attn_backend(&sel, &backend));

    // Blocks: every copy gets its own blocks, drawn from one random permutation
    // (--block-order sequential: the identity, each request's blocks contiguous).
    blocks_per_copy = 0;
    T = 0;
    for (const Req &r : reqs) {
      const int32_t nb = (r.seq + o.block_size - 1) / o.block_size;
      blocks_per_copy += nb;
      max_blocks = std::max(max_blocks, nb);
      T += r.q;
    }
    max_blocks = std::max(max_blocks, o.table_cols);
    num_blocks = blocks_per_copy * s.copies + 1;
    std::vector<int32_t> perm(static_cast<size_t>(std::max<int64_t>(num_blocks, 1)));
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937_64 rng(o.seed);
    if (o.block_order == "shuffled" || o.block_order == "sorted") std::shuffle(perm.begin(), perm.end(), rng);
    // window:W: each run of W consecutive blocks shuffled in itself (the last run may be shorter).
    for (size_t i = 0; o.block_window > 1 && i < perm.size(); i += static_cast<size_t>(o.block_window))
      std::shuffle(perm.begin() + i, perm.begin() + std::min(perm.size(), i + static_cast<size_t>(o.block_window)),
                   rng);

    vattn_kv_cache_spec_t spec;
    vattn_kv_cache_spec_init(&spec);
    spec.block_size = o.block_size;
    spec.num_kv_heads = o.kv_heads;
    spec.head_size = o.head_size;
    spec.dtype = t.cache_dtype;
    vattn_kv_cache_options_t copts;
    vattn_kv_cache_options_init(&copts);
    copts.device_type = dev.device_type;
    copts.device_id = 0;
    copts.layout = o.layout == "hnd" ? VATTN_LAYOUT_HND : VATTN_LAYOUT_NHD;
    copts.zero_fill = 0;
    copts.num_blocks = num_blocks;
    copts.backend = backend;
    VCHECK(vattn_kv_cache_create(&cache, &spec, nullptr, 1, &copts));
    VCHECK(vattn_kv_cache_layer_tensor(cache, 0, &cache_view));
    cache_span = span_elems(cache_view, cache_strides);
    fill_cache();

    if (attention()) {
      vattn_builder_options_t bo;
      vattn_builder_options_init(&bo);
      bo.num_heads = o.heads;
      bo.num_kv_heads = o.kv_heads;
      bo.head_size = o.head_size;
      bo.block_size = o.block_size;
      bo.max_num_reqs = static_cast<int32_t>(reqs.size());
      bo.max_num_tokens = std::max<int64_t>(T, 1);
      bo.max_blocks_per_req = max_blocks;
      bo.num_threads = o.threads;
      bo.kv_cache_dtype = t.kv_cache_dtype;
      bo.max_num_splits = o.max_splits;
      VCHECK(vattn_builder_create(&builder, backend, &bo));
      vattn_layer_options_t lo;
      vattn_layer_options_init(&lo);
      lo.num_heads = o.heads;
      lo.num_kv_heads = o.kv_heads;
      lo.head_size = o.head_size;
      lo.dtype = t.dtype;
      lo.kv_cache_dtype = t.kv_cache_dtype;
      lo.block_size = o.block_size;
      lo.attn_type = VATTN_ATTN_DECODER;
      VCHECK(vattn_layer_create(&layer, backend, &lo));
    }

    q_shape[0] = T, q_shape[1] = o.heads, q_shape[2] = o.head_size;
    kv_shape[0] = T, kv_shape[1] = o.kv_heads, kv_shape[2] = o.head_size;
    slot_shape[0] = T;
    const size_t qbytes = static_cast<size_t>(T) * o.heads * o.head_size * t.es;
    const size_t kvbytes = static_cast<size_t>(T) * o.kv_heads * o.head_size * t.es;
    const bool need_kv = !attention() || s.with_kv;
    const DLDataType i64{kDLInt, 64, 1};
    for (int c = 0; c < s.copies; ++c) {
      // Block table and slot mapping of this copy.
      std::vector<int32_t> table(reqs.size() * static_cast<size_t>(max_blocks), 0);
      const size_t nreq = reqs.size();
      std::vector<int32_t> qsl(nreq + 1, 0), seq_lens(nreq, 0);
      std::vector<int64_t> positions;
      positions.reserve(T);
      int64_t next = 1 + c * blocks_per_copy;  // perm[0] stays unused (a spare)
      for (size_t i = 0; i < reqs.size(); ++i) {
        const int32_t nb = (reqs[i].seq + o.block_size - 1) / o.block_size;
        for (int32_t j = 0; j < nb; ++j) table[i * max_blocks + j] = perm[next++];
        if (o.block_order == "sorted")  // the same blocks, visited by address
          std::sort(table.begin() + i * max_blocks, table.begin() + i * max_blocks + nb);
        qsl[i + 1] = qsl[i] + reqs[i].q;
        seq_lens[i] = reqs[i].seq;
        for (int32_t p = reqs[i].seq - reqs[i].q; p < reqs[i].seq; ++p) positions.push_back(p);
      }
      std::vector<int64_t> slots(std::max<int64_t>(T, 1), VATTN_PAD_SLOT_ID);
      vattn_slot_mapping_args_t sm;
      vattn_slot_mapping_args_init(&sm);
      sm.block_table = table.data();
      sm.num_rows = static_cast<int64_t>(reqs.size());
      sm.row_stride = max_blocks;
      sm.query_start_loc = qsl.data();
      sm.num_reqs = static_cast<int64_t>(reqs.size());
      sm.positions = positions.data();
      sm.num_tokens = T;
      sm.block_size = o.block_size;
      sm.num_cache_blocks = num_blocks;
      VCHECK(vattn_slot_mapping_compute(&sm, slots.data(), T));
      slot_maps.push_back(slots);

      if (attention()) {
        vattn_metadata_desc_t d;
        vattn_metadata_desc_init(&d);
        d.num_reqs = static_cast<int64_t>(reqs.size());
        d.num_actual_tokens = T;
        d.query_start_loc = qsl.data();
        d.seq_lens = seq_lens.data();
        d.block_table = table.data();
        d.block_table_rows = static_cast<int64_t>(reqs.size());
        d.block_table_cols = max_blocks;
        d.slot_mapping = slots.data();
        d.slot_mapping_len = T;
        d.causal = (o.workload == "prefill" && !o.causal) ? 0 : 1;
        d.block_size = o.block_size;
        d.num_cache_blocks = num_blocks;
        vattn_metadata_t *md = nullptr;
        VCHECK(vattn_metadata_create(&md, &d));
        mds.push_back(md);
        vattn_plan_t *plan = nullptr;
        VCHECK(vattn_plan_create(&plan, builder));
        plans.push_back(plan);
        VCHECK(vattn_builder_build(builder, plan, 0, md, 0, stream));
        q.emplace_back(qbytes, s.cuda);
        out.emplace_back(qbytes, s.cuda);
        fill_values(q.back().p, T * o.heads * o.head_size, t.elem, o.seed * 7 + 100 + c);
      }
      if (need_kv) {
        k.emplace_back(kvbytes, s.cuda);
        v.emplace_back(kvbytes, s.cuda);
        fill_values(k.back().p, T * o.kv_heads * o.head_size, t.elem, o.seed * 7 + 200 + c);
        fill_values(v.back().p, T * o.kv_heads * o.head_size, t.elem, o.seed * 7 + 300 + c);
      }
      if (!attention()) {
        slots_dev.emplace_back(static_cast<size_t>(T) * 8, s.cuda);
        upload(slots_dev.back().p, slots.data(), static_cast<size_t>(T) * 8, s.cuda);
      }
    }
    // DLTensors (after every vector has its final size: they point into them).
    for (int c = 0; c < s.copies; ++c) {
      if (attention()) {
        tq.push_back(tensor(q[c].p, dev, t.dl, 3, q_shape));
        to.push_back(tensor(out[c].p, dev, t.dl, 3, q_shape));
      }
      if (need_kv) {
        tk.push_back(tensor(k[c].p, dev, t.dl, 3, kv_shape));
        tv.push_back(tensor(v[c].p, dev, t.dl, 3, kv_shape));
      }
      if (!attention()) ts.push_back(tensor(slots_dev[c].p, dev, i64, 1, slot_shape));
    }
    sync();
  }

  // Host time of planning this batch: vattn_builder_build of copy 0's
  // metadata into its plan, n times (the plan's uploads go out on the
  // stream asynchronously, as in a serving loop), microseconds per build.
  vbench::Stats time_builds(int n) {
    std::vector<double> us;
    us.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      VCHECK(vattn_builder_build(builder, plans[0], 0, mds[0], 0, stream));
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    sync();
    return vbench::stats_of(us);
  }

  void sync() {
#ifdef VATTN_BENCH_CUDA
    if (s.cuda) CUCHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
#endif
  }

  // Values of a plain buffer: on the host from the element index (identical
  // on every backend), or generated on the device.
  void fill_values(void *p, int64_t n, int32_t kind, uint64_t seed) {
    if (s.host_values && s.cuda) {
      std::vector<unsigned char> h(static_cast<size_t>(n) * vbench::elem_bytes(kind));
      fill_random(h.data(), n, kind, seed, false, nullptr);
      upload(p, h.data(), h.size(), true);
    } else {
      fill_random(p, n, kind, seed, s.cuda, stream);
    }
  }

  char *cache_base() const { return static_cast<char *>(cache_view.data) + cache_view.byte_offset; }

  // Cache contents: random in every element.  With host_values the value of
  // a logical element (kv, block, slot, head, d) is a function of its logical
  // index, so two caches of different layouts / backends hold the same data.
  void fill_cache() {
    const int32_t ck = t.cache_elem;
    const size_t es = static_cast<size_t>(vbench::elem_bytes(ck));
    if (!s.host_values) {
      fill_random(cache_base(), cache_span, ck, o.seed * 7 + 1, s.cuda, stream);
      return;
    }
    std::vector<unsigned char> img(static_cast<size_t>(cache_span) * es);
    const int64_t *sh = cache_view.shape;
    int64_t li = 0;
    for (int64_t a = 0; a < sh[0]; ++a)
      for (int64_t b = 0; b < sh[1]; ++b)
        for (int64_t c = 0; c < sh[2]; ++c)
          for (int64_t h = 0; h < sh[3]; ++h)
            for (int64_t d = 0; d < sh[4]; ++d, ++li) {
              const int64_t off = a * cache_strides[0] + b * cache_strides[1] + c * cache_strides[2] +
                                  h * cache_strides[3] + d * cache_strides[4];
              vbench::store_elem(img.data(), off, ck, vbench::uniform_pm1(o.seed * 7 + 1, li));
            }
    upload(cache_base(), img.data(), img.size(), s.cuda);
  }

  // The cache as floats in logical order.
  std::vector<float> read_cache() {
    const int32_t ck = t.cache_elem;
    std::vector<unsigned char> img(static_cast<size_t>(cache_span) * vbench::elem_bytes(ck));
    sync();
    download(img.data(), cache_base(), img.size(), s.cuda);
    std::vector<float> r;
    const int64_t *sh = cache_view.shape;
    r.reserve(static_cast<size_t>(sh[0] * sh[1] * sh[2] * sh[3] * sh[4]));
    for (int64_t a = 0; a < sh[0]; ++a)
      for (int64_t b = 0; b < sh[1]; ++b)
        for (int64_t c = 0; c < sh[2]; ++c)
          for (int64_t h = 0; h < sh[3]; ++h)
            for (int64_t d = 0; d < sh[4]; ++d)
              r.push_back(vbench::load_elem(img.data(),
                                            a * cache_strides[0] + b * cache_strides[1] +
                                                c * cache_strides[2] + h * cache_strides[3] +
                                                d * cache_strides[4],
                                            ck));
    return r;
  }

  std::vector<float> read_output(int c) {
    const int64_t n = T * o.heads * o.head_size;
    std::vector<unsigned char> h(static_cast<size_t>(n) * t.es);
    sync();
    download(h.data(), out[c].p, h.size(), s.cuda);
    std::vector<float> r(n);
    for (int64_t i = 0; i < n; ++i) r[i] = vbench::load_elem(h.data(), i, t.elem);
    return r;
  }

  void poison_output(int c) {
    std::vector<unsigned char> h(out[c].bytes, 0xff);  // NaN in every float format
    upload(out[c].p, h.data(), h.size(), s.cuda);
  }

  // One run on copy c (asynchronous on CUDA).
  vattn_status_t run(int c) {
    if (!attention())
      return vattn_reshape_and_cache(&tk[c], &tv[c], &cache_view, &ts[c], t.kv_cache_dtype, 1.f, 1.f,
                                     stream);
    vattn_forward_args_t a;
    vattn_forward_args_init(&a);
    a.query = &tq[c];
    if (s.with_kv) {
      a.key = &tk[c];
      a.value = &tv[c];
    }
    a.kv_cache = &cache_view;
    a.output = &to[c];
    a.k_scale = 1.f;
    a.v_scale = 1.f;
    a.stream = stream;
    return vattn_layer_forward(layer, plans[c], &a);
  }
  void run_or_die(int c) {
    vattn_status_t st = run(c);
    if (st != VATTN_OK)
      die("%s", (std::string(attention() ? "vattn_layer_forward" : "vattn_reshape_and_cache") +
                 " failed: " + vattn_status_string(st) + ": " + vattn_last_error_message())
                    .c_str());
  }

  // Per-run times in microseconds.
  std::vector<double> time_runs(int warmup, int iters, bool graph_mode) {
    std::vector<double> us;
    us.reserve(iters);
    const int w = warmup + (s.copies > 1 ? s.copies : 0);  // every copy at least once
#ifdef VATTN_BENCH_CUDA
    if (s.cuda) {
      cudaStream_t st = static_cast<cudaStream_t>(stream);
      auto launch = [&](int i) {
        const int c = i % s.copies;
        if (graph_mode) CUCHECK(cudaGraphLaunch(graphs[c], st));
        else run_or_die(c);
      };
      for (int i = 0; i < w; ++i) launch(i);
      CUCHECK(cudaStreamSynchronize(st));
      CUCHECK(cudaGetLastError());
      us = time_event_pairs(st, iters, launch);
      CUCHECK(cudaGetLastError());
      return us;
    }
#endif
    (void)graph_mode;
    for (int i = 0; i < w; ++i) run_or_die(i % s.copies);
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      run_or_die(i % s.copies);
      auto t1 = std::chrono::steady_clock::now();
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    return us;
  }

  // Captures one graph per copy; returns "" or the reason it failed.
  std::string capture_graphs() {
#ifdef VATTN_BENCH_CUDA
    if (!s.cuda) return "CUDA graphs need --device cuda";
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    for (int c = 0; c < s.copies; ++c) {
      CUCHECK(cudaStreamSynchronize(st));
      if (cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
        return std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(cudaGetLastError());
      vattn_status_t rs = run(c);
      std::string msg = rs == VATTN_OK ? "" : std::string(vattn_status_string(rs)) + ": " + vattn_last_error_message();
      cudaGraph_t g = nullptr;
      cudaError_t e = cudaStreamEndCapture(st, &g);
      if (rs != VATTN_OK) {
        if (g) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return "forward during capture failed: " + msg;
      }
      if (e != cudaSuccess || !g) {
        (void)cudaGetLastError();
        return std::string("cudaStreamEndCapture: ") + cudaGetErrorString(e);
      }
      cudaGraphExec_t x = nullptr;
      e = cudaGraphInstantiate(&x, g, 0);
      (void)cudaGraphDestroy(g);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return std::string("cudaGraphInstantiate: ") + cudaGetErrorString(e);
      }
      graphs.push_back(x);
    }
    return "";
#else
    return "built without CUDA";
#endif
  }
};

// ---- ceilings -----------------------------------------------------------------------
struct Ceiling {
  double gbps = 0;
  double bytes = 0;  // per copy call (read + write)
  std::string method;
};

Ceiling measure_copy(bool cuda, int threads, void *stream) {
  Ceiling c;
#ifdef VATTN_BENCH_CUDA
  if (cuda) {
    size_t free_b = 0, total_b = 0;
    CUCHECK(cudaMemGetInfo(&free_b, &total_b));
    size_t n = size_t(1) << 30;
    while (n > (size_t(64) << 20) && 2 * n > free_b / 2) n /= 2;
    Mem a(n, true), b(n, true);
    fill_random(a.p, static_cast<int64_t>(n / 4), vbench::kF32, 99, true, stream);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    std::vector<double> ms;
    cudaEvent_t e0, e1;
    CUCHECK(cudaEventCreate(&e0));
    CUCHECK(cudaEventCreate(&e1));
    for (int i = 0; i < 23; ++i) {
      const bool flip = i & 1;
      CUCHECK(cudaEventRecord(e0, st));
      CUCHECK(cudaMemcpyAsync(flip ? a.p : b.p, flip ? b.p : a.p, n, cudaMemcpyDeviceToDevice, st));
      CUCHECK(cudaEventRecord(e1, st));
      CUCHECK(cudaEventSynchronize(e1));
      float t = 0;
      CUCHECK(cudaEventElapsedTime(&t, e0, e1));
      if (i >= 3) ms.push_back(t);
    }
    (void)cudaEventDestroy(e0);
    (void)cudaEventDestroy(e1);
    const double med = vbench::stats_of(ms).median;
    c.bytes = 2.0 * static_cast<double>(n);
    c.gbps = c.bytes / (med * 1e-3) / 1e9;
    char buf[128];
    std::snprintf(buf, sizeof buf, "cudaMemcpyAsync device-to-device, %zu MiB, median of 20, read+write",
                  n >> 20);
    c.method = buf;
    return c;
  }
#endif
  (void)stream;
  const int nt = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  const size_t n = size_t(256) << 20;
  Mem a(n, false), b(n, false);
  std::memset(a.p, 1, n);
  std::memset(b.p, 2, n);
  std::vector<double> secs;
  for (int i = 0; i < 8; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> th;
    const size_t chunk = (n + nt - 1) / nt;
    for (int k = 0; k < nt; ++k) {
      const size_t lo = std::min(n, k * chunk), hi = std::min(n, lo + chunk);
      th.emplace_back([&, lo, hi] { std::memcpy(static_cast<char *>(b.p) + lo, static_cast<char *>(a.p) + lo, hi - lo); });
    }
    for (auto &x : th) x.join();
    auto t1 = std::chrono::steady_clock::now();
    if (i >= 1) secs.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  c.bytes = 2.0 * static_cast<double>(n);
  c.gbps = c.bytes / vbench::stats_of(secs).median / 1e9;
  char buf[128];
  std::snprintf(buf, sizeof buf, "memcpy 256 MiB on %d threads, median of 7, read+write", nt);
  c.method = buf;
  return c;
}

// ---- same-size read reference (CUDA) ------------------------------------------------------
// For small shapes the 1 GiB copy ceiling is out of reach (launch overhead
// and ramp-up dominate), so the eager median is also set against a plain
// streaming read of the same number of bytes (vbench_read_device), timed the
// way Bench::time_runs times the workload, in the same process.
struct ReadRef {
  bool ran = false;
  double bytes = 0;      // read per run: the workload's bytes rounded up to 256
  Stats st;              // microseconds per read
  double gbps = 0;       // bytes / median
  double eager_pct = 0;  // 100 * read median / eager median: the eager rate as % of the read's
  std::string note;      // why it was not measured (ran == false)
};

#ifdef VATTN_BENCH_CUDA
// Buffer of max(4 x bytes, 256 MiB), random (never zeros); read i starts at
// (i * bytes) mod (size - bytes), so consecutive reads never hit in L2.
// Skips (note set, nothing timed) when the buffer cannot be allocated or the
// read cannot be launched; only errors of the stream itself are fatal.
ReadRef measure_read(double work_bytes, double eager_median_us, int warmup, int iters, uint64_t seed,
                     void *stream) {
  ReadRef r;
  const size_t br = (static_cast<size_t>(std::ceil(work_bytes)) + 255) / 256 * 256;
  // Both candidates are multiples of 256, so every offset stays 256-byte aligned.
  const size_t size = std::max(4 * br, size_t(256) << 20);
  void *buf = nullptr;
  // + 256 bytes after the read region for the sink (one int, practically never written).
  cudaError_t e = cudaMalloc(&buf, size + 256);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it and go on without the reference
    r.note = "cudaMalloc of " + std::to_string((size + 256) >> 20) + " MiB failed: " + cudaGetErrorString(e);
    return r;
  }
  char *base = static_cast<char *>(buf);
  void *sink = base + size;
  fill_random(base, static_cast<int64_t>(size / 4), vbench::kF32, seed, true, stream);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const size_t span = size - br;  // >= 3 * br > 0: offsets rotate through [0, span)
  size_t n = 0;                   // reads issued so far, warm-up included
  std::string err;
  auto launch = [&](int) {
    const size_t off = (n++ * br) % span;
    const int rc = vbench_read_device(base + off, static_cast<long long>(br), sink, stream);
    if (rc && err.empty()) err = cudaGetErrorString(static_cast<cudaError_t>(rc));
  };
  // As time_runs: warm-up, then `iters` back-to-back event pairs.  At least
  // one warm-up read, so the kernel's lazy module load is never timed
  // (time_runs gets the same from its pass over every copy).
  for (int i = 0; i < std::max(warmup, 1); ++i) launch(i);
  CUCHECK(cudaStreamSynchronize(st));
  std::vector<double> us;
  if (err.empty()) us = time_event_pairs(st, iters, launch);
  (void)cudaFree(buf);
  if (!err.empty()) {
    (void)cudaGetLastError();
    r.note = "read kernel launch failed: " + err;
    return r;
  }
  r.ran = true;
  r.bytes = static_cast<double>(br);
  r.st = vbench::stats_of(us);
  r.gbps = r.bytes / (r.st.median * 1e-6) / 1e9;
  r.eager_pct = eager_median_us > 0 ? 100 * r.st.median / eager_median_us : 0;
  return r;
}
#endif

struct DeviceInfo {
  std::string name;
  int sms = 0;
  double l2_mb = 0, mem_gb = 0;
};

DeviceInfo device_info(bool cuda) {
  DeviceInfo d;
#ifdef VATTN_BENCH_CUDA
  if (cuda) {
    cudaDeviceProp p;
    CUCHECK(cudaGetDeviceProperties(&p, 0));
    d.name = p.name;
    d.sms = p.multiProcessorCount;
    d.l2_mb = p.l2CacheSize / 1048576.0;
    d.mem_gb = static_cast<double>(p.totalGlobalMem) / 1e9;
    return d;
  }
#endif
  d.name = "host CPU";
  d.sms = static_cast<int>(std::thread::hardware_concurrency());
  return d;
}

// ---- check against the CPU backend ------------------------------------------------------------
struct CheckResult {
  bool ran = false, pass = false;
  double rel_l2 = 0, max_abs = 0, tol = 0;
  int64_t values = 0, nonfinite = 0;
  std::string what;
};

CheckResult run_check(const Options &o, bool cuda, void *stream) {
  CheckResult r;
  r.ran = true;
  const Types t = types_of(o);
  const auto reqs = check_requests_of(o);
  const bool attn = o.workload != "cache-write";
  Setup s;
  s.copies = 1;
  s.with_kv = true;  // exercises the cache write inside the forward as well
  s.host_values = true;
  Setup sref = s;
  s.cuda = cuda;
  sref.cuda = false;
  Options oref = o;
  oref.layout = "nhd";
  Bench a(o, reqs, s, stream), b(oref, reqs, sref, nullptr);
  a.init();
  b.init();
  std::vector<float> x, y;
  if (attn) {
    a.poison_output(0);
    b.poison_output(0);
  }
  a.run_or_die(0);
  b.run_or_die(0);
  a.sync();
#ifdef VATTN_BENCH_CUDA
  if (cuda) CUCHECK(cudaGetLastError());
#endif
  if (attn) {
    x = a.read_output(0);
    y = b.read_output(0);
    r.what = "attention output";
  } else {
    x = a.read_cache();
    y = b.read_cache();
    r.what = "KV cache after the write";
  }
  if (x.size() != y.size()) die("check: output sizes differ");
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      ++r.nonfinite;
      continue;
    }
    const double d = static_cast<double>(x[i]) - y[i];
    num += d * d;
    den += static_cast<double>(y[i]) * y[i];
    r.max_abs = std::max(r.max_abs, std::fabs(d));
  }
  r.values = static_cast<int64_t>(x.size());
  r.rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  r.tol = o.check_tol > 0 ? o.check_tol : (t.dtype == VATTN_DTYPE_FLOAT32 && attn) ? 1e-4 : 1e-2;
  if (!attn && t.kv_cache_dtype == VATTN_KV_CACHE_DTYPE_AUTO && o.check_tol <= 0) r.tol = 1e-6;
  r.pass = r.nonfinite == 0 && r.rel_l2 <= r.tol;
  return r;
}

// ---- results -------------------------------------------------------------------------------
struct Rated {
  Stats st;
  double gbps = 0, tflops = 0, pct_copy = 0, pct_matrix = 0, pct_floor = 0;
};

Rated rate(const std::vector<double> &us, const Work &w, double copy_gbps, double matrix_tflops) {
  Rated r;
  r.st = vbench::stats_of(us);
  const double sec = r.st.median * 1e-6;
  r.gbps = w.bytes / sec / 1e9;
  r.tflops = w.flops / sec / 1e12;
  r.pct_copy = copy_gbps > 0 ? 100 * r.gbps / copy_gbps : 0;
  r.pct_matrix = matrix_tflops > 0 ? 100 * r.tflops / matrix_tflops : 0;
  double floor_s = copy_gbps > 0 ? w.bytes / (copy_gbps * 1e9) : 0;
  if (matrix_tflops > 0) floor_s = std::max(floor_s, w.flops / (matrix_tflops * 1e12));
  r.pct_floor = 100 * floor_s / sec;
  return r;
}

void json_rated(Json &j, const char *key, const Rated &r) {
  j.open(key)
      .num("median_us", r.st.median)
      .num("p10_us", r.st.p10)
      .num("p90_us", r.st.p90)
      .num("mean_us", r.st.mean)
      .num("min_us", r.st.min)
      .num("max_us", r.st.max)
      .num("runs", static_cast<double>(r.st.n))
      .num("gbps", r.gbps)
      .num("tflops", r.tflops)
      .num("pct_of_copy", r.pct_copy)
      .num("pct_of_matrix", r.pct_matrix)
      .num("pct_of_floor", r.pct_floor)
      .close();
}

void print_rated(const char *mode, const Rated &r, const Options &o, double copy_gbps, double matrix) {
  std::printf("%-6s median %10.2f us  (p10 %.2f, p90 %.2f, n=%zu)  |  %8.1f GB/s = %5.1f%% of copy",
              mode, r.st.median, r.st.p10, r.st.p90, r.st.n, r.gbps, r.pct_copy);
  if (o.workload != "cache-write") {
    std::printf("  |  %7.1f TFLOP/s", r.tflops);
    if (matrix > 0) std::printf(" = %5.1f%% of %.0f", r.pct_matrix, matrix);
  }
  std::printf("  |  %5.1f%% of floor\n", r.pct_floor);
  (void)copy_gbps;
}

}  // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  const Types t = types_of(o);
  int32_t ngpu = 0;
  VCHECK(vattn_cuda_device_count(&ngpu));
  if (o.device.empty()) o.device = ngpu > 0 ? "cuda" : "cpu";
  if (o.device != "cpu" && o.device != "cuda") die("--device '%s': expected cpu or cuda", o.device.c_str());
  const bool cuda = o.device == "cuda";
#ifndef VATTN_BENCH_CUDA
  if (cuda) die("built without CUDA; use --device cpu");
#endif
  if (cuda && ngpu == 0) die("--device cuda: no usable GPU (vattn_cuda_device_count = 0)");
  if (o.graph && !cuda) die("--graph needs --device cuda");
  if (o.rotate_mb < 0) o.rotate_mb = cuda ? 256 : 64;

  void *stream = nullptr;
#ifdef VATTN_BENCH_CUDA
  if (cuda) {
    CUCHECK(cudaSetDevice(0));
    cudaStream_t st;
    CUCHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    stream = st;
  }
#endif
  const DeviceInfo di = device_info(cuda);
  double matrix = o.matrix_tflops;
  std::string matrix_src = "stated (--matrix-tflops)";
  if (matrix < 0) {
    matrix = 0;
    matrix_src = "none";
    if (cuda && (di.name.find("H100") != std::string::npos || di.name.find("H200") != std::string::npos)) {
      matrix = 800;
      matrix_src = "stated default: ~800 TFLOP/s bf16 GEMM measured on this H100/H200 (docs/benchmarks.md)";
    }
  }

  const auto reqs = requests_of(o);
  const Work w = work_of(o, t, reqs);
  if (!o.quiet) {
    std::printf("vattn-bench (vattn %s) | %s backend: %s", vattn_version_string(), cuda ? "CUDA" : "CPU",
                di.name.c_str());
    if (cuda) std::printf(" (%d SMs, %.0f MB L2, %.0f GB)", di.sms, di.l2_mb, di.mem_gb);
    std::printf("\n%s: ", o.workload.c_str());
    if (o.workload == "mixed")
      std::printf("%d decodes at %d + %d prefill chunks of %d after %d", o.decodes, o.decode_ctx, o.prefills,
                  o.chunk, o.prefill_ctx);
    else
      std::printf("B=%lld L=%lld", (long long)o.batch, (long long)o.len);
    if (o.len_min > 0) std::printf(" (contexts %lld-%lld)", (long long)o.len_min, (long long)o.len);
    std::printf(" | %d q heads / %d kv heads, head %d, block %d, %s, kv %s, %s%s%s%s\n", o.heads, o.kv_heads,
                o.head_size, o.block_size, o.dtype.c_str(), o.kv_dtype.c_str(), o.layout.c_str(),
                o.block_order == "sequential" ? ", blocks in order"
                : o.block_window > 0 || o.block_order == "sorted" ? (", blocks " + o.block_order).c_str()
                                              : "",
                o.workload == "prefill" ? (o.causal ? ", causal" : ", non-causal") : "",
                o.write_kv ? ", with cache write" : "");
    std::fflush(stdout);
  }

  // ---- check ---------------------------------------------------------------------------------
  CheckResult chk;
  if (o.check) {
    chk = run_check(o, cuda, stream);
    std::printf("check vs CPU backend (%s, %lld values): %s  rel L2 %.3g (tol %.1g), max |diff| %.3g%s\n",
                chk.what.c_str(), (long long)chk.values, chk.pass ? "PASS" : "FAIL", chk.rel_l2, chk.tol,
                chk.max_abs, chk.nonfinite ? " -- NON-FINITE VALUES" : "");
    std::fflush(stdout);
  }
  auto write_json = [&](const Ceiling *ceil, const Rated *eager, const Rated *graph, const std::string &graph_err,
                        int copies, int64_t per_copy, const ReadRef *read = nullptr) {
    if (o.json.empty()) return;
    Json j;
    j.open()
        .str("tool", "vattn-bench")
        .str("vattn_version", vattn_version_string())
        .str("label", o.label);
    j.open("device").str("backend", cuda ? "CUDA" : "CPU").str("name", di.name).num("sms", di.sms)
        .num("l2_mb", di.l2_mb).num("mem_gb", di.mem_gb).close();
    j.open("config")
        .str("workload", o.workload)
        .num("batch", static_cast<double>(o.batch))
        .num("len", static_cast<double>(o.len))
        .num("len_min", static_cast<double>(o.len_min))
        .num("num_heads", o.heads)
        .num("num_kv_heads", o.kv_heads)
        .num("head_size", o.head_size)
        .num("block_size", o.block_size)
        .str("dtype", o.dtype)
        .str("kv_dtype", o.kv_dtype)
        .str("layout", o.layout)
        .str("block_order", o.block_order)
        .num("table_cols", o.table_cols)
        .boolean("causal", o.causal != 0)
        .num("prefills", o.prefills)
        .num("chunk", o.chunk)
        .num("prefill_ctx", o.prefill_ctx)
        .num("decodes", o.decodes)
        .num("decode_ctx", o.decode_ctx)
        .boolean("write_kv", o.write_kv)
        .num("iters", o.iters)
        .num("warmup", o.warmup)
        .num("copies", copies)
        .num("bytes_per_copy", static_cast<double>(per_copy))
        .num("seed", static_cast<double>(o.seed))
        .close();
    j.open("work")
        .num("num_reqs", static_cast<double>(reqs.size()))
        .num("num_tokens", static_cast<double>(w.tokens))
        .num("num_keys", static_cast<double>(w.keys))
        .num("bytes", w.bytes)
        .num("kv_bytes", w.kv_bytes)
        .num("flops", w.flops)
        .close();
    j.open("ceilings");
    if (ceil) j.num("copy_gbps", ceil->gbps).str("copy_method", ceil->method);
    j.num("matrix_tflops", matrix).str("matrix_source", matrix_src).close();
    j.open("check").boolean("ran", chk.ran).boolean("pass", chk.pass).num("rel_l2", chk.rel_l2)
        .num("tol", chk.tol).num("max_abs", chk.max_abs).num("values", static_cast<double>(chk.values))
        .num("nonfinite", static_cast<double>(chk.nonfinite)).str("what", chk.what).close();
    if (eager) json_rated(j, "eager", *eager);
    if (graph) json_rated(j, "graph", *graph);
    if (!graph_err.empty()) j.str("graph_error", graph_err);
    if (read && read->ran)
      j.open("read_ref")
          .num("bytes", read->bytes)
          .num("median_us", read->st.median)
          .num("p10_us", read->st.p10)
          .num("p90_us", read->st.p90)
          .num("gbps", read->gbps)
          .num("eager_pct", read->eager_pct)
          .close();
    j.close();
    std::FILE *f = std::fopen(o.json.c_str(), "w");
    if (!f) die("cannot write --json file '%s'", o.json.c_str());
    std::fprintf(f, "%s\n", j.text().c_str());
    std::fclose(f);
  };
  if (o.check && !chk.pass) {
    std::fprintf(stderr, "vattn-bench: check FAILED: not timing a wrong result\n");
    write_json(nullptr, nullptr, nullptr, "", 0, 0);
    return 1;
  }
  if (o.check_only) {
    write_json(nullptr, nullptr, nullptr, "", 0, 0);
    return 0;
  }

  // ---- rotation -----------------------------------------------------------------------------
  const int64_t per_copy = Bench::per_copy_bytes(o, t, reqs, o.write_kv);
  const double want = o.rotate_mb * 1e6;
  int copies = static_cast<int>(std::min<double>(64, std::ceil(want / std::max<int64_t>(per_copy, 1))));
  copies = std::max(copies, 2);
  double budget = 8e9;  // host default
#ifdef VATTN_BENCH_CUDA
  if (cuda) {
    size_t free_b = 0, total_b = 0;
    CUCHECK(cudaMemGetInfo(&free_b, &total_b));
    budget = 0.6 * static_cast<double>(free_b);
  }
#endif
  while (copies > 1 && static_cast<double>(copies) * per_copy > budget) --copies;
  if (static_cast<double>(per_copy) > budget)
    die("shape needs %s bytes, more than the memory budget %s",
        std::to_string(per_copy).c_str(), std::to_string(static_cast<int64_t>(budget)).c_str());

  const Ceiling ceil = measure_copy(cuda, o.threads, stream);
  Setup s;
  s.cuda = cuda;
  s.copies = copies;
  s.with_kv = o.write_kv;
  Bench b(o, reqs, s, stream);
  b.init();
  if (!o.quiet) {
    std::printf("work: %zu requests, %lld query tokens, %lld keys | %.1f MB moved", reqs.size(),
                (long long)w.tokens, (long long)w.keys, w.bytes / 1e6);
    if (w.flops > 0) std::printf(", %.3f TFLOP", w.flops / 1e12);
    std::printf(" | rotation: %d copies x %.1f MB\n", copies, per_copy / 1e6);
    std::printf("copy ceiling: %.1f GB/s (%s)\n", ceil.gbps, ceil.method.c_str());
    std::fflush(stdout);
  }

  const Rated eager = rate(b.time_runs(o.warmup, o.iters, false), w, ceil.gbps, matrix);
  print_rated("eager", eager, o, ceil.gbps, matrix);
  std::fflush(stdout);
  // The reachable floor for this size: a plain read of the same bytes, timed the same way.
  ReadRef read;
#ifdef VATTN_BENCH_CUDA
  if (cuda && w.bytes > 0) {
    read = measure_read(w.bytes, eager.st.median, o.warmup, o.iters, o.seed * 7 + 5, stream);
    if (read.ran)
      std::printf("read   median %10.2f us  (p10 %.2f, p90 %.2f, n=%zu)  |  %8.1f GB/s  "
                  "(a plain read of the same bytes; eager = %.1f%% of it)\n",
                  read.st.median, read.st.p10, read.st.p90, read.st.n, read.gbps, read.eager_pct);
    else
      std::printf("read   not measured: %s\n", read.note.c_str());
    std::fflush(stdout);
  }
#endif
  if (b.attention() && !o.quiet) {
    const vbench::Stats bs = b.time_builds(std::max(o.iters, 20));
    std::printf("build  median %10.2f us  (p10 %.2f, p90 %.2f, n=%zu)  |  host: vattn_builder_build of this batch\n",
                bs.median, bs.p10, bs.p90, bs.n);
    std::fflush(stdout);
  }
  Rated graph;
  std::string graph_err;
  bool have_graph = false;
  if (o.graph) {
    if (!b.attention()) {
      graph_err = "graph mode applies to vattn_layer_forward only";
    } else {
      graph_err = b.capture_graphs();
      if (graph_err.empty()) {
        graph = rate(b.time_runs(o.warmup, o.iters, true), w, ceil.gbps, matrix);
        have_graph = true;
        print_rated("graph", graph, o, ceil.gbps, matrix);
      } else {
        std::printf("graph  not timed: %s\n", graph_err.c_str());
      }
    }
  }
  write_json(&ceil, &eager, have_graph ? &graph : nullptr, graph_err, copies, per_copy, &read);
#ifdef VATTN_BENCH_CUDA
  if (cuda) {
    CUCHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    CUCHECK(cudaGetLastError());
  }
#endif
  return 0;
}
