#include "search/dominance.h"

#include <algorithm>
#include <cmath>

#include "search/cost_model.h"

namespace autotile {

namespace {
// The edges on each tensor variable, grouped by node: var v's are entries [start[v],
// start[v + 1]) of `node` and `edge` (node ascending, then edge), so a node's edges on v are
// one run.
struct VarUses {
  std::vector<int> start;
  std::vector<NodeId> node;
  std::vector<int> edge;

  // Calls f(n, first, last) for each node n touching v, with its edges edge[first, last).
  template <typename F>
  bool each_node(int v, F&& f) const {
    for (int i = start[v], end = start[v + 1]; i < end;) {
      int j = i + 1;
      while (j < end && node[j] == node[i]) ++j;
      if (!f(node[i], i, j)) return false;
      i = j;
    }
    return true;
  }
  bool empty(int v) const { return start[v] == start[v + 1]; }
};

VarUses uses_of(const CutProblem& p) {
  VarUses u;
  u.start.assign(p.num_vars() + 1, 0);
  for (const auto& es : p.edges)
    for (const auto& e : es) ++u.start[e.var + 1];
  for (int v = 0; v < p.num_vars(); ++v) u.start[v + 1] += u.start[v];
  u.node.resize(u.start.back());
  u.edge.resize(u.start.back());
  std::vector<int> next(u.start.begin(), u.start.end() - 1);
  for (NodeId n = 0; n < static_cast<NodeId>(p.edges.size()); ++n)
    for (int i = 0; i < static_cast<int>(p.edges[n].size()); ++i) {
      const int at = next[p.edges[n][i].var]++;
      u.node[at] = n, u.edge[at] = i;
    }
  return u;
}

// One run of flags per item (a variable's values, a node's options), in one array.
struct Flags {
  std::vector<int> start;  // item i's flags are on[start[i], start[i + 1])
  std::vector<char> on;
  // `size(i)` flags per item, all set.
  template <typename F>
  Flags(int items, F&& size) : start(items + 1, 0) {
    for (int i = 0; i < items; ++i) start[i + 1] = start[i] + static_cast<int>(size(i));
    on.assign(start.back(), 1);
  }
  char* operator[](int i) { return on.data() + start[i]; }
  const char* operator[](int i) const { return on.data() + start[i]; }
  int count(int i) const { return static_cast<int>(std::count(on.begin() + start[i], on.begin() + start[i + 1], 1)); }
};

// Sets `opts` to the options node n may take: the live ones, or (shared strategy) those its
// variable can select (the vector's storage is kept).
void live_options(const CutProblem& p, NodeId n, const char* alive, std::vector<int>& opts) {
  opts.clear();
  if (p.node_var[n] < 0) {
    for (int o = 0; o < static_cast<int>(p.options[n].size()); ++o)
      if (alive[o]) opts.push_back(o);
  } else {
    for (int o : p.node_var_option[n])
      if (o >= 0) opts.push_back(o);
    std::sort(opts.begin(), opts.end());
    opts.erase(std::unique(opts.begin(), opts.end()), opts.end());
  }
}

// True when v = r costs no more than v = x whatever the other variables are (see header).
bool dominates(const CutProblem& p, int v, const VarUses& uses, const std::vector<std::vector<int>>& opts_of, int r,
               int x) {
  const int D = p.domain[v];
  double total = 0;
  bool x_infeasible = false;
  const bool all = uses.each_node(v, [&](NodeId n, int first, int last) {
    double worst = -kInfCost;  // max over options of (cost at r - cost at x)
    for (int o : opts_of[n]) {
      double at_r = 0, at_x = 0;
      for (int i = first; i < last; ++i) {
        const auto& cost = p.edges[n][uses.edge[i]].cost;
        at_r += cost[o * D + r];
        at_x += cost[o * D + x];
      }
      if (std::isinf(at_x)) continue;  // o is unusable with v = x: nothing to match
      if (std::isinf(at_r)) return false;
      worst = std::max(worst, at_r - at_x);
    }
    if (worst == -kInfCost) {
      x_infeasible = true;  // v = x makes this node infeasible: any r is at least as good
      return true;
    }
    total += worst;
    return true;
  });
  return all && (x_infeasible || total <= 0);
}

// True when option a of node n costs no more than option b on every edge at every live value
// (then b never beats a: the node's cost function keeps its values without b).
bool option_dominates(const CutProblem& p, NodeId n, const Flags& alive, int a, int b) {
  for (const auto& e : p.edges[n]) {
    const int D = p.domain[e.var];
    for (int x = 0; x < D; ++x)
      if (alive[e.var][x] && !(e.cost[a * D + x] <= e.cost[b * D + x])) return false;
  }
  return true;
}
}  // namespace

DomainReduction reduce_domains(const CutProblem& p, Reduce what) {
  const bool every_dominated = what == Reduce::kEvery;
  const int V = p.num_vars();
  const NodeId N = static_cast<NodeId>(p.edges.size());
  const auto uses = uses_of(p);
  Flags alive(V, [&](int v) { return p.domain[v]; });
  Flags opt_alive(N, [&](int n) { return p.options[n].size(); });
  std::vector<std::vector<int>> opts_of(N);
  // Fewer options make more values dominated and fewer values more options: repeat until
  // nothing changes (each round only removes, so this ends).
  for (bool changed = what != Reduce::kNothing; changed;) {
    changed = false;
    for (NodeId n = 0; n < N; ++n) {
      const int O = static_cast<int>(p.options[n].size());
      if (every_dominated && p.node_var[n] < 0)  // a shared strategy's options are one variable's
        for (int b = O - 1; b >= 0; --b) {
          if (!opt_alive[n][b]) continue;
          for (int a = 0; a < O; ++a)
            if (a != b && opt_alive[n][a] && option_dominates(p, n, alive, a, b)) {
              opt_alive[n][b] = 0, changed = true;
              break;
            }
        }
      live_options(p, n, opt_alive[n], opts_of[n]);
    }
    for (int v = 0; v < V; ++v) {
      const int D = p.domain[v];
      // Strategy variables carry no edges; a tensor variable nobody touches keeps its domain.
      if (D == 1 || p.var_tilings[v].empty() || uses.empty(v)) continue;
      if (!every_dominated) {
        for (int y = 0; y < D; ++y) {
          bool all = true;
          for (int x = 0; x < D && all; ++x) all = x == y || dominates(p, v, uses, opts_of, y, x);
          if (all) {
            for (int x = 0; x < D; ++x) alive[v][x] = x == y;
            break;
          }
        }
        continue;
      }
      for (int x = D - 1; x >= 0; --x) {
        if (!alive[v][x]) continue;
        for (int y = 0; y < D; ++y)
          if (y != x && alive[v][y] && dominates(p, v, uses, opts_of, y, x)) {
            alive[v][x] = 0, changed = true;
            break;
          }
      }
    }
  }

  DomainReduction r;
  r.kept.resize(V);
  r.kept_options.resize(N);
  for (int v = 0; v < V; ++v) {
    r.kept[v].reserve(alive.count(v));
    for (int x = 0; x < p.domain[v]; ++x)
      if (alive[v][x]) r.kept[v].push_back(x);
  }
  for (NodeId n = 0; n < N; ++n) {
    r.kept_options[n].reserve(opt_alive.count(n));
    for (int o = 0; o < static_cast<int>(p.options[n].size()); ++o)
      if (opt_alive[n][o]) r.kept_options[n].push_back(o);
  }
  r.count(p);
  return r;
}

void DomainReduction::count(const CutProblem& p) {
  pruned_vars = fixed_vars = pruned_nodes = 0;
  for (int v = 0; v < p.num_vars(); ++v)
    if (static_cast<int>(kept[v].size()) < p.domain[v]) {
      ++pruned_vars;
      if (kept[v].size() == 1) ++fixed_vars;
    }
  for (size_t n = 0; n < kept_options.size(); ++n)
    if (kept_options[n].size() < p.options[n].size()) ++pruned_nodes;
}

CutProblem restrict_domains(const CutProblem& p, const DomainReduction& r) {
  CutProblem q = p;
  for (int v = 0; v < p.num_vars(); ++v) {
    if (static_cast<int>(r.kept[v].size()) == p.domain[v]) continue;
    q.domain[v] = static_cast<int>(r.kept[v].size());
    q.var_tilings[v].clear();
    for (int x : r.kept[v]) q.var_tilings[v].push_back(p.var_tilings[v][x]);
  }
  for (NodeId n = 0; n < static_cast<NodeId>(p.edges.size()); ++n) {
    const auto& opts = r.kept_options[n];
    const int Oq = static_cast<int>(opts.size());
    const bool all_opts = Oq == static_cast<int>(p.options[n].size());
    if (!all_opts) {
      q.options[n].clear();
      for (int o : opts) q.options[n].push_back(p.options[n][o]);
    }
    for (auto& e : q.edges[n]) {
      const int D = p.domain[e.var], Dq = q.domain[e.var];
      if (D == Dq && all_opts) continue;
      std::vector<double> cost(static_cast<size_t>(Oq) * Dq);
      for (int o = 0; o < Oq; ++o)
        for (int j = 0; j < Dq; ++j) cost[o * Dq + j] = e.cost[opts[o] * D + r.kept[e.var][j]];
      e.cost.swap(cost);
    }
  }
  return q;
}

double expand_and_polish(const CutProblem& p, const DomainReduction& r, std::vector<int>* value) {
  std::vector<int>& val = *value;
  std::vector<int> polish;  // pruned variables whose value is not their first
  for (int v = 0; v < p.num_vars(); ++v) {
    val[v] = r.kept[v][val[v]];
    if (static_cast<int>(r.kept[v].size()) != p.domain[v] && val[v] != 0) polish.push_back(v);
  }
  if (polish.empty()) return 0;
  const VarUses uses = uses_of(p);
  double change = 0;
  std::vector<int> opt;
  for (int v : polish) {
    const int D = p.domain[v], chosen = val[v];
    const int first = uses.start[v], last = uses.start[v + 1];
    double before = 0;  // the nodes' costs
    opt.clear();
    uses.each_node(v, [&](NodeId n, int, int) {
      int o = -1;
      before += p.node_cost(n, val, &o);
      opt.push_back(o);
      return true;
    });
    // v's own edges under the chosen options at value x.
    auto edges_at = [&](int x) {
      double c = 0;
      size_t u = 0;
      for (int i = first; i < last; ++i) {
        if (i > first && uses.node[i] != uses.node[i - 1]) ++u;
        c += p.edges[uses.node[i]][uses.edge[i]].cost[opt[u] * D + x];
      }
      return c;
    };
    const double at_chosen = edges_at(chosen);
    for (int x = 0; x < chosen; ++x) {
      if (!(edges_at(x) <= at_chosen + 1e-12 * std::abs(at_chosen))) continue;
      val[v] = x;
      double after = 0;
      uses.each_node(v, [&](NodeId n, int, int) {
        after += p.node_cost(n, val);
        return true;
      });
      change += after - before;
      break;
    }
  }
  return change;
}

}  // namespace autotile
