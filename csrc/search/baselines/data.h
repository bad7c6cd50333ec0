// The `data` baseline: data parallelism as a restriction of the search space. Weights (and
// the updated weights tied to them) are replicated; weight gradients are left to the search
// (it keeps them partial and lets the update reduce them: reduce-scatter + all-gather, i.e.
// 2(K-1) * weight bytes in all); every other tensor whose dim 0 is the batch (dim 0 of the
// largest non-weight graph input) is split along dim 0; scalars replicate; the rest (e.g.
// BatchNorm moving statistics) is left to the search. A node that reads or writes batch tensors must split them along
// dim 0 (so the batch is what every op divides); nodes that touch only weights and their
// gradients (the update) are free: the DP picks how they slice the weights.
#pragma once
#include "graph/graph.h"
#include "search/constraint.h"

namespace autotile {

/// \brief Constraint of the data-parallel baseline for graph `g`.
PlanConstraint data_parallel_constraint(const Graph& g);

}  // namespace autotile
