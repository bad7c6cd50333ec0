#include "search/external_solver.h"

#include "search/cost_model.h"
#include "search/cut_problem.h"
#include "search/dominance.h"
#include "search/one_cut_dp.h"
#include "util/error.h"

namespace autotile {

CutProblemData cut_problem_data(const CutProblem& p) {
  CutProblemData d;
  d.cut = p.cut;
  d.k = p.k;
  d.domain = p.domain;
  d.var_home = p.var_home;
  d.node_var = p.node_var;
  d.node_var_option = p.node_var_option;
  d.num_options.reserve(p.options.size());
  for (const auto& o : p.options) d.num_options.push_back(static_cast<int>(o.size()));
  d.edge_var.resize(p.edges.size());
  d.edge_cost.resize(p.edges.size());
  for (size_t n = 0; n < p.edges.size(); ++n)
    for (const auto& e : p.edges[n]) {
      d.edge_var[n].push_back(e.var);
      d.edge_cost[n].push_back(e.cost);
    }
  return d;
}

CutSolution solve_external(const Graph& g, const CutProblem& p, const ExternalCutSolver& solver) {
  if (!solver) fail("cut ", p.cut + 1, ": no external solver is set (algorithm 'ilp' is solved from Python)");
  CutSolution sol;
  sol.value = solver(cut_problem_data(p));
  if (sol.value.size() != static_cast<size_t>(p.num_vars()))
    fail("cut ", p.cut + 1, ": the external solver returned ", sol.value.size(), " values for ", p.num_vars(),
         " variables");
  for (int v = 0; v < p.num_vars(); ++v)
    if (sol.value[v] < 0 || sol.value[v] >= p.domain[v])
      fail("cut ", p.cut + 1, ": the external solver gave variable ", v, " the value ", sol.value[v],
           " outside its domain of ", p.domain[v]);
  sol.cost = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) sol.cost += p.node_cost(n, sol.value);
  if (!(sol.cost < kInfCost)) fail("cut ", p.cut + 1, ": the external solver's answer is infeasible");
  return sol;
}

CutSolution solve_external_reduced(const Graph& g, const CutProblem& p, const ExternalCutSolver& solver) {
  const DomainReduction r = reduce_domains(p, Reduce::kEvery);
  if (r.empty()) return solve_external(g, p, solver);
  CutSolution sol = solve_external(g, restrict_domains(p, r), solver);
  expand_and_polish(p, r, &sol.value);
  sol.cost = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) sol.cost += p.node_cost(n, sol.value);
  return sol;
}

}  // namespace autotile
