#include "search/bfs_levels.h"

#include <algorithm>

namespace autotile {

Levels bfs_levels(const Graph& g, const Coarsening& c) {
  std::vector<std::vector<int>> adj(c.num_groups);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    int a = c.node_group[n];
    for (const auto* ts : {&node.inputs, &node.outputs})
      for (TensorId t : *ts) {
        int b = c.tensor_group[t];
        if (a != b) {
          adj[a].push_back(b);
          adj[b].push_back(a);
        }
      }
  }
  for (auto& v : adj) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  Levels L;
  L.level_of_group.assign(c.num_groups, -1);
  std::vector<int> seeds;
  for (NodeId n : g.topo_order()) seeds.push_back(c.node_group[n]);
  for (TensorId t = 0; t < g.num_tensors(); ++t) seeds.push_back(c.tensor_group[t]);
  int base = 0;
  std::vector<int> frontier, next;
  for (int s : seeds) {
    if (L.level_of_group[s] >= 0) continue;
    int level = base;
    frontier = {s};
    L.level_of_group[s] = level;
    while (!frontier.empty()) {
      next.clear();
      for (int u : frontier)
        for (int v : adj[u])
          if (L.level_of_group[v] < 0) {
            L.level_of_group[v] = level + 1;
            next.push_back(v);
          }
      if (!next.empty()) ++level;
      frontier.swap(next);
    }
    base = level + 1;
  }
  L.num_levels = base;
  return L;
}

}  // namespace autotile
