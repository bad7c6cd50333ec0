#include "search/one_cut_dp.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include "search/cost_model.h"
#include "search/dominance.h"
#include "search/elimination.h"
#include "search/shared_inputs.h"
#include "util/error.h"

namespace autotile {

std::vector<int64_t> level_priority(const CutProblem& p, const std::vector<int>& level_of_group, const Coarsening& c) {
  const int V = p.num_vars();
  std::vector<int64_t> prio(V);
  for (int v = 0; v < V; ++v) {
    int home = p.var_home[v];
    int group = home >= 0 ? c.tensor_group[home] : c.node_group[~home];
    prio[v] = static_cast<int64_t>(level_of_group[group]) * (V + 1) + v;
  }
  return prio;
}

namespace {
// The exact minimum of `p` restricted to `r` (the kept values and options; empty: all of them)
// by variable elimination, in the restricted problem's values (restrict_domains(p, r)'s, read
// from `p` in place). Variables marked in `folded` (may be empty) have one value and join no
// factor: their terms only depend on the node's strategy, so a fixed shared input couples no
// nodes.
CutSolution solve_factor_dp(const Graph& g, const CutProblem& p, const DomainReduction& r,
                            const std::vector<int64_t>& priority, int64_t max_states, bool report_width,
                            const std::vector<char>& folded = {}) {
  const int V = p.num_vars();
  const int N = static_cast<int>(p.edges.size());
  const bool all = r.empty();
  FactorGraph fg;
  for (int v = 0; v < V; ++v) fg.add_var(all ? p.domain[v] : static_cast<int>(r.kept[v].size()));
  std::vector<int64_t> prio(priority.begin(), priority.end());
  if (prio.empty())
    for (int v = 0; v < V; ++v) prio.push_back(v);
  std::vector<NodeId> strategy_of(V, kNone);  // extra variable -> its node (for messages)

  // One node's terms, summed per tensor variable (-1: the strategy's own), added in that order:
  // per_var[0, used) (the buffers are kept from node to node).
  std::vector<std::pair<int, std::vector<double>>> per_var;
  size_t used = 0;
  auto table_of = [&](int key) -> std::vector<double>& {
    for (size_t i = 0; i < used; ++i)
      if (per_var[i].first == key) return per_var[i].second;
    if (used == per_var.size()) per_var.emplace_back();
    per_var[used].first = key;
    per_var[used].second.clear();
    return per_var[used++].second;
  };
  std::vector<int> opt;  // the option (in p) each value of the node's strategy variable means, -1: none
  for (NodeId n = 0; n < N; ++n) {
    const int O = all ? static_cast<int>(p.options[n].size()) : static_cast<int>(r.kept_options[n].size());
    int sv = -1;
    opt.clear();
    if (p.node_var[n] >= 0) {
      sv = p.node_var[n];
      opt = p.node_var_option[n];
      std::vector<double> unary(opt.size(), 0);
      bool any = false;
      for (size_t a = 0; a < opt.size(); ++a)
        if (opt[a] < 0) unary[a] = kInfCost, any = true;
      if (any) fg.add_factor({sv}, unary);
    } else if (O > 1) {
      sv = fg.add_var(O);
      strategy_of.push_back(n);
      // Just after the node's earliest tensor, so ties keep the level sweep.
      int64_t best = -1;
      for (const auto& e : p.edges[n]) best = best < 0 ? prio[e.var] : std::min(best, prio[e.var]);
      prio.push_back(best < 0 ? 0 : best);
      for (int o = 0; o < O; ++o) opt.push_back(all ? o : r.kept_options[n][o]);
    }
    const int only = all ? 0 : (r.kept_options[n].empty() ? 0 : r.kept_options[n][0]);  // sv < 0: the option
    used = 0;
    for (const auto& e : p.edges[n]) {
      const int D = p.domain[e.var];
      const int Dq = fg.domain[e.var];
      const int* kept = all ? nullptr : r.kept[e.var].data();
      const int key = !folded.empty() && folded[e.var] ? -1 : e.var;
      auto& t = table_of(key);
      if (sv < 0) {  // a single option: unary terms
        t.resize(Dq, 0);
        for (int x = 0; x < Dq; ++x) t[x] += e.cost[only * D + (kept ? kept[x] : x)];
        continue;
      }
      const int S = static_cast<int>(opt.size());
      t.resize(static_cast<size_t>(S) * Dq, 0);
      for (int a = 0; a < S; ++a)
        if (opt[a] >= 0)
          for (int x = 0; x < Dq; ++x) t[a * Dq + x] += e.cost[opt[a] * D + (kept ? kept[x] : x)];
    }
    std::sort(per_var.begin(), per_var.begin() + used, [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < used; ++i) {
      const auto& [var, table] = per_var[i];
      if (var < 0 && sv < 0)
        fg.add_factor({}, table);
      else if (var < 0)
        fg.add_factor({sv}, table);
      else if (sv < 0)
        fg.add_factor({var}, table);
      else
        fg.add_factor({sv, var}, table);
    }
  }

  auto describe = [&](int v) -> std::string {
    if (v >= V) {
      const Node& node = g.node(strategy_of[v]);
      return "the strategy of node '" + node.name + "' (op " + node.op + ")";
    }
    int home = p.var_home[v];
    if (home >= 0) return "the tiling of tensor '" + g.tensor(home).name + "'";
    return "the shared strategy of node '" + g.node(~home).name + "'";
  };
  EliminationResult res = eliminate(std::move(fg), prio, max_states, describe, report_width);
  CutSolution sol;
  if (res.too_wide) {
    sol.too_wide = true;
    return sol;
  }
  sol.value.assign(res.value.begin(), res.value.begin() + V);
  sol.cost = res.cost;
  sol.log2_width = res.log2_width;
  sol.work = res.work;
  sol.computed = res.computed;
  return sol;
}

// Solves `p` restricted to `r`, in `p`'s values and costs.
CutSolution solve_restricted(const Graph& g, const CutProblem& p, const DomainReduction& r,
                             const std::vector<int64_t>& priority, int64_t max_states, bool report_width) {
  if (r.empty()) return solve_factor_dp(g, p, r, priority, max_states, report_width);
  std::vector<char> folded(p.num_vars(), 0);
  for (int v = 0; v < p.num_vars(); ++v) folded[v] = p.domain[v] > 1 && r.kept[v].size() == 1;
  CutSolution sol = solve_factor_dp(g, p, r, priority, max_states, report_width, folded);
  if (!sol.too_wide) sol.cost += expand_and_polish(p, r, &sol.value);
  return sol;
}

// The same, once per combination of tilings of the shared read-only inputs `r` leaves open
// (search/shared_inputs.h), keeping the cheapest (the first of equal ones).
CutSolution solve_reduced(const Graph& g, const CutProblem& p, const DomainReduction& r,
                          const std::vector<int64_t>& priority, int64_t max_states, bool report_width) {
  constexpr int kMinReaders = 4;       // a layer's forward and backward reading it twice
  constexpr int64_t kMaxCombinations = 64;
  const std::vector<int> shared = shared_input_vars(g, p, r, kMinReaders);
  if (shared.empty()) return solve_restricted(g, p, r, priority, max_states, report_width);
  const auto each = fix_each_combination(p, r, shared, kMaxCombinations);
  if (each.size() < 2) return solve_restricted(g, p, r, priority, max_states, report_width);
  CutSolution best;
  double work = 0, computed = 0, log2_width = 0;
  for (const DomainReduction& f : each) {
    CutSolution sol = solve_restricted(g, p, f, priority, max_states, report_width);
    if (sol.too_wide) return sol;  // (every combination has the same variables and domains)
    work += sol.work, computed += sol.computed, log2_width = std::max(log2_width, sol.log2_width);
    if (best.value.empty() || sol.cost < best.cost - 1e-12 * std::abs(best.cost)) best = std::move(sol);
  }
  best.work = work, best.computed = computed, best.log2_width = log2_width;  // the profile's figures: all the DPs'
  return best;
}
}  // namespace

CutSolution solve_one_cut_dp(const Graph& g, const CutProblem& p, const std::vector<int64_t>& priority,
                             int64_t max_states, WidthPolicy width) {
  // Dominated values leave the domains first (search/dominance.h), which is exact: variables
  // with one dominant value (inputs shared by every layer, such as rotary tables) are fixed,
  // so they no longer couple the layers; shared inputs that stay open are conditioned on
  // (search/shared_inputs.h). For tests and benchmarks, AUTOTILE_SEARCH_DOMINANCE=off gives
  // the plain DP, =all drops every dominated value from the start and =condition conditions
  // on the shared inputs without reducing anything first.
  const char* env = std::getenv("AUTOTILE_SEARCH_DOMINANCE");
  const std::string mode = env ? env : "";
  const bool report = width == WidthPolicy::kReport;
  if (mode == "off") return solve_factor_dp(g, p, DomainReduction{}, priority, max_states, report);
  if (mode == "all") return solve_reduced(g, p, reduce_domains(p, Reduce::kEvery), priority, max_states, report);
  if (mode == "condition")
    return solve_reduced(g, p, reduce_domains(p, Reduce::kNothing), priority, max_states, report);
  const DomainReduction fixed = reduce_domains(p, Reduce::kDominant);
  DomainReduction every;
  // Too wide even so: drop every dominated value and option as well, which shrinks the tables
  // further; too wide again (or nothing more dropped) stays too wide.
  auto drops_more = [&] {
    every = reduce_domains(p, Reduce::kEvery);
    return !(every.pruned_vars == fixed.pruned_vars && every.fixed_vars == fixed.fixed_vars && every.pruned_nodes == 0);
  };
  if (report) {
    CutSolution sol = solve_reduced(g, p, fixed, priority, max_states, true);
    if (!sol.too_wide || !drops_more()) return sol;
    return solve_reduced(g, p, every, priority, max_states, true);
  }
  try {
    return solve_reduced(g, p, fixed, priority, max_states, false);
  } catch (const Error&) {
    // (the only error the elimination raises: too wide) rethrown when that drops nothing more
    if (!drops_more()) throw;
  }
  return solve_reduced(g, p, every, priority, max_states, false);
}

}  // namespace autotile
