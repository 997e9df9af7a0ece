// kv_cache_plan.cpp -- the layer table of a KV cache: spec validation,
// sharing rules, grouping, and blocks per memory budget (see kv_cache.h).
#include <cstdint>
#include <string>

#include "kv_cache/kv_cache.h"
#include "kv_cache/spec.h"

namespace vattn {

vattn_status_t plan_layers(const vattn_kv_cache_spec_t *specs, const int32_t *kv_sharing_target,
                           size_t num_layers, LayerPlan *out) {
  VATTN_CHECK_NOT_NULL(specs);
  VATTN_CHECK_ARG(num_layers > 0, "argument 'num_layers' is 0");
  VATTN_CHECK_ARG(num_layers <= INT32_MAX, "argument 'num_layers' = %zu is too large", num_layers);
  LayerPlan p;
  p.specs.resize(num_layers);
  p.target.assign(num_layers, -1);
  p.group.assign(num_layers, -1);
  for (size_t i = 0; i < num_layers; ++i) {
    std::string name = format("specs[%zu]", i);
    VATTN_TRY(read_spec(&specs[i], name.c_str(), &p.specs[i]));
  }
  if (kv_sharing_target) {
    for (size_t i = 0; i < num_layers; ++i) {
      const int32_t t = kv_sharing_target[i];
      if (t == -1) continue;
      VATTN_CHECK_ARG(t >= 0 && static_cast<size_t>(t) < i,
                      "argument 'kv_sharing_target': kv_sharing_target[%zu] = %d must be -1 (own "
                      "cache) or the index of an earlier layer (< %zu)",
                      i, t, i);
      VATTN_CHECK_ARG(kv_sharing_target[t] == -1,
                      "argument 'kv_sharing_target': kv_sharing_target[%zu] = %d, but layer %d "
                      "itself reads layer %d's cache (point at %d)",
                      i, t, t, kv_sharing_target[t], kv_sharing_target[t]);
      VATTN_CHECK_ARG(p.specs[t].kind != VATTN_KV_SPEC_ENCODER_ONLY,
                      "argument 'kv_sharing_target': kv_sharing_target[%zu] = %d, but layer %d is "
                      "ENCODER_ONLY and keeps no cache",
                      i, t, t);
      VATTN_CHECK_ARG(specs_equal(p.specs[i], p.specs[t]),
                      "argument 'kv_sharing_target': kv_sharing_target[%zu] = %d, but specs[%zu] "
                      "differs from specs[%d] in %s",
                      i, t, i, t, first_difference(p.specs[i], p.specs[t]));
      p.target[i] = t;
    }
  }
  // Groups in order of first appearance; sharing layers follow their target.
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < num_layers; ++i) {
    if (p.target[i] >= 0) {
      p.group[i] = p.group[p.target[i]];
      members[p.group[i]].push_back(i);
      continue;
    }
    int32_t g = -1;
    for (size_t k = 0; k < members.size() && g < 0; ++k)
      if (specs_equal_ignoring_window(p.specs[members[k][0]], p.specs[i]))
        g = static_cast<int32_t>(k);
    if (g < 0) {
      g = static_cast<int32_t>(members.size());
      members.emplace_back();
    }
    p.group[i] = g;
    members[g].push_back(i);
  }
  p.group_specs.resize(members.size());
  for (size_t g = 0; g < members.size(); ++g) {
    std::vector<const vattn_kv_cache_spec_t *> ptrs;
    for (size_t i : members[g]) ptrs.push_back(&p.specs[i]);
    VATTN_TRY(merge_specs(ptrs.data(), ptrs.size(), members[g].data(), &p.group_specs[g]));
  }
  *out = std::move(p);
  return VATTN_OK;
}

vattn_status_t blocks_for_budget(const LayerPlan &plan, int64_t budget, int64_t *out) {
  VATTN_CHECK_ARG(budget >= 0, "argument 'memory_budget_bytes' = %lld is negative",
                  static_cast<long long>(budget));
  int64_t per_block = 0;
  size_t owners = 0;
  bool overflow = false;
  for (size_t i = 0; i < plan.num_layers(); ++i) {
    if (!plan.owns(i)) continue;
    ++owners;
    if (__builtin_add_overflow(per_block, spec_page_bytes(plan.specs[i]), &per_block))
      overflow = true;
  }
  VATTN_CHECK_ARG(owners > 0,
                  "argument 'specs': no layer keeps a cache of its own (all share or are "
                  "ENCODER_ONLY), so a memory budget cannot size the cache");
  if (overflow)
    return fail(VATTN_ERR_OUT_OF_MEMORY,
                "argument 'memory_budget_bytes' = %lld: one block of each of the %zu layers that "
                "own a cache needs more than INT64_MAX bytes",
                static_cast<long long>(budget), owners);
  const int64_t blocks = budget / per_block;
  if (blocks == 0)
    return fail(VATTN_ERR_OUT_OF_MEMORY,
                "argument 'memory_budget_bytes' = %lld is too small: one block for each of the %zu "
                "layers that own a cache needs %lld bytes",
                static_cast<long long>(budget), owners, static_cast<long long>(per_block));
  *out = blocks;
  return VATTN_OK;
}

}  // namespace vattn
