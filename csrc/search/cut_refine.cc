#include "search/cut_refine.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
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
/// (about 0.3-1 s here: tiny GPT-2/BERT/LLaMA on 4 devices reach their joint optimum within
/// it); beyond it, half of what the recursion spent. One node's options cost about as much as
/// 1000 DP entries (LLaMA-7B on 64 devices: 20-40 us a node, 30 ns an entry).
constexpr double kFloor = 1 << 25;
constexpr double kShareOfRecursion = 0.5;
constexpr double kNodeUnits = 1000;
/// Graphs of more nodes get a floor shrunk in proportion (their node options cost more).
constexpr double kSmallGraph = 256;
/// A move is kept when it lowers the total by more than this fraction (rounding aside).
constexpr double kGain = 1e-9;
/// Largest DP table of a neighbourhood move (entries); wider neighbourhoods fall back to the
/// cut-by-cut moves.
constexpr int64_t kMaxTable = 1 << 22;

// A whole plan by name: tilings [tensor][cut], strategy names [node][cut].
struct NamedPlan {
  std::vector<std::vector<Tiling>> tiling;
  std::vector<std::vector<std::string>> option;
};

// The uncut state of `g` with its layouts interned in `pool`.
SearchState initial_on(const Graph& g, const std::shared_ptr<LayoutPool>& pool) {
  SearchState s = SearchState::initial(g);
  s.pool = pool;
  for (TensorId t = 0; t < g.num_tensors(); ++t) s.held[t] = pool->whole(g.tensor(t).shape);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    for (size_t i = 0; i < node.inputs.size(); ++i) s.need[n][i] = pool->whole(g.tensor(node.inputs[i]).shape);
    for (size_t i = 0; i < node.outputs.size(); ++i) s.make[n][i] = pool->whole(g.tensor(node.outputs[i]).shape);
  }
  return s;
}

