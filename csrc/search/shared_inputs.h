// Conditioning on shared read-only inputs: exact, for the cuts where dominance cannot fix them.
//
// A read-only graph input read by many nodes (LLaMA's rotary cos/sin tables, an export's
// masks) couples every layer that reads it. Without a memory term, replicate dominates its
// other tilings and search/dominance.h fixes it. With a memory term (a device memory budget)
// replicate costs memory and no value dominates; then the cut is solved once per combination
// of such inputs' tilings, each time with them fixed (so the layers decouple), and the
// cheapest solution kept: the exact minimum, at the price of one DP per combination (a few:
// each table has 2-4 tilings) instead of tables that carry the inputs through every layer.
#pragma once
#include <vector>

#include "graph/graph.h"
#include "search/cut_problem.h"
#include "search/dominance.h"

namespace autotile {

/// \brief Variables of read-only graph inputs (no producer, no gradient, not parameters; so
/// every tensor the variable stands for) that at least `min_readers` nodes read and that `r`
/// leaves several values.
std::vector<int> shared_input_vars(const Graph& g, const CutProblem& p, const DomainReduction& r, int min_readers);

/// \brief `r` (a reduction of `p`) with `vars` fixed, one reduction per combination of their kept values (the
/// first variable slowest, values in domain order); empty when there would be more than `limit`.
std::vector<DomainReduction> fix_each_combination(const CutProblem& p, const DomainReduction& r,
                                                  const std::vector<int>& vars, int64_t limit);

}  // namespace autotile
