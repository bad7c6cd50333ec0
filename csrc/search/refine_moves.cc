// The refinement's cut-by-cut moves and the plan bookkeeping they share (search/refiner.h).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "search/cost_model.h"
#include "search/dominance.h"
#include "search/one_cut_dp.h"
#include "search/refiner.h"
#include "search/time_cost.h"
#include "util/error.h"

namespace autotile {
namespace refine {

std::vector<std::vector<NodeOption>> Refiner::options_at(const SearchState& s, int cut,
                                                         std::vector<char>* elementwise) const {
  return node_options(g, s, factors[cut], cut, provider, options.constraint, options.replicate_fallback,
                      elementwise);
}

// The problem of cut `cut` from state `s` (as the recursion builds it), its coarsening and
// levels; false when some node has no strategy there.
bool Refiner::cut_problem_at(const SearchState& s, int cut, CutProblem* p, Coarsening* c, Levels* levels) const {
  std::vector<char> elementwise;
  try {
    auto opts = options_at(s, cut, &elementwise);
    *c = coarsen(g, elementwise, &opts);  // as the recursion: joint strategies shared
    *p = build_cut_problem(g, s, factors[cut], cut, std::move(opts), *c, options.constraint);
    *levels = bfs_levels(g, *c);
  } catch (const Error&) {
    return false;
  }
  return true;
}

bool Refiner::fits(TensorId t, const Shape& shape, const Tiling& ti, int k) const {
  if (ti.kind == Tiling::kSplit)
    return ti.dim >= 0 && ti.dim < static_cast<int>(shape.size()) && shape[ti.dim] % k == 0;
  if (ti.kind == Tiling::kPartial) return g.tensor(t).producer != kNone;
  return true;
}

// Applies cuts [s->factors.size(), cuts) of `p` to `s`, each strategy re-derived by name for
// the shapes the earlier cuts leave (as price_plan does); the states after each cut go to
// `states`, the costs after each to `costs` (under the time objective its seconds too, as
// plan_seconds adds them). False when a tiling no longer fits or is not allowed, a strategy no
// longer exists, or a partial tensor has a producer that cannot make it.
bool Refiner::replay(const NamedPlan& p, SearchState s, std::vector<SearchState>* states, PlanCost* costs) const {
  const int T = g.num_tensors(), N = g.num_nodes();
  std::vector<double> edges_before;  // (time objective) each edge's flat bytes before the cut
  if (options.time) edges_before = edge_bytes_of(g, s);
  for (int cut = static_cast<int>(s.factors.size()); cut < cuts; ++cut) {
    const int k = factors[cut];
    std::vector<char> elementwise;
    std::vector<std::vector<NodeOption>> opts;
    try {
      opts = options_at(s, cut, &elementwise);
    } catch (const Error&) {
      return false;  // a node without any strategy at these shapes
    }
    std::vector<Tiling> tilings(T);
    for (TensorId t = 0; t < T; ++t) {
      const Tiling& ti = p.tiling[t][cut];
      if (!fits(t, s.tensor_shape[t], ti, k)) return false;
      if (options.constraint.allow_tiling && !options.constraint.allow_tiling(t, ti, cut)) return false;
      tilings[t] = ti;
    }
    std::vector<NodeOption> chosen(N);
    for (NodeId n = 0; n < N; ++n) {
      auto it = std::find_if(opts[n].begin(), opts[n].end(),
                             [&](const NodeOption& o) { return o.name == p.option[n][cut]; });
      if (it == opts[n].end()) return false;
      chosen[n] = *it;
    }
    s.apply(g, k, tilings, chosen);
    if (!(s.flat_bytes < kInfCost)) return false;
    costs->flat.push_back(s.flat_bytes);
    if (options.time) {
      std::vector<double> edges_after = edge_bytes_of(g, s);
      const double sec = cut_comm_seconds(g, edges_before, edges_after, tilings, chosen, *options.time, cut);
      costs->secs.push_back((costs->secs.empty() ? 0.0 : costs->secs.back()) + sec);
      edges_before = std::move(edges_after);
      if (cut + 1 == cuts) costs->compute = final_compute_seconds(g, s, chosen, *options.time);
    }
    states->push_back(s);
  }
  return true;
}

// Takes `p` (equal to the current plan before cut `from`) when it prices, and, with
// `only_better`, prices below the current plan.
bool Refiner::adopt(NamedPlan p, int from, bool only_better) {
  std::vector<SearchState> states;
  PlanCost costs = cost.upto(from);
  if (!replay(p, prefix[from], &states, &costs)) return false;
  if (only_better && !(total_of(costs) < total() * (1 - kGain))) return false;
  plan = std::move(p);
  ++version;
  cost = std::move(costs);
  prefix.resize(from + 1);
  for (SearchState& st : states) prefix.push_back(std::move(st));
  return true;
}

// Cuts [from, cuts) of `want` made valid one cut at a time: each cut is solved by the DP
// (costs of that cut alone, as the recursion prices it) with every tensor held to its tiling
// in `want` where that tiling is in its domain, every node free, so the result is `want`
// wherever `want` is a plan and a plan everywhere (a permuted plan may name strategies a
// node does not have at the shapes the new order leaves, or split a dimension too small).
bool Refiner::project(NamedPlan want, int from) {
  SearchState s = prefix[from];
  const int T = g.num_tensors(), N = g.num_nodes();
  for (int j = from; j < cuts; ++j) {
    const int k = factors[j];
    CutProblem p;
    Levels levels;
    Coarsening c;
    if (!cut_problem_at(s, j, &p, &c, &levels)) return false;
    if (options.time) {  // (as the recursion prices the cut: the factors after it split evenly)
      int remaining = 1;
      for (int r = j + 1; r < cuts; ++r) remaining *= factors[r];
      add_time_terms(g, s, j, remaining, *options.time, &p);
    }
    if (!budget->take((j < static_cast<int>(cut_work.size()) ? cut_work[j] : 0) + kNodeUnits * N)) return false;
    // held[v]: the value variable v is held to (-1: free)
    std::vector<int> held(p.num_vars(), -1);
    for (int v = 0; v < p.num_vars(); ++v) {
      if (p.var_home[v] < 0) continue;
      const std::vector<Tiling>& dom = p.var_tilings[v];
      auto it = std::find(dom.begin(), dom.end(), want.tiling[p.var_home[v]][j]);
      if (it != dom.end()) held[v] = static_cast<int>(it - dom.begin());
    }
    for (auto& edges : p.edges)
      for (CutProblem::Edge& e : edges) {
        if (held[e.var] < 0) continue;
        const int D = p.domain[e.var];
        for (size_t x = 0; x < e.cost.size(); ++x)
          if (static_cast<int>(x % D) != held[e.var]) e.cost[x] = kInfCost;
      }
    CutSolution sol;
    try {
      sol = solve_one_cut_dp(g, p, level_priority(p, levels.level_of_group, c), kMaxCutTable, WidthPolicy::kReport);
    } catch (const Error&) {
      return false;
    }
    if (sol.too_wide || !(sol.cost < kInfCost)) return false;
    std::vector<Tiling> tilings(T);
    for (TensorId t = 0; t < T; ++t) want.tiling[t][j] = tilings[t] = p.var_tilings[p.tensor_var[t]][sol.value[p.tensor_var[t]]];
    std::vector<NodeOption> chosen(N);
    for (NodeId n = 0; n < N; ++n) {
      int best = -1;
      p.node_cost(n, sol.value, &best);
      if (best < 0) return false;
      chosen[n] = p.options[n][best];
      want.option[n][j] = chosen[n].name;
    }
    s.apply(g, k, tilings, chosen);
    if (!(s.flat_bytes < kInfCost)) return false;
  }
  return adopt(std::move(want), from, false);
}

// The plan with its cuts in the order `perm` (cut j takes what cut perm[j] had), projected
// onto a valid plan (another starting point, whatever it costs).
bool Refiner::force_order(const std::vector<int>& perm) {
  NamedPlan p = plan;
  int from = cuts;
  for (int j = 0; j < cuts; ++j)
    if (perm[j] != j) from = std::min(from, j);
  if (from == cuts) return false;
  for (size_t t = 0; t < p.tiling.size(); ++t)
    for (int j = 0; j < cuts; ++j) p.tiling[t][j] = plan.tiling[t][perm[j]];
  for (size_t n = 0; n < p.option.size(); ++n)
    for (int j = 0; j < cuts; ++j) p.option[n][j] = plan.option[n][perm[j]];
  return adopt(p, from, false) || project(std::move(p), from);
}

// Cuts i and i+1 exchanged in every tensor's and node's sequence.
bool Refiner::swap_move(int i) {
  if (!budget->take(kNodeUnits * g.num_nodes() * (cuts - i))) return false;
  NamedPlan p = plan;
  for (auto& seq : p.tiling) std::swap(seq[i], seq[i + 1]);
  for (auto& seq : p.option) std::swap(seq[i], seq[i + 1]);
  return keep_if_better(std::move(p), i);
}

// Cut i re-solved with every other cut kept: the cut problem of cut i (its variables,
// domains and options, from the state before it) with each edge priced at its final bytes,
// the later cuts' tilings and strategies applied by name after each candidate of cut i. Under
// the time objective each edge is priced at the seconds it adds from cut i on (its bytes after
// each later cut at that cut's rate and latency) and each node at the compute of its final
// tiles (refine_time.cc): the whole plan's seconds, less the cuts before i.
bool Refiner::cut_move(int i, double dp_estimate) {
  if (budget->spent + min_move_units(g.num_nodes(), cuts, i, dp_estimate) > budget->limit)
    return !(budget->capped = true);
  const SearchState& pre = prefix[i];
  const int k = factors[i];
  const int T = g.num_tensors(), N = g.num_nodes();
  const bool timed = options.time != nullptr;
  LayoutPool& pool = *pre.pool;
  CutProblem p;
  Levels levels;
  Coarsening c;
  if (!cut_problem_at(pre, i, &p, &c, &levels)) return false;
  size_t widest = 0;
  for (NodeId n = 0; n < N; ++n) widest = std::max(widest, p.options[n].size());
  // options at this cut, at each later cut once per option index, and the final replay
  const double nodes = 1.0 + static_cast<double>(cuts - 1 - i) * widest + (cuts - i);
  if (!budget->take(dp_estimate + kNodeUnits * N * nodes)) return false;
  // What each device finally holds of tensor t for each value of its variable (-1: a later
  // cut's tiling no longer fits); under the time objective, what it holds after each cut.
  std::vector<std::vector<int>> held(T);
  std::vector<std::vector<TensorPath>> tpath(timed ? T : 0);  // [tensor][value]
  for (TensorId t = 0; t < T; ++t) {
    for (const Tiling& ti : p.var_tilings[p.tensor_var[t]]) {
      int h = pool.held(pre.held[t], ti, k);
      Shape shape = pre.tensor_shape[t];
      if (ti.kind == Tiling::kSplit) shape[ti.dim] /= k;
      TensorPath path;
      if (timed) path.held.push_back(h), path.tiling.push_back(ti);
      for (int j = i + 1; j < cuts && h >= 0; ++j) {
        const Tiling& tj = plan.tiling[t][j];
        if (!fits(t, shape, tj, factors[j])) {
          h = -1;
          break;
        }
        h = pool.held(h, tj, factors[j]);
        if (tj.kind == Tiling::kSplit) shape[tj.dim] /= factors[j];
        if (timed) path.held.push_back(h), path.tiling.push_back(tj);
      }
      held[t].push_back(h);
      if (timed) tpath[t].push_back(std::move(path));
    }
  }
  // Each node's final layouts for each of its options at cut i (alive = the later cuts'
  // strategies exist for the shapes that option leaves); under the time objective, its
  // layouts after each cut.
  std::vector<std::vector<NodePrefix>> fin(N);
  std::vector<std::vector<char>> alive(N);
  std::vector<std::vector<NodePath>> npath(timed ? N : 0);  // [node][option]
  for (NodeId n = 0; n < N; ++n) {
    NodePrefix base{pre.node_in[n], pre.node_out[n], pre.need[n], pre.make[n], {}};
    for (const NodeOption& o : p.options[n]) {
      fin[n].push_back(extend_prefix(g.node(n), base, o, k, pool));
      if (timed) npath[n].emplace_back(), npath[n].back().push(fin[n].back().need, fin[n].back().make, o);
    }
    alive[n].assign(fin[n].size(), 1);
  }
  SearchState shapes = pre;  // node_options reads only each node's shapes
  for (int j = i + 1; j < cuts; ++j) {
    std::vector<std::vector<NodePrefix>> next = fin;
    // Call j serves every node's j-th option (its last where it has fewer), as joint_problem does.
    for (size_t a = 0; a < widest; ++a) {
      use_prefix_shapes(fin, a, &shapes);
      std::vector<char> ew;
      std::vector<std::vector<NodeOption>> opts;
      try {
        opts = options_at(shapes, j, &ew);
      } catch (const Error&) {
        for (NodeId n = 0; n < N; ++n)
          if (a < fin[n].size()) alive[n][a] = 0;
        continue;
      }
      for (NodeId n = 0; n < N; ++n) {
        if (a >= fin[n].size() || !alive[n][a]) continue;
        auto it = std::find_if(opts[n].begin(), opts[n].end(),
                               [&](const NodeOption& o) { return o.name == plan.option[n][j]; });
        if (it == opts[n].end()) {
          alive[n][a] = 0;
        } else {
          next[n][a] = extend_prefix(g.node(n), fin[n][a], *it, factors[j], pool);
          if (timed) npath[n][a].push(next[n][a].need, next[n][a].make, *it);
        }
      }
    }
    fin = std::move(next);
  }
  // Edge tables at final bytes (same layout as build_cut_problem's: inputs, then outputs), or
  // at the seconds from cut i on with each node's final compute on its first edge.
  const std::vector<std::vector<int>> upto = timed ? factors_upto() : std::vector<std::vector<int>>{};
  for (NodeId n = 0; n < N; ++n) {
    const Node& node = g.node(n);
    const size_t ins = node.inputs.size();
    for (size_t e = 0; e < p.edges[n].size(); ++e) {
      const TensorId t = e < ins ? node.inputs[e] : node.outputs[e - ins];
      CutProblem::Edge& edge = p.edges[n][e];
      const int D = p.domain[edge.var];
      const double before = !timed ? 0.0
                            : e < ins ? edge_bytes(g, t, pool, pre.held[t], pre.need[n][e], pre.factors)
                                      : edge_bytes(g, t, pool, pre.make[n][e - ins], pre.held[t], pre.factors);
      for (size_t o = 0; o < fin[n].size(); ++o) {
        const double unary = timed && e == 0 && alive[n][o] ? final_seconds(n, fin[n][o], npath[n][o]) : 0.0;
        for (int x = 0; x < D; ++x) {
          const int h = held[t][x];
          double& cost = edge.cost[o * D + x];
          if (!alive[n][o] || h < 0)
            cost = kInfCost;
          else if (timed)
            cost = edge_seconds(n, e, i, before, tpath[t][x], npath[n][o], upto) + unary;
          else
            cost = e < ins ? edge_bytes(g, t, pool, h, fin[n][o].need[e], factors)
                           : edge_bytes(g, t, pool, fin[n][o].make[e - ins], h, factors);
        }
      }
    }
  }
  CutSolution sol;
  try {
    sol = solve_one_cut_dp(g, p, level_priority(p, levels.level_of_group, c), kMaxCutTable, WidthPolicy::kReport);
  } catch (const Error&) {
    return false;
  }
  if (sol.too_wide) return false;  // too wide for the DP: the recursion's cut stays
  budget->spent += sol.work - dp_estimate;  // the DP's actual work replaces its estimate
  // (the cuts before i are the plan's: their seconds are a constant of the move)
  const double fixed = timed && i > 0 ? cost.secs[i - 1] : 0.0;
  if (!(fixed + sol.cost < total() * (1 - kGain))) return false;
  NamedPlan q = plan;
  for (TensorId t = 0; t < T; ++t) q.tiling[t][i] = p.var_tilings[p.tensor_var[t]][sol.value[p.tensor_var[t]]];
  for (NodeId n = 0; n < N; ++n) {
    int best = -1;
    p.node_cost(n, sol.value, &best);
    if (best < 0) return false;
    q.option[n][i] = p.options[n][best].name;
  }
  return keep_if_better(std::move(q), i);
}

}  // namespace refine
}  // namespace autotile
