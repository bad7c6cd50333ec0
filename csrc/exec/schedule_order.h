// The serial order in which every device runs its sub-operators (Tofu Sec 6: control
// dependencies keep each device in the serial graph's order, so that order decides how much
// memory every device needs).
#pragma once
#include <vector>

#include "graph/graph.h"

namespace autotile {

/// \brief A topological order of `graph` in which each layer's backward ops run together:
/// among the ready nodes, updates and gradient sums first (they consume gradients), then
/// backward nodes in reverse order of the forward nodes they differentiate, then forward
/// nodes in id order.
///
/// Plain id order runs every weight-gradient op after the whole data-gradient chain (the
/// autodiff emits them in that order), which keeps each layer's saved activation and output
/// gradient alive to the end of the backward pass; a framework's per-layer backward frees
/// them as it goes.
std::vector<NodeId> schedule_order(const Graph& graph);

}  // namespace autotile
