// Drivers shared by the baselines: run the recursive k-cuts (Soybean Alg. 1, Tofu Sec 5.2)
// with a restriction or a solver that may look at what the earlier cuts chose.
//
//  * staged_plan: cut i is solved by the core search (k_cuts on k_1*...*k_i devices) with
//    cuts 1..i-1 fixed to what was already chosen and cut i restricted by a PlanConstraint
//    built for that cut (it sees the shrunk shapes and every node's options). So every
//    DP-based baseline uses exactly the core DP and cost model, cut by cut.
//  * direct_plan: cut i is built as a CutProblem and solved by a baseline-specific solver
//    (Spartan's greedy, Soybean's uncoarsened level order).
// Both price the final plan with the shared flat cost model (SearchState), like k_cuts.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "search/coarsen.h"
#include "search/cut_problem.h"
#include "search/kcuts.h"
#include "search/plan.h"
#include "search/search_state.h"

namespace autotile {

/// \brief What a baseline sees when it decides one cut.
struct CutContext {
  const Graph& g;
  const SearchState& s;  ///< the plan so far (shapes shrunk by the previous cuts)
  int cut;               ///< 0-based index of this cut
  int k;                 ///< this cut's factor
  const std::vector<std::vector<NodeOption>>& options;  ///< every node's options at this cut, unrestricted
  const StrategyProvider& provider;
};

/// \brief Builds the restriction of one cut (staged_plan).
using CutRestriction = std::function<PlanConstraint(const CutContext&)>;
/// \brief Solves one cut problem: a value for every variable of `p` (direct_plan).
using CutChooser = std::function<std::vector<int>(const CutContext&, const CutProblem& p, const Coarsening& c)>;

/// \brief Plans `g` cut by cut with the core search, each cut restricted by `restrict`.
Plan staged_plan(const Graph& g, int devices, const SearchOptions& options, const std::string& name,
                 const CutRestriction& restrict);

/// \brief Plans `g` cut by cut with `choose` solving each cut's problem (built under
/// options.constraint and, when given, `restrict`).
Plan direct_plan(const Graph& g, int devices, const SearchOptions& options, const std::string& name,
                 const CutChooser& choose, const CutRestriction& restrict = nullptr);

/// \brief A constraint allowing what both `a` and `b` allow (either may be empty); named `name`.
PlanConstraint both(const PlanConstraint& a, const PlanConstraint& b, const std::string& name);

}  // namespace autotile
