#include "search/elimination.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <sstream>
#include <tuple>

#include "util/error.h"

namespace autotile {

int FactorGraph::add_var(int d) {
  if (d < 1) fail("internal: variable with an empty domain");
  domain.push_back(d);
  return static_cast<int>(domain.size()) - 1;
}

void FactorGraph::add_factor(std::vector<int> vars, std::vector<double> table) {
  if (vars.empty()) {
    constant += table.at(0);
    return;
  }
  factors.push_back(Factor{std::move(vars), std::move(table)});
}

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// Removes `x` from the sorted vector `v` (if present).
void erase_sorted(std::vector<int>& v, int x) {
  auto it = std::lower_bound(v.begin(), v.end(), x);
  if (it != v.end() && *it == x) v.erase(it);
}

// Merges the sorted `add` (minus `skip`) into the sorted `v`.
void merge_sorted(std::vector<int>& v, const std::vector<int>& add, int skip, std::vector<int>& tmp) {
  tmp.clear();
  size_t i = 0, j = 0;
  while (i < v.size() || j < add.size()) {
    if (j < add.size() && add[j] == skip) {
      ++j;
      continue;
    }
    if (j == add.size() || (i < v.size() && v[i] < add[j])) {
      tmp.push_back(v[i++]);
    } else if (i == v.size() || add[j] < v[i]) {
      tmp.push_back(add[j++]);
    } else {
      tmp.push_back(v[i++]);
      ++j;
    }
  }
  v.swap(tmp);
}

// One elimination, kept for reading the values back: `var` given the values of `scope`.
struct Step {
  int var;
  std::vector<int> scope;      // sorted
  std::vector<uint16_t> arg;   // mixed radix over scope, last fastest
};
}  // namespace

