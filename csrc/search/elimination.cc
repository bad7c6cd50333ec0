#include "search/elimination.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "util/error.h"

namespace autotile {

int FactorGraph::add_var(int d) {
  if (d < 1) fail("internal: variable with an empty domain");
  domain.push_back(d);
  return static_cast<int>(domain.size()) - 1;
}

void FactorGraph::add_factor(std::initializer_list<int> vs, const std::vector<double>& table) {
  if (vs.size() == 0) {
    constant += table.at(0);
    return;
  }
  vars.insert(vars.end(), vs.begin(), vs.end());
  var_start.push_back(static_cast<int>(vars.size()));
  tables.insert(tables.end(), table.begin(), table.end());
  table_start.push_back(static_cast<int64_t>(tables.size()));
}

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
/// Entries of the tables kept for reuse after their factor is consumed (8 bytes each: 128 MiB).
constexpr int64_t kRetainEntries = int64_t{1} << 24;
/// Tables of whole numbers below this (bytes) are shifted to a minimum of 0, exactly.
constexpr double kExactBelow = 1125899906842624.0;  // 2^50

// Removes `x` from the sorted vector `v` (if present).
void erase_sorted(std::vector<int>& v, int x) {
  auto it = std::lower_bound(v.begin(), v.end(), x);
  if (it != v.end() && *it == x) v.erase(it);
}

// Merges the sorted `add` (minus `skip`) into the sorted `v`.
void merge_sorted(std::vector<int>& v, const int* add, const int* add_end, int skip, std::vector<int>& tmp) {
  tmp.clear();
  auto i = v.begin();
  while (i != v.end() || add != add_end) {
    if (add != add_end && *add == skip) {
      ++add;
      continue;
    }
    if (add == add_end || (i != v.end() && *i < *add)) {
      tmp.push_back(*i++);
    } else if (i == v.end() || *add < *i) {
      tmp.push_back(*add++);
    } else {
      tmp.push_back(*i++);
      ++add;
    }
  }
  v.swap(tmp);
}

// Variables by (weight, priority, id), smallest first, each once: the weights change as the
// interaction graph does (a binary heap of keys, with each variable's place in it).
class VarHeap {
 public:
  VarHeap(const std::vector<double>& weight, const std::vector<int64_t>& priority) {
    const int V = static_cast<int>(weight.size());
    heap_.resize(V);
    at_.resize(V);
    for (int v = 0; v < V; ++v) heap_[v] = Key{weight[v], priority.empty() ? v : priority[v], v}, at_[v] = v;
    for (int i = V / 2 - 1; i >= 0; --i) down(i);
  }
  bool empty() const { return heap_.empty(); }
  // The smallest variable and its weight.
  int top() const { return heap_[0].v; }
  double top_weight() const { return heap_[0].w; }
  void pop() {
    at_[heap_[0].v] = -1;
    const Key last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) heap_[0] = last, down(0);
  }
  // Gives `v` (in the heap) the weight `w`.
  void set(int v, double w) {
    const int i = at_[v];
    const double old = heap_[i].w;
    heap_[i].w = w;
    if (w < old) up(i);
    else if (old < w) down(i);
  }

 private:
  struct Key {
    double w;
    int64_t p;
    int v;
    bool operator<(const Key& o) const { return w != o.w ? w < o.w : p != o.p ? p < o.p : v < o.v; }
  };
  void up(int i) {
    const Key k = heap_[i];
    while (i > 0 && k < heap_[(i - 1) / 2]) {
      heap_[i] = heap_[(i - 1) / 2], at_[heap_[i].v] = i;
      i = (i - 1) / 2;
    }
    heap_[i] = k, at_[k.v] = i;
  }
  void down(int i) {
    const Key k = heap_[i];
    const int n = static_cast<int>(heap_.size());
    for (;;) {
      int c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && heap_[c + 1] < heap_[c]) ++c;
      if (!(heap_[c] < k)) break;
      heap_[i] = heap_[c], at_[heap_[i].v] = i;
      i = c;
    }
    heap_[i] = k, at_[k.v] = i;
  }
  std::vector<Key> heap_;
  std::vector<int> at_;
};

