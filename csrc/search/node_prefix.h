// One node's layout after some cuts, extended one cut at a time: what SearchState::apply does
// for a single node, for code that tries several strategies of a node side by side (the joint
// problem's strategy sequences, the refinement of a plan across its cuts).
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"
#include "search/layout_pool.h"
#include "search/search_state.h"
#include "search/strategy_provider.h"

namespace autotile {

/// \brief A node's shapes and per-device layouts after some cuts, and its strategy names.
struct NodePrefix {
  std::vector<Shape> in, out;    ///< per input / output edge, after the cuts
  std::vector<int> need, make;   ///< interned layouts: what each device reads / writes
  std::vector<std::string> names;  ///< the strategy of each cut so far
};

/// \brief `p` extended by a k-way cut running `node` as option `o` (layouts interned in `pool`).
NodePrefix extend_prefix(const Node& node, const NodePrefix& p, const NodeOption& o, int k, LayoutPool& pool);

/// \brief Gives every node of `s` the shapes of its `a`-th prefix (its last where it has fewer),
/// so one node_options call serves the a-th prefix of every node at once.
void use_prefix_shapes(const std::vector<std::vector<NodePrefix>>& prefixes, size_t a, SearchState* s);

}  // namespace autotile
