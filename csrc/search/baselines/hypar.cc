#include "search/baselines/hypar.h"

#include <limits>
#include <utility>

#include "search/baselines/cut_driver.h"
#include "search/baselines/data.h"
#include "search/baselines/layerwise.h"

namespace autotile {

std::vector<char> hypar_partition(const std::vector<HyparLayerCost>& L, double* com) {
  const double inf = std::numeric_limits<double>::infinity();
  const size_t n = L.size();
  std::vector<char> mp(n, 0);
  if (n == 0) {
    if (com) *com = 0;
    return mp;
  }
  // best[l][x]: least communication of layers 0..l with layer l in x (0 dp, 1 mp);
  // from[l][x]: the choice of layer l-1 on that path.
  std::vector<double> best_dp(n), best_mp(n);
  std::vector<char> from_dp(n, 0), from_mp(n, 0);
  best_dp[0] = L[0].dp_ok ? L[0].intra_dp : inf;
  best_mp[0] = L[0].intra_mp;
  for (size_t l = 1; l < n; ++l) {
    const double F = L[l].inter;
    const double dp_dp = 0, dp_mp = 0.25 * F + 0.25 * F, mp_mp = 0.5 * F, mp_dp = 0.5 * F;
    double a = best_dp[l - 1] + dp_dp, b = best_mp[l - 1] + mp_dp;
    best_dp[l] = (L[l].dp_ok ? L[l].intra_dp : inf) + (a <= b ? a : b);
    from_dp[l] = a <= b ? 0 : 1;
    a = best_dp[l - 1] + dp_mp, b = best_mp[l - 1] + mp_mp;
    best_mp[l] = L[l].intra_mp + (a <= b ? a : b);
    from_mp[l] = a <= b ? 0 : 1;
  }
  char x = best_dp[n - 1] <= best_mp[n - 1] ? 0 : 1;
  if (com) *com = x ? best_mp[n - 1] : best_dp[n - 1];
  for (size_t l = n; l-- > 0;) {
    mp[l] = x;
    x = x ? from_mp[l] : from_dp[l];
  }
  return mp;
}

namespace {
double elements(const Shape& s) {
  double e = 1;
  for (int64_t d : s) e *= static_cast<double>(d);
  return e;
}
}  // namespace

Plan hypar_plan(const Graph& g, int devices, const SearchOptions& options) {
  StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  auto view = layer_view(g, provider);
  const std::vector<int> inputs = input_batch_dims(g, options.batch_dims);
  const BatchMap batch = batch_map(g, inputs, provider);  // one map: the constraint's and the layers'
  PlanConstraint data = data_parallel_constraint(g, inputs, batch);
  // Batch tensors (those the data rules split along their batch dim) touched by each layer's nodes.
  auto batch_of_layer = std::make_shared<std::vector<std::vector<std::pair<TensorId, int>>>>(view->layers.size());
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    int l = view->node_layer[n];
    if (view->layers.empty()) break;
    auto& list = (*batch_of_layer)[l < 0 ? 0 : l];
    for (const auto* ts : {&g.node(n).inputs, &g.node(n).outputs})
      for (TensorId t : *ts)
        if (view->weight_of[t] == kNone && batch.dim[t] >= 0 && !g.tensor(t).shape.empty())
          list.emplace_back(t, batch.dim[t]);
  }
  return staged_plan(g, devices, options, "hypar", [view, data, batch_of_layer](const CutContext& ctx) {
    const auto& layers = view->layers;
    std::vector<HyparLayerCost> cost(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      const Layer& L = layers[l];
      for (TensorId w : L.weights) cost[l].intra_dp += elements(ctx.s.tensor_shape[w]);
      cost[l].intra_mp = L.output == kNone ? 0 : elements(ctx.s.tensor_shape[L.output]);
      cost[l].inter = L.input == kNone ? 0 : elements(ctx.s.tensor_shape[L.input]);
      for (const auto& [t, d] : (*batch_of_layer)[l]) {
        const Shape& sh = ctx.s.tensor_shape[t];
        if (sh[d] % ctx.k != 0) cost[l].dp_ok = false;
      }
    }
    std::vector<char> mp = hypar_partition(cost);
    return layerwise_constraint(*view, data, ctx, mp, "hypar");
  });
}

}  // namespace autotile
