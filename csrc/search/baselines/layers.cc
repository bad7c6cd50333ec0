#include "search/baselines/layers.h"

#include <algorithm>
#include <cctype>

#include "search/coarsen.h"
#include "util/error.h"

namespace autotile {

bool layer_kind_of(const std::string& op, LayerKind* kind) {
  std::string s;
  for (char c : op) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.rfind("_backward", 0) == 0) return false;
  if (s.find("conv") != std::string::npos) {
    *kind = LayerKind::kConv;
    return true;
  }
  for (const char* fc : {"fullyconnected", "matmul", "gemm", "dense", "linear"})
    if (s.find(fc) != std::string::npos) {
      *kind = LayerKind::kFC;
      return true;
    }
  if (s == "fc" || s == "dot") {
    *kind = LayerKind::kFC;
    return true;
  }
  return false;
}

namespace {
int largest_dim(const std::vector<int64_t>& shape) {
  int best = -1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (best < 0 || shape[d] > shape[best]) best = static_cast<int>(d);
  return best;
}

// The dim of weight input `i` of forward node `n` that HyPar's model parallelism splits.
int find_model_dim(const Graph& g, const StrategyProvider& provider, const std::vector<char>& weight_class, NodeId n,
                   size_t i) {
  const Node& node = g.node(n);
  const std::vector<int64_t>& wshape = g.tensor(node.inputs[i]).shape;
  if (node.tdl.empty()) return largest_dim(wshape);
  std::vector<Shape> ins, outs;
  for (TensorId t : node.inputs) ins.push_back(g.tensor(t).shape);
  for (TensorId t : node.outputs) outs.push_back(g.tensor(t).shape);
  OpStrategies st;
  try {
    st = provider(g, n, ins, outs, 2);
  } catch (const Error&) {
    return largest_dim(wshape);
  }
  int reduce_dim = -1, out_dim = -1;
  for (const Strategy& s : st.strategies) {
    if (i >= s.inputs.size()) continue;
    const InputNeed& w = s.inputs[i];
    if (w.replicate || !w.read || w.dim < 0 || w.dim >= static_cast<int>(wshape.size())) continue;
    bool data_split = false;
    for (size_t j = 0; j < s.inputs.size(); ++j)
      if (j != i && !weight_class[node.inputs[j]] && s.inputs[j].read && !s.inputs[j].replicate) data_split = true;
    int& slot = s.reduction ? reduce_dim : out_dim;
    if (s.reduction && !data_split) continue;
    if (slot < 0 || wshape[w.dim] > wshape[slot]) slot = w.dim;
  }
  if (reduce_dim >= 0) return reduce_dim;
  if (out_dim >= 0) return out_dim;
  return largest_dim(wshape);
}
}  // namespace

