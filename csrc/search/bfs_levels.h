// BFS levels of the undirected coarsened graph (Soybean Sec 4.2.2): groups that share a
// tensor land in adjacent levels, so the DP state only spans consecutive levels.
#pragma once
#include <vector>

#include "graph/graph.h"
#include "search/coarsen.h"

namespace autotile {

/// \brief Levels of the coarsened graph.
struct Levels {
  std::vector<int> level_of_group;  ///< group -> level
  int num_levels = 0;
};

/// \brief BFS from the group of the first node in topological order (each further connected
/// component starts a new level after the previous component's last).
Levels bfs_levels(const Graph& g, const Coarsening& c);

}  // namespace autotile
