// C API: running the search (csrc/search/planner.h) and reading the plan back.
#include <cstddef>
#include <cstring>
#include <mutex>

#include "capi/handles.h"
#include "search/planner.h"

using namespace autotile;
using namespace autotile::capi;

namespace {

// Reads the caller's options field by field up to the size it declared, so a caller
// compiled against an older (shorter) AT_SearchOptions keeps working after fields are added.
SearchOptions search_options(const AT_SearchOptions* in) {
  SearchOptions opts;
  if (in == nullptr) return opts;
  AT_SearchOptions o;
  at_search_options_init(&o);
  const size_t size = in->struct_size;
  if (size < offsetof(AT_SearchOptions, replicate_fallback))
    api_fail(AT_ERR_INVALID_ARGUMENT, "options->struct_size ", size,
             " is too small (initialise options with at_search_options_init)");
  if (size > sizeof(AT_SearchOptions))
    api_fail(AT_ERR_INVALID_ARGUMENT, "options->struct_size ", size, " is larger than this library's ",
             sizeof(AT_SearchOptions), " (built against a newer autotile?)");
  std::memcpy(&o, in, size);
  if (o.replicate_fallback != 0 && o.replicate_fallback != 1)
    api_fail(AT_ERR_INVALID_ARGUMENT, "options->replicate_fallback must be 0 or 1, got ", o.replicate_fallback);
  opts.replicate_fallback = o.replicate_fallback != 0;
  if (o.num_bandwidths < 0)
    api_fail(AT_ERR_INVALID_ARGUMENT, "options->num_bandwidths ", o.num_bandwidths, " is negative");
  if (o.num_bandwidths > 0 && o.bandwidths == nullptr)
    api_fail(AT_ERR_NULL_ARGUMENT, "options->bandwidths is NULL but num_bandwidths is ", o.num_bandwidths);
  for (int32_t i = 0; i < o.num_bandwidths; ++i) {
    // NaN fails both comparisons, so it is rejected too.
    if (!(o.bandwidths[i] > 0) || !(o.bandwidths[i] < 1e300))
      api_fail(AT_ERR_INVALID_ARGUMENT, "options->bandwidths[", i, "] = ", o.bandwidths[i],
               " is not a positive finite number");
    opts.bandwidths.push_back(o.bandwidths[i]);
  }
  if (o.bruteforce_limit < 0)
    api_fail(AT_ERR_INVALID_ARGUMENT, "options->bruteforce_limit ", o.bruteforce_limit, " is negative");
  if (o.bruteforce_limit > 0) opts.bruteforce_limit = o.bruteforce_limit;
  return opts;
}

const Plan& plan_of(AT_Plan* handle, std::shared_ptr<PlanObject>* keep) {
  *keep = get_plan(handle);
  return (*keep)->plan;
}

}  // namespace

extern "C" {

AT_Status at_search_options_init(AT_SearchOptions* options) {
  if (options == nullptr) {
    return guard("at_search_options_init", [] { api_fail(AT_ERR_NULL_ARGUMENT, "options is NULL"); });
  }
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(AT_SearchOptions);
  return guard("at_search_options_init", [] {});
}

AT_Status at_search(AT_Graph* graph, int32_t devices, const char* algorithm, const AT_SearchOptions* options,
                    AT_Plan** out_plan) {
  return guard("at_search", [&] {
    auto obj = get_graph(graph);
    need(out_plan, "out_plan");
    if (devices < 1 || devices > AT_MAX_DEVICES)
      api_fail(AT_ERR_INVALID_ARGUMENT, "devices must be in 1..", AT_MAX_DEVICES, ", got ", devices);
    std::string algo = algorithm ? algorithm : "tofu";
    bool known = false;
    std::string names;
    for (const auto& n : search_algorithms()) {
      known = known || n == algo;
      names += (names.empty() ? "" : ", ") + n;
    }
    if (!known) api_fail(AT_ERR_INVALID_ARGUMENT, "unknown search algorithm '", algo, "' (implemented: ", names, ")");
    SearchOptions opts = search_options(options);
    auto plan = std::make_shared<PlanObject>();
    {
      std::shared_lock<std::shared_mutex> lock(obj->mutex);
      plan->plan = plan_graph(obj->graph, devices, algo, std::move(opts));
    }
    *out_plan = reinterpret_cast<AT_Plan*>(register_object(std::move(plan)));
  });
}

AT_Status at_plan_free(AT_Plan* plan) {
  return guard("at_plan_free", [&] {
    if (plan == nullptr) return;
    if (!unregister_object(reinterpret_cast<uintptr_t>(plan), Kind::kPlan))
      api_fail(AT_ERR_INVALID_HANDLE, "plan is not a live plan handle (freed twice or never created)");
  });
}

AT_Status at_plan_algorithm(AT_Plan* plan, const char** out) {
  return guard("at_plan_algorithm", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    *out = p.algorithm.c_str();
  });
}

