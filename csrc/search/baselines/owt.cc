#include "search/baselines/owt.h"

#include "search/baselines/cut_driver.h"
#include "search/baselines/data.h"
#include "search/baselines/layerwise.h"

namespace autotile {

Plan one_weird_trick_plan(const Graph& g, int devices, const SearchOptions& options) {
  StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  auto view = layer_view(g, provider);
  std::vector<char> mp;
  for (const Layer& L : view->layers) mp.push_back(L.kind == LayerKind::kFC);
  PlanConstraint data = data_parallel_constraint(g, options);
  return staged_plan(g, devices, options, "owt", [view, mp, data](const CutContext& ctx) {
    return layerwise_constraint(*view, data, ctx, mp, "owt");
  });
}

}  // namespace autotile
