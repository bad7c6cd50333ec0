#include "search/baselines/icml18.h"

#include <memory>

#include "search/baselines/cut_driver.h"

namespace autotile {

Plan icml18_plan(const Graph& g, int devices, const SearchOptions& options) {
  return staged_plan(g, devices, options, "icml18", [](const CutContext& ctx) {
    // Nodes that have at least one strategy without reduction must use one.
    auto strict = std::make_shared<std::vector<char>>(ctx.g.num_nodes(), 0);
    for (NodeId n = 0; n < ctx.g.num_nodes(); ++n)
      for (const NodeOption& o : ctx.options[n])
        if (o.whole || !o.strategy.reduction) (*strict)[n] = 1;
    PlanConstraint pc;
    pc.name = "icml18";
    pc.allow_tiling = [](TensorId, const Tiling& ti, int) { return ti.kind != Tiling::kPartial; };
    pc.allow_strategy = [strict](NodeId n, const NodeOption& o, int) {
      return !(*strict)[n] || o.whole || !o.strategy.reduction;
    };
    return pc;
  });
}

}  // namespace autotile
