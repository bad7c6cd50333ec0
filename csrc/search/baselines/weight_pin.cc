#include "search/baselines/weight_pin.h"

namespace autotile {

WeightPin pin_weights(const LayerView& v, const CutContext& ctx, const std::vector<char>& split_weight,
                      bool replicate_rest, const std::vector<char>& in_place) {
  const Graph& g = ctx.g;
  WeightPin pin;
  pin.pinned.assign(g.num_tensors(), 0);
  pin.tiling.assign(g.num_tensors(), Tiling::replicate());
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    TensorId w = v.weight_of[t];
    if (w == kNone) continue;
    const bool gradient = !v.weight_class[t];
    if (split_weight[w]) {
      Tiling ti = model_tiling(v, ctx, w);
      if (gradient && ctx.s.tensor_shape[t] != ctx.s.tensor_shape[w]) continue;
      pin.pinned[t] = 1;
      pin.tiling[t] = ti;
    } else if (replicate_rest && !gradient) {
      pin.pinned[t] = 1;
      pin.tiling[t] = Tiling::replicate();
    }
  }
  std::vector<Tiling> wt(g.num_tensors(), Tiling::replicate());
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (pin.pinned[t]) wt[t] = pin.tiling[t];
  pin.allowed = in_place_options(v, ctx, wt, in_place);
  return pin;
}

PlanConstraint pin_constraint(const WeightPin& pin, const std::string& name) {
  PlanConstraint pc;
  pc.name = name;
  auto pinned = std::make_shared<std::vector<char>>(pin.pinned);
  auto tiling = std::make_shared<std::vector<Tiling>>(pin.tiling);
  pc.allow_tiling = [pinned, tiling](TensorId t, const Tiling& ti, int) { return !(*pinned)[t] || (*tiling)[t] == ti; };
  auto allowed = pin.allowed;
  pc.allow_strategy = [allowed](NodeId n, const NodeOption& o, int) { return option_listed(*allowed, n, o); };
  return pc;
}

}  // namespace autotile
