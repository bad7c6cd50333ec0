#include "search/baselines/registry.h"

#include "search/baselines/allrow.h"
#include "search/baselines/equalchop.h"
#include "search/baselines/hypar.h"
#include "search/baselines/icml18.h"
#include "search/baselines/model.h"
#include "search/baselines/owt.h"
#include "search/baselines/soybean.h"
#include "search/baselines/spartan.h"
#include "util/error.h"

namespace autotile {

const std::vector<std::string>& baseline_algorithms() {
  static const std::vector<std::string> names{"soybean", "model", "owt", "hypar", "spartan", "allrow", "equalchop",
                                              "icml18"};
  return names;
}

Plan baseline_plan(const Graph& g, int devices, const std::string& algorithm, const SearchOptions& options) {
  if (devices < 1) fail("devices must be >= 1, got ", devices);
  Plan p;
  if (algorithm == "soybean") p = soybean_plan(g, devices, options);
  else if (algorithm == "model") p = model_parallel_plan(g, devices, options);
  else if (algorithm == "owt") p = one_weird_trick_plan(g, devices, options);
  else if (algorithm == "hypar") p = hypar_plan(g, devices, options);
  else if (algorithm == "spartan") p = spartan_plan(g, devices, options);
  else if (algorithm == "allrow") p = allrow_plan(g, devices, options);
  else if (algorithm == "equalchop") p = equalchop_plan(g, devices, options);
  else if (algorithm == "icml18") p = icml18_plan(g, devices, options);
  else fail("unknown baseline algorithm '", algorithm, "'");
  p.algorithm = algorithm;
  return p;
}

}  // namespace autotile
