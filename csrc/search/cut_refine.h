// Refinement of a finished recursive plan across its cuts (issue 24).
//
// Each cut of the recursion is exact given the earlier ones, but the whole plan need not be:
// among the tied optima of a cut the one kept may make the later cuts dearer, and Tofu's
// proof that the greedy order is optimal (App. A, Theorem 3) assumes a cut costs the same
// whichever cuts came before it, which ghost areas and partial sums break. The plan's final
// cost is a sum over edges of the bytes that turn a tensor's tilings over all cuts into what
// its reader's strategies over all cuts need, so with every cut but one fixed it is again a
// pairwise problem of the cut problem's form, over that cut's tilings and strategies: the
// one-cut DP solves it exactly. Under the time objective (search/time_cost.h) the plan's
// seconds are again such a sum (each edge's bytes after each cut at that cut's rate, a latency
// where it starts moving, each node's compute on its final tiles), and every move below is
// solved and judged on them instead (refine_time.cc). A local search then makes moves, each
// kept only when the plan, priced again from the cut it changes, costs less in all:
//
//  - re-solve cut i given all the others (their tilings and strategies kept by name, the
//    strategies re-derived for the shapes the new cut i leaves), which also picks, among cut
//    i's tied optima, the one best for the cuts after it;
//  - swap cuts i and i+1 of equal factor (the same tiles in the other order; with different
//    costs where the cuts do not commute);
//  - when neither helps, the wide moves, each the joint program restricted to a neighbourhood
//    of the plan and solved by the DP: the cut-orders move (every layer may make its cuts in
//    its own order, small nodes such as weight updates and the tensors take any sequence),
//    then the one-change move (every tensor class and every node may at once keep its
//    sequence, change one cut, or exchange two adjacent cuts). A wide move whose DP would pass
//    its table limit is made over a smaller neighbourhood instead: each tensor's and node's 48,
//    24, 12 or 6 candidates of least lower bound (the first that fits; its own always kept).
//
// It starts from the recursion's plan and again from the best plan with its cuts in every
// other order of equal factors (projected onto a valid plan one cut at a time where a
// strategy name does not exist at the shapes the new order leaves), with the cheap moves;
// the wide moves then polish the best end (the starts stop at 60% of the budget so that the
// polish gets the rest). It spends at most max(a floor, half of what the
// recursion spent) in work units (DP entries, node options derived, edge costs priced), so a
// small graph is refined until no move helps and a large one gets at most about half the
// recursion's time more (none when the first move alone would cost more than that).
//
// Files: this driver (cut_refine.cc: the starts and the descent), the Refiner and its
// constants (refiner.h), the cut-by-cut moves (refine_moves.cc), the wide moves
// (refine_neighbourhood.cc) and their pricing in seconds (refine_time.cc).
#pragma once
#include <vector>

#include "graph/graph.h"
#include "search/kcuts.h"  // (no search_state.h: the Python binding includes this header)

namespace autotile {

/// \brief What a refinement did.
struct RefineStats {
  int tried = 0;     ///< moves tried
  int kept = 0;      ///< moves that lowered the total (each is kept)
  double work = 0;   ///< work units spent (DP entries, and 1000 a node whose options are derived)
  bool capped = false;  ///< stopped by the work budget before no move helped
};

/// \brief Whether `options` ask for the refinement and it applies: the DP solver, no memory
/// term and no bandwidths (the cuts' order is then tied to the links), and more than one cut.
bool refine_applies(const SearchOptions& options, size_t cuts);

/// \brief Lowers the total bytes (under `options.time`, the time objective's seconds, as
/// plan_seconds prices them) of the recursive plan in `s` (all cuts applied; `flat` its
/// cumulative cost after each cut) by a local search over its cuts, within a work budget
/// derived from `cut_work` (the DP entries each cut of the recursion visited) and the graph's
/// size. On return `s` and `flat` hold the refined plan (the same when no move helped); a move
/// is kept only after its plan is priced again from the cut it changes on, each strategy
/// re-derived by name, as price_plan prices a plan.
RefineStats refine_cuts(const Graph& g, const std::vector<int>& factors, const SearchOptions& options,
                        const StrategyProvider& provider, const std::vector<double>& cut_work, SearchState* s,
                        std::vector<double>* flat, size_t first_cut_widest = 2);

/// \brief Testing aid: the given plan ([tensor][cut] tilings, [node][cut] strategy names,
/// checked as price_plan checks them) refined by refine_cuts with the floor of its budget
/// (as for a recursion that spent nothing), returned as a plan.
Plan refine_given_plan(const Graph& g, int devices, const std::vector<std::vector<std::string>>& tensor_tilings,
                       const std::vector<std::vector<std::string>>& node_strategies, const SearchOptions& options);

}  // namespace autotile