// The least a move of cut i costs: its DP, and the node options of its cut, of every later
// cut for at least two of its options, and of the replay from it.
double min_move_units(int nodes, int cuts, int i, double dp) {
  return dp + kNodeUnits * nodes * (1.0 + 2.0 * (cuts - 1 - i) + (cuts - i));
}

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
  std::vector<double> cut_work;     // DP entries of each cut of the recursion

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

  // Takes `p` (equal to the current plan before cut `from`) when it prices, and, with
  // `only_better`, prices below the current plan.
  bool adopt(NamedPlan p, int from, bool only_better) {
    std::vector<SearchState> states;
    std::vector<double> costs(flat.begin(), flat.begin() + from);
    if (!replay(p, prefix[from], &states, &costs)) return false;
    if (only_better && !(costs.back() < total() * (1 - kGain))) return false;
    plan = std::move(p);
    flat = std::move(costs);
    prefix.resize(from + 1);
    for (SearchState& st : states) prefix.push_back(std::move(st));
    return true;
  }
  bool keep_if_better(NamedPlan p, int from) { return adopt(std::move(p), from, true); }

  // The plan with cuts i and i+1 exchanged, whatever it costs (a second starting point).
  // The plan with its cuts in the order `perm` (cut j takes what cut perm[j] had), whatever it
  // costs (another starting point).
  bool force_order(const std::vector<int>& perm) {
    NamedPlan p = plan;
    int from = cuts;
    for (int j = 0; j < cuts; ++j)
      if (perm[j] != j) from = std::min(from, j);
    if (from == cuts) return false;
    for (size_t t = 0; t < p.tiling.size(); ++t)
      for (int j = 0; j < cuts; ++j) p.tiling[t][j] = plan.tiling[t][perm[j]];
    for (size_t n = 0; n < p.option.size(); ++n)
      for (int j = 0; j < cuts; ++j) p.option[n][j] = plan.option[n][perm[j]];
    return adopt(std::move(p), from, false);
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
    if (budget->spent + min_move_units(g.num_nodes(), cuts, i, dp_estimate) > budget->limit)
      return !(budget->capped = true);
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

  // One node's candidate strategy sequence while its layouts are derived cut by cut.
  struct NodeCandidate {
    std::vector<std::string> names;
    int pos;         // next cut to derive
    NodePrefix at;   // layouts after cuts [0, pos)
    bool alive = true;
  };

  // Every tensor class and every node may, at once, change one of its cuts or exchange two
  // adjacent cuts of equal factor (or keep its sequence): the joint program restricted to that
  // neighbourhood of the plan, solved exactly by the DP. It contains every cut move and every
  // swap, and plans where one layer swaps its cuts while another changes one. Ties are the
  // first cut's coarsening's (as the joint program's) among tensors that share their sequence;
  // nodes sharing a strategy (merged timesteps) keep theirs. kFailed: too wide or over budget.
  enum Outcome { kKept, kNoGain, kFailed };
  Outcome neighbourhood_move(const Coarsening& ties, const Levels& levels) {
    const int T = g.num_tensors(), N = g.num_nodes();
    LayoutPool& pool = *prefix[0].pool;
    if (!budget->take(kNodeUnits * N * cuts)) return kFailed;
    // Options at each cut of the current plan's prefix (what a changed cut may take).
    std::vector<std::vector<std::vector<NodeOption>>> at_cut(cuts);
    for (int i = 0; i < cuts; ++i) {
      std::vector<char> ew;
      try {
        at_cut[i] = options_at(prefix[i], i, &ew);
      } catch (const Error&) {
        return kFailed;
      }
    }
    auto swappable = [&](int i) { return options.factors.empty() && factors[i] == factors[i + 1]; };
    // Tensor classes: tied at the first cut and laid out alike now.
    std::map<std::pair<TensorId, std::vector<std::string>>, int> class_of;
    CutProblem q;
    q.tensor_var.assign(T, -1);
    std::vector<std::vector<TensorId>> members;
    for (TensorId t = 0; t < T; ++t) {
      std::vector<std::string> seq;
      for (const Tiling& ti : plan.tiling[t]) seq.push_back(ti.str());
      auto it = class_of.emplace(std::make_pair(ties.tensor_tie[t], seq), static_cast<int>(members.size())).first;
      if (it->second == static_cast<int>(members.size())) members.emplace_back();
      members[it->second].push_back(t);
      q.tensor_var[t] = it->second;
    }
    std::vector<std::vector<std::vector<Tiling>>> tcand(members.size());  // [class][value] -> tilings
    std::vector<std::vector<int>> held(T);                                // [tensor][value] -> final layout
    auto add_tensor_candidate = [&](int v, const std::vector<Tiling>& seq, int first) {
      std::vector<int> h;
      for (TensorId t : members[v]) {
        Shape shape = prefix[first].tensor_shape[t];
        int layout = prefix[first].held[t];
        for (int j = first; j < cuts; ++j) {
          const Tiling& ti = seq[j];
          if (!fits(t, shape, ti, factors[j])) return;
          if (options.constraint.allow_tiling && !options.constraint.allow_tiling(t, ti, j)) return;
          layout = pool.held(layout, ti, factors[j]);
          if (ti.kind == Tiling::kSplit) shape[ti.dim] /= factors[j];
        }
        h.push_back(layout);
      }
      tcand[v].push_back(seq);
      for (size_t m = 0; m < members[v].size(); ++m) held[members[v][m]].push_back(h[m]);
    };
    for (int v = 0; v < static_cast<int>(members.size()); ++v) {
      const TensorId rep = members[v][0];
      const std::vector<Tiling>& cur = plan.tiling[rep];
      add_tensor_candidate(v, cur, cuts - 1);
      for (int i = 0; i < cuts; ++i) {
        std::vector<Tiling> options_i{Tiling::replicate()};
        for (size_t d = 0; d < prefix[i].tensor_shape[rep].size(); ++d) options_i.push_back(Tiling::split(d));
        options_i.push_back(Tiling::partial());
        for (const Tiling& ti : options_i) {
          if (ti == cur[i]) continue;
          std::vector<Tiling> seq = cur;
          seq[i] = ti;
          add_tensor_candidate(v, seq, i);
        }
      }
      for (int i = 0; i + 1 < cuts; ++i)
        if (swappable(i) && !(cur[i] == cur[i + 1])) {
          std::vector<Tiling> seq = cur;
          std::swap(seq[i], seq[i + 1]);
          add_tensor_candidate(v, seq, i);
        }
      q.domain.push_back(static_cast<int>(tcand[v].size()));
      q.var_home.push_back(rep);
      q.var_tilings.emplace_back(tcand[v].size(), Tiling::replicate());  // (not read: values are sequences)
      q.var_names.emplace_back();
    }
    // Node candidates; a node sharing its strategy keeps its sequence.
    std::vector<int> share_size(N, 0);
    for (NodeId n = 0; n < N; ++n) ++share_size[ties.node_share[n]];
    std::vector<std::vector<NodeCandidate>> ncand(N);
    size_t widest = 0;
    for (NodeId n = 0; n < N; ++n) {
      const NodePrefix last{prefix[cuts].node_in[n], prefix[cuts].node_out[n], prefix[cuts].need[n],
                            prefix[cuts].make[n], plan.option[n]};
      ncand[n].push_back({plan.option[n], cuts, last});
      if (share_size[ties.node_share[n]] == 1) {
        auto base = [&](int i) {
          return NodePrefix{prefix[i].node_in[n], prefix[i].node_out[n], prefix[i].need[n], prefix[i].make[n], {}};
        };
        for (int i = 0; i < cuts; ++i)
          for (const NodeOption& o : at_cut[i][n]) {
            if (o.name == plan.option[n][i]) continue;
            std::vector<std::string> seq = plan.option[n];
            seq[i] = o.name;
            ncand[n].push_back({seq, i + 1, extend_prefix(g.node(n), base(i), o, factors[i], pool)});
          }
        for (int i = 0; i + 1 < cuts; ++i)
          if (swappable(i) && plan.option[n][i] != plan.option[n][i + 1]) {
            std::vector<std::string> seq = plan.option[n];
            std::swap(seq[i], seq[i + 1]);
            ncand[n].push_back({seq, i, base(i)});
          }
      }
      widest = std::max(widest, ncand[n].size());
    }
    // Budget: the options derived below (at most one call per cut and candidate index), the
    // replay, and the DP's tables (bounded by max_states).
    if (!budget->take(kNodeUnits * N * (static_cast<double>(cuts) * widest + cuts))) return kFailed;
    // Later cuts' strategies re-derived by name for each candidate's shapes.
    for (int j = 0; j < cuts; ++j) {
      for (size_t a = 0; a < widest; ++a) {
        SearchState shapes = prefix[j];
        bool any = false;
        for (NodeId n = 0; n < N; ++n)
          if (a < ncand[n].size() && ncand[n][a].alive && ncand[n][a].pos == j) {
            shapes.node_in[n] = ncand[n][a].at.in;
            shapes.node_out[n] = ncand[n][a].at.out;
            any = true;
          }
        if (!any) continue;
        std::vector<char> ew;
        std::vector<std::vector<NodeOption>> opts;
        bool ok = true;
        try {
          opts = options_at(shapes, j, &ew);
        } catch (const Error&) {
          ok = false;
        }
        for (NodeId n = 0; n < N; ++n) {
          if (a >= ncand[n].size() || !ncand[n][a].alive || ncand[n][a].pos != j) continue;
          NodeCandidate& c = ncand[n][a];
          if (!ok) {
            c.alive = false;
            continue;
          }
          auto it = std::find_if(opts[n].begin(), opts[n].end(), [&](const NodeOption& o) { return o.name == c.names[j]; });
          if (it == opts[n].end()) {
            c.alive = false;
            continue;
          }
          c.at = extend_prefix(g.node(n), c.at, *it, factors[j], pool);
          c.pos = j + 1;
        }
      }
    }
    // The program: edges at their final bytes.
    q.options.resize(N);
    q.node_var.assign(N, -1);
    q.node_var_option.assign(N, {});
    q.edges.resize(N);
    for (NodeId n = 0; n < N; ++n) {
      const Node& node = g.node(n);
      const size_t O = ncand[n].size(), ins = node.inputs.size();
      q.options[n].resize(O);
      for (size_t e = 0; e < ins + node.outputs.size(); ++e) {
        const TensorId t = e < ins ? node.inputs[e] : node.outputs[e - ins];
        CutProblem::Edge edge{q.tensor_var[t], {}};
        const int D = q.domain[edge.var];
        edge.cost.assign(O * D, kInfCost);
        for (size_t o = 0; o < O; ++o) {
          const NodeCandidate& c = ncand[n][o];
          if (!c.alive) continue;
          for (int x = 0; x < D; ++x)
            edge.cost[o * D + x] = e < ins ? edge_bytes(g, t, pool, held[t][x], c.at.need[e], factors)
                                           : edge_bytes(g, t, pool, c.at.make[e - ins], held[t][x], factors);
        }
        q.edges[n].push_back(std::move(edge));
      }
    }
    CutSolution sol;
    try {
      sol = solve_one_cut_dp(g, q, level_priority(q, levels.level_of_group, ties), kMaxTable);
    } catch (const Error&) {
      return kFailed;
    }
    budget->spent += sol.work;
    if (!(sol.cost < total() * (1 - kGain))) return kNoGain;
    NamedPlan next = plan;
    for (TensorId t = 0; t < T; ++t) next.tiling[t] = tcand[q.tensor_var[t]][sol.value[q.tensor_var[t]]];
    for (NodeId n = 0; n < N; ++n) {
      int best = -1;
      q.node_cost(n, sol.value, &best);
      if (best < 0) return kFailed;
      next.option[n] = ncand[n][best].names;
    }
    int from = cuts;
    for (TensorId t = 0; t < T; ++t)
      for (int j = 0; j < cuts; ++j)
        if (!(next.tiling[t][j] == plan.tiling[t][j])) from = std::min(from, j);
    for (NodeId n = 0; n < N; ++n)
      for (int j = 0; j < cuts; ++j)
        if (next.option[n][j] != plan.option[n][j]) from = std::min(from, j);
    if (from == cuts) return kNoGain;
    return keep_if_better(std::move(next), from) ? kKept : kNoGain;
  }
};

