// Pinning weights for one cut: the tilings weight-class tensors and their gradients must
// take, and the node options that read and write them in place. Shared by the layer-wise
// baselines (model, owt, hypar).
#pragma once
#include <memory>
#include <vector>

#include "search/baselines/layers.h"

namespace autotile {

/// \brief Tilings pinned for one cut and the node options that keep them in place.
struct WeightPin {
  std::vector<char> pinned;  ///< tensor -> its tiling is fixed to `tiling[t]`
  std::vector<Tiling> tiling;
  std::shared_ptr<std::vector<std::vector<std::string>>> allowed;  ///< per node (empty: all)
};

/// \brief Pins the weights selected by `split_weight` (weight tensor -> split it: model
/// parallelism) to model_tiling and the rest to replicate when `replicate_rest`, together with
/// their tie classes and gradients (gradients only when split, and only while their shape
/// still equals the weight's); nodes in `in_place` must read/write split weights in place.
WeightPin pin_weights(const LayerView& v, const CutContext& ctx, const std::vector<char>& split_weight,
                      bool replicate_rest, const std::vector<char>& in_place);

/// \brief The constraint of a pin, named `name`.
PlanConstraint pin_constraint(const WeightPin& pin, const std::string& name);

}  // namespace autotile
