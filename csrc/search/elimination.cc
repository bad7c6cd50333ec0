#include "search/elimination.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <queue>
#include <sstream>
#include <tuple>
#include <unordered_map>

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
/// Entries of consumed tables kept for reuse (8 bytes each: 128 MiB).
constexpr int64_t kRetainEntries = int64_t{1} << 24;

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
  std::vector<int> scope;                                 // sorted
  std::shared_ptr<const std::vector<uint16_t>> arg;       // mixed radix over scope, last fastest
};

// A factor during the elimination: its table shared with equal factors, and the id of its
// content (equal ids: equal tables over variables of equal domains, position by position).
struct LiveFactor {
  std::vector<int> vars;
  std::shared_ptr<const std::vector<double>> table;
  int content = -1;
};

template <typename T>
void put(std::string& key, T v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// What one elimination computes: the new table and, per entry, the value of the variable.
struct StepResult {
  std::weak_ptr<const std::vector<double>> out;  // alive while a factor or `retained` holds it
  std::shared_ptr<const std::vector<uint16_t>> arg;
  int content = -1;
};

// min over v of the sum of the incident factors, at every value of the scope (the first value
// of v on ties). fstride[i * (s + 1) + j]: factor i's stride for scope var j (j = s: v). For
// each value of v the sum is built factor by factor over the whole table (simple loops over a
// block of the trailing scope variables), each entry adding the factors in their order, as one
// loop per entry would: the same bits.
void min_sum(const std::vector<const double*>& tables, const std::vector<int64_t>& fstride, const std::vector<int>& dom,
             int Dv, int64_t out_size, std::vector<double>* out, std::vector<uint16_t>* arg) {
  const int m = static_cast<int>(tables.size()), s = static_cast<int>(dom.size());
  out->assign(out_size, kInf);
  arg->assign(out_size, 0);
  if (m == 0) {  // nothing depends on v: every sum is 0, reached first at v = 0
    out->assign(out_size, 0.0);
    return;
  }
  auto stride = [&](int i, int j) { return fstride[static_cast<size_t>(i) * (s + 1) + j]; };
  // Scope variables [split, s) form the inner block (up to kBlock entries, at least the last).
  constexpr int64_t kBlock = 256;
  int split = s;
  int64_t block = 1;
  while (split > 0 && (block * dom[split - 1] <= kBlock || split == s)) block *= dom[--split];
  const int64_t outer_size = out_size / block;
  std::vector<int64_t> in_block(static_cast<size_t>(m) * block);  // [factor][block entry] offset
  std::vector<int> digit(s, 0);
  for (int i = 0; i < m; ++i) {
    std::fill(digit.begin(), digit.end(), 0);
    int64_t off = 0;
    for (int64_t d = 0; d < block; ++d) {
      in_block[static_cast<size_t>(i) * block + d] = off;
      for (int j = s - 1; j >= split; --j) {
        off += stride(i, j);
        if (++digit[j] < dom[j]) break;
        off -= stride(i, j) * digit[j];
        digit[j] = 0;
      }
    }
  }
  std::vector<double> acc(out_size);
  double* o = out->data();
  uint16_t* a = arg->data();
  for (int x = 0; x < Dv; ++x) {
    for (int i = 0; i < m; ++i) {
      const double* t = tables[i] + x * stride(i, s);
      const int64_t* bo = in_block.data() + static_cast<size_t>(i) * block;
      std::fill(digit.begin(), digit.begin() + split, 0);
      int64_t off = 0;
      double* c = acc.data();
      for (int64_t outer = 0; outer < outer_size; ++outer, c += block) {
        const double* b = t + off;
        if (i == 0) {
          for (int64_t d = 0; d < block; ++d) c[d] = 0.0 + b[bo[d]];
        } else {
          for (int64_t d = 0; d < block; ++d) c[d] += b[bo[d]];
        }
        for (int j = split - 1; j >= 0; --j) {
          off += stride(i, j);
          if (++digit[j] < dom[j]) break;
          off -= stride(i, j) * digit[j];
          digit[j] = 0;
        }
      }
    }
    for (int64_t idx = 0; idx < out_size; ++idx)
      if (acc[idx] < o[idx]) o[idx] = acc[idx], a[idx] = static_cast<uint16_t>(x);
  }
}
}  // namespace

