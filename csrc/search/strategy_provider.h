// Where the search gets each node's partition strategies for one cut. The TDL analysis
// (csrc/tdl/analyze.h) is the default; tests and embedding engines may plug in their own.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "tdl/strategy.h"

namespace autotile {

using Shape = std::vector<int64_t>;

/// \brief Strategies of node `node` for a k-way cut at the node's current shapes.
using StrategyProvider = std::function<OpStrategies(const Graph& g, NodeId node, const std::vector<Shape>& in_shapes,
                                                    const std::vector<Shape>& out_shapes, int k)>;

/// \brief The default provider: analyze_tdl(node.tdl, ...), memoised by (text, shapes, k).
StrategyProvider tdl_strategy_provider();

/// \brief C callback form (used by the Python bindings): fills `out`, returns false on failure.
using ProviderCallback = bool (*)(void* ctx, int node, const std::vector<Shape>& in_shapes,
                                  const std::vector<Shape>& out_shapes, int k, OpStrategies* out);
/// \brief Wraps a C callback; a false return becomes an Error naming the node.
StrategyProvider callback_strategy_provider(ProviderCallback fn, void* ctx);

/// \brief One candidate way to run a node in one cut: a TDL strategy, or whole replication
/// (every group runs the entire op; only under the replicate_fallback option).
struct NodeOption {
  std::string name;     ///< split variable, or "replicate"
  bool whole = false;   ///< replicated execution
  Strategy strategy;    ///< needs and makes (unused when whole)
};

}  // namespace autotile
