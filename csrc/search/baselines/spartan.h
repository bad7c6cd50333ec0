// The `spartan` baseline: Spartan's greedy "maximum connectivity group first" tiling
// (spartan-swapadvisor-thesis.txt Sec 2, Fig. 2.8), per cut on the same cut problem and cost
// model as the DP. The node groups of Spartan's tiling graph are our tiling variables (a
// tensor, or a class of tied tensors; merged RNN steps add shared strategy variables), its
// tiling nodes their candidate values, and its edge weights our conversion costs.
//
// Variables are visited in order of connectivity (number of other variables they share an
// operator with; ties: larger tensor first, as Tofu Sec 7.3 describes the heuristic, then
// id). For each candidate value FindCost sums, over the operators the variable touches, the
// cheapest cost each operator can still reach: the chosen values of fixed variables, the
// best value of every unfixed one (each edge on its own, as Fig. 2.8's min over edges), the
// best strategy. The cheapest value is fixed and never revisited. Operators finally take
// their cheapest strategy given all tilings.
#pragma once
#include <vector>

#include "search/cut_problem.h"
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief Spartan's greedy assignment of one cut problem (a value per variable); `size`
/// (bytes per variable, 0 for strategy variables) breaks connectivity ties.
std::vector<int> spartan_greedy(const CutProblem& p, const std::vector<double>& size);

/// \brief Plans `g` with Spartan's greedy tiling, cut by cut.
Plan spartan_plan(const Graph& g, int devices, const SearchOptions& options);

}  // namespace autotile
