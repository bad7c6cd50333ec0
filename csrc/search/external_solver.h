// A cut solved outside the core (the integer program of planner/ilp.py, through the Python
// binding): the solver gets the cut problem as plain data and returns a value for every
// variable; the core checks the values and prices them with the same cost terms the DP
// minimises. This header stays free of the search's internals so bindings can include it.
#pragma once
#include <functional>
#include <vector>

namespace autotile {

struct CutProblem;
struct CutSolution;
class Graph;

/// \brief One cut problem as plain data (see CutProblem in search/cut_problem.h).
struct CutProblemData {
  int cut = 0;
  int k = 2;
  std::vector<int> domain;                      ///< per variable: number of values
  std::vector<int> var_home;                    ///< a tensor (>= 0) or ~node owning the variable
  std::vector<int> num_options;                 ///< per node
  std::vector<int> node_var;                    ///< per node: shared strategy variable or -1
  std::vector<std::vector<int>> node_var_option;  ///< [node][value of node_var] -> option or -1
  std::vector<std::vector<int>> edge_var;       ///< [node][edge] -> variable
  /// [node][edge] -> cost[option * domain + value] in bytes (infinity: not allowed)
  std::vector<std::vector<std::vector<double>>> edge_cost;
};

/// \brief Solves one cut problem: a value (index into the domain) per variable.
using ExternalCutSolver = std::function<std::vector<int>(const CutProblemData&)>;

/// \brief The plain-data form of `p`.
CutProblemData cut_problem_data(const CutProblem& p);

/// \brief Runs `solver` on `p` and prices its answer. Throws Error when no solver is set,
/// when the answer has the wrong length or an out-of-range value, or when it is infeasible.
CutSolution solve_external(const Graph& g, const CutProblem& p, const ExternalCutSolver& solver);

/// \brief The same on `p` with every dominated value and option dropped first (search/dominance.h:
/// the cut's optimum is unchanged), then the values mapped back and polished as the DP does:
/// a smaller program for a cut too wide for the DP. Returns values and cost of `p`.
CutSolution solve_external_reduced(const Graph& g, const CutProblem& p, const ExternalCutSolver& solver);

}  // namespace autotile
