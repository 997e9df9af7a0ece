// kernel_trace.cpp -- a CUPTI injection library that records every kernel a
// process runs: its start and end on the GPU clock, grid, block, registers,
// shared memory, cluster, and how it was launched.  A dev tool for the GPU
// machine, which has no Nsight Systems: it times a peer's kernels (torch
// SDPA) without events around them, and shows what each call launches.
//
// Build (on the GPU machine; CUPTI ships with the CUDA toolkit; I and L are
// the folders of cupti.h and libcupti.so):
//   g++ -O1 -shared -fPIC -o /tmp/libkernel_trace.so bench/kernel_trace.cpp -I$I -L$L -lcupti -Wl,-rpath,$L
// Use:
//   KERNEL_TRACE_OUT=trace.tsv CUDA_INJECTION64_PATH=/tmp/libkernel_trace.so <command>
//   python3 bench/kernel_trace.py report trace.tsv
//
// Kernels are recorded as CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, which does
// not serialise launches (the plain KERNEL kind would).  The launch column is
// "plain" (cuLaunchKernel) or "Ex" (cuLaunchKernelEx) followed by the
// launch attributes, " a<id>=<first value word>": programmatic dependent
// launch shows as a6 (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
// or a7 (PROGRAMMATIC_EVENT).
//
// Output: a TSV with one header line, then one row per kernel, written as
// CUPTI hands over its buffers.  Buffers are forced out when the context
// starts to be destroyed and at exit, whichever comes first.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Kernel {
  uint64_t start, end;
  uint32_t corr, stream;
  int gx, gy, gz, threads, regs, smem, cluster;
  std::string name;
};

std::mutex g_mu;  // guards everything below
FILE *g_out = nullptr;
std::vector<Kernel> g_rows;              // delivered, not yet written
std::map<uint32_t, std::string> g_how;  // correlation id -> launch API and attributes

void write_rows_locked() {
  if (g_out == nullptr) return;
  for (const Kernel &k : g_rows) {
    const auto it = g_how.find(k.corr);
    std::fprintf(g_out, "%llu\t%llu\t%u\t%dx%dx%d\t%d\t%d\t%d\t%d\t%s\t%s\n", static_cast<unsigned long long>(k.start),
                 static_cast<unsigned long long>(k.end), k.stream, k.gx, k.gy, k.gz, k.threads, k.regs, k.smem,
                 k.cluster, it == g_how.end() ? "-" : it->second.c_str(), k.name.c_str());
    if (it != g_how.end()) g_how.erase(it);
  }
  g_rows.clear();
  std::fflush(g_out);
}

void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
  *size = size_t{1} << 20;
  *buf = static_cast<uint8_t *>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUpti_Activity *r = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto *k = reinterpret_cast<const CUpti_ActivityKernel10 *>(r);
    g_rows.push_back({k->start, k->end, k->correlationId, k->streamId, k->gridX, k->gridY, k->gridZ,
                      k->blockX * k->blockY * k->blockZ, k->registersPerThread,
                      k->staticSharedMemory + k->dynamicSharedMemory, static_cast<int>(k->clusterX),
                      k->name != nullptr ? k->name : "?"});
  }
  std::free(buf);
  write_rows_locked();
}

void CUPTIAPI on_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    return;
  }
  const auto *d = static_cast<const CUpti_CallbackData *>(data);
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || d->callbackSite != CUPTI_API_ENTER) return;
  std::string how;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz) {
    const auto *p = static_cast<const cuLaunchKernelEx_params *>(d->functionParams);
    how = "Ex";
    for (unsigned i = 0; p->config != nullptr && i < p->config->numAttrs; ++i) {
      const CUlaunchAttribute &a = p->config->attrs[i];
      char t[48];
      std::snprintf(t, sizeof t, " a%d=%d", static_cast<int>(a.id),
                    static_cast<int>(a.value.programmaticStreamSerializationAllowed));
      how += t;
    }
  } else if (id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) {
    how = "plain";
  } else {
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_how[d->correlationId] = how;
}

void at_exit() { cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); }

}  // namespace

// Called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH).
extern "C" int InitializeInjection(void) {
  const char *path = std::getenv("KERNEL_TRACE_OUT");
  g_out = std::fopen(path != nullptr ? path : "/tmp/kernel_trace.tsv", "w");
  if (g_out == nullptr) return 0;
  std::fprintf(g_out, "start_ns\tend_ns\tstream\tgrid\tthreads\tregs\tsmem\tcluster\tlaunch\tname\n");
  std::fflush(g_out);
  CUpti_SubscriberHandle sub;
  if (cuptiSubscribe(&sub, on_callback, nullptr) != CUPTI_SUCCESS) return 0;
  cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
  cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RESOURCE);
  cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  std::atexit(at_exit);
  return 1;
}
