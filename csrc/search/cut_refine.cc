#include "search/cut_refine.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "search/bfs_levels.h"
#include "search/coarsen.h"
#include "search/cost_model.h"
#include "search/cut_problem.h"
#include "search/node_prefix.h"
#include "search/one_cut_dp.h"
#include "util/error.h"

namespace autotile {

namespace {

/// The refinement's budget in work units: DP table entries visited, and kNodeUnits per node
/// whose options are derived (node_options) or applied once more. It may always spend kFloor
/// (a few milliseconds: small graphs are refined until no move helps); beyond it, half of what
/// the recursion spent. One node's options cost about as much as 1000 DP entries (LLaMA-7B on
/// 64 devices: 20-40 us a node, 30 ns an entry).
constexpr double kFloor = 1 << 23;
constexpr double kShareOfRecursion = 0.5;
constexpr double kNodeUnits = 1000;
/// A move is kept when it lowers the total by more than this fraction (rounding aside).
constexpr double kGain = 1e-9;

// A whole plan by name: tilings [tensor][cut], strategy names [node][cut].
struct NamedPlan {
  std::vector<std::vector<Tiling>> tiling;
  std::vector<std::vector<std::string>> option;
};

struct Budget {
  double spent = 0, limit = 0;
  bool capped = false;
  // Charges `units` when they fit; else marks the budget spent.
  bool take(double units) {
    if (spent + units > limit) return !(capped = true);
    spent += units;
    return true;
  }
};

struct Refiner {
  const Graph& g;
  const std::vector<int>& factors;
  const SearchOptions& options;
  const StrategyProvider& provider;
  const int cuts;
  Budget* budget;
  NamedPlan plan;
  std::vector<SearchState> prefix;  // prefix[i]: the state after cuts [0, i) of `plan`
  std::vector<double> flat;         // cumulative cost after each cut of `plan`

  double total() const { return flat.back(); }

  std::vector<std::vector<NodeOption>> options_at(const SearchState& s, int cut, std::vector<char>* elementwise) const {
    return node_options(g, s, factors[cut], cut, provider, options.constraint, options.replicate_fallback,
                        elementwise);
  }

  bool fits(TensorId t, const Shape& shape, const Tiling& ti, int k) const {
    if (ti.kind == Tiling::kSplit)
      return ti.dim >= 0 && ti.dim < static_cast<int>(shape.size()) && shape[ti.dim] % k == 0;
    if (ti.kind == Tiling::kPartial) return g.tensor(t).producer != kNone;
    return true;
  }

  // Applies cuts [s->factors.size(), cuts) of `p` to `s`, each strategy re-derived by name for
  // the shapes the earlier cuts leave (as price_plan does); the states after each cut go to
  // `states`, the cumulative costs to `costs`. False when a tiling no longer fits or is not
  // allowed, a strategy no longer exists, or a partial tensor has a producer that cannot make it.
  bool replay(const NamedPlan& p, SearchState s, std::vector<SearchState>* states, std::vector<double>* costs) const {
    const int T = g.num_tensors(), N = g.num_nodes();
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
      costs->push_back(s.flat_bytes);
      states->push_back(s);
    }
    return true;
  }

  // Keeps `p` when it prices below the current plan from cut `from` on (cuts before it equal).
  bool keep_if_better(NamedPlan p, int from) {
    std::vector<SearchState> states;
    std::vector<double> costs(flat.begin(), flat.begin() + from);
    if (!replay(p, prefix[from], &states, &costs)) return false;
    if (!(costs.back() < total() * (1 - kGain))) return false;
    plan = std::move(p);
    flat = std::move(costs);
    prefix.resize(from + 1);
    for (SearchState& st : states) prefix.push_back(std::move(st));
    return true;
  }

  // Cuts i and i+1 exchanged in every tensor's and node's sequence.
  bool swap_move(int i) {
    if (!budget->take(kNodeUnits * g.num_nodes() * (cuts - i))) return false;
    NamedPlan p = plan;
    for (auto& seq : p.tiling) std::swap(seq[i], seq[i + 1]);
    for (auto& seq : p.option) std::swap(seq[i], seq[i + 1]);
    return keep_if_better(std::move(p), i);
  }

