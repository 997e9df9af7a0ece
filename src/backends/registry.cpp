// registry.cpp -- the list of compiled-in backends, in selection order.
#include "backends/backend.h"

namespace vattn {
namespace {

struct Registry {
  std::vector<const Backend *> list;
  Registry() {
    // CUDA first: the selector prefers the GPU when one is usable and the
    // caller did not name a device.  CPU is always present.
#ifdef VATTN_WITH_CUDA
    list.push_back(cuda_backend());
#endif
    list.push_back(cpu_backend());
  }
};

const Registry &registry() {
  static const Registry r;
  return r;
}

}  // namespace

size_t backend_count() { return registry().list.size(); }

const Backend *backend_at(size_t i) {
  const auto &l = registry().list;
  return i < l.size() ? l[i] : nullptr;
}

const Backend *backend_for_device(int32_t device_type) {
  int32_t want = device_type == kDLCUDAHost ? kDLCPU : device_type;
  for (const Backend *b : registry().list)
    if (b->info().device_type == want) return b;
  return nullptr;
}

}  // namespace vattn
