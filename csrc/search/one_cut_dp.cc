#include "search/one_cut_dp.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "search/cost_model.h"
#include "util/error.h"

namespace autotile {

std::vector<int> level_order(const CutProblem& p, const std::vector<int>& level_of_group, const Coarsening& c) {
  std::vector<std::tuple<int, int, int>> key;
  for (int v = 0; v < p.num_vars(); ++v) {
    int home = p.var_home[v];
    int group = home >= 0 ? c.tensor_group[home] : c.node_group[~home];
    key.emplace_back(level_of_group[group], group, v);
  }
  std::sort(key.begin(), key.end());
  std::vector<int> order;
  for (auto& k : key) order.push_back(std::get<2>(k));
  return order;
}

std::vector<int> layer_order(const Graph& g, const CutProblem& p) {
  std::vector<NodeId> topo = g.topo_order();
  std::vector<int> layer(g.num_nodes(), 0);
  int pos = 0;
  for (NodeId n : topo) {
    const Node& node = g.node(n);
    int l = pos++;
    if (node.forward_node != kNone) {
      l = layer[node.forward_node];
    } else if (node.role != NodeRole::kForward) {
      int m = -1;
      for (TensorId t : node.inputs)
        if (g.tensor(t).producer != kNone) m = std::max(m, layer[g.tensor(t).producer]);
      if (m >= 0) l = m;
    }
    layer[n] = l;
  }
  std::vector<int> key(p.num_vars(), 1 << 30);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    for (const auto& e : p.edges[n]) key[e.var] = std::min(key[e.var], layer[n]);
    if (p.node_var[n] >= 0) key[p.node_var[n]] = std::min(key[p.node_var[n]], layer[n]);
  }
  std::vector<int> order(p.num_vars());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key[a] < key[b]; });
  return order;
}

double sweep_width(const CutProblem& p, const std::vector<int>& order) {
  const int V = p.num_vars();
  std::vector<int> pos(V);
  for (int i = 0; i < V; ++i) pos[order[i]] = i;
  std::vector<int> last(V);
  for (int v = 0; v < V; ++v) last[v] = pos[v];
  for (size_t n = 0; n < p.edges.size(); ++n) {
    int at = -1;
    std::vector<int> vars;
    for (const auto& e : p.edges[n]) vars.push_back(e.var);
    if (p.node_var[n] >= 0) vars.push_back(p.node_var[n]);
    for (int v : vars) at = std::max(at, pos[v]);
    for (int v : vars) last[v] = std::max(last[v], at);
  }
  // Variable v is in the table from pos[v] through last[v].
  std::vector<double> delta(V + 1, 0);
  for (int v = 0; v < V; ++v) {
    double w = std::log2(static_cast<double>(std::max(1, p.domain[v])));
    delta[pos[v]] += w;
    delta[last[v] + 1] -= w;
  }
  double cur = 0, best = 0;
  for (int i = 0; i < V; ++i) best = std::max(best, cur += delta[i]);
  return best;
}

namespace {
// A node's cost over its own distinct variables, as a dense table.
struct Factor {
  NodeId node;
  std::vector<int> vars;   // distinct, in any order
  std::vector<double> table;  // mixed radix over vars, last var least significant
};

struct Step {  // one elimination: var `var` minimised out of a table over `vars`
  int var;
  std::vector<int> vars;   // remaining variables, table order
  std::vector<uint8_t> arg;
};
}  // namespace

