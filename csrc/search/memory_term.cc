#include "search/memory_term.h"

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace autotile {

namespace {
// Bytes one device holds of tensor t in the current state, unsplit at this cut.
double held_bytes(const Graph& g, const SearchState& s, TensorId t) {
  double bytes = static_cast<double>(dtype_size(g.tensor(t).dtype));
  for (int64_t d : s.tensor_shape[t]) bytes *= static_cast<double>(d);
  return bytes;
}
}  // namespace

std::vector<char> unweighted_shared_inputs(const Graph& g, const SearchState& s, const CutProblem& p) {
  const int V = p.num_vars();
  // AUTOTILE_MEMORY_TERM=all weighs every tensor (the term before issue #24), for tests.
  const char* env = std::getenv("AUTOTILE_MEMORY_TERM");
  if (env && std::string(env) == "all") return std::vector<char>(V, 0);
  std::vector<char> read_only(V, 1);
  std::vector<double> bytes(V, 0.0);
  double total = 0;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor& x = g.tensor(t);
    const double b = held_bytes(g, s, t);
    total += b;
    const int v = p.tensor_var[t];
    if (v < 0) continue;
    bytes[v] += b;
    if (x.producer != kNone || x.is_param || x.gradient != kNone) read_only[v] = 0;
  }
  std::vector<std::set<NodeId>> readers(V);
  for (NodeId n = 0; n < static_cast<NodeId>(p.edges.size()); ++n)
    for (const auto& e : p.edges[n])
      if (read_only[e.var]) readers[e.var].insert(n);
  std::vector<char> out(V, 0);
  for (int v = 0; v < V; ++v)
    out[v] = read_only[v] && !p.var_tilings[v].empty() && static_cast<int>(readers[v].size()) >= kSharedInputReaders &&
             bytes[v] <= kSharedInputShare * total;
  return out;
}

CutProblem with_memory_term(const Graph& g, const SearchState& s, const CutProblem& p, double weight) {
  CutProblem q = p;
  if (!(weight > 0)) return q;
  const std::vector<char> skip = unweighted_shared_inputs(g, s, p);
  // Each variable's memory cost per value, summed over the tensors it stands for.
  std::vector<std::vector<double>> extra(p.num_vars());
  for (int v = 0; v < p.num_vars(); ++v) extra[v].assign(p.domain[v], 0.0);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    int v = p.tensor_var[t];
    if (v < 0 || p.var_tilings[v].empty() || skip[v]) continue;
    const double tile = held_bytes(g, s, t);
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
      if (placed[e.var] || skip[e.var]) continue;
      placed[e.var] = 1;
      const int dom = q.domain[e.var];
      for (int o = 0; o < options; ++o)
        for (int val = 0; val < dom; ++val) e.cost[o * dom + val] += extra[e.var][val];
    }
  }
  return q;
}

}  // namespace autotile
