// The layer view of a training graph that the layer-wise baselines (model, owt, hypar) need:
// HyPar (Sec 3) and Krizhevsky's "one weird trick" reason about weighted layers (conv, fc),
// each with its forward op, backward ops, weights, weight gradients and the unweighted ops
// that follow it (activation, pooling, normalisation, loss) up to the next weighted layer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "search/baselines/cut_driver.h"
#include "search/constraint.h"

namespace autotile {

/// \brief Kind of a weighted layer, from the op type of its forward node.
enum class LayerKind : int8_t { kConv, kFC };

/// \brief One weighted layer (a forward node reading a weight).
struct Layer {
  NodeId forward = kNone;
  LayerKind kind = LayerKind::kFC;
  TensorId input = kNone;   ///< the forward node's first non-weight input (HyPar's F_l)
  TensorId output = kNone;  ///< the forward node's first output
  std::vector<TensorId> weights;  ///< weight tensors its forward node reads
};

/// \brief Layers, node and tensor membership, weight classes and model-parallel split dims.
struct LayerView {
  std::vector<Layer> layers;          ///< in topological order of their forward nodes
  std::vector<int> node_layer;        ///< node -> layer (-1: before the first weighted layer)
  std::vector<char> weight_class;     ///< tensor is a weight or tied to one (updated weight)
  std::vector<TensorId> weight_of;    ///< weight-class tensor -> its weight; weight gradient -> its weight; else kNone
  std::vector<int> weight_layer;      ///< weight -> layer of its first weighted consumer, -1 if none
  std::vector<int> model_dim;         ///< weight -> dim HyPar's model parallelism splits (-1: none)
};

/// \brief op type of a forward node -> conv / fc / neither (returns false).
bool layer_kind_of(const std::string& op, LayerKind* kind);

/// \brief Builds the layer view of `g`. Model dims come from the forward node's strategies
/// for a 2-way cut: the reduction variable that indexes both the weight and the data input
/// (HyPar's model parallelism: F_l split by features, W_l split on its input dim, F_(l+1)
/// partial); when the op offers none (a bias added after the sum is not a top-level
/// reduction), the weight dim its output-channel split reads; else the weight's largest dim.
std::shared_ptr<const LayerView> layer_view(const Graph& g, const StrategyProvider& provider);

/// \brief Tiling of weight `w` (and its class and gradient) under model parallelism at this
/// cut: split(model dim) when the current extent divides by k, else the largest other
/// divisible dim, else replicate.
Tiling model_tiling(const LayerView& v, const CutContext& ctx, TensorId w);

/// \brief Allowed option names per node so that each node in `nodes` (mask) reads and
/// writes weight-class tensors and weight gradients in place, given their tilings `wt` at
/// this cut (tensor -> tiling, only weight-related entries are read). A node with no such
/// option keeps all its options (its op cannot keep the weight in place).
std::shared_ptr<std::vector<std::vector<std::string>>> in_place_options(const LayerView& v, const CutContext& ctx,
                                                                       const std::vector<Tiling>& wt,
                                                                       const std::vector<char>& nodes);

/// \brief True when the option's name is in `allowed[n]` (empty list: everything allowed).
bool option_listed(const std::vector<std::vector<std::string>>& allowed, NodeId n, const NodeOption& o);

}  // namespace autotile