EliminationResult eliminate(FactorGraph fg, const std::vector<int64_t>& priority, int64_t max_states,
                            const std::function<std::string(int)>& describe) {
  const int V = static_cast<int>(fg.domain.size());
  for (int d : fg.domain)
    if (d > 65535) fail("internal: a search variable has ", d, " values");
  std::vector<double> logd(V);
  for (int v = 0; v < V; ++v) logd[v] = std::log2(static_cast<double>(fg.domain[v]));

  // Equal tables share one content id (and one copy): a model that repeats a layer has the
  // same terms in every copy, and an elimination whose incident factors have the same contents
  // in the same places as an earlier one's gives the same table, which is then reused.
  std::unordered_map<std::string, int> content_of;  // key -> content id
  std::string key;
  int next_content = 0;
  std::vector<LiveFactor> factors;
  factors.reserve(fg.factors.size() * 2);
  std::unordered_map<std::string, std::shared_ptr<const std::vector<double>>> table_of;
  for (FactorGraph::Factor& f : fg.factors) {
    key.clear();
    put(key, static_cast<int>(f.vars.size()));
    for (int v : f.vars) put(key, fg.domain[v]);
    key.append(reinterpret_cast<const char*>(f.table.data()), f.table.size() * sizeof(double));
    auto [it, fresh] = content_of.emplace(key, next_content);
    if (fresh) ++next_content;
    auto& shared = table_of[key];
    if (!shared) shared = std::make_shared<const std::vector<double>>(std::move(f.table));
    factors.push_back(LiveFactor{std::move(f.vars), shared, it->second});
  }
  table_of.clear();
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

  // Then the tables, in that order; an elimination seen before (same contents in the same
  // places) takes the earlier one's table and values. AUTOTILE_SEARCH_REUSE=off computes every
  // table (for tests: the same values either way).
  const char* reuse_env = std::getenv("AUTOTILE_SEARCH_REUSE");
  const bool reuse = !(reuse_env && std::string(reuse_env) == "off");
  std::unordered_map<std::string, StepResult> done_steps;
  // Tables kept for reuse after their factor is consumed, up to kRetainEntries entries in all
  // (beyond that a table lives as long as its factor, as without reuse).
  std::vector<std::shared_ptr<const std::vector<double>>> retained;
  int64_t retained_entries = 0;
  std::vector<int> incident, dom;
  std::vector<int64_t> fstride;
  std::vector<const double*> tables;
  for (Step& step : steps) {
    const int v = step.var;
    const std::vector<int>& scope = step.scope;
    double size = 1;
    for (int u : scope) size *= fg.domain[u];
    incident.clear();
    for (int f : var_factors[v])
      if (alive[f]) incident.push_back(f), alive[f] = 0;

    const int m = static_cast<int>(incident.size()), s = static_cast<int>(scope.size());
    const int Dv = fg.domain[v];
    dom.resize(s);
    for (int j = 0; j < s; ++j) dom[j] = fg.domain[scope[j]];
    fstride.assign(static_cast<size_t>(m) * (s + 1), 0);  // [factor][scope var..., v]
    key.clear();
    put(key, Dv);
    put(key, s);
    for (int d : dom) put(key, d);
    for (int i = 0; i < m; ++i) {
      const auto& f = factors[incident[i]];
      put(key, f.content);
      put(key, static_cast<int>(f.vars.size()));
      int64_t stride = 1;
      for (int j = static_cast<int>(f.vars.size()) - 1; j >= 0; --j) {
        int u = f.vars[j];
        int pos = u == v ? s : static_cast<int>(std::lower_bound(scope.begin(), scope.end(), u) - scope.begin());
        put(key, pos);
        fstride[static_cast<size_t>(i) * (s + 1) + pos] = stride;
        stride *= fg.domain[u];
      }
    }
    const int64_t out_size = static_cast<int64_t>(size);
    res.work += static_cast<double>(out_size) * Dv * std::max(1, m);
    if (!reuse) key.clear(), put(key, static_cast<int64_t>(&step - steps.data()));  // one entry per step
    auto [it, fresh] = done_steps.try_emplace(key);
    StepResult& r = it->second;
    std::shared_ptr<const std::vector<double>> out = r.out.lock();
    if (!out) {  // new, or its table was freed: (re)compute it
      auto table = std::make_shared<std::vector<double>>();
      auto arg = std::make_shared<std::vector<uint16_t>>();
      tables.clear();
      for (int f : incident) tables.push_back(factors[f].table->data());
      min_sum(tables, fstride, dom, Dv, out_size, table.get(), arg.get());
      res.computed += static_cast<double>(out_size) * Dv * std::max(1, m);
      out = std::move(table);
      if (retained_entries + out_size <= kRetainEntries) retained.push_back(out), retained_entries += out_size;
      r.out = out;
      r.arg = std::move(arg);
      if (fresh) r.content = next_content++;
    }
    step.arg = r.arg;
    for (int f : incident) factors[f].table.reset();  // free the consumed tables (unless shared)
    if (scope.empty()) {
      res.cost += (*out)[0];
      continue;
    }
    int id = static_cast<int>(factors.size());
    factors.push_back(LiveFactor{scope, std::move(out), r.content});
    alive.push_back(1);
    for (int u : scope) var_factors[u].push_back(id);
  }

  // Read the values back in reverse elimination order: every scope is decided by then.
  res.value.assign(V, 0);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    int64_t idx = 0;
    for (int u : it->scope) idx = idx * fg.domain[u] + res.value[u];
    res.value[it->var] = (*it->arg)[idx];
  }
  return res;
}

}  // namespace autotile
