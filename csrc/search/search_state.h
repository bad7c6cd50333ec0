// What the recursive search knows after some cuts: per-cut choices, the shrunk shapes the
// next cut plans (Tofu Sec 5.2), and every tensor's and node edge's per-device layout.
#pragma once
#include <memory>
#include <vector>

#include "graph/graph.h"
#include "search/layout.h"
#include "search/layout_pool.h"
#include "search/strategy_provider.h"
#include "search/tiling.h"

namespace autotile {

/// \brief Prefix of a k-cut plan and the shapes of the representative group.
struct SearchState {
  std::vector<int> factors;                          ///< k of each applied cut
  std::vector<std::vector<Tiling>> tiling;           ///< [tensor][cut]
  /// [node][cut] the option each cut ran the node as: its name and whether whole (the
  /// strategy itself is not kept: what it needs and makes is in `need` and `make`, and a
  /// state is copied whole by the refinement across cuts)
  std::vector<std::vector<NodeOption>> option;
  std::vector<Shape> tensor_shape;                   ///< per tensor, after the cuts
  std::vector<std::vector<Shape>> node_in, node_out; ///< per node edge, after the cuts
  std::shared_ptr<LayoutPool> pool;                  ///< the layouts below are ids into it
  std::vector<int> held;                             ///< [tensor] what each device holds
  std::vector<std::vector<int>> need;                ///< [node][input] what each device reads
  std::vector<std::vector<int>> make;                ///< [node][output] what each device writes
  double flat_bytes = 0;                             ///< total cost of the cuts so far

  /// \brief The uncut graph.
  static SearchState initial(const Graph& g);
  /// \brief Applies one k-way cut; shapes shrink (tensors by tiling, nodes by strategy:
  /// outputs by their split, inputs to the largest region a worker needs).
  void apply(const Graph& g, int k, const std::vector<Tiling>& tilings, const std::vector<NodeOption>& options);
  /// \brief The same with each node's option given by address.
  void apply(const Graph& g, int k, const std::vector<Tiling>& tilings, const std::vector<const NodeOption*>& options);
};

/// \brief Bytes moved over all devices for one tensor->node or node->tensor edge.
double edge_bytes(const Graph& g, TensorId t, const DeviceLayout& held, const DeviceLayout& need,
                  const std::vector<int>& factors);
/// \brief The same for interned layouts (memoised in the pool).
double edge_bytes(const Graph& g, TensorId t, LayoutPool& pool, int held, int need, const std::vector<int>& factors);

}  // namespace autotile
