// The oracle: every combination of tilings and strategies of one cut, on small graphs.
#pragma once
#include <cstdint>

#include "search/one_cut_dp.h"

namespace autotile {

/// \brief Exhaustive minimum of the cut problem: every tiling of every variable, and for each
/// node every strategy. Throws Error (before any work) if the number of tiling combinations
/// exceeds `limit`.
CutSolution solve_bruteforce(const CutProblem& p, int64_t limit);

}  // namespace autotile
