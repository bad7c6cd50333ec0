#include "search/coarsen_fold.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "search/cost_model.h"

namespace autotile {

void JointFold::restore(std::vector<int>* value) const {
  for (size_t i = 0; i < var.size(); ++i) (*value)[var[i]] = best[i][(*value)[by[i]]];
}

JointFold fold_joint_internals(CutProblem* p) {
  JointFold fold;
  const char* env = std::getenv("AUTOTILE_SEARCH_FOLD");
  if (env && std::string(env) == "off") return fold;
  const int V = p->num_vars(), N = static_cast<int>(p->edges.size());
  // The (node, edge) pairs of every variable: uses[start[v] .. start[v + 1]).
  std::vector<int> start(V + 1, 0);
  for (int n = 0; n < N; ++n)
    for (const CutProblem::Edge& e : p->edges[n]) ++start[e.var + 1];
  for (int v = 0; v < V; ++v) start[v + 1] += start[v];
  std::vector<std::pair<int, int>> uses(start[V]);
  std::vector<int> fill(start.begin(), start.end() - 1);
  for (int n = 0; n < N; ++n)
    for (size_t i = 0; i < p->edges[n].size(); ++i) uses[fill[p->edges[n][i].var]++] = {n, static_cast<int>(i)};
  // The shared strategy variable deciding each tiling variable: its nodes are that strategy's
  // members or have one option (kStays: no such variable, or another node decides too).
  constexpr int kStays = -1;
  std::vector<int> by(V, kStays);
  bool any = false;
  for (int v = 0; v < V; ++v) {
    if (p->var_home[v] < 0 || p->domain[v] < 2) continue;
    int s = kStays;
    for (int u = start[v]; u < start[v + 1]; ++u) {
      const int n = uses[u].first, nv = p->node_var[n];
      if (nv < 0 && p->options[n].size() == 1) continue;
      if (nv < 0 || (s != kStays && s != nv)) {
        s = kStays;
        break;
      }
      s = nv;
    }
    by[v] = s;
    any = any || s != kStays;
  }
  if (!any) return fold;
  // One carrier edge per shared variable: an edge of one of its members to a variable that stays.
  std::vector<std::pair<int, int>> carrier(V, {-1, -1});
  for (int n = 0; n < N; ++n) {
    const int s = p->node_var[n];
    for (size_t i = 0; s >= 0 && carrier[s].first < 0 && i < p->edges[n].size(); ++i)
      if (by[p->edges[n][i].var] == kStays) carrier[s] = {n, static_cast<int>(i)};
  }
  std::vector<char> folded(V, 0);
  std::vector<double> total;
  for (int v = 0; v < V; ++v) {
    const int s = by[v];
    if (s == kStays || carrier[s].first < 0) continue;
    // the option of node n at value a of s (-1: a is infeasible for n, which an infinite term
    // already says; a node with one option: that option)
    auto option = [&](int n, int a) { return p->node_var[n] >= 0 ? p->node_var_option[n][a] : 0; };
    const int S = p->domain[s], D = p->domain[v];
    std::vector<int> best(S, 0);
    std::vector<double> min_cost(S, 0);
    for (int a = 0; a < S; ++a) {
      total.assign(D, 0);
      for (int u = start[v]; u < start[v + 1]; ++u) {
        auto [n, i] = uses[u];
        const int o = option(n, a);
        if (o < 0) continue;
        const std::vector<double>& cost = p->edges[n][i].cost;
        for (int x = 0; x < D; ++x) total[x] += cost[static_cast<size_t>(o) * D + x];
      }
      // the first of equal minima, as the elimination keeps
      best[a] = static_cast<int>(std::min_element(total.begin(), total.end()) - total.begin());
      min_cost[a] = total[best[a]];
    }
    auto [n0, i0] = carrier[s];
    CutProblem::Edge& e = p->edges[n0][i0];
    const int Du = p->domain[e.var];
    for (int a = 0; a < S; ++a) {
      const int o = option(n0, a);
      if (o < 0) continue;
      for (int x = 0; x < Du; ++x) e.cost[static_cast<size_t>(o) * Du + x] += min_cost[a];
    }
    folded[v] = 1;
    fold.var.push_back(v);
    fold.by.push_back(s);
    fold.best.push_back(std::move(best));
  }
  for (auto& es : p->edges)
    es.erase(std::remove_if(es.begin(), es.end(), [&](const CutProblem::Edge& e) { return folded[e.var]; }), es.end());
  return fold;
}

}  // namespace autotile
