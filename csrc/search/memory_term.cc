#include "search/memory_term.h"

#include <vector>

#include "graph/dtype.h"

namespace autotile {

CutProblem with_memory_term(const Graph& g, const SearchState& s, const CutProblem& p, double weight) {
  CutProblem q = p;
  if (!(weight > 0)) return q;
  // Each variable's memory cost per value, summed over the tensors it stands for.
  std::vector<std::vector<double>> extra(p.num_vars());
  for (int v = 0; v < p.num_vars(); ++v) extra[v].assign(p.domain[v], 0.0);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    int v = p.tensor_var[t];
    if (v < 0 || p.var_tilings[v].empty()) continue;
    double tile = static_cast<double>(dtype_size(g.tensor(t).dtype));
    for (int64_t d : s.tensor_shape[t]) tile *= static_cast<double>(d);
    for (int val = 0; val < p.domain[v]; ++val) {
      const Tiling& ti = p.var_tilings[v][val];
      extra[v][val] += weight * (ti.kind == Tiling::kSplit ? tile / p.k : tile);
    }
  }
  // Put each variable's term on one edge that reads it (every option of that node pays it,
  // so the node's best option does not change).
  std::vector<char> placed(p.num_vars(), 0);
  for (size_t n = 0; n < q.edges.size(); ++n) {
    const int options = static_cast<int>(q.options[n].size());
    for (auto& e : q.edges[n]) {
      if (placed[e.var]) continue;
      placed[e.var] = 1;
      const int dom = q.domain[e.var];
      for (int o = 0; o < options; ++o)
        for (int val = 0; val < dom; ++val) e.cost[o * dom + val] += extra[e.var][val];
    }
  }
  return q;
}

}  // namespace autotile
