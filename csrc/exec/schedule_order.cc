#include "exec/schedule_order.h"

#include <queue>
#include <tuple>

namespace autotile {

std::vector<NodeId> schedule_order(const Graph& g) {
  g.topo_order();  // reports a cycle, naming a node on it
  const int n = g.num_nodes();
  using Key = std::tuple<int, int, NodeId>;  // (class, rank within class, id): smallest first
  auto key = [&](NodeId v) -> Key {
    const Node& node = g.node(v);
    if (node.role == NodeRole::kUpdate || (node.role == NodeRole::kBackward && node.forward_node == kNone))
      return {0, 0, v};
    if (node.forward_node != kNone) return {1, -node.forward_node, v};
    return {2, 0, v};
  };
  std::vector<int> indegree(n, 0);
  for (NodeId v = 0; v < n; ++v)
    for (TensorId t : g.node(v).inputs)
      if (g.tensor(t).producer != kNone) ++indegree[v];
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  for (NodeId v = 0; v < n; ++v)
    if (indegree[v] == 0) ready.push(key(v));
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    NodeId u = std::get<2>(ready.top());
    ready.pop();
    order.push_back(u);
    for (TensorId t : g.node(u).outputs)
      for (NodeId v : g.tensor(t).consumers)
        if (--indegree[v] == 0) ready.push(key(v));
  }
  return order;
}

}  // namespace autotile