EliminationResult eliminate(const FactorGraph& fg, const std::vector<int64_t>& priority, int64_t max_states,
                            const std::function<std::string(int)>& describe) {
  const int V = static_cast<int>(fg.domain.size());
  for (int d : fg.domain)
    if (d > 65535) fail("internal: a search variable has ", d, " values");
  std::vector<double> logd(V);
  for (int v = 0; v < V; ++v) logd[v] = std::log2(static_cast<double>(fg.domain[v]));

  std::vector<FactorGraph::Factor> factors = fg.factors;
  std::vector<char> alive(factors.size(), 1);
  std::vector<std::vector<int>> var_factors(V), adj(V);
  for (size_t f = 0; f < factors.size(); ++f) {
    for (int v : factors[f].vars) {
      var_factors[v].push_back(static_cast<int>(f));
      for (int u : factors[f].vars)
        if (u != v) adj[v].push_back(u);
    }
  }
  for (auto& a : adj) {
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
  }

  // Greedy min-weight order with lazy deletion: entries carry the stamp they were made at.
  auto weight = [&](int v) {
    double w = logd[v];
    for (int u : adj[v]) w += logd[u];
    return w;
  };
  using Entry = std::tuple<double, int64_t, int, int>;  // weight, priority, var, stamp
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  std::vector<int> stamp(V, 0);
  std::vector<char> done(V, 0);
  auto prio = [&](int v) { return priority.empty() ? static_cast<int64_t>(v) : priority[v]; };
  for (int v = 0; v < V; ++v) queue.emplace(weight(v), prio(v), v, 0);

  EliminationResult res;
  res.cost = fg.constant;
  // First the order alone: it depends on the interaction graph only, not on the tables, so a
  // graph too wide for the exact search is refused before any table is built (an unrolled
  // LSTM built tables of up to 2^26 entries for seconds before meeting the one over the limit).
  std::vector<Step> steps;
  steps.reserve(V);
  std::vector<int> tmp;
  while (!queue.empty()) {
    auto [w, pr, v, st] = queue.top();
    queue.pop();
    if (done[v] || st != stamp[v]) continue;
    done[v] = 1;
    res.log2_width = std::max(res.log2_width, w);
    const std::vector<int>& scope = adj[v];  // sorted: the new factor's variables
    double size = 1;
    for (int u : scope) size *= fg.domain[u];
    if (size * fg.domain[v] > static_cast<double>(max_states)) {
      std::string others;
      for (size_t i = 0; i < scope.size() && i < 8; ++i) others += (i ? ", " : "") + describe(scope[i]);
      if (scope.size() > 8) others += ", ...";
      std::ostringstream msg;
      msg << "the exact search would need a table of " << size * fg.domain[v] << " entries (limit " << max_states
          << ") to eliminate " << describe(v) << ", which interacts with " << scope.size() << " other choices ("
          << others << "); the graph is too wide for the exact search";
      throw WidthError(msg.str());
    }
    steps.push_back(Step{v, scope, {}});
    // The interaction graph loses v; its neighbours become one clique.
    for (int u : scope) {
      erase_sorted(adj[u], v);
      merge_sorted(adj[u], scope, u, tmp);
      queue.emplace(weight(u), prio(u), u, ++stamp[u]);
    }
  }

  // Then the tables, in that order.
  std::vector<int> incident;
  std::vector<int64_t> fstride, off;
  std::vector<int> digit;
  for (Step& step : steps) {
    const int v = step.var;
    const std::vector<int>& scope = step.scope;
    double size = 1;
    for (int u : scope) size *= fg.domain[u];
    incident.clear();
    for (int f : var_factors[v])
      if (alive[f]) incident.push_back(f), alive[f] = 0;

    // New table over `scope`: min over v of the sum of the incident factors.
    const int m = static_cast<int>(incident.size()), s = static_cast<int>(scope.size());
    const int Dv = fg.domain[v];
    fstride.assign(static_cast<size_t>(m) * (s + 1), 0);  // [factor][scope var..., v]
    for (int i = 0; i < m; ++i) {
      const auto& f = factors[incident[i]];
      int64_t stride = 1;
      for (int j = static_cast<int>(f.vars.size()) - 1; j >= 0; --j) {
        int u = f.vars[j];
        int pos = u == v ? s : static_cast<int>(std::lower_bound(scope.begin(), scope.end(), u) - scope.begin());
        fstride[static_cast<size_t>(i) * (s + 1) + pos] = stride;
        stride *= fg.domain[u];
      }
    }
    const int64_t out_size = static_cast<int64_t>(size);
    res.work += static_cast<double>(out_size) * Dv * std::max(1, m);
    step.arg.assign(out_size, 0);
    std::vector<double> out(out_size);
    off.assign(m, 0);
    digit.assign(s, 0);
    for (int64_t idx = 0; idx < out_size; ++idx) {
      double best = kInf;
      int arg = 0;
      for (int x = 0; x < Dv; ++x) {
        double c = 0;
        for (int i = 0; i < m; ++i) c += factors[incident[i]].table[off[i] + x * fstride[static_cast<size_t>(i) * (s + 1) + s]];
        if (c < best) best = c, arg = x;
      }
      out[idx] = best;
      step.arg[idx] = static_cast<uint16_t>(arg);
      for (int j = s - 1; j >= 0; --j) {
        for (int i = 0; i < m; ++i) off[i] += fstride[static_cast<size_t>(i) * (s + 1) + j];
        if (++digit[j] < fg.domain[scope[j]]) break;
        for (int i = 0; i < m; ++i) off[i] -= fstride[static_cast<size_t>(i) * (s + 1) + j] * digit[j];
        digit[j] = 0;
      }
    }
    for (int f : incident) {  // free the consumed tables
      std::vector<double>().swap(factors[f].table);
    }
    if (scope.empty()) {
      res.cost += out[0];
      continue;
    }
    int id = static_cast<int>(factors.size());
    factors.push_back(FactorGraph::Factor{scope, std::move(out)});
    alive.push_back(1);
    for (int u : scope) var_factors[u].push_back(id);
  }

  // Read the values back in reverse elimination order: every scope is decided by then.
  res.value.assign(V, 0);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    int64_t idx = 0;
    for (int u : it->scope) idx = idx * fg.domain[u] + res.value[u];
    res.value[it->var] = it->arg[idx];
  }
  return res;
}

}  // namespace autotile