// One elimination, kept for reading the values back: `var` given the values of its scope
// (scopes[scope_begin, scope_end), sorted).
struct Step {
  int var;
  int scope_begin, scope_end;
  std::shared_ptr<const std::vector<uint16_t>> arg;  // mixed radix over the scope, last fastest
};

// A factor during the elimination: its variables (vars[begin, end)), its table shared with
// equal factors, and the id of its content (equal ids: equal tables over variables of equal
// domains, position by position).
struct LiveFactor {
  int begin, end;
  std::shared_ptr<const double> table;  // its entries (a vector's, or a run of FactorGraph::tables)
  int content = -1;
};

// Hash of the key of an elimination (a list of ids).
struct StepKeyHash {
  size_t operator()(const std::vector<int>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// True when every finite entry is a whole number below kExactBelow (bytes): such tables are
// summed exactly, so shifting them by whole numbers changes no comparison.
bool whole_numbers(const double* t, const double* end) {
  for (; t != end; ++t) {
    const double x = *t;
    if (x != kInf && !(std::abs(x) < kExactBelow && x == static_cast<double>(static_cast<int64_t>(x)))) return false;
  }
  return true;
}

// True when the factor graph's tables are whole numbers (whole_numbers) whose largest entries,
// one per factor, add up (twice over: shifted messages span up to a max minus a min) to less
// than 2^53: then every sum the elimination forms, shifted or not, is exact.
bool exact_sums(const FactorGraph& fg) {
  double bound = 0;
  for (int f = 0; f < fg.num_factors(); ++f) {  // (one pass: whole_numbers and the largest entry)
    double largest = 0;
    for (int64_t i = fg.table_start[f]; i < fg.table_start[f + 1]; ++i) {
      const double x = fg.tables[i];
      if (x == kInf) continue;
      if (!(std::abs(x) < kExactBelow && x == static_cast<double>(static_cast<int64_t>(x)))) return false;
      largest = std::max(largest, std::abs(x));
    }
    bound += 2 * largest;
  }
  return bound < 9007199254740992.0;  // 2^53
}

// Subtracts the smallest entry of a table of whole numbers (whole_numbers) from every entry
// and returns it (0, and the table unchanged, when that is 0 or infinite).
double shift_to_zero(double* t, double* end) {
  double low = kInf;
  for (const double* x = t; x != end; ++x) low = std::min(low, *x);
  if (low == kInf || low == 0) return 0;
  for (double* x = t; x != end; ++x) *x -= low;
  return low;
}

// Content ids of tables: equal tables over equal domains (bit for bit) get one id and share one
// copy, kept here while the budget of kRetainEntries entries lasts (a table not kept gets an id
// of its own). A model that repeats a layer repeats its terms, and, once shifted to a minimum
// of 0, the messages carried from one layer into the next repeat too.
class Contents {
 public:
  // The id of `*t`, a table of `size` entries over variables of domains dom[0, s); *t becomes
  // the kept copy when there is an equal one.
  int intern(const int* dom, int s, int64_t size, std::shared_ptr<const double>* t) {
    const double* x = t->get();
    uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(s);
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (int j = 0; j < s; ++j) mix(static_cast<uint64_t>(dom[j]));
    for (int64_t i = 0; i < size; ++i) {
      uint64_t bits;
      std::memcpy(&bits, x + i, sizeof bits);
      mix(bits ^ (bits >> 29));
    }
    auto& bucket = kept_[h];
    for (const Kept& k : bucket)
      if (k.dom.size() == static_cast<size_t>(s) && std::equal(dom, dom + s, k.dom.begin()) &&
          std::memcmp(k.table.get(), x, size * sizeof(double)) == 0) {  // equal domains: equal sizes
        *t = k.table;
        return k.id;
      }
    const int id = next_++;
    if (entries_ + size <= kRetainEntries) {
      entries_ += size;
      bucket.push_back(Kept{std::vector<int>(dom, dom + s), *t, id});
    }
    return id;
  }
  // A new id (a table not compared with others).
  int fresh() { return next_++; }

 private:
  struct Kept {
    std::vector<int> dom;
    std::shared_ptr<const double> table;
    int id;
  };
  std::unordered_map<uint64_t, std::vector<Kept>> kept_;
  int next_ = 0;
  int64_t entries_ = 0;
};

// What one elimination computes: the new table (shifted by `shift`) and, per entry, the value
// of the variable.
struct StepResult {
  std::weak_ptr<const double> out;  // alive while a factor or the contents hold it
  std::shared_ptr<const std::vector<uint16_t>> arg;
  int content = -1;
  double shift = 0;
};

// Buffers of min_sum, kept across calls.
struct MinSumScratch {
  std::vector<int64_t> in_block;
  std::vector<int> digit;
  std::vector<double> acc;
};

// min over v of the sum of the incident factors, at every value of the scope (the first value
// of v on ties). fstride[i * (s + 1) + j]: factor i's stride for scope var j (j = s: v). For
// each value of v the sum is built factor by factor over the whole table (simple loops over a
// block of the trailing scope variables), each entry adding the factors in their order, as one
// loop per entry would: the same bits.
void min_sum(const std::vector<const double*>& tables, const std::vector<int64_t>& fstride, const std::vector<int>& dom,
             int Dv, int64_t out_size, std::vector<double>* out, std::vector<uint16_t>* arg, MinSumScratch* scratch) {
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
  std::vector<int64_t>& in_block = scratch->in_block;  // [factor][block entry] offset
  in_block.resize(static_cast<size_t>(m) * block);
  std::vector<int>& digit = scratch->digit;
  digit.assign(s, 0);
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
  std::vector<double>& acc = scratch->acc;
  if (static_cast<int64_t>(acc.size()) < out_size) acc.resize(out_size);
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
                            const std::function<std::string(int)>& describe, bool report_width) {
  const int V = static_cast<int>(fg.domain.size());
  for (int d : fg.domain)
    if (d > 65535) fail("internal: a search variable has ", d, " values");
  std::vector<double> logd(V);
  for (int v = 0; v < V; ++v) logd[v] = std::log2(static_cast<double>(fg.domain[v]));
  // AUTOTILE_SEARCH_REUSE=off computes every table, unshifted (for tests: the same values).
  const char* reuse_env = std::getenv("AUTOTILE_SEARCH_REUSE");
  const bool reuse = !(reuse_env && std::string(reuse_env) == "off");

  EliminationResult res;
  res.cost = fg.constant;
  // Tables of whole numbers (bytes; not with a memory term) are shifted to a minimum of 0, the
  // shift added to the cost: the sums stay exact, so every comparison and the cost are the
  // same, and terms that differ by a constant share a content id.
  const int F = fg.num_factors();
  bool shift = reuse && exact_sums(fg);

  // Equal tables share one content id (and one copy): an elimination whose incident factors
  // have the same contents in the same places as an earlier one's gives the same table, which
  // is then reused. The given tables stay in one array, which lives while one of them does.
  Contents contents;
  const auto given = std::make_shared<std::vector<double>>(std::move(fg.tables));
  std::vector<int> vars = std::move(fg.vars);  // the factors' variables, factor after factor
  std::vector<LiveFactor> factors;
  factors.reserve(static_cast<size_t>(F) * 2);
  std::vector<int> dom;
  for (int f = 0; f < F; ++f) {
    double* t = given->data() + fg.table_start[f];
    double* t_end = given->data() + fg.table_start[f + 1];
    if (shift) res.cost += shift_to_zero(t, t_end);
    dom.clear();
    for (int i = fg.var_start[f]; i < fg.var_start[f + 1]; ++i) dom.push_back(fg.domain[vars[i]]);
    std::shared_ptr<const double> table(given, t);
    const int content = contents.intern(dom.data(), static_cast<int>(dom.size()), t_end - t, &table);
    factors.push_back(LiveFactor{fg.var_start[f], fg.var_start[f + 1], std::move(table), content});
  }
  std::vector<char> alive(factors.size(), 1);
  std::vector<std::vector<int>> var_factors(V), adj(V);
  {
    // Room for each variable's factors and neighbours (one allocation each, with some to
    // spare for the factors the elimination adds).
    std::vector<int> uses(V, 0), near(V, 0);
    for (const LiveFactor& f : factors)
      for (int i = f.begin; i < f.end; ++i) ++uses[vars[i]], near[vars[i]] += f.end - f.begin - 1;
    for (int v = 0; v < V; ++v) var_factors[v].reserve(uses[v] + 2), adj[v].reserve(near[v]);
  }
  for (size_t f = 0; f < factors.size(); ++f) {
    for (int i = factors[f].begin; i < factors[f].end; ++i) {
      const int v = vars[i];
      var_factors[v].push_back(static_cast<int>(f));
      for (int j = factors[f].begin; j < factors[f].end; ++j)
        if (vars[j] != v) adj[v].push_back(vars[j]);
    }
  }
  for (auto& a : adj) {
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
  }

  // Greedy min-weight order: the variable whose table is smallest (log2 entries), ties by
  // priority, then id.
  auto weight = [&](int v) {
    double w = logd[v];
    for (int u : adj[v]) w += logd[u];
    return w;
  };
  std::vector<double> weights(V);
  for (int v = 0; v < V; ++v) weights[v] = weight(v);
  VarHeap heap(weights, priority);

  // First the order alone: it depends on the interaction graph only, not on the tables, so a
  // graph too wide for the exact search is refused before any table is built (an unrolled
  // LSTM built tables of up to 2^26 entries for seconds before meeting the one over the limit).
  std::vector<Step> steps;
  steps.reserve(V);
  std::vector<int> scopes;  // the steps' scopes, step after step
  std::vector<int> tmp;
  while (!heap.empty()) {
    const double w = heap.top_weight();
    const int v = heap.top();
    heap.pop();
    res.log2_width = std::max(res.log2_width, w);
    const std::vector<int>& scope = adj[v];  // sorted: the new factor's variables
    double size = 1;
    for (int u : scope) size *= fg.domain[u];
    if (size * fg.domain[v] > static_cast<double>(max_states)) {
      if (report_width) {
        res.too_wide = true;
        return res;
      }
      std::string others;
      for (size_t i = 0; i < scope.size() && i < 8; ++i) others += (i ? ", " : "") + describe(scope[i]);
      if (scope.size() > 8) others += ", ...";
      std::ostringstream msg;
      msg << "the exact search would need a table of " << size * fg.domain[v] << " entries (limit " << max_states
          << ") to eliminate " << describe(v) << ", which interacts with " << scope.size() << " other choices ("
          << others << "); the graph is too wide for the exact search";
      throw WidthError(msg.str());
    }
    const int begin = static_cast<int>(scopes.size());
    scopes.insert(scopes.end(), scope.begin(), scope.end());
    steps.push_back(Step{v, begin, static_cast<int>(scopes.size()), {}});
    // The interaction graph loses v; its neighbours become one clique.
    for (int u : scope) {
      erase_sorted(adj[u], v);
      merge_sorted(adj[u], scopes.data() + begin, scopes.data() + scopes.size(), u, tmp);
      heap.set(u, weight(u));
    }
    std::vector<int>().swap(adj[v]);
  }

  // Then the tables, in that order; an elimination seen before (same contents in the same
  // places) takes the earlier one's table and values.
  std::unordered_map<std::vector<int>, StepResult, StepKeyHash> done_steps;
  std::vector<int> key;
  MinSumScratch scratch;
  std::vector<int> incident;
  std::vector<int64_t> fstride;
  std::vector<const double*> incident_tables;
  for (Step& step : steps) {
    const int v = step.var;
    const int* scope = scopes.data() + step.scope_begin;
    const int s = step.scope_end - step.scope_begin;
    double size = 1;
    for (int j = 0; j < s; ++j) size *= fg.domain[scope[j]];
    incident.clear();
    for (int f : var_factors[v])
      if (alive[f]) incident.push_back(f), alive[f] = 0;

    const int m = static_cast<int>(incident.size());
    const int Dv = fg.domain[v];
    dom.resize(s);
    for (int j = 0; j < s; ++j) dom[j] = fg.domain[scope[j]];
    fstride.assign(static_cast<size_t>(m) * (s + 1), 0);  // [factor][scope var..., v]
    key.clear();
    key.push_back(Dv);
    key.push_back(s);
    key.insert(key.end(), dom.begin(), dom.end());
    for (int i = 0; i < m; ++i) {
      const LiveFactor& f = factors[incident[i]];
      key.push_back(f.content);
      key.push_back(f.end - f.begin);
      int64_t stride = 1;
      for (int j = f.end - 1; j >= f.begin; --j) {
        const int u = vars[j];
        const int pos = u == v ? s : static_cast<int>(std::lower_bound(scope, scope + s, u) - scope);
        key.push_back(pos);
        fstride[static_cast<size_t>(i) * (s + 1) + pos] = stride;
        stride *= fg.domain[u];
      }
    }
    const int64_t out_size = static_cast<int64_t>(size);
    res.work += static_cast<double>(out_size) * Dv * std::max(1, m);
    if (!reuse) key.assign(1, static_cast<int>(&step - steps.data()));  // one entry per step
    auto [it, fresh] = done_steps.try_emplace(key);
    StepResult& r = it->second;
    std::shared_ptr<const double> out = r.out.lock();
    if (!out) {  // new, or its table was freed: (re)compute it
      auto table = std::make_shared<std::vector<double>>();
      auto arg = std::make_shared<std::vector<uint16_t>>();
      incident_tables.clear();
      for (int f : incident) incident_tables.push_back(factors[f].table.get());
      min_sum(incident_tables, fstride, dom, Dv, out_size, table.get(), arg.get(), &scratch);
      res.computed += static_cast<double>(out_size) * Dv * std::max(1, m);
      double* t = table->data();
      r.shift = shift && whole_numbers(t, t + out_size) ? shift_to_zero(t, t + out_size) : 0;
      out = std::shared_ptr<const double>(table, t);
      if (fresh) r.content = reuse ? contents.intern(dom.data(), s, out_size, &out) : contents.fresh();
      r.out = out;
      r.arg = std::move(arg);
    }
    res.cost += r.shift;
    step.arg = r.arg;
    for (int f : incident) factors[f].table.reset();  // free the consumed tables (unless shared)
    if (s == 0) {
      res.cost += out.get()[0];
      continue;
    }
    const int id = static_cast<int>(factors.size());
    const int begin = static_cast<int>(vars.size());
    vars.insert(vars.end(), scope, scope + s);
    factors.push_back(LiveFactor{begin, static_cast<int>(vars.size()), std::move(out), r.content});
    alive.push_back(1);
    for (int j = 0; j < s; ++j) var_factors[scope[j]].push_back(id);
  }

  // Read the values back in reverse elimination order: every scope is decided by then.
  res.value.assign(V, 0);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    int64_t idx = 0;
    for (int j = it->scope_begin; j < it->scope_end; ++j) idx = idx * fg.domain[scopes[j]] + res.value[scopes[j]];
    res.value[it->var] = (*it->arg)[idx];
  }
  return res;
}

}  // namespace autotile
