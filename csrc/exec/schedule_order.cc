#include "exec/schedule_order.h"

#include <algorithm>
#include <queue>
#include <tuple>

#include "util/error.h"

namespace autotile {

namespace {

/// Each layer's backward ops together: updates and gradient sums as soon as ready, backward
/// nodes in reverse order of their forward nodes, forward nodes in id order.
std::vector<NodeId> layerwise_order(const Graph& g) {
  const int n = g.num_nodes();
  using Key = std::tuple<int, int, NodeId>;  // (class, rank within class, id): smallest first
  auto key = [&](NodeId v) -> Key {
    const Node& node = g.node(v);
    if (node.role == NodeRole::kUpdate || is_gradient_sum(g, v) ||
        (node.role == NodeRole::kBackward && node.forward_node == kNone))
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

}  // namespace

int64_t serial_peak_bytes(const Graph& g, const std::vector<NodeId>& order) {
  const int T = g.num_tensors();
  std::vector<int> last(T, -1), position(g.num_nodes(), 0);
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int>(i);
  int64_t live = 0;
  for (TensorId t = 0; t < T; ++t) {
    const Tensor& x = g.tensor(t);
    if (x.is_output || x.consumers.empty()) {
      last[t] = static_cast<int>(order.size());  // lives to the end
    } else {
      for (NodeId c : x.consumers) last[t] = std::max(last[t], position[c]);
    }
    if (x.producer == kNone) live += x.bytes();
  }
  std::vector<std::vector<TensorId>> dies(order.size());
  for (TensorId t = 0; t < T; ++t)
    if (last[t] >= 0 && last[t] < static_cast<int>(order.size())) dies[last[t]].push_back(t);
  int64_t peak = live;
  for (size_t i = 0; i < order.size(); ++i) {
    for (TensorId t : g.node(order[i]).outputs) live += g.tensor(t).bytes();
    peak = std::max(peak, live);
    for (TensorId t : dies[i]) live -= g.tensor(t).bytes();
  }
  return peak;
}

std::vector<NodeId> checked_order(const Graph& g, const std::vector<NodeId>& order) {
  const int n = g.num_nodes();
  if (static_cast<int>(order.size()) != n)
    fail("schedule order: ", order.size(), " nodes given, the graph has ", n);
  std::vector<int> position(n, -1);
  for (size_t i = 0; i < order.size(); ++i) {
    NodeId v = order[i];
    if (v < 0 || v >= n) fail("schedule order: node id ", v, " at position ", i, " out of range (", n, " nodes)");
    if (position[v] >= 0)
      fail("schedule order: node '", g.node(v).name, "' appears twice (positions ", position[v], " and ", i, ")");
    position[v] = static_cast<int>(i);
  }
  for (size_t i = 0; i < order.size(); ++i)
    for (TensorId t : g.node(order[i]).inputs) {
      NodeId p = g.tensor(t).producer;
      if (p != kNone && position[p] > static_cast<int>(i))
        fail("schedule order: node '", g.node(order[i]).name, "' (position ", i, ") runs before node '",
             g.node(p).name, "' (position ", position[p], "), which produces its input '", g.tensor(t).name, "'");
    }
  return order;
}

std::vector<NodeId> schedule_order(const Graph& g) {
  std::vector<NodeId> by_id = g.topo_order();  // reports a cycle, naming a node on it
  std::vector<NodeId> by_layer = layerwise_order(g);
  return serial_peak_bytes(g, by_id) < serial_peak_bytes(g, by_layer) ? by_id : by_layer;
}

}  // namespace autotile
