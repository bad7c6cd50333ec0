// Folding a joint strategy's internal tensors out of a cut problem (issue 24).
//
// A synchronous BatchNorm searches one strategy for its moments, apply and their backward
// nodes (coarsen.h's joint strategies); its per-channel tensors between them (the moments, the
// mean and inverse std, their gradients) and the moving statistics are read and written only
// by those nodes and by `_bn_stats` and its backward, which have one option each. Given the
// joint strategy's value, each such tensor's cost is then a function of its own tiling alone,
// so its best tiling is known per value of the strategy before the search: the fold takes its
// edges out of the problem and adds their minimum, per value, to one edge of a member that
// stays (a constant per option), and the search no longer sees it. The plan is the same optimum
// (exact: nothing else depends on that tiling); a fold keeps, per value, the first of tied
// tilings, as eliminating the tensor next to its strategy would.
#pragma once
#include <vector>

#include "search/cut_problem.h"

namespace autotile {

/// \brief The tensor variables folded out of a cut problem and their tilings per value of the
/// shared strategy variable that decides them.
struct JointFold {
  std::vector<int> var;                ///< folded tiling variable
  std::vector<int> by;                 ///< the shared strategy variable deciding it
  std::vector<std::vector<int>> best;  ///< [i][value of by[i]] -> value of var[i]

  /// \brief Sets every folded variable of `value` (a solution of the folded problem).
  void restore(std::vector<int>* value) const;
};

/// \brief Folds out of `p` the tiling variables whose edges all belong to nodes of one shared
/// strategy variable or to nodes with a single option (at least one of the former), each into
/// a per-option constant on an edge of that strategy's members that stays. `p`'s optimum and
/// its optimal plans (after JointFold::restore) are unchanged.
JointFold fold_joint_internals(CutProblem* p);

}  // namespace autotile