AT_Status at_plan_devices(AT_Plan* plan, int32_t* out) {
  return guard("at_plan_devices", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    *out = p.devices;
  });
}

AT_Status at_plan_num_cuts(AT_Plan* plan, int32_t* out) {
  return guard("at_plan_num_cuts", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    *out = static_cast<int32_t>(p.factors.size());
  });
}

AT_Status at_plan_factor(AT_Plan* plan, int32_t cut, int32_t* out) {
  return guard("at_plan_factor", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    check_index(cut, static_cast<int64_t>(p.factors.size()), "cut");
    *out = p.factors[static_cast<size_t>(cut)];
  });
}

AT_Status at_plan_cut_cost(AT_Plan* plan, int32_t cut, double* out) {
  return guard("at_plan_cut_cost", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    check_index(cut, static_cast<int64_t>(p.cut_costs.size()), "cut");
    *out = p.cut_costs[static_cast<size_t>(cut)];
  });
}

AT_Status at_plan_total_bytes(AT_Plan* plan, double* out) {
  return guard("at_plan_total_bytes", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    *out = p.total_bytes;
  });
}

AT_Status at_plan_weighted_cost(AT_Plan* plan, double* out) {
  return guard("at_plan_weighted_cost", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    *out = p.weighted_cost;
  });
}

AT_Status at_plan_search_seconds(AT_Plan* plan, double* out) {
  return guard("at_plan_search_seconds", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    *out = p.search_seconds;
  });
}

AT_Status at_plan_num_tensors(AT_Plan* plan, int32_t* out) {
  return guard("at_plan_num_tensors", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    *out = static_cast<int32_t>(p.tensor_tilings.size());
  });
}

AT_Status at_plan_num_nodes(AT_Plan* plan, int32_t* out) {
  return guard("at_plan_num_nodes", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    *out = static_cast<int32_t>(p.node_strategies.size());
  });
}

AT_Status at_plan_tiling(AT_Plan* plan, int32_t tensor, int32_t cut, const char** out) {
  return guard("at_plan_tiling", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    check_index(tensor, static_cast<int64_t>(p.tensor_tilings.size()), "tensor");
    const auto& row = p.tensor_tilings[static_cast<size_t>(tensor)];
    check_index(cut, static_cast<int64_t>(row.size()), "cut");
    *out = row[static_cast<size_t>(cut)].c_str();
  });
}

AT_Status at_plan_strategy(AT_Plan* plan, int32_t node, int32_t cut, const char** out) {
  return guard("at_plan_strategy", [&] {
    std::shared_ptr<PlanObject> keep;
    const Plan& p = plan_of(plan, &keep);
    need(out, "out");
    check_index(node, static_cast<int64_t>(p.node_strategies.size()), "node");
    const auto& row = p.node_strategies[static_cast<size_t>(node)];
    check_index(cut, static_cast<int64_t>(row.size()), "cut");
    *out = row[static_cast<size_t>(cut)].c_str();
  });
}

}  // extern "C"