  // Cut i re-solved with every other cut kept: the cut problem of cut i (its variables,
  // domains and options, from the state before it) with each edge priced at its final bytes,
  // the later cuts' tilings and strategies applied by name after each candidate of cut i.
  bool cut_move(int i, double dp_estimate) {
    const SearchState& pre = prefix[i];
    const int k = factors[i];
    const int T = g.num_tensors(), N = g.num_nodes();
    LayoutPool& pool = *pre.pool;
    std::vector<char> elementwise;
    CutProblem p;
    Levels levels;
    Coarsening c;
    try {
      auto opts = options_at(pre, i, &elementwise);
      c = coarsen(g, elementwise);
      p = build_cut_problem(g, pre, k, i, std::move(opts), c, options.constraint);
      levels = bfs_levels(g, c);
    } catch (const Error&) {
      return false;
    }
    size_t widest = 0;
    for (NodeId n = 0; n < N; ++n) widest = std::max(widest, p.options[n].size());
    // options at this cut, at each later cut once per option index, and the final replay
    const double nodes = 1.0 + static_cast<double>(cuts - 1 - i) * widest + (cuts - i);
    if (!budget->take(dp_estimate + kNodeUnits * N * nodes)) return false;
    // What each device finally holds of tensor t for each value of its variable (-1: a later
    // cut's tiling no longer fits).
    std::vector<std::vector<int>> held(T);
    for (TensorId t = 0; t < T; ++t) {
      for (const Tiling& ti : p.var_tilings[p.tensor_var[t]]) {
        int h = pool.held(pre.held[t], ti, k);
        Shape shape = pre.tensor_shape[t];
        if (ti.kind == Tiling::kSplit) shape[ti.dim] /= k;
        for (int j = i + 1; j < cuts && h >= 0; ++j) {
          const Tiling& tj = plan.tiling[t][j];
          if (!fits(t, shape, tj, factors[j])) {
            h = -1;
            break;
          }
          h = pool.held(h, tj, factors[j]);
          if (tj.kind == Tiling::kSplit) shape[tj.dim] /= factors[j];
        }
        held[t].push_back(h);
      }
    }
    // Each node's final layouts for each of its options at cut i (alive = the later cuts'
    // strategies exist for the shapes that option leaves).
    std::vector<std::vector<NodePrefix>> fin(N);
    std::vector<std::vector<char>> alive(N);
    for (NodeId n = 0; n < N; ++n) {
      NodePrefix base{pre.node_in[n], pre.node_out[n], pre.need[n], pre.make[n], {}};
      for (const NodeOption& o : p.options[n]) fin[n].push_back(extend_prefix(g.node(n), base, o, k, pool));
      alive[n].assign(fin[n].size(), 1);
    }
    SearchState shapes = pre;  // node_options reads only each node's shapes
    for (int j = i + 1; j < cuts; ++j) {
      std::vector<std::vector<NodePrefix>> next = fin;
      // Call j serves every node's j-th option (its last where it has fewer), as joint_problem does.
      for (size_t a = 0; a < widest; ++a) {
        for (NodeId n = 0; n < N; ++n) {
          const NodePrefix& q = fin[n][std::min(a, fin[n].size() - 1)];
          shapes.node_in[n] = q.in;
          shapes.node_out[n] = q.out;
        }
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
          if (it == opts[n].end())
            alive[n][a] = 0;
          else
            next[n][a] = extend_prefix(g.node(n), fin[n][a], *it, factors[j], pool);
        }
      }
      fin = std::move(next);
    }
    // Edge tables at final bytes (same layout as build_cut_problem's: inputs, then outputs).
    for (NodeId n = 0; n < N; ++n) {
      const Node& node = g.node(n);
      const size_t ins = node.inputs.size();
      for (size_t e = 0; e < p.edges[n].size(); ++e) {
        const TensorId t = e < ins ? node.inputs[e] : node.outputs[e - ins];
        CutProblem::Edge& edge = p.edges[n][e];
        const int D = p.domain[edge.var];
        for (size_t o = 0; o < fin[n].size(); ++o)
          for (int x = 0; x < D; ++x) {
            const int h = held[t][x];
            double& cost = edge.cost[o * D + x];
            if (!alive[n][o] || h < 0)
              cost = kInfCost;
            else
              cost = e < ins ? edge_bytes(g, t, pool, h, fin[n][o].need[e], factors)
                             : edge_bytes(g, t, pool, fin[n][o].make[e - ins], h, factors);
          }
      }
    }
    CutSolution sol;
    try {
      sol = solve_one_cut_dp(g, p, level_priority(p, levels.level_of_group, c));
    } catch (const Error&) {
      return false;  // too wide for the DP: the recursion's cut stays
    }
    budget->spent += sol.work - dp_estimate;  // the DP's actual work replaces its estimate
    if (!(sol.cost < total() * (1 - kGain))) return false;
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
};

}  // namespace

bool refine_applies(const SearchOptions& options, size_t cuts) {
  return options.refine && cuts > 1 && options.solver == CutSolver::kDP && options.memory_weight == 0 &&
         options.bandwidths.empty();
}

RefineStats refine_cuts(const Graph& g, const std::vector<int>& factors, const SearchOptions& options,
                        const StrategyProvider& provider, const std::vector<double>& cut_work,
                        std::vector<SearchState> before, SearchState* s, std::vector<double>* flat) {
  RefineStats stats;
  const int cuts = static_cast<int>(factors.size());
  if (cuts < 2 || before.size() != factors.size() || cut_work.size() != factors.size()) return stats;
  double recursion = 0;
  for (double w : cut_work) recursion += w + kNodeUnits * g.num_nodes();
  Budget budget{0, std::max(kFloor, kShareOfRecursion * recursion)};
  Refiner r{g, factors, options, provider, cuts, &budget, {}, std::move(before), *flat};
  r.prefix.push_back(*s);
  r.plan.tiling = s->tiling;
  r.plan.option.assign(g.num_nodes(), {});
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    for (const NodeOption& o : s->option[n]) r.plan.option[n].push_back(o.name);
  constexpr int kMaxRounds = 16;
  bool improved = true;
  for (int round = 0; round < kMaxRounds && improved && !budget.capped; ++round) {
    improved = false;
    for (int i = 0; i < cuts && !budget.capped; ++i) {
      ++stats.tried;
      if (r.cut_move(i, cut_work[i])) ++stats.kept, improved = true;
    }
    // Swapping cuts of a named mesh would move tilings between its axes.
    for (int i = 0; i + 1 < cuts && options.factors.empty() && !budget.capped; ++i) {
      if (factors[i] != factors[i + 1]) continue;
      ++stats.tried;
      if (r.swap_move(i)) ++stats.kept, improved = true;
    }
  }
  stats.work = budget.spent;
  stats.capped = budget.capped;
  if (stats.kept > 0) {
    *s = std::move(r.prefix.back());
    *flat = std::move(r.flat);
  }
  return stats;
}

}  // namespace autotile
