#include "search/baselines/layerwise.h"

#include <memory>

#include "search/baselines/weight_pin.h"

namespace autotile {

bool node_is_mp(const LayerView& v, NodeId n, const std::vector<char>& mp) {
  if (mp.empty()) return false;
  int l = v.node_layer[n];
  return mp[l < 0 ? 0 : l];
}

PlanConstraint layerwise_constraint(const LayerView& v, const PlanConstraint& data, const CutContext& ctx,
                                    const std::vector<char>& mp, const std::string& name) {
  const Graph& g = ctx.g;
  std::vector<char> split_weight(g.num_tensors(), 0), mp_node(g.num_nodes(), 0);
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_param) {
      int l = v.weight_layer[t];
      split_weight[t] = !mp.empty() && mp[l < 0 ? 0 : l];
    }
  for (NodeId n = 0; n < g.num_nodes(); ++n) mp_node[n] = node_is_mp(v, n, mp);
  WeightPin pin = pin_weights(v, ctx, split_weight, true, mp_node);
  // Batch tensors a dp node touches follow the data baseline's tiling rule.
  auto dp_touch = std::make_shared<std::vector<char>>(g.num_tensors(), 0);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (mp_node[n]) continue;
    for (TensorId t : g.node(n).inputs) (*dp_touch)[t] = v.weight_of[t] == kNone;
    for (TensorId t : g.node(n).outputs) (*dp_touch)[t] = v.weight_of[t] == kNone;
  }
  PlanConstraint pc = pin_constraint(pin, name);
  auto pin_t = pc.allow_tiling;
  auto pin_s = pc.allow_strategy;
  auto data_t = data.allow_tiling;
  auto data_s = data.allow_strategy;
  pc.allow_tiling = [pin_t, data_t, dp_touch](TensorId t, const Tiling& ti, int cut) {
    return pin_t(t, ti, cut) && (!(*dp_touch)[t] || data_t(t, ti, cut));
  };
  // A dp node none of whose options splits the batch the data way (BatchNorm's batch
  // statistics, a slice along the batch-sized axis) is left to the search, as an mp node
  // with nothing pinned would be: data parallelism has no way to run it.
  auto mode = std::make_shared<std::vector<char>>(g.num_nodes(), 0);  // 0 dp, 1 mp, 2 free
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (mp_node[n]) {
      (*mode)[n] = 1;
      continue;
    }
    bool any = false;
    for (const NodeOption& o : ctx.options[n]) any = any || data_s(n, o, ctx.cut);
    if (!any) (*mode)[n] = 2;
  }
  pc.allow_strategy = [pin_s, data_s, mode](NodeId n, const NodeOption& o, int cut) {
    switch ((*mode)[n]) {
      case 0: return data_s(n, o, cut);
      case 1: return pin_s(n, o, cut);
      default: return true;
    }
  };
  pc.explain = data.explain;
  return pc;
}

}  // namespace autotile