std::shared_ptr<const LayerView> layer_view(const Graph& g, const StrategyProvider& provider) {
  auto v = std::make_shared<LayerView>();
  const int T = g.num_tensors(), N = g.num_nodes();
  Coarsening c = coarsen(g, std::vector<char>(N, 0));
  v->weight_class.assign(T, 0);
  v->weight_of.assign(T, kNone);
  std::vector<TensorId> class_weight(T, kNone);
  for (TensorId t = 0; t < T; ++t)
    if (g.tensor(t).is_param) class_weight[c.tensor_tie[t]] = t;
  for (TensorId t = 0; t < T; ++t)
    if (class_weight[c.tensor_tie[t]] != kNone) {
      v->weight_class[t] = 1;
      v->weight_of[t] = class_weight[c.tensor_tie[t]];
    }
  for (TensorId t = 0; t < T; ++t) {
    TensorId of = g.tensor(t).gradient_of;
    if (of != kNone && v->weight_class[of]) v->weight_of[t] = v->weight_of[of];
  }

  // Layers and the layer of every forward node, in topological order.
  v->node_layer.assign(N, -1);
  std::vector<NodeId> order = g.topo_order();
  for (NodeId n : order) {
    const Node& node = g.node(n);
    if (node.role != NodeRole::kForward) continue;
    LayerKind kind;
    bool reads_weight = false;
    for (TensorId t : node.inputs) reads_weight = reads_weight || (v->weight_class[t] && g.tensor(t).is_param);
    if (reads_weight && layer_kind_of(node.op, &kind)) {
      Layer L;
      L.forward = n;
      L.kind = kind;
      for (TensorId t : node.inputs) {
        if (v->weight_class[t]) {
          if (std::find(L.weights.begin(), L.weights.end(), t) == L.weights.end()) L.weights.push_back(t);
        } else if (L.input == kNone) {
          L.input = t;
        }
      }
      if (!node.outputs.empty()) L.output = node.outputs[0];
      v->node_layer[n] = static_cast<int>(v->layers.size());
      v->layers.push_back(L);
      continue;
    }
    int layer = -1;
    for (TensorId t : node.inputs) {
      NodeId p = g.tensor(t).producer;
      if (p != kNone) layer = std::max(layer, v->node_layer[p]);
    }
    v->node_layer[n] = layer;
  }
  // Weights belong to the layer of their first forward consumer.
  v->weight_layer.assign(T, -1);
  v->model_dim.assign(T, -1);
  for (NodeId n : order) {
    const Node& node = g.node(n);
    if (node.role != NodeRole::kForward) continue;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      TensorId t = node.inputs[i];
      if (!g.tensor(t).is_param || v->weight_layer[t] >= 0) continue;
      v->weight_layer[t] = v->node_layer[n];
      v->model_dim[t] = find_model_dim(g, provider, v->weight_class, n, i);
    }
  }
  for (TensorId t = 0; t < T; ++t)
    if (g.tensor(t).is_param && v->model_dim[t] < 0) v->model_dim[t] = largest_dim(g.tensor(t).shape);
  // Backward nodes follow their forward node; gradient sums the tensor they differentiate;
  // updates the weight they update.
  for (NodeId n : order) {
    const Node& node = g.node(n);
    if (node.role == NodeRole::kForward) continue;
    int layer = -1;
    if (node.forward_node != kNone) {
      layer = v->node_layer[node.forward_node];
    } else if (node.role == NodeRole::kBackward) {
      for (TensorId o : node.outputs) {
        TensorId of = g.tensor(o).gradient_of;
        if (of == kNone) continue;
        NodeId p = g.tensor(of).producer;
        if (p != kNone) layer = std::max(layer, v->node_layer[p]);
        else
          for (NodeId cns : g.tensor(of).consumers)
            if (g.node(cns).role == NodeRole::kForward) layer = std::max(layer, v->node_layer[cns]);
      }
    } else {
      for (TensorId t : node.inputs)
        if (v->weight_of[t] != kNone && v->weight_layer[v->weight_of[t]] >= 0) {
          layer = v->weight_layer[v->weight_of[t]];
          break;
        }
    }
    v->node_layer[n] = layer;
  }
  return v;
}

Tiling model_tiling(const LayerView& v, const CutContext& ctx, TensorId w) {
  const Shape& shape = ctx.s.tensor_shape[w];
  TensorId weight = v.weight_of[w] == kNone ? w : v.weight_of[w];
  int d = v.model_dim[weight];
  if (d >= 0 && d < static_cast<int>(shape.size()) && shape[d] % ctx.k == 0) return Tiling::split(d);
  int best = -1;
  for (size_t e = 0; e < shape.size(); ++e)
    if (shape[e] % ctx.k == 0 && (best < 0 || shape[e] > shape[best])) best = static_cast<int>(e);
  return best >= 0 ? Tiling::split(best) : Tiling::replicate();
}

std::shared_ptr<std::vector<std::vector<std::string>>> in_place_options(const LayerView& v, const CutContext& ctx,
                                                                       const std::vector<Tiling>& wt,
                                                                       const std::vector<char>& nodes) {
  const Graph& g = ctx.g;
  auto allowed = std::make_shared<std::vector<std::vector<std::string>>>(g.num_nodes());
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!nodes[n]) continue;
    const Node& node = g.node(n);
    auto pinned = [&](TensorId t) { return v.weight_of[t] != kNone && wt[t].kind == Tiling::kSplit; };
    bool any = false;
    for (TensorId t : node.inputs) any = any || pinned(t);
    for (TensorId t : node.outputs) any = any || pinned(t);
    if (!any) continue;
    std::vector<std::string> ok;
    for (const NodeOption& o : ctx.options[n]) {
      if (o.whole) continue;
      bool fits = true;
      for (size_t i = 0; i < node.inputs.size() && fits; ++i) {
        TensorId t = node.inputs[i];
        const InputNeed& need = o.strategy.inputs[i];
        if (pinned(t) && need.read && (need.replicate || need.dim != wt[t].dim)) fits = false;
      }
      for (size_t i = 0; i < node.outputs.size() && fits; ++i) {
        TensorId t = node.outputs[i];
        const OutputMake& mk = o.strategy.outputs[i];
        if (pinned(t) && (mk.partial || mk.dim != wt[t].dim)) fits = false;
      }
      if (fits) ok.push_back(o.name);
    }
    (*allowed)[n] = ok;  // empty: the op cannot keep its weight in place, every option stays
  }
  return allowed;
}

bool option_listed(const std::vector<std::vector<std::string>>& allowed, NodeId n, const NodeOption& o) {
  const auto& a = allowed[n];
  return a.empty() || std::find(a.begin(), a.end(), o.name) != a.end();
}

}  // namespace autotile