// The first cut's ties and levels (the neighbourhood move's variables and elimination
// order), derived when a neighbourhood move is first made.
struct FirstCutTies {
  bool tried = false, ok = false;
  Coarsening c;
  Levels levels;
  bool get(const Refiner& r) {
    if (tried) return ok;
    tried = true;
    std::vector<char> elementwise;
    try {
      r.options_at(r.prefix[0], 0, &elementwise);
      c = coarsen(r.g, elementwise);
      levels = bfs_levels(r.g, c);
      ok = true;
    } catch (const Error&) {
    }
    return ok;
  }
};

// Cheap moves (one cut re-solved, two cuts swapped) until none helps; then one step in the
// whole neighbourhood, which contains them all, to leave that local optimum; and again.
void descend(Refiner& r, FirstCutTies& ties, RefineStats* stats) {
  constexpr int kMaxRounds = 32;
  const int cuts = r.cuts;
  for (int round = 0; round < kMaxRounds && !r.budget->capped; ++round) {
    bool improved = false;
    for (int i = 0; i < cuts && !r.budget->capped; ++i) {
      ++stats->tried;
      if (r.cut_move(i, r.cut_work[i])) ++stats->kept, improved = true;
    }
    // Swapping cuts of a named mesh would move tilings between its axes.
    for (int i = 0; i + 1 < cuts && r.options.factors.empty() && !r.budget->capped; ++i) {
      if (r.factors[i] != r.factors[i + 1]) continue;
      ++stats->tried;
      if (r.swap_move(i)) ++stats->kept, improved = true;
    }
    if (improved || r.budget->capped) continue;
    ++stats->tried;
    if (!ties.get(r) || r.neighbourhood_move(ties.c, ties.levels) != Refiner::kKept) break;
    ++stats->kept;
  }
}

}  // namespace

