// cuda_plan.h -- the CUDA builder's plan: persistent device buffers sized
// at creation from the builder's capacities, rebuilt in place by every
// build (no reallocation), so a forward captured in a CUDA graph replays
// any later batch that fits.
//
// One device allocation holds, at fixed offsets:
//   header[8]     int32: [0] items, [1] output tokens (num_actual_tokens),
//                 [2] slot-mapping length, [3] general items (the decode
//                 kernel's items are [header[3], header[0]))
//   reqs          AttnReq[max_num_reqs + 1]   (+1: cascade prefix pass)
//   items         AttnItem[cap_items]
//   tok_parts     int2[max_num_tokens]        (merge pass: offset, count)
//   part_list     int32[cap_parts]
//   block_table   int32[max_num_reqs * max_blocks_per_req] (row stride fixed)
//   slot_mapping  int64[max_num_tokens]
//   merge_ctr     int32[cap_items * num_kv_heads] (self-merging decode
//                 tiles' arrival counters, at most one per item; zero
//                 between launches)
//   unit_ctr      int32[2] (the Hopper kernel's unit claim / exit counters;
//                 zero between launches)
//   units         int32[cap_items * num_kv_heads] (the order in which the
//                 Hopper kernel's CTAs take the general items' units)
//   ws_lse, ws_o  float[ws_rows * KVH], float[ws_rows * KVH * head_size]
// Two pinned host mirrors of the metadata part take turns: build() fills
// one and copies it with cudaMemcpyAsync on the build's stream, and an
// event per mirror guards its reuse.  A build therefore waits on the host
// only when the mirror it needs is still being uploaded, i.e. when the host
// runs two builds of this plan ahead of the device's stream.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_schedule.h"
#include "launch.h"

namespace vattn {

class CudaPlan final : public PlanImpl {
 public:
  ~CudaPlan() override;

  int32_t device = 0;
  int32_t num_heads = 0, num_kv_heads = 0, head_size = 0, block_size = 0;
  int32_t num_sms = 0, max_num_splits = 0;
  int32_t dec_heads = 1;  // KV heads per decode CTA (kern::decode_kv_heads_per_cta)
  int64_t cap_items = 0, cap_parts = 0, ws_rows = 0;  // ws_rows per KV head
  CudaPlanLayout lay;
  char *dev = nullptr;    // device buffer
  char *host = nullptr;   // the mirror the current / last build fills (one of host_buf)
  char *host_buf[2] = {nullptr, nullptr};  // pinned mirrors of [0, lay.meta_end)
  void *events[2] = {nullptr, nullptr};    // cudaEvent_t: upload from host_buf[i] done
  int32_t slot = 1;                        // host_buf index of the last build
  CudaScheduleScratch scratch;             // build()'s working arrays, kept warm

  // Host values of the last build (grid sizes; never read by kernels).
  int32_t num_items = 0;     // all items: general [0, num_gen_items), decode after
  int32_t num_gen_items = 0;  // items for attention_kernel (header[3] on the device)
  int32_t grid_attn = 1, grid_merge = 1, grid_cache = 1, grid_dec = 1;
  bool cascade_active = false;
  bool capture = false;      // built for graph capture: launch every kernel
  bool needs_merge = true;   // split parts or padding rows exist (or capture)

  template <class T>
  T *d(size_t off) const { return reinterpret_cast<T *>(dev + off); }
  template <class T>
  T *h(size_t off) const { return reinterpret_cast<T *>(host + off); }
};

}  // namespace vattn
