#include "search/bruteforce.h"

#include "search/cost_model.h"
#include "util/error.h"

namespace autotile {

CutSolution solve_bruteforce(const CutProblem& p, int64_t limit) {
  const int V = p.num_vars();
  double combos = 1;
  for (int v = 0; v < V; ++v) combos *= p.domain[v];
  if (combos > static_cast<double>(limit))
    fail("bruteforce: cut ", p.cut + 1, " has ", combos, " tiling combinations over ", V,
         " tensors (limit ", limit, "); use algorithm='tofu' for graphs this large");
  const int N = static_cast<int>(p.edges.size());
  CutSolution best;
  best.cost = kInfCost;
  std::vector<int> value(V, 0);
  while (true) {
    double total = 0;
    for (NodeId n = 0; n < N && total < best.cost; ++n) {
      // Every strategy of the node, written out (no shared code with the DP's tables).
      double node_best = kInfCost;
      const int O = static_cast<int>(p.options[n].size());
      for (int o = 0; o < O; ++o) {
        if (p.node_var[n] >= 0 && p.node_var_option[n][value[p.node_var[n]]] != o) continue;
        double c = 0;
        for (const auto& e : p.edges[n]) c += e.cost[o * p.domain[e.var] + value[e.var]];
        if (c < node_best) node_best = c;
      }
      total += node_best;
    }
    if (total < best.cost || best.value.empty()) {
      best.cost = total;
      best.value = value;
    }
    int v = 0;
    while (v < V && ++value[v] == p.domain[v]) value[v++] = 0;
    if (v == V) break;
  }
  return best;
}

}  // namespace autotile
