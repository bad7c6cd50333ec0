// Recursive k-cuts (Soybean Alg. 1, Tofu Sec 5.2): factorise k = k_1 * k_2 * ... with
// k_i >= k_(i+1), plan one k_i-way cut at a time on the graph shrunk by the previous cuts.
//
// delta_i = bytes moved by all devices because of cut i = (flat cost of the plan on
// k_1*...*k_i devices) - (flat cost on k_1*...*k_(i-1) devices), so sum delta_i is the exact
// flat cost of the final plan; Tofu's Theorem 2 expects delta_i <= delta_(i+1).
//
// Setting the environment variable AUTOTILE_SEARCH_PROFILE prints, per cut, where the time
// goes (strategies, coarsening, cost tables, levels, DP, pricing) and the DP's sizes (stderr).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "search/constraint.h"
#include "search/external_solver.h"
#include "search/plan.h"
#include "search/strategy_provider.h"
#include "search/time_cost.h"

namespace autotile {

/// \brief How each cut is solved.
enum class CutSolver { kDP, kBruteforce, kExternal };

/// \brief Knobs of one search.
struct SearchOptions {
  bool replicate_fallback = false;  ///< nodes without TDL (or strategies) run replicated
  StrategyProvider provider;        ///< empty: the TDL analysis
  PlanConstraint constraint;        ///< restrictions (baselines)
  CutSolver solver = CutSolver::kDP;
  int64_t bruteforce_limit = 4000000;  ///< most tiling combinations bruteforce enumerates per cut
  std::vector<double> bandwidths;   ///< bytes/s of the link each cut crosses (any order; may be empty)
  /// bandwidths[i] is the link of cut i (a named mesh's axes), not a set to map slowest-first
  bool bandwidths_in_cut_order = false;
  /// Cut factors in the order the cuts are made (a named mesh: each axis's factors); empty:
  /// factorize(devices). Checked by cut_factors (search/pins.h).
  std::vector<int> factors;
  /// Refine the recursive plan across its cuts afterwards (search/cut_refine.h; the DP
  /// solver only, without a memory term or bandwidths). plan_graph keeps it for "tofu" only.
  bool refine = true;
  /// Weight of the per-device memory term (search/memory_term.h); 0: communication only.
  double memory_weight = 0;
  /// [tensor][cut] tilings the user fixed ("" = free; empty table = none): see search/pins.h.
  /// Honoured by tofu, bruteforce and data.
  std::vector<std::vector<std::string>> pinned;
  /// Per tensor: the batch dim of a data input, -1 elsewhere (the data baseline splits the batch
  /// there and carries it through the graph: search/baselines/data.h); empty: dim 0 of the
  /// graph inputs that share the largest one's dim 0.
  std::vector<int> batch_dims;
  /// Testing aid: when set, every cut is also solved by bruteforce on the same problem and
  /// (DP cost, bruteforce cost) of that cut's problem is appended; the DP's choice is kept.
  std::vector<std::pair<double, double>>* cut_check = nullptr;
  /// Solver of every cut when solver == kExternal (search/external_solver.h), and of the
  /// second column of cut_check when set (instead of bruteforce).
  ExternalCutSolver external_solver;
  /// The time objective (search/time_cost.h): each cut priced in seconds, not bytes; null: bytes.
  std::shared_ptr<const TimeObjective> time;
};

/// \brief Prime factors of `devices`, largest first (12 -> 3, 2, 2); empty for 1.
std::vector<int> factorize(int devices);

/// \brief Plans `g` for `devices` devices.
Plan k_cuts(const Graph& g, int devices, const SearchOptions& options);

/// \brief Prices a given plan ([tensor][cut] tilings, [node][cut] strategy names) with the
/// same cost model; throws Error naming the tensor or node whose entry is invalid.
Plan price_plan(const Graph& g, int devices, const std::vector<std::vector<std::string>>& tensor_tilings,
                const std::vector<std::vector<std::string>>& node_strategies, const SearchOptions& options);

struct SearchState;

/// \brief Fills a plan's per-cut costs, totals (the cheapest cut charged against the slowest
/// link, Soybean Sec 5.1) and tiling/strategy strings from the final search state; `flat` holds
/// the cumulative cost after each cut. Shared by the search and the cut-by-cut baselines.
void finish_plan(const Graph& g, const SearchState& s, const std::vector<double>& flat,
                 const std::vector<double>& bandwidths, Plan* plan, bool bandwidths_in_cut_order = false);

}  // namespace autotile
