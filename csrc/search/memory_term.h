// A per-device memory term for the one-cut problem, so the search can trade communication for
// memory (issue #15, "Plans that fit"): each tensor tiling value costs `weight` times the bytes
// of the tile one device holds after the cut (a split holds 1/k, a replica or a partial sum all
// of it). The planner searches the weight (planner/memory_fit.py) until the execution graph's
// memory plan fits the budget. The term sits on the tensors' variables, so a node's cheapest
// option, and hence the plan's communication, is priced exactly as without it.
#pragma once
#include "graph/graph.h"
#include "search/cut_problem.h"
#include "search/search_state.h"

namespace autotile {

/// \brief Readers a read-only input needs to be left out of the term (as search/shared_inputs.h's conditioning).
constexpr int kSharedInputReaders = 4;
/// \brief ... and the largest share of all tensors' bytes (one device, this cut) it may hold.
constexpr double kSharedInputShare = 1.0 / 16384;

/// \brief Per variable of `p`: 1 for a small read-only graph input read by many nodes (no
/// producer, no gradient, not a parameter; at least kSharedInputReaders readers; its tensors at
/// most kSharedInputShare of the bytes of all tensors), which the memory term leaves out.
///
/// Such an input (LLaMA's rotary cos/sin tables: 2 MB of 7B-parameter training state) is
/// fixed replicated by dominance in the plain search (search/dominance.h). Priced by the term,
/// no value dominates and every cut is solved once per combination of the tables' tilings
/// (search/shared_inputs.h: 9 DPs a cut for LLaMA, 3.3 s a weighted search against 0.5 s),
/// to save at most w x its bytes, which no budget notices. Left out, it is fixed replicated
/// as without a budget (issue #24). AUTOTILE_MEMORY_TERM=all (tests) leaves nothing out.
std::vector<char> unweighted_shared_inputs(const Graph& g, const SearchState& s, const CutProblem& p);

/// \brief `p` with weight * (bytes each device holds of every tensor but those of
/// unweighted_shared_inputs) added to its variables.
CutProblem with_memory_term(const Graph& g, const SearchState& s, const CutProblem& p, double weight);

}  // namespace autotile
