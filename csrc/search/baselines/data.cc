#include "search/baselines/data.h"

#include <map>
#include <memory>
#include <vector>

#include "search/coarsen.h"

namespace autotile {

PlanConstraint data_parallel_constraint(const Graph& g) {
  enum Kind : char { kBatch = 0, kWeight, kFree, kScalar };
  auto kind = std::make_shared<std::vector<char>>(g.num_tensors(), kBatch);
  // Weights and whatever is tied to them (their updated values, optimizer states).
  Coarsening c = coarsen(g, std::vector<char>(g.num_nodes(), 0));
  std::vector<char> weight_class(g.num_tensors(), 0);
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_param) weight_class[c.tensor_tie[t]] = 1;
  // The batch size: the most common dim 0 among non-weight tensors (activations and their
  // gradients far outnumber anything else; an unrolled RNN's data input is (steps, batch), but
  // its per-step states are (batch, hidden)). Ties go to the larger size.
  // Tensors whose dim 0 is not the batch (BatchNorm statistics, the RNN's token ids) are left free.
  std::map<int64_t, int> dim0_count;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor& x = g.tensor(t);
    if (!weight_class[c.tensor_tie[t]] && !x.shape.empty()) ++dim0_count[x.shape[0]];
  }
  int64_t batch = -1;
  int best = 0;
  for (const auto& [size, count] : dim0_count)
    if (count >= best) best = count, batch = size;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor& x = g.tensor(t);
    if (weight_class[c.tensor_tie[t]]) (*kind)[t] = kWeight;
    else if (!x.shape.empty() && x.shape[0] != batch) (*kind)[t] = kFree;
    else if (x.gradient_of != kNone && weight_class[c.tensor_tie[x.gradient_of]]) (*kind)[t] = kFree;
    else if (x.shape.empty()) (*kind)[t] = kScalar;
  }
  PlanConstraint pc;
  pc.name = "data";
  pc.allow_tiling = [kind](TensorId t, const Tiling& ti, int) {
    switch ((*kind)[t]) {
      case kWeight:
      case kScalar: return ti.kind == Tiling::kReplicate;
      case kFree: return true;
      default: return ti.kind == Tiling::kSplit && ti.dim == 0;
    }
  };
  const Graph* gp = &g;
  pc.allow_strategy = [kind, gp](NodeId n, const NodeOption& o, int) {
    const Node& node = gp->node(n);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if ((*kind)[node.inputs[i]] != kBatch) continue;
      if (o.whole) return false;
      const InputNeed& need = o.strategy.inputs[i];
      if (need.read && (need.replicate || need.dim != 0)) return false;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if ((*kind)[node.outputs[i]] != kBatch) continue;
      if (o.whole || o.strategy.outputs[i].partial || o.strategy.outputs[i].dim != 0) return false;
    }
    return true;
  };
  pc.explain = [kind](TensorId t) -> std::string {
    return (*kind)[t] == kBatch ? " (data parallelism splits it along dim 0, which the device count must divide)" : "";
  };
  return pc;
}

}  // namespace autotile
