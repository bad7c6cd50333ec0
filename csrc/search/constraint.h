// Restrictions of the search space: how a baseline is expressed. A baseline either restricts
// the candidate tilings / strategies of some tensors and nodes and runs the same search, or
// fixes a whole plan and prices it with the same cost model (price_plan).
#pragma once
#include <functional>
#include <string>

#include "graph/graph.h"
#include "search/strategy_provider.h"
#include "search/tiling.h"

namespace autotile {

/// \brief Which tilings and strategies a search may use; empty functions allow everything.
struct PlanConstraint {
  std::string name;  ///< named in error messages (e.g. "data")
  /// tensor, candidate tiling, cut index -> allowed?
  std::function<bool(TensorId, const Tiling&, int)> allow_tiling;
  /// node, candidate option (its name: split variable or "replicate"; its needs), cut -> allowed?
  std::function<bool(NodeId, const NodeOption&, int)> allow_strategy;
  /// Why a tensor may end up with no allowed tiling (appended to the error), optional.
  std::function<std::string(TensorId)> explain;
};

}  // namespace autotile