bool refine_applies(const SearchOptions& options, size_t cuts) {
  return options.refine && cuts > 1 && options.solver == CutSolver::kDP && options.memory_weight == 0 &&
         options.bandwidths.empty();
}

RefineStats refine_cuts(const Graph& g, const std::vector<int>& factors, const SearchOptions& options,
                        const StrategyProvider& provider, const std::vector<double>& cut_work, SearchState* s,
                        std::vector<double>* flat) {
  RefineStats stats;
  const int cuts = static_cast<int>(factors.size());
  if (cuts < 2 || cut_work.size() != factors.size()) return stats;
  double recursion = 0;
  for (double w : cut_work) recursion += w + kNodeUnits * g.num_nodes();
  const double floor = kFloor * std::min(1.0, kSmallGraph / std::max(1, g.num_nodes()));
  Budget budget{0, std::max(floor, kShareOfRecursion * recursion)};
  // Nothing when the first move, the first cut's, does not fit the budget (copying the states
  // alone would cost a large graph a good part of its search).
  if (min_move_units(g.num_nodes(), cuts, 0, cut_work[0]) > budget.limit) {
    stats.capped = true;
    return stats;
  }
  Refiner r{g, factors, options, provider, cuts, &budget, {}, {}, {}, cut_work};
  r.plan.tiling = s->tiling;
  r.plan.option.assign(g.num_nodes(), {});
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    for (const NodeOption& o : s->option[n]) r.plan.option[n].push_back(o.name);
  // The states before each cut: the recursion's plan replayed on its own layout pool.
  budget.take(kNodeUnits * g.num_nodes() * cuts);
  r.prefix.push_back(initial_on(g, s->pool));
  std::vector<SearchState> states;
  if (!r.replay(r.plan, r.prefix[0], &states, &r.flat)) return stats;  // (it is the recursion's own plan)
  for (SearchState& st : states) r.prefix.push_back(std::move(st));
  FirstCutTies ties;
  // From the recursion's plan, then from the best plan so far with its cuts in each other order
  // (where cuts do not commute, another order can lead to a better optimum the moves cannot
  // reach one step at a time): the cheapest end wins.
  auto best = std::make_unique<Refiner>(r);
  descend(r, ties, &stats);
  if (r.total() < best->total()) best = std::make_unique<Refiner>(r);
  // Other orders of the cuts (of equal factor; not a named mesh's axes) as further starts.
  std::vector<int> perm(cuts);
  for (int j = 0; j < cuts; ++j) perm[j] = j;
  while (options.factors.empty() && !budget.capped && std::next_permutation(perm.begin(), perm.end())) {
    bool equal = true;
    for (int j = 0; j < cuts; ++j) equal = equal && factors[perm[j]] == factors[j];
    if (!equal || !budget.take(kNodeUnits * g.num_nodes() * cuts)) continue;
    Refiner start = *best;
    if (!start.force_order(perm)) continue;
    descend(start, ties, &stats);
    if (start.total() < best->total() * (1 - kGain)) best = std::make_unique<Refiner>(std::move(start)), ++stats.kept;
  }
  stats.work = budget.spent;
  stats.capped = budget.capped;
  if (best->total() < flat->back()) {
    *s = std::move(best->prefix.back());
    *flat = std::move(best->flat);
  }
  return stats;
}

}  // namespace autotile
