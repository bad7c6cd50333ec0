// The `data` baseline: data parallelism as a restriction of the search space.
//
// The batch is where the user binds it: one dimension of each data input (SearchOptions::
// batch_dims; dim 0 of every data input unless the model declares another). From there it is
// carried node by node (batch_map): a node whose every batch-carrying input some strategy
// splits along its batch dim passes the batch on to the output dims those strategies split
// (an XLNet-like transpose moves it to dim 1; a reduction over it ends it: the output is
// partial, e.g. BatchNorm statistics, and is left to the search). Batch tensors split along
// their batch dim and nothing else; the nodes that read or write them split them so.
// A node that reads the batch but has no such strategy is stuck: it runs replicated. Where its
// output still holds the batch in a dim (a fused BatchNorm: the statistics read every row, the
// output is the input's rows) the batch goes on from there; where not (an unrolled RNN's
// step-major Concat, a (seq, batch) -> (seq*batch) Reshape), what it computes from the batch
// ("lost" tensors, and every tensor computed from them alone) is replicated and computed whole,
// never split along another dim: data parallelism never splits a sequence or an image plane
// and calls it the batch.
// Weights (and the updated weights tied to them) are replicated; weight gradients are left to
// the search (it keeps them partial and lets the update reduce them: reduce-scatter +
// all-gather, i.e. 2(K-1) * weight bytes in all); scalars replicate.
#pragma once
#include <vector>

#include "graph/graph.h"
#include "search/constraint.h"
#include "search/kcuts.h"
#include "search/strategy_provider.h"

namespace autotile {

/// \brief Where the batch is in every tensor of a graph (see batch_map).
struct BatchMap {
  std::vector<int> dim;       ///< per tensor: its batch dim, or -1 (none)
  std::vector<char> lost;     ///< per tensor: the batch in no dim, computed by a stuck node (replicated)
  std::vector<NodeId> stuck;  ///< nodes that read a batch tensor but cannot split it along its batch dim
  /// per node: 1 it splits its batch inputs along their batch dims; 2 it cannot (it runs whole)
  /// but its outputs still hold the batch in a dim (a fused BatchNorm); 0 otherwise
  std::vector<char> carries;
  int carriers = 0;           ///< nodes that split their batch inputs along the batch
  std::vector<char> weight;   ///< per tensor: a weight or tied to one (updated weights, optimizer states)
};

/// \brief The batch dims of `g`'s data inputs: `given` (per tensor: the batch dim of a data
/// input, -1 elsewhere) checked against the graph (Error naming a tensor that is a weight, has
/// no such dim or is not a graph input), or, when `given` is empty (the C API), dim 0 of each
/// non-weight graph input whose dim 0 is that of the largest of them.
std::vector<int> input_batch_dims(const Graph& g, const std::vector<int>& given);

/// \brief Carries the batch from the data inputs (`inputs`, per tensor as input_batch_dims
/// returns) through every node in topological order, with `provider`'s strategies.
BatchMap batch_map(const Graph& g, const std::vector<int>& inputs, const StrategyProvider& provider);

/// \brief Constraint of the data-parallel baseline for graph `g` (options.batch_dims,
/// options.provider). `strict` (algorithm "data" on more than one device): a graph whose batch
/// no node can split is an Error naming the data input and the node that cannot split it, and
/// what stuck nodes compute from the batch is replicated and computed whole. Without it (the
/// data layers of the layer-wise baselines, which leave such nodes to the search) only the
/// batch tensors are constrained.
PlanConstraint data_parallel_constraint(const Graph& g, const SearchOptions& options, bool strict = false);

/// \brief The same from the data inputs' batch dims `inputs` (input_batch_dims) and their
/// batch_map `m`, for a caller that reads the map too (hypar).
PlanConstraint data_parallel_constraint(const Graph& g, const std::vector<int>& inputs, const BatchMap& m,
                                        bool strict = false);

}  // namespace autotile
