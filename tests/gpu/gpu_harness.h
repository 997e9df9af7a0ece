// gpu_harness.h -- GPU side of the CUDA backend tests.
//
// The test binary links only libvattn (whose CUDA runtime is static and
// hidden), so device memory, streams and graphs come from the CUDA driver
// API loaded with dlopen("libcuda.so.1"): no build dependency, and the
// primary context it uses is the one the runtime inside libvattn uses.
//
// Problems come from the CPU suite's harness (tests/cpu/cpu_harness.h): one
// random attention problem with host tensors, metadata and a CPU layer.
// run_gpu_case() runs it on the CPU backend AND on the CUDA backend (device
// copies of every tensor, outputs poisoned with NaN), checks the CUDA
// results against the float64 oracle with the harness's check_problem()
// (output, LSE, padding rows zero / -inf, rows past num_actual_tokens
// untouched, cache bytes), and compares CUDA with CPU directly.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../cpu/cpu_harness.h"
#include "test_util.h"

namespace gt {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using CUstream = void *;
using CUcontext = void *;
using CUgraph = void *;
using CUgraphExec = void *;

struct Driver {
  bool ok = false;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(int *, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, int);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemAllocHost)(void **, size_t);
  CUresult (*cuMemFreeHost)(void *);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
};

inline Driver &drv() {
  static Driver d = [] {
    Driver x{};
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return x;
    bool all = true;
    auto sym = [&](auto &fn, const char *name) {
      void *s = dlsym(h, name);
      if (!s) all = false;
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(s);
    };
    sym(x.cuInit, "cuInit");
    sym(x.cuDeviceGet, "cuDeviceGet");
    sym(x.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(x.cuCtxSetCurrent, "cuCtxSetCurrent");
    sym(x.cuCtxSynchronize, "cuCtxSynchronize");
    sym(x.cuMemAlloc, "cuMemAlloc_v2");
    sym(x.cuMemFree, "cuMemFree_v2");
    sym(x.cuMemAllocHost, "cuMemAllocHost_v2");
    sym(x.cuMemFreeHost, "cuMemFreeHost");
    sym(x.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    sym(x.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    sym(x.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    sym(x.cuStreamCreate, "cuStreamCreate");
    sym(x.cuStreamDestroy, "cuStreamDestroy_v2");
    sym(x.cuStreamSynchronize, "cuStreamSynchronize");
    sym(x.cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    sym(x.cuStreamEndCapture, "cuStreamEndCapture");
    sym(x.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    sym(x.cuGraphLaunch, "cuGraphLaunch");
    sym(x.cuGraphExecDestroy, "cuGraphExecDestroy");
    sym(x.cuGraphDestroy, "cuGraphDestroy");
    if (!all || x.cuInit(0) != 0) return x;
    int dev = 0;
    CUcontext ctx = nullptr;
    if (x.cuDeviceGet(&dev, 0) != 0 || x.cuDevicePrimaryCtxRetain(&ctx, dev) != 0 ||
        x.cuCtxSetCurrent(ctx) != 0)
      return x;
    x.ok = true;
    return x;
  }();
  return d;
}

inline bool have_gpu() {
  int32_t n = 0;
  if (vattn_cuda_device_count(&n) != VATTN_OK || n == 0) return false;
  return drv().ok;
}

#define GPU_TEST_REQUIRE()                                            \
  do {                                                                \
    if (!::gt::have_gpu()) GTEST_SKIP() << "skipped: no GPU";         \
  } while (0)

#define CU_OK(expr) ASSERT_EQ((expr), 0) << #expr

// A device copy of a host tensor: same shape, strides, dtype.
struct DevTensor {
  std::vector<int64_t> shape, strides;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DLTensor t{};
  DevTensor() = default;
  explicit DevTensor(const vt::HostTensor &h) { init(h); }
  // capacity: bytes to allocate (>= the host tensor's), so that another
  // problem's data can later be uploaded to the same address (graph replay).
  void init(const vt::HostTensor &h, size_t capacity = 0) {
    shape = h.shape;
    strides = h.strides;
    bytes = h.nbytes();
    const size_t cap = std::max<size_t>(std::max(bytes, capacity), 16);
    if (drv().cuMemAlloc(&ptr, cap) != 0) ptr = 0;
    t = h.t;
    t.data = reinterpret_cast<void *>(ptr);
    t.device = DLDevice{kDLCUDA, 0};
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    upload(h);
  }
  void upload(const vt::HostTensor &h) {
    if (bytes) drv().cuMemcpyHtoD(ptr, h.bytes.data(), bytes);
  }
  // Re-points this tensor at another problem's host tensor (same address).
  void retarget(const vt::HostTensor &h) {
    shape = h.shape;
    strides = h.strides;
    bytes = h.nbytes();
    void *keep = t.data;
    t = h.t;
    t.data = keep;
    t.device = DLDevice{kDLCUDA, 0};
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    upload(h);
  }
  void download(vt::HostTensor *h) const {
    drv().cuCtxSynchronize();
    if (bytes) drv().cuMemcpyDtoH(h->bytes.data(), ptr, bytes);
  }
  ~DevTensor() {
    if (ptr) drv().cuMemFree(ptr);
  }
  DevTensor(const DevTensor &) = delete;
  DevTensor &operator=(const DevTensor &) = delete;
  DLTensor *dl() { return &t; }
};

inline const vattn_backend_t *cuda() {
  const vattn_backend_t *b = nullptr;
  vattn_backend_find("CUDA", &b);
  return b;
}

// CUDA builder / plan / layer mirroring the problem's CPU objects.
struct GpuObjs {
  ct::BuilderPtr builder;
  ct::PlanPtr plan;
  ct::LayerPtr layer;
};

inline vattn_status_t make_gpu_objs(const ct::Problem &p, GpuObjs *o, int32_t max_num_splits = 0) {
  const ct::Config &c = p.c;
  vattn_builder_options_t bo;
  vattn_builder_options_init(&bo);
  bo.num_heads = c.num_heads;
  bo.num_kv_heads = c.num_kv_heads;
  bo.head_size = c.head_size;
  bo.block_size = c.block_size;
  bo.max_num_reqs = 64;
  bo.max_num_tokens = 4096;
  // Room for the problem's block-table width (at least 512, the default tests' need).
  bo.max_blocks_per_req = static_cast<int32_t>(std::max<int64_t>(512, p.cols));
  bo.max_num_splits = max_num_splits;
  bo.kv_cache_dtype = c.builder_kv_cache_dtype >= 0 ? c.builder_kv_cache_dtype : c.kv_cache_dtype;
  vattn_builder_t *b = nullptr;
  vattn_status_t st = vattn_builder_create(&b, cuda(), &bo);
  if (st) return st;
  o->builder.reset(b);
  vattn_plan_t *pl = nullptr;
  if ((st = vattn_plan_create(&pl, b))) return st;
  o->plan.reset(pl);
  vattn_layer_options_t lo;
  vattn_layer_options_init(&lo);
  lo.num_heads = c.num_heads;
  lo.num_kv_heads = c.num_kv_heads;
  lo.head_size = c.head_size;
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
  lo.block_size = c.block_size;
  vattn_layer_t *l = nullptr;
  if ((st = vattn_layer_create(&l, cuda(), &lo))) return st;
  o->layer.reset(l);
  return VATTN_OK;
}

// Device copies of a problem's tensors + forward args pointing at them.
struct GpuArgs {
  DevTensor q, k, v, cache, out, lse;
  vattn_forward_args_t args{};
  void init(ct::Problem &p, void *stream) {
    q.init(p.q);
    out.init(p.out);  // NaN-poisoned by make_problem
    if (p.c.want_lse) lse.init(p.lse);
    if (p.uses_cache()) cache.init(p.cache);
    if (p.args.key) {
      k.init(p.k);
      v.init(p.v);
    }
    args = p.args;
    args.query = q.dl();
    args.output = out.dl();
    args.output_lse = p.c.want_lse ? lse.dl() : nullptr;
    args.kv_cache = p.uses_cache() ? cache.dl() : nullptr;
    args.key = p.args.key ? k.dl() : nullptr;
    args.value = p.args.key ? v.dl() : nullptr;
    args.stream = stream;
  }
  void download(ct::Problem &p) {
    out.download(&p.out);
    if (p.c.want_lse) lse.download(&p.lse);
    if (p.uses_cache()) cache.download(&p.cache);
  }
};

// Largest |gpu - cpu| over the real rows (NaN counts as infinite).
inline double max_diff(const ct::Problem &p, const std::vector<unsigned char> &gpu_out,
                       const std::vector<unsigned char> &cpu_out) {
  const size_t es = ct::dtype_bytes(p.c.dtype);
  double m = 0;
  const int64_t n = p.T * p.c.num_heads * p.c.head_size;
  for (int64_t i = 0; i < n; ++i) {
    const double a = ct::get(p.c.dtype, gpu_out.data() + i * es);
    const double b = ct::get(p.c.dtype, cpu_out.data() + i * es);
    const double d = std::fabs(a - b);
    if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

// Runs one problem on CPU and CUDA; returns false on a hard failure.
inline void run_gpu_case(const ct::Config &c, const std::vector<int32_t> &q_lens,
                         const std::vector<int32_t> &kv_lens, std::mt19937_64 &g,
                         int32_t max_num_splits = 0) {
  auto p = ct::make_problem(c, q_lens, kv_lens, g);
  const std::vector<unsigned char> out0 = p->out.bytes, lse0 = p->lse.bytes;
  // CPU reference run.
  ASSERT_VATTN_OK(vattn_builder_build(p->builder.get(), p->plan.get(), c.common_prefix_len,
                                      p->md.get(), 0, nullptr));
  ASSERT_VATTN_OK(vattn_layer_forward(p->layer.get(), p->plan.get(), &p->args));
  const std::vector<unsigned char> cpu_out = p->out.bytes, cpu_cache = p->cache.bytes;
  // Back to the initial state, then the GPU run.
  p->out.bytes = out0;
  p->lse.bytes = lse0;
  p->cache.bytes = p->cache_before;
  p->out.t.data = p->out.bytes.data();
  p->lse.t.data = p->lse.bytes.data();
  p->cache.t.data = p->cache.bytes.data();
  GpuObjs o;
  ASSERT_VATTN_OK(make_gpu_objs(*p, &o, max_num_splits));
  // Half the cases build and run on the legacy NULL stream (the stream a
  // caller gets by passing no stream), half on a non-blocking stream.
  CUstream s = nullptr;
  if (g() & 1) CU_OK(drv().cuStreamCreate(&s, 1));
  GpuArgs ga;
  ga.init(*p, s);
  ASSERT_VATTN_OK(vattn_builder_build(o.builder.get(), o.plan.get(), c.common_prefix_len,
                                      p->md.get(), 0, s));
  // Two forwards on one build (as a model's layers run): the first must
  // leave the plan's split counters (and any other state a kernel changes)
  // re-armed.  Outputs are re-poisoned before the second.
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run == 0 ? "first forward" : "second forward on the same plan");
    if (run == 1) {
      p->out.bytes = out0;
      p->lse.bytes = lse0;
      ga.out.upload(p->out);
      if (c.want_lse) ga.lse.upload(p->lse);
    }
    ASSERT_VATTN_OK(vattn_layer_forward(o.layer.get(), o.plan.get(), &ga.args));
    CU_OK(drv().cuStreamSynchronize(s));
    ga.download(*p);
    EXPECT_EQ(ct::check_problem(*p), 0) << "CUDA vs oracle: " << c.str();
    const double md = max_diff(*p, p->out.bytes, cpu_out);
    EXPECT_LE(md, 2e-2) << "CUDA vs CPU backend max |diff| " << md << " [" << c.str() << "]";
    if (p->uses_cache()) EXPECT_TRUE(p->cache.bytes == cpu_cache) << "cache bytes differ from CPU [" << c.str() << "]";
  }
  if (s) drv().cuStreamDestroy(s);
}

}  // namespace gt
