// User-fixed tilings ("pins"): a layout the user gives for some tensors (Mesh-TensorFlow's
// layout rules, a hand layout such as Megatron-LM's), which the search must honour while it
// chooses everything else. Expressed as a PlanConstraint, so every search in the same cost
// model (tofu, bruteforce, data) completes a partial layout optimally per cut.
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"
#include "search/constraint.h"

namespace autotile {

/// \brief Checks `factors` (cut factors in order, each >= 2) against `devices` and returns
/// them; an empty list gives the default factorisation (largest first). Throws Error.
std::vector<int> cut_factors(int devices, const std::vector<int>& factors);

/// \brief The constraint of a pin table: `pinned[t][c]` is the tiling tensor t must take at
/// cut c ("split(d)", "replicate", "partial"), or "" where the search is free. The table may
/// be empty (no pins) or have one row per tensor, each with one entry per cut. Throws Error
/// naming the tensor on a malformed entry or a split of a dimension the tensor lacks.
PlanConstraint pin_table_constraint(const Graph& g, const std::vector<std::vector<std::string>>& pinned,
                                    size_t num_cuts);

}  // namespace autotile
