// Exact min-sum variable elimination over small dense factors (bucket elimination).
//
// The one-cut problem is a sum of pairwise terms between a node's strategy and each tensor
// it touches (one_cut_dp.h builds them). Minimising a sum of factors variable by variable is
// exact whatever the order; the order only decides the size of the intermediate factors
// (the induced width). The order is chosen greedily: always eliminate the variable whose
// elimination creates the smallest table (min-weight, ties by a caller-given priority such
// as the BFS level), which keeps chains, residual blocks and unrolled RNNs at a few
// variables per table, so the work grows linearly with depth.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "util/error.h"

namespace autotile {

/// \brief A sum of dense factors over discrete variables, stored flat: factor f is a table over
/// vars[var_start[f], var_start[f + 1]) (distinct), held in tables[table_start[f],
/// table_start[f + 1]) in mixed radix, last variable fastest.
struct FactorGraph {
  std::vector<int> domain;  ///< per variable, >= 1
  std::vector<int> var_start{0};        ///< per factor and one past the last: its first entry of `vars`
  std::vector<int> vars;                ///< every factor's variables, factor after factor
  std::vector<int64_t> table_start{0};  ///< per factor and one past the last: its first entry of `tables`
  std::vector<double> tables;           ///< every factor's table, factor after factor
  double constant = 0;  ///< terms without variables

  /// \brief Adds a variable with `d` values; returns its id.
  int add_var(int d);
  /// \brief Adds a term over `vars` (its table in mixed radix, last var fastest).
  void add_factor(std::initializer_list<int> vars, const std::vector<double>& table);
  /// \brief Number of terms (those over no variable are in `constant`).
  int num_factors() const { return static_cast<int>(var_start.size()) - 1; }
};

/// \brief Thrown when eliminating a variable would build a table over the limit: the graph is
/// too wide for the exact DP (the search may hand that cut to a bounded solver instead).
class WidthError : public Error {
 public:
  explicit WidthError(const std::string& msg) : Error(msg) {}
};

/// \brief Minimum of the sum and the values reaching it.
struct EliminationResult {
  std::vector<int> value;  ///< per variable
  double cost = 0;
  double log2_width = 0;   ///< log2 of the largest table built (the induced width in entries)
  double work = 0;         ///< table entries visited in all (sum of table size x factors)
  double computed = 0;     ///< the part of `work` computed (the rest repeated an earlier elimination)
  /// With `report_width`: a table would have passed `max_states`, nothing was computed (value
  /// empty). Without it that is a WidthError.
  bool too_wide = false;
};

/// \brief Exact minimum by greedy min-weight elimination (takes the tables over: pass an
/// rvalue). `priority[v]` (optional, may be empty) breaks ties: lower first. When a table would
/// exceed `max_states` entries it throws WidthError (message from `describe(v)`), or with
/// `report_width` returns a result marked too_wide (callers that probe whether a problem fits
/// take no exception on that normal path). An elimination whose incident tables equal an
/// earlier one's (tables of whole numbers compared after shifting them to a minimum of 0, which
/// is exact) takes the earlier result; AUTOTILE_SEARCH_REUSE=off computes every table unshifted.
EliminationResult eliminate(FactorGraph fg, const std::vector<int64_t>& priority, int64_t max_states,
                            const std::function<std::string(int)>& describe, bool report_width = false);

}  // namespace autotile
