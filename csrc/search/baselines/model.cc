#include "search/baselines/model.h"

#include "search/baselines/cut_driver.h"
#include "search/baselines/weight_pin.h"

namespace autotile {

Plan model_parallel_plan(const Graph& g, int devices, const SearchOptions& options) {
  StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  auto view = layer_view(g, provider);
  std::vector<char> every_weight(g.num_tensors(), 0);
  for (TensorId t = 0; t < g.num_tensors(); ++t) every_weight[t] = g.tensor(t).is_param;
  std::vector<char> every_node(g.num_nodes(), 1);
  return staged_plan(g, devices, options, "model", [view, every_weight, every_node](const CutContext& ctx) {
    return pin_constraint(pin_weights(*view, ctx, every_weight, false, every_node), "model");
  });
}

}  // namespace autotile
