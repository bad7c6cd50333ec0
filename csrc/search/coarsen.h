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
//  * joint strategies (Tofu Sec 5.1's coarsening of an op's parts): the nodes with one value of
//    attr `__joint_strategy__`, with their backward nodes, are one group that searches one
//    strategy (by split variable) when the caller gives the options and every member offers the
//    same split variables. Synchronous BatchNorm marks its `_bn_moments` and `_bn_apply`
//    (ops/sync_batchnorm.py): 4 strategy variables per BatchNorm become 1, which keeps the
//    DP's tables as narrow as the fused BatchNorm's. This one is a constraint: the per-cut
//    optimum is unchanged on the zoo (tests/search/test_coarsen_batchnorm.py checks it against
//    the search without it, AUTOTILE_SEARCH_JOINT=off). The tensors only such a group and
//    single-option nodes (`_bn_stats`) touch then leave the DP's problem (coarsen_fold.h);
//  * an update node's output is the next value of a graph input (weight or optimizer state):
//    it must be tiled like it (steady state). Attr `__inplace__` = comma-separated input index
//    per output (-1: none); without it, outputs pair in order with the update node's
//    producer-less inputs of the same shape.
// Groups only decide the DP's visiting order; members keep their own choices (the search
// enumerates them), so grouping never loses optimality. Ties and shares (timesteps, joint
// strategies) are constraints.
#pragma once
#include <vector>

#include "graph/graph.h"
#include "search/strategy_provider.h"

namespace autotile {

/// \brief Result of coarsening one graph.
struct Coarsening {
  std::vector<int> tensor_group;  ///< tensor -> group
  std::vector<int> node_group;    ///< node -> group
  int num_groups = 0;
  std::vector<TensorId> tensor_tie;  ///< tensor -> representative of its same-tiling class
  std::vector<NodeId> node_share;    ///< node -> representative of its same-strategy class
};

/// \brief The part of coarsening that reads the graph alone (the same at every cut of one
/// search): groups, ties and shares before the element-wise chains and joint strategies join
/// them, as union-find parents (each class's root is its smallest member, whatever the order
/// of the joins, so finishing them later gives the same classes and representatives).
struct CoarsenBase {
  std::vector<int> groups;                   ///< tensors 0..T-1, nodes T..T+N-1
  std::vector<int> tie;                      ///< per tensor (final: no later join ties tensors)
  std::vector<int> share;                    ///< per node
  std::vector<std::vector<NodeId>> joint;    ///< the nodes of each joint strategy
};
/// \brief The CoarsenBase of `g`.
CoarsenBase coarsen_base(const Graph& g);

/// \brief Coarsens `g`; `elementwise[n]` tells whether node n is element-wise. With `options`
/// (node -> the cut's options) the nodes of a joint strategy share one (see above); without,
/// or when the environment sets AUTOTILE_SEARCH_JOINT=off, each keeps its own. `base` (may be
/// null): coarsen_base(g), kept by a caller that coarsens `g` once per cut.
Coarsening coarsen(const Graph& g, const std::vector<char>& elementwise,
                   const std::vector<std::vector<NodeOption>>* options = nullptr, const CoarsenBase* base = nullptr);

}  // namespace autotile
