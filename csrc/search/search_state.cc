#include "search/search_state.h"

#include <algorithm>

#include "search/cost_model.h"

namespace autotile {

SearchState SearchState::initial(const Graph& g) {
  SearchState s;
  s.pool = std::make_shared<LayoutPool>();
  LayoutPool& pool = *s.pool;
  const int T = g.num_tensors(), N = g.num_nodes();
  s.tiling.resize(T);
  s.option.resize(N);
  s.node_in.resize(N);
  s.node_out.resize(N);
  s.need.resize(N);
  s.make.resize(N);
  for (TensorId t = 0; t < T; ++t) {
    s.tensor_shape.push_back(g.tensor(t).shape);
    s.held.push_back(pool.whole(g.tensor(t).shape));
  }
  for (NodeId n = 0; n < N; ++n) {
    for (TensorId t : g.node(n).inputs) {
      s.node_in[n].push_back(g.tensor(t).shape);
      s.need[n].push_back(pool.whole(g.tensor(t).shape));
    }
    for (TensorId t : g.node(n).outputs) {
      s.node_out[n].push_back(g.tensor(t).shape);
      s.make[n].push_back(pool.whole(g.tensor(t).shape));
    }
  }
  return s;
}

void SearchState::apply(const Graph& g, int k, const std::vector<Tiling>& tilings,
                        const std::vector<NodeOption>& options) {
  std::vector<const NodeOption*> of(options.size());
  for (size_t n = 0; n < options.size(); ++n) of[n] = &options[n];
  apply(g, k, tilings, of);
}

void SearchState::apply(const Graph& g, int k, const std::vector<Tiling>& tilings,
                        const std::vector<const NodeOption*>& options) {
  factors.push_back(k);
  LayoutPool& p = *pool;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tiling& ti = tilings[t];
    if (tiling[t].empty()) tiling[t].reserve(8);
    tiling[t].push_back(ti);
    held[t] = p.held(held[t], ti, k);
    if (ti.kind == Tiling::kSplit) tensor_shape[t][ti.dim] /= k;
  }
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const NodeOption& o = *options[n];
    if (option[n].empty()) option[n].reserve(8);  // (cuts of up to 2^8 devices in one allocation)
    NodeOption& kept = option[n].emplace_back();  // needs and makes live on in need/make
    kept.name = o.name;
    kept.whole = o.whole;
    const Node& node = g.node(n);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (o.whole) {
        need[n][i] = p.need(need[n][i], InputNeed{}, k);
        continue;
      }
      const InputNeed& in = o.strategy.inputs[i];
      need[n][i] = p.need(need[n][i], in, k);
      if (!in.replicate) {
        int64_t ext = 0;
        for (const Interval& iv : in.per_worker) ext = std::max(ext, iv.size());
        node_in[n][i][in.dim] = ext;
      }
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const OutputMake& mk = o.whole ? OutputMake{} : o.strategy.outputs[i];
      make[n][i] = p.make(make[n][i], mk, o.whole, k);
      if (!o.whole && !mk.partial) node_out[n][i][mk.dim] /= k;
    }
  }
  double total = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    for (size_t i = 0; i < node.inputs.size(); ++i)
      total += edge_bytes(g, node.inputs[i], p, held[node.inputs[i]], need[n][i], factors);
    for (size_t i = 0; i < node.outputs.size(); ++i)
      total += edge_bytes(g, node.outputs[i], p, make[n][i], held[node.outputs[i]], factors);
  }
  flat_bytes = total;
}

double edge_bytes(const Graph& g, TensorId t, const DeviceLayout& held, const DeviceLayout& need,
                  const std::vector<int>& factors) {
  double e = conversion_elements(held, need, factors);
  return e == 0 ? 0 : e * dtype_size(g.tensor(t).dtype);
}

double edge_bytes(const Graph& g, TensorId t, LayoutPool& pool, int held, int need, const std::vector<int>& factors) {
  double e = pool.elements(held, need, factors);
  return e == 0 ? 0 : e * dtype_size(g.tensor(t).dtype);
}

}  // namespace autotile
