#include "search/one_cut_dp.h"

#include <map>

#include "search/cost_model.h"
#include "search/elimination.h"
#include "util/error.h"

namespace autotile {

std::vector<int64_t> level_priority(const CutProblem& p, const std::vector<int>& level_of_group, const Coarsening& c) {
  const int V = p.num_vars();
  std::vector<int64_t> prio(V);
  for (int v = 0; v < V; ++v) {
    int home = p.var_home[v];
    int group = home >= 0 ? c.tensor_group[home] : c.node_group[~home];
    prio[v] = static_cast<int64_t>(level_of_group[group]) * (V + 1) + v;
  }
  return prio;
}

CutSolution solve_one_cut_dp(const Graph& g, const CutProblem& p, const std::vector<int64_t>& priority,
                             int64_t max_states) {
  const int V = p.num_vars();
  const int N = static_cast<int>(p.edges.size());
  FactorGraph fg;
  for (int v = 0; v < V; ++v) fg.add_var(p.domain[v]);
  std::vector<int64_t> prio(priority.begin(), priority.end());
  if (prio.empty())
    for (int v = 0; v < V; ++v) prio.push_back(v);
  std::vector<NodeId> strategy_of(V, kNone);  // extra variable -> its node (for messages)

  std::map<int, std::vector<double>> per_var;  // one node's terms, summed per tensor variable
  for (NodeId n = 0; n < N; ++n) {
    const int O = static_cast<int>(p.options[n].size());
    // Which option each value of the node's strategy variable means (-1: not available).
    int sv = -1;
    std::vector<int> opt;
    if (p.node_var[n] >= 0) {
      sv = p.node_var[n];
      opt = p.node_var_option[n];
      std::vector<double> unary(opt.size(), 0);
      bool any = false;
      for (size_t a = 0; a < opt.size(); ++a)
        if (opt[a] < 0) unary[a] = kInfCost, any = true;
      if (any) fg.add_factor({sv}, std::move(unary));
    } else if (O > 1) {
      sv = fg.add_var(O);
      strategy_of.push_back(n);
      // Just after the node's earliest tensor, so ties keep the level sweep.
      int64_t best = -1;
      for (const auto& e : p.edges[n]) best = best < 0 ? prio[e.var] : std::min(best, prio[e.var]);
      prio.push_back(best < 0 ? 0 : best);
      for (int o = 0; o < O; ++o) opt.push_back(o);
    }
    per_var.clear();
    for (const auto& e : p.edges[n]) {
      const int D = p.domain[e.var];
      if (sv < 0) {  // a single option: unary terms
        auto& t = per_var[e.var];
        t.resize(D, 0);
        for (int x = 0; x < D; ++x) t[x] += e.cost[x];
        continue;
      }
      const int S = static_cast<int>(opt.size());
      auto& t = per_var[e.var];
      t.resize(static_cast<size_t>(S) * D, 0);
      for (int a = 0; a < S; ++a)
        if (opt[a] >= 0)
          for (int x = 0; x < D; ++x) t[a * D + x] += e.cost[opt[a] * D + x];
    }
    for (auto& [var, table] : per_var) {
      if (sv < 0)
        fg.add_factor({var}, std::move(table));
      else
        fg.add_factor({sv, var}, std::move(table));
    }
  }

  auto describe = [&](int v) -> std::string {
    if (v >= V) {
      const Node& node = g.node(strategy_of[v]);
      return "the strategy of node '" + node.name + "' (op " + node.op + ")";
    }
    int home = p.var_home[v];
    if (home >= 0) return "the tiling of tensor '" + g.tensor(home).name + "'";
    return "the shared strategy of node '" + g.node(~home).name + "'";
  };
  EliminationResult r = eliminate(fg, prio, max_states, describe);
  CutSolution sol;
  sol.value.assign(r.value.begin(), r.value.begin() + V);
  sol.cost = r.cost;
  sol.log2_width = r.log2_width;
  sol.work = r.work;
  return sol;
}

}  // namespace autotile
