// Graph coarsening (Tofu Sec 5.1): which nodes and tensors form one group of the coarsened
// graph, which tensors must share one tiling, and which nodes must share one strategy.
//
//  * op groups: a forward node with all its backward nodes;
//  * tensor groups: a tensor with its gradient, plus the node that sums the gradient of a
//    multi-use tensor (a node with no forward node whose outputs are all gradients);
//  * chains of element-wise ops merge (incl. optimizer update ops);
//  * nodes with equal attr `__timestep_group__` (unrolled RNN steps) merge; nodes of one such
//    group with the same op, TDL and shapes share their strategy, and their outputs (same index and
//    shape) share their tiling; the gradient sums of a step's outputs join the step likewise;
//  * an update node's output is the next value of a graph input (weight or optimizer state):
//    it must be tiled like it (steady state). Attr `__inplace__` = comma-separated input index
//    per output (-1: none); without it, outputs pair in order with the update node's
//    producer-less inputs of the same shape.
// Groups only decide the DP's visiting order; members keep their own choices (the search
// enumerates them), so grouping never loses optimality. Ties and shares are constraints.
#pragma once
#include <vector>

#include "graph/graph.h"

namespace autotile {

/// \brief Result of coarsening one graph.
struct Coarsening {
  std::vector<int> tensor_group;  ///< tensor -> group
  std::vector<int> node_group;    ///< node -> group
  int num_groups = 0;
  std::vector<TensorId> tensor_tie;  ///< tensor -> representative of its same-tiling class
  std::vector<NodeId> node_share;    ///< node -> representative of its same-strategy class
};

/// \brief Coarsens `g`; `elementwise[n]` tells whether node n is element-wise.
Coarsening coarsen(const Graph& g, const std::vector<char>& elementwise);

}  // namespace autotile