CutSolution solve_one_cut_dp(const CutProblem& p, const std::vector<int>& order, int64_t max_states) {
  const int V = p.num_vars();
  const int N = static_cast<int>(p.edges.size());
  std::vector<int> pos(V);
  for (int i = 0; i < V; ++i) pos[order[i]] = i;

  // Factors, each attached to the position of its last variable.
  std::vector<std::vector<int>> factors_at(V);
  std::vector<Factor> factors;
  std::vector<int> last_use(V);
  for (int v = 0; v < V; ++v) last_use[v] = pos[v];
  std::vector<int> value(V, 0);
  for (NodeId n = 0; n < N; ++n) {
    Factor f;
    f.node = n;
    for (const auto& e : p.edges[n]) f.vars.push_back(e.var);
    if (p.node_var[n] >= 0) f.vars.push_back(p.node_var[n]);
    std::sort(f.vars.begin(), f.vars.end());
    f.vars.erase(std::unique(f.vars.begin(), f.vars.end()), f.vars.end());
    int64_t size = 1;
    for (int v : f.vars) {
      size *= p.domain[v];
      if (size > max_states) fail("node ", n, " touches too many tensors for the DP (", size, " tiling combinations)");
    }
    f.table.resize(size);
    for (int64_t idx = 0; idx < size; ++idx) {
      int64_t r = idx;
      for (int i = static_cast<int>(f.vars.size()) - 1; i >= 0; --i) {
        value[f.vars[i]] = static_cast<int>(r % p.domain[f.vars[i]]);
        r /= p.domain[f.vars[i]];
      }
      f.table[idx] = p.node_cost(n, value);
    }
    int at = -1;
    for (int v : f.vars) at = std::max(at, pos[v]);
    for (int v : f.vars) last_use[v] = std::max(last_use[v], at);
    if (at >= 0) {
      factors_at[at].push_back(static_cast<int>(factors.size()));
    }
    factors.push_back(std::move(f));
  }
  double constant = 0;  // nodes without variables
  for (const Factor& f : factors)
    if (f.vars.empty()) constant += f.table[0];

  std::vector<int> active;       // table variables, last = least significant
  std::vector<double> table{0};  // cost of the best completion of each state
  std::vector<Step> steps;
  std::vector<int64_t> stride;
  auto strides = [&]() {
    stride.assign(active.size(), 1);
    for (int i = static_cast<int>(active.size()) - 2; i >= 0; --i) stride[i] = stride[i + 1] * p.domain[active[i + 1]];
  };
  for (int i = 0; i < V; ++i) {
    const int v = order[i];
    const int D = p.domain[v];
    if (static_cast<int64_t>(table.size()) * D > max_states)
      fail("the DP state grew past ", max_states, " entries (", active.size() + 1,
           " tensors shared between BFS levels); the graph is too wide for the exact search");
    std::vector<double> grown(table.size() * D);
    for (size_t s = 0; s < table.size(); ++s)
      for (int x = 0; x < D; ++x) grown[s * D + x] = table[s];
    table.swap(grown);
    active.push_back(v);
    strides();
    for (int fi : factors_at[i]) {
      const Factor& f = factors[fi];
      std::vector<int64_t> st(f.vars.size()), fst(f.vars.size());
      int64_t m = 1;
      for (int j = static_cast<int>(f.vars.size()) - 1; j >= 0; --j) {
        fst[j] = m;
        m *= p.domain[f.vars[j]];
        st[j] = stride[std::find(active.begin(), active.end(), f.vars[j]) - active.begin()];
      }
      for (size_t s = 0; s < table.size(); ++s) {
        int64_t fidx = 0;
        for (size_t j = 0; j < f.vars.size(); ++j) fidx += (static_cast<int64_t>(s) / st[j] % p.domain[f.vars[j]]) * fst[j];
        table[s] += f.table[fidx];
      }
    }
    // Minimise out every variable no later node reads.
    for (size_t a = 0; a < active.size();) {
      int u = active[a];
      if (last_use[u] > i) {
        ++a;
        continue;
      }
      const int64_t Du = p.domain[u], low = stride[a], high = static_cast<int64_t>(table.size()) / (Du * low);
      Step step;
      step.var = u;
      std::vector<double> smaller(high * low);
      step.arg.resize(high * low);
      for (int64_t h = 0; h < high; ++h)
        for (int64_t l = 0; l < low; ++l) {
          double best = kInfCost;
          int arg = 0;
          for (int64_t x = 0; x < Du; ++x) {
            double c = table[(h * Du + x) * low + l];
            if (c < best) best = c, arg = static_cast<int>(x);
          }
          smaller[h * low + l] = best;
          step.arg[h * low + l] = static_cast<uint8_t>(arg);
        }
      table.swap(smaller);
      active.erase(active.begin() + a);
      strides();
      step.vars = active;
      steps.push_back(std::move(step));
    }
  }
  CutSolution sol;
  sol.cost = table[0] + constant;
  sol.value.assign(V, 0);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    int64_t idx = 0;
    for (int u : it->vars) idx = idx * p.domain[u] + sol.value[u];
    sol.value[it->var] = it->arg[idx];
  }
  return sol;
}

}  // namespace autotile
