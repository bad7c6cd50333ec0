#include "search/planner.h"

#include <algorithm>

#include "search/baselines/data.h"
#include "search/baselines/cut_driver.h"
#include "search/baselines/registry.h"
#include "search/pins.h"
#include "util/error.h"

namespace autotile {

const std::vector<std::string>& search_algorithms() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v{"tofu", "bruteforce", "ilp", "data"};
    for (const auto& b : baseline_algorithms()) v.push_back(b);
    return v;
  }();
  return names;
}

Plan plan_graph(const Graph& g, int devices, const std::string& algorithm, SearchOptions options) {
  if (devices < 1) fail("devices must be >= 1, got ", devices);
  if (algorithm != "tofu") options.refine = false;  // the baselines and oracles recurse cut by cut
  if (algorithm == "tofu") {
    options.solver = CutSolver::kDP;
  } else if (algorithm == "bruteforce") {
    options.solver = CutSolver::kBruteforce;
  } else if (algorithm == "ilp") {
    options.solver = CutSolver::kExternal;  // planner/ilp.py through the binding
  } else if (algorithm == "data") {
    options.solver = CutSolver::kDP;
    options.constraint = data_parallel_constraint(g, options, devices > 1);
  } else if (std::find(baseline_algorithms().begin(), baseline_algorithms().end(), algorithm) !=
             baseline_algorithms().end()) {
    if (!options.factors.empty() || !options.pinned.empty())
      fail("algorithm '", algorithm, "' plans its own layout: a mesh or layout rules work with tofu, bruteforce "
           "and data");
    return baseline_plan(g, devices, algorithm, options);
  } else {
    std::string names;
    for (const auto& n : search_algorithms()) names += (names.empty() ? "" : ", ") + n;
    fail("unknown search algorithm '", algorithm, "' (implemented: ", names, ")");
  }
  if (!options.pinned.empty()) {
    size_t cuts = cut_factors(devices, options.factors).size();
    options.constraint = both(options.constraint, pin_table_constraint(g, options.pinned, cuts),
                              options.constraint.name.empty() ? "layout" : options.constraint.name + "+layout");
  }
  Plan p = k_cuts(g, devices, options);
  p.algorithm = algorithm;
  return p;
}

}  // namespace autotile
