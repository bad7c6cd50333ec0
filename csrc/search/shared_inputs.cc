#include "search/shared_inputs.h"

#include <set>

namespace autotile {

std::vector<int> shared_input_vars(const Graph& g, const CutProblem& p, const DomainReduction& r, int min_readers) {
  const int V = p.num_vars();
  std::vector<char> read_only(V, 1);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor& x = g.tensor(t);
    if (x.producer != kNone || x.is_param || x.gradient != kNone) read_only[p.tensor_var[t]] = 0;
  }
  std::vector<std::set<NodeId>> readers(V);
  for (NodeId n = 0; n < static_cast<NodeId>(p.edges.size()); ++n)
    for (const auto& e : p.edges[n])
      if (read_only[e.var]) readers[e.var].insert(n);
  std::vector<int> vars;
  for (int v = 0; v < V; ++v)
    if (read_only[v] && !p.var_tilings[v].empty() && r.kept[v].size() > 1 &&
        static_cast<int>(readers[v].size()) >= min_readers)
      vars.push_back(v);
  return vars;
}

std::vector<DomainReduction> fix_each_combination(const CutProblem& p, const DomainReduction& r,
                                                  const std::vector<int>& vars, int64_t limit) {
  int64_t combos = 1;
  for (int v : vars)
    if ((combos *= static_cast<int64_t>(r.kept[v].size())) > limit) return {};
  std::vector<DomainReduction> out;
  std::vector<size_t> pick(vars.size(), 0);  // odometer over the kept values, last var fastest
  for (int64_t c = 0; c < combos; ++c) {
    DomainReduction f = r;
    for (size_t i = 0; i < vars.size(); ++i) f.kept[vars[i]] = {r.kept[vars[i]][pick[i]]};
    f.count(p);
    out.push_back(std::move(f));
    for (size_t i = vars.size(); i-- > 0;) {
      if (++pick[i] < r.kept[vars[i]].size()) break;
      pick[i] = 0;
    }
  }
  return out;
}

}  // namespace autotile
