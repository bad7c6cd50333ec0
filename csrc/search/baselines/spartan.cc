#include "search/baselines/spartan.h"

#include <algorithm>
#include <numeric>

#include "search/baselines/cut_driver.h"
#include "search/cost_model.h"

namespace autotile {

namespace {
// Lower bound of node n's cost with the values fixed so far (value[v] < 0: unfixed).
double reachable_cost(const CutProblem& p, NodeId n, const std::vector<int>& value) {
  const int num_opts = static_cast<int>(p.options[n].size());
  int only = -1;
  const int sv = p.node_var[n];
  if (sv >= 0 && value[sv] >= 0) {
    only = p.node_var_option[n][value[sv]];
    if (only < 0) return kInfCost;
  }
  double best = kInfCost;
  for (int o = 0; o < num_opts; ++o) {
    if (only >= 0 && o != only) continue;
    if (sv >= 0 && only < 0 &&
        std::find(p.node_var_option[n].begin(), p.node_var_option[n].end(), o) == p.node_var_option[n].end())
      continue;
    double c = 0;
    for (const CutProblem::Edge& e : p.edges[n]) {
      const int D = p.domain[e.var];
      if (value[e.var] >= 0) {
        c += e.cost[o * D + value[e.var]];
      } else {
        double m = kInfCost;
        for (int x = 0; x < D; ++x) m = std::min(m, e.cost[o * D + x]);
        c += m;
      }
    }
    best = std::min(best, c);
  }
  return best;
}
}  // namespace

std::vector<int> spartan_greedy(const CutProblem& p, const std::vector<double>& size) {
  const int V = p.num_vars();
  const int N = static_cast<int>(p.options.size());
  std::vector<std::vector<NodeId>> nodes_of(V);
  for (NodeId n = 0; n < N; ++n) {
    std::vector<int> vars;
    for (const CutProblem::Edge& e : p.edges[n]) vars.push_back(e.var);
    if (p.node_var[n] >= 0) vars.push_back(p.node_var[n]);
    std::sort(vars.begin(), vars.end());
    vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
    for (int v : vars) nodes_of[v].push_back(n);
  }
  // Connectivity: distinct other variables reached through the variable's operators.
  std::vector<int> connectivity(V, 0);
  std::vector<int> seen(V, -1);
  for (int v = 0; v < V; ++v)
    for (NodeId n : nodes_of[v]) {
      auto visit = [&](int u) {
        if (u != v && seen[u] != v) {
          seen[u] = v;
          ++connectivity[v];
        }
      };
      for (const CutProblem::Edge& e : p.edges[n]) visit(e.var);
      if (p.node_var[n] >= 0) visit(p.node_var[n]);
    }
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (connectivity[a] != connectivity[b]) return connectivity[a] > connectivity[b];
    return size[a] > size[b];
  });
  std::vector<int> value(V, -1);
  for (int v : order) {
    double best = kInfCost;
    int arg = 0;
    for (int x = 0; x < p.domain[v]; ++x) {
      value[v] = x;
      double c = 0;
      for (NodeId n : nodes_of[v]) c += reachable_cost(p, n, value);
      if (c < best) best = c, arg = x;
    }
    value[v] = arg;
  }
  return value;
}

Plan spartan_plan(const Graph& g, int devices, const SearchOptions& options) {
  return direct_plan(g, devices, options, "spartan",
                     [](const CutContext& ctx, const CutProblem& p, const Coarsening&) {
                       std::vector<double> size(p.num_vars(), 0);
                       for (int v = 0; v < p.num_vars(); ++v)
                         if (p.var_home[v] >= 0) {
                           double e = 1;
                           for (int64_t d : ctx.s.tensor_shape[p.var_home[v]]) e *= static_cast<double>(d);
                           size[v] = e * dtype_size(ctx.g.tensor(p.var_home[v]).dtype);
                         }
                       return spartan_greedy(p, size);
                     });
}

}  // namespace autotile
