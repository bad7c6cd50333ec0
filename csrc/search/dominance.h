// Dominated values: tilings (and strategies) a cut's optimum never needs.
//
// A node's cost is min over its options o of a sum of edge terms, so changing one variable v
// from x to r changes node n's cost by at most
//     delta_n(r, x) = max_o [ sum of n's edges on v at r - the same at x ]
// whatever the other variables are. When sum_n delta_n(r, x) <= 0, any plan with v = x is
// matched by the plan with v = r, so x can leave the domain without changing the optimum.
// Likewise an option no cheaper than another one on every edge at every value can go.
//
// What this is for: a read-only input shared by many nodes (LLaMA's rotary cos/sin tables,
// fed like data to every layer's queries and keys; an ONNX export's masks) ties every layer
// to one variable, and the elimination then carries it through every table (67 s of search for
// LLaMA-7B on 64 devices). Held replicated, such an input is read by every consumer for free
// (the held box contains any need), so replicate dominates each split and the variable is
// fixed; a fixed variable joins no factor, and the layers stop interacting through it.
//
// Fixing only variables with one dominant value keeps the DP's usual choices (the fixed values
// are polished back below); dropping every dominated value and option as well makes tables
// smaller still, but equally cheap plans may then be chosen differently (later cuts can differ
// when a cut has several optimal plans), so the search does that only for a cut that is too
// wide otherwise (one_cut_dp.cc).
#pragma once
#include <vector>

#include "search/cut_problem.h"

namespace autotile {

/// \brief Which values of each variable and which options of each node the search keeps
/// (original ids, ascending).
struct DomainReduction {
  std::vector<std::vector<int>> kept;          ///< per variable; all values for unpruned ones
  std::vector<std::vector<int>> kept_options;  ///< per node
  int pruned_vars = 0;                         ///< variables that lost at least one value
  int fixed_vars = 0;                          ///< variables left with one value (were wider)
  int pruned_nodes = 0;                        ///< nodes that lost at least one option

  bool empty() const { return pruned_vars == 0 && pruned_nodes == 0; }
  /// \brief Sets the counts from `kept` and `kept_options` (of a reduction of `p`).
  void count(const CutProblem& p);
};

/// \brief What reduce_domains drops.
enum class Reduce {
  kNothing,   ///< nothing: every value and option stays
  kDominant,  ///< fixes each tensor variable that has a value dominating all its others (the first such)
  /// also every value dominated by another live one (higher ids first, so of two equally good
  /// values the first stays) and every option of a node (not of a shared strategy) that
  /// another live option matches or beats on each edge at each live value, until nothing changes
  kEvery,
};

/// \brief The values and options `p`'s optimum keeps under `what`; the optimum is unchanged.
DomainReduction reduce_domains(const CutProblem& p, Reduce what);

/// \brief `p` restricted to `r` (domains, tilings, options and edge tables sliced). Each
/// node's cost on the kept values is its cost in `p`.
CutProblem restrict_domains(const CutProblem& p, const DomainReduction& r);

/// \brief Turns values of the restricted problem into values of `p`, then gives each pruned
/// variable the first value of its domain whose edges, with every node's chosen option kept,
/// cost no more than the value found (as the DP's own tie-break, which takes the first
/// cheapest value given the strategies: a shared data input is split again where each reader
/// reads it in its own slab). Returns the change of the total cost (<= 0 up to rounding).
double expand_and_polish(const CutProblem& p, const DomainReduction& r, std::vector<int>* value);

}  // namespace autotile
