// cpu_layer.h -- one attention layer on the CPU backend.
#pragma once

#include "backends/backend.h"

namespace vattn {
namespace cpu {

class CpuLayer final : public LayerImpl {
 public:
  explicit CpuLayer(const LayerParams &p) : p_(p) {}
  vattn_status_t forward(const PlanImpl &plan, const vattn_forward_args_t &args) const override;

 private:
  LayerParams p_;
};

}  // namespace cpu
}  // namespace vattn
