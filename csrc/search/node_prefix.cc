#include "search/node_prefix.h"

#include <algorithm>

namespace autotile {

NodePrefix extend_prefix(const Node& node, const NodePrefix& p, const NodeOption& o, int k, LayoutPool& pool) {
  NodePrefix q = p;
  q.names.push_back(o.name);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (o.whole) {
      q.need[i] = pool.need(p.need[i], InputNeed{}, k);
      continue;
    }
    const InputNeed& in = o.strategy.inputs[i];
    q.need[i] = pool.need(p.need[i], in, k);
    if (!in.replicate) {
      int64_t ext = 0;
      for (const Interval& iv : in.per_worker) ext = std::max(ext, iv.size());
      q.in[i][in.dim] = ext;
    }
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const OutputMake& mk = o.whole ? OutputMake{} : o.strategy.outputs[i];
    q.make[i] = pool.make(p.make[i], mk, o.whole, k);
    if (!o.whole && !mk.partial) q.out[i][mk.dim] /= k;
  }
  return q;
}

void use_prefix_shapes(const std::vector<std::vector<NodePrefix>>& prefixes, size_t a, SearchState* s) {
  for (size_t n = 0; n < prefixes.size(); ++n) {
    const NodePrefix& p = prefixes[n][std::min(a, prefixes[n].size() - 1)];
    s->node_in[n] = p.in;
    s->node_out[n] = p.out;
  }
}

}  // namespace autotile
