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
#include "search/dominance.h"
#include "search/node_prefix.h"
#include "search/one_cut_dp.h"
#include "util/error.h"

namespace autotile {

namespace {

/// The refinement's budget in work units: DP table entries visited, kNodeUnits per node whose
/// options are derived (node_options) or applied once more, kCellUnits per edge-cost entry of
/// a neighbourhood move. It may always spend a floor: kFloor, or kOrdersFloor for graphs of at
/// most kSmallGraph nodes planned in at most kMaxOrderCuts cuts, where the cut-orders move
/// applies (tiny BERT on 8 devices reaches its joint optimum after about 0.9e8 units; 2^25
/// stopped it 3.7% above); beyond it, half of what the recursion spent. One node's options
/// cost about as much as 1000 DP entries (LLaMA-7B on 64 devices: 20-40 us a node, 30 ns an
/// entry).
constexpr double kFloor = 1 << 25;
constexpr double kOrdersFloor = 1 << 27;
constexpr double kShareOfRecursion = 0.5;
constexpr double kNodeUnits = 1000;
/// Graphs of more nodes get kFloor shrunk in proportion (their node options cost more).
constexpr double kSmallGraph = 256;
/// A move is kept when it lowers the total by more than this fraction (rounding aside).
constexpr double kGain = 1e-9;
/// Largest DP table of a neighbourhood move (entries); wider neighbourhoods are truncated
/// (kTruncated), and left to the cut-by-cut moves when even the narrowest is too wide.
constexpr int64_t kMaxTable = 1 << 22;
/// Work units of one edge-cost entry of a neighbourhood move (a conversion priced).
constexpr double kCellUnits = 50;
/// The cut-orders move lets a tensor take any sequence of tilings where it has at most this
/// many (rank 4 over three cuts: 6^3), a node any sequence of strategies where it has at most
/// kAllSequences; the others take their own sequence in each order of the cuts.
constexpr double kAllTensorSequences = 216;
constexpr size_t kAllSequences = 32;
/// A neighbourhood move whose DP is too wide is made over each tensor's and node's this many
/// candidates of least lower bound instead, the first that fits (tiny GPT-2 and LLaMA on 8
/// devices: the cut-orders move is 2^23.8 entries wide whole and fits at 12).
constexpr size_t kTruncated[] = {48, 24, 12, 6};
/// Where the wide moves polish the best start's end (at most kMaxOrderCuts cuts), the starts
/// may spend this share of the budget (tiny LLaMA on 8 devices spent it all on starts and never
/// made the cut-orders move that reaches its optimum).
constexpr double kStartsShare = 0.6;
/// The cut-orders move is made for at most this many cuts (4! orders of a sequence).
constexpr int kMaxOrderCuts = 4;

// Calls f(digit) for every digit vector with 0 <= digit[j] < size[j] (none when a size is 0).
template <class F>
void for_each_product(const std::vector<size_t>& size, F f) {
  for (size_t n : size)
    if (n == 0) return;
  std::vector<size_t> digit(size.size(), 0);
  for (;;) {
    f(digit);
    int j = static_cast<int>(size.size()) - 1;
    while (j >= 0 && ++digit[j] == size[j]) digit[j--] = 0;
    if (j < 0) return;
  }
}

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
double min_move_units(int nodes, int cuts, int i, double dp, double widest = 2.0) {
  return dp + kNodeUnits * nodes * (1.0 + widest * (cuts - 1 - i) + (cuts - i));
}

// Lower bounds of a neighbourhood problem `q` (no shared strategy variables): for each node
// candidate, the least it pays on its edges; for each value of a variable, the least the nodes
// next to it pay with that value (each node's cheapest candidate, its other edges at their least).
void lower_bounds(const CutProblem& q, std::vector<std::vector<double>>* node_bound,
                  std::vector<std::vector<double>>* value_bound) {
  const size_t N = q.edges.size();
  std::vector<std::vector<std::vector<double>>> row_min(N);  // [node][edge][candidate]
  node_bound->assign(N, {});
  for (size_t n = 0; n < N; ++n) {
    const size_t O = q.options[n].size();
    (*node_bound)[n].assign(O, 0);
    for (const CutProblem::Edge& edge : q.edges[n]) {
      const int D = q.domain[edge.var];
      std::vector<double> m(O);
      for (size_t o = 0; o < O; ++o) {
        m[o] = *std::min_element(edge.cost.begin() + o * D, edge.cost.begin() + (o + 1) * D);
        (*node_bound)[n][o] += m[o];
      }
      row_min[n].push_back(std::move(m));
    }
  }
  value_bound->assign(q.domain.size(), {});
  for (size_t v = 0; v < q.domain.size(); ++v) (*value_bound)[v].assign(q.domain[v], 0);
  for (size_t n = 0; n < N; ++n)
    for (size_t e = 0; e < q.edges[n].size(); ++e) {
      const CutProblem::Edge& edge = q.edges[n][e];
      const int D = q.domain[edge.var];
      for (int x = 0; x < D; ++x) {
        double least = kInfCost;
        for (size_t o = 0; o < q.options[n].size(); ++o)
          least = std::min(least, (*node_bound)[n][o] - row_min[n][e][o] + edge.cost[o * D + x]);
        (*value_bound)[edge.var][x] += least;
      }
    }
}

// The first value (the plan's own), those marked in `first`, and others of least `bound` (the
// earlier of equal ones; none that cannot be taken) up to `width` in all, in index order.
std::vector<int> least(const std::vector<double>& bound, size_t width, const std::vector<char>& first) {
  std::vector<int> order;
  for (size_t x = 0; x < bound.size(); ++x)
    if (x == 0 || bound[x] < kInfCost) order.push_back(static_cast<int>(x));
  std::stable_sort(order.begin() + 1, order.end(), [&](int a, int b) {
    return first[a] != first[b] ? first[a] > first[b] : bound[a] < bound[b];
  });
  size_t firsts = 0;
  for (int x : order) firsts += first[x];
  width = std::max(width, firsts + 1);
  if (order.size() > width) order.resize(width);
  std::sort(order.begin(), order.end());
  return order;
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
  int version = 0;                  // bumped whenever `plan` changes

  double total() const { return flat.back(); }

  std::vector<std::vector<NodeOption>> options_at(const SearchState& s, int cut, std::vector<char>* elementwise) const {
    return node_options(g, s, factors[cut], cut, provider, options.constraint, options.replicate_fallback,
                        elementwise);
  }

  // The problem of cut `cut` from state `s` (as the recursion builds it), its coarsening and
  // levels; false when some node has no strategy there.
  bool cut_problem_at(const SearchState& s, int cut, CutProblem* p, Coarsening* c, Levels* levels) const {
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
    ++version;
    flat = std::move(costs);
    prefix.resize(from + 1);
    for (SearchState& st : states) prefix.push_back(std::move(st));
    return true;
  }
  bool keep_if_better(NamedPlan p, int from) { return adopt(std::move(p), from, true); }

  // Cuts [from, cuts) of `want` made valid one cut at a time: each cut is solved by the DP
  // (costs of that cut alone, as the recursion prices it) with every tensor held to its tiling
  // in `want` where that tiling is in its domain, every node free, so the result is `want`
  // wherever `want` is a plan and a plan everywhere (a permuted plan may name strategies a
  // node does not have at the shapes the new order leaves, or split a dimension too small).
  bool project(NamedPlan want, int from) {
    SearchState s = prefix[from];
    const int T = g.num_tensors(), N = g.num_nodes();
    for (int j = from; j < cuts; ++j) {
      const int k = factors[j];
      CutProblem p;
      Levels levels;
      Coarsening c;
      if (!cut_problem_at(s, j, &p, &c, &levels)) return false;
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
        sol = solve_one_cut_dp(g, p, level_priority(p, levels.level_of_group, c));
      } catch (const Error&) {
        return false;
      }
      if (!(sol.cost < kInfCost)) return false;
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
    return adopt(p, from, false) || project(std::move(p), from);
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

  // Calls f(other, first) for every distinct reordering `other` of `seq` by an order of the
  // cuts that keeps each cut's factor (none for a named mesh, whose cuts are its axes);
  // `first` is the first cut where `other` differs from `seq`.
  template <class T, class F>
  void for_each_order(const std::vector<T>& seq, F f) const {
    if (!options.factors.empty()) return;
    std::vector<int> perm(cuts);
    for (int j = 0; j < cuts; ++j) perm[j] = j;
    std::vector<std::vector<T>> seen{seq};
    while (std::next_permutation(perm.begin(), perm.end())) {
      std::vector<T> other(cuts);
      bool equal = true;
      for (int j = 0; j < cuts; ++j) {
        equal = equal && factors[perm[j]] == factors[j];
        other[j] = seq[perm[j]];
      }
      if (!equal || std::find(seen.begin(), seen.end(), other) != seen.end()) continue;
      int first = 0;
      while (other[first] == seq[first]) ++first;
      f(other, first);
      seen.push_back(std::move(other));
    }
  }

  // One node's candidate strategy sequence while its layouts are derived cut by cut.
  struct NodeCandidate {
    std::vector<std::string> names;
    int pos;         // next cut to derive
    NodePrefix at;   // layouts after cuts [0, pos)
    bool alive = true;
  };

  // The joint program restricted to a neighbourhood of the plan, solved exactly by the DP:
  //  - kOneChange: every tensor class and every node may, at once, change one of its cuts or
  //    exchange two adjacent cuts of equal factor (or keep its sequence). It contains every cut
  //    move and every swap, and plans where one layer swaps its cuts while another changes one.
  //  - kOrders: every node may take its sequence in any order of the cuts (of equal factors),
  //    or any sequence at all where it has at most kAllSequences (element-wise ops, weight
  //    updates), and every tensor any sequence (at most kAllTensorSequences; else its own in
  //    any order): each layer may make its cuts in its own order while the tensors between
  //    layers and the weights' updates follow. Tiny BERT on 8 devices needs it: its attention
  //    splits heads last and batch first in the joint optimum, the other way round in the
  //    recursion, and the weights' gradients and updates change with them (one move).
  // Ties are the first cut's coarsening's (as the joint program's) among tensors that share
  // their sequence; nodes sharing a strategy (merged timesteps) keep theirs. kFailed: over
  // budget or no option; kTooWide: the DP's table would pass kMaxTable even truncated.
  enum Outcome { kKept, kNoGain, kFailed, kTooWide };
  enum Neighbourhood { kOneChange, kOrders };
  Outcome neighbourhood_move(const Coarsening& ties, const Levels& levels, Neighbourhood kind) {
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
      double all_seqs = std::pow(g.tensor(rep).shape.size() + 2.0, cuts);
      if (kind == kOrders && all_seqs > kAllTensorSequences)
        for_each_order(cur, [&](const std::vector<Tiling>& seq, int first) { add_tensor_candidate(v, seq, first); });
      if (kind == kOrders && all_seqs <= kAllTensorSequences) {
        std::vector<Tiling> each{Tiling::replicate()};
        for (size_t d = 0; d < g.tensor(rep).shape.size(); ++d) each.push_back(Tiling::split(static_cast<int>(d)));
        each.push_back(Tiling::partial());
        for_each_product(std::vector<size_t>(cuts, each.size()), [&](const std::vector<size_t>& digit) {
          std::vector<Tiling> seq(cuts);
          for (int j = 0; j < cuts; ++j) seq[j] = each[digit[j]];
          if (seq != cur) add_tensor_candidate(v, seq, 0);
        });
      }
      for (int i = 0; i < cuts && kind == kOneChange; ++i) {
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
      for (int i = 0; i + 1 < cuts && kind == kOneChange; ++i)
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
        // (any sequence: of the names the node has at the plan's cuts; re-derived below)
        std::vector<size_t> names(cuts);
        size_t all = 1;
        for (int i = 0; i < cuts; ++i) all *= names[i] = at_cut[i][n].size();
        if (kind == kOrders && all <= kAllSequences) {
          for_each_product(names, [&](const std::vector<size_t>& digit) {
            std::vector<std::string> seq(cuts);
            for (int j = 0; j < cuts; ++j) seq[j] = at_cut[j][n][digit[j]].name;
            if (seq != plan.option[n]) ncand[n].push_back({seq, 0, base(0)});
          });
        } else if (kind == kOrders) {
          for_each_order(plan.option[n], [&](const std::vector<std::string>& seq, int first) {
            ncand[n].push_back({seq, first, base(first)});
          });
        }
        for (int i = 0; i < cuts && kind == kOneChange; ++i)
          for (const NodeOption& o : at_cut[i][n]) {
            if (o.name == plan.option[n][i]) continue;
            std::vector<std::string> seq = plan.option[n];
            seq[i] = o.name;
            ncand[n].push_back({seq, i + 1, extend_prefix(g.node(n), base(i), o, factors[i], pool)});
          }
        for (int i = 0; i + 1 < cuts && kind == kOneChange; ++i)
          if (swappable(i) && plan.option[n][i] != plan.option[n][i + 1]) {
            std::vector<std::string> seq = plan.option[n];
            std::swap(seq[i], seq[i + 1]);
            ncand[n].push_back({seq, i, base(i)});
          }
      }
      widest = std::max(widest, ncand[n].size());
    }
    // Budget: the replay (the options derived below are charged per call, the DP's tables after).
    if (!budget->take(kNodeUnits * N * cuts)) return kFailed;
    // Later cuts' strategies re-derived by name for each candidate's shapes. Candidates of a
    // node that agree on their first j strategies share their shapes before cut j: one
    // node_options call per such group (the calls serve every node at once).
    for (int j = 0; j < cuts; ++j) {
      std::vector<std::vector<std::vector<int>>> groups(N);  // [node][group] -> candidates
      size_t calls = 0;
      for (NodeId n = 0; n < N; ++n) {
        std::map<std::vector<std::string>, int> group_of;
        for (size_t a = 0; a < ncand[n].size(); ++a) {
          const NodeCandidate& c = ncand[n][a];
          if (!c.alive || c.pos != j) continue;
          std::vector<std::string> key(c.names.begin(), c.names.begin() + j);
          auto it = group_of.emplace(std::move(key), static_cast<int>(groups[n].size())).first;
          if (it->second == static_cast<int>(groups[n].size())) groups[n].emplace_back();
          groups[n][it->second].push_back(static_cast<int>(a));
        }
        calls = std::max(calls, groups[n].size());
      }
      for (size_t b = 0; b < calls; ++b) {
        if (!budget->take(kNodeUnits * N)) return kFailed;
        SearchState shapes = prefix[j];
        for (NodeId n = 0; n < N; ++n)
          if (b < groups[n].size()) {
            const NodeCandidate& c = ncand[n][groups[n][b][0]];
            shapes.node_in[n] = c.at.in;
            shapes.node_out[n] = c.at.out;
          }
        std::vector<char> ew;
        std::vector<std::vector<NodeOption>> opts;
        bool ok = true;
        try {
          opts = options_at(shapes, j, &ew);
        } catch (const Error&) {
          ok = false;
        }
        for (NodeId n = 0; n < N; ++n) {
          if (b >= groups[n].size()) continue;
          for (int a : groups[n][b]) {
            NodeCandidate& c = ncand[n][a];
            auto it = !ok ? opts[n].end() : std::find_if(opts[n].begin(), opts[n].end(), [&](const NodeOption& o) {
              return o.name == c.names[j];
            });
            if (!ok || it == opts[n].end()) {
              c.alive = false;
              continue;
            }
            c.at = extend_prefix(g.node(n), c.at, *it, factors[j], pool);
            c.pos = j + 1;
          }
        }
      }
    }
    // The program: edges at their final bytes (each entry priced: charged as kCellUnits).
    double cells = 0;
    for (NodeId n = 0; n < N; ++n) {
      const Node& node = g.node(n);
      for (size_t e = 0; e < node.inputs.size() + node.outputs.size(); ++e) {
        const TensorId t = e < node.inputs.size() ? node.inputs[e] : node.outputs[e - node.inputs.size()];
        cells += static_cast<double>(ncand[n].size()) * q.domain[q.tensor_var[t]];
      }
    }
    if (!budget->take(kCellUnits * cells)) return kFailed;
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
    // Solved whole when the DP fits; else each tensor class keeps its kTruncated[w] values and
    // each node its kTruncated[w] candidates (its own sequence, then its own in other orders,
    // then those of least lower bound), for the first w that fits: the move is then exact over
    // that smaller neighbourhood.
    const int V = static_cast<int>(members.size());
    // (the values and options kept of a truncated neighbourhood; none when solved whole)
    DomainReduction narrowed;
    std::vector<std::vector<int>>& keep = narrowed.kept;
    std::vector<std::vector<int>>& keep_option = narrowed.kept_options;
    CutProblem r;
    CutSolution sol;
    bool solved = false;
    try {
      sol = solve_one_cut_dp(g, q, level_priority(q, levels.level_of_group, ties), kMaxTable);
      solved = true;
    } catch (const Error&) {
    }
    if (!solved) {
      // (the plan's own sequences in other orders are kept first)
      std::vector<std::vector<char>> reorder_value(V), reorder_option(N);
      for (int v = 0; v < V; ++v) {
        std::vector<std::string> own;
        for (const Tiling& ti : tcand[v][0]) own.push_back(ti.str());
        std::sort(own.begin(), own.end());
        for (const auto& seq : tcand[v]) {
          std::vector<std::string> other;
          for (const Tiling& ti : seq) other.push_back(ti.str());
          std::sort(other.begin(), other.end());
          reorder_value[v].push_back(other == own);
        }
      }
      for (NodeId n = 0; n < N; ++n) {
        std::vector<std::string> own = plan.option[n];
        std::sort(own.begin(), own.end());
        for (const NodeCandidate& c : ncand[n]) {
          std::vector<std::string> other = c.names;
          std::sort(other.begin(), other.end());
          reorder_option[n].push_back(other == own);
        }
      }
      std::vector<std::vector<double>> node_bound, value_bound;
      lower_bounds(q, &node_bound, &value_bound);
      for (size_t width : kTruncated) {
        keep.assign(V, {});
        keep_option.assign(N, {});
        for (int v = 0; v < V; ++v) keep[v] = least(value_bound[v], width, reorder_value[v]);
        for (NodeId n = 0; n < N; ++n) keep_option[n] = least(node_bound[n], width, reorder_option[n]);
        r = restrict_domains(q, narrowed);
        try {
          sol = solve_one_cut_dp(g, r, level_priority(r, levels.level_of_group, ties), kMaxTable);
          solved = true;
          break;
        } catch (const Error&) {
        }
      }
    }
    if (!solved) return kTooWide;
    budget->spent += sol.work;
    const CutProblem& solved_problem = keep.empty() ? q : r;
    if (!(sol.cost < total() * (1 - kGain))) return kNoGain;
    NamedPlan next = plan;
    for (TensorId t = 0; t < T; ++t) {
      const int v = q.tensor_var[t];
      next.tiling[t] = tcand[v][keep.empty() ? sol.value[v] : keep[v][sol.value[v]]];
    }
    for (NodeId n = 0; n < N; ++n) {
      int best = -1;
      solved_problem.node_cost(n, sol.value, &best);
      if (best < 0) return kFailed;
      next.option[n] = ncand[n][keep.empty() ? best : keep_option[n][best]].names;
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
  bool too_wide[2] = {false, false};  // a neighbourhood's DP too wide once: not tried again
  Coarsening c;
  Levels levels;
  bool get(const Refiner& r) {
    if (tried) return ok;
    tried = true;
    std::vector<char> elementwise;
    try {
      const auto opts = r.options_at(r.prefix[0], 0, &elementwise);
      c = coarsen(r.g, elementwise, &opts);
      levels = bfs_levels(r.g, c);
      ok = true;
    } catch (const Error&) {
    }
    return ok;
  }
};

// Cheap moves (one cut re-solved, two cuts swapped) until none helps; then, when `wide`, one
// step in a wide neighbourhood (the layers' cut orders, else one change anywhere) to leave
// that local optimum; and again.
void descend(Refiner& r, FirstCutTies& ties, RefineStats* stats, bool wide) {
  constexpr int kMaxRounds = 32;
  const int cuts = r.cuts;
  // The plan version each cut move / swap last ended on: none is made twice on the same plan
  // (each is exact, so once made it cannot help again until another move changes the plan).
  std::vector<int> cut_seen(cuts, -1), swap_seen(cuts, -1);
  int wide_seen[2] = {-1, -1};
  for (int round = 0; round < kMaxRounds && !r.budget->capped; ++round) {
    bool improved = false;
    for (int i = 0; i < cuts && !r.budget->capped; ++i) {
      if (cut_seen[i] == r.version) continue;
      ++stats->tried;
      if (r.cut_move(i, r.cut_work[i])) ++stats->kept, improved = true;
      cut_seen[i] = r.version;
    }
    // Swapping cuts of a named mesh would move tilings between its axes.
    for (int i = 0; i + 1 < cuts && r.options.factors.empty() && !r.budget->capped; ++i) {
      if (r.factors[i] != r.factors[i + 1] || swap_seen[i] == r.version) continue;
      ++stats->tried;
      if (r.swap_move(i)) ++stats->kept, improved = true;
      swap_seen[i] = r.version;
    }
    if (improved) continue;
    if (r.budget->capped || !wide || !ties.get(r)) break;
    // The wide moves, each exact over its neighbourhood: the layers' cut orders first (cheaper).
    bool moved = false;
    for (Refiner::Neighbourhood kind : {Refiner::kOrders, Refiner::kOneChange}) {
      if (moved || ties.too_wide[kind] || wide_seen[kind] == r.version) continue;
      if (kind == Refiner::kOrders && cuts > kMaxOrderCuts) continue;
      ++stats->tried;
      const Refiner::Outcome out = r.neighbourhood_move(ties.c, ties.levels, kind);
      wide_seen[kind] = r.version;
      if (out == Refiner::kTooWide) ties.too_wide[kind] = true;
      if (out == Refiner::kKept) ++stats->kept, moved = true;
    }
    if (!moved) break;
  }
}

}  // namespace

bool refine_applies(const SearchOptions& options, size_t cuts) {
  return options.refine && cuts > 1 && options.solver == CutSolver::kDP && options.memory_weight == 0 &&
         options.bandwidths.empty();
}

RefineStats refine_cuts(const Graph& g, const std::vector<int>& factors, const SearchOptions& options,
                        const StrategyProvider& provider, const std::vector<double>& cut_work, SearchState* s,
                        std::vector<double>* flat, size_t first_cut_widest) {
  RefineStats stats;
  const int cuts = static_cast<int>(factors.size());
  if (cuts < 2 || cut_work.size() != factors.size()) return stats;
  double recursion = 0;
  for (double w : cut_work) recursion += w + kNodeUnits * g.num_nodes();
  const bool small = g.num_nodes() <= kSmallGraph;
  const double floor = small && cuts <= kMaxOrderCuts ? kOrdersFloor : kFloor * std::min(1.0, kSmallGraph / g.num_nodes());
  Budget budget{0, std::max(floor, kShareOfRecursion * recursion)};
  // Nothing when the first move, the first cut's, does not fit the budget after the replay
  // (copying the states alone would cost a large graph a good part of its search): priced as
  // cut_move charges it, with the first cut's widest node options, so a refinement that could
  // not make its first move (LLaMA-70B's shapes on 1024 devices: 0.45 s of replay and cut
  // problem for nothing) is not started; the plan is the same either way.
  const double replay = kNodeUnits * g.num_nodes() * cuts;
  if (replay + min_move_units(g.num_nodes(), cuts, 0, cut_work[0], static_cast<double>(first_cut_widest)) >
      budget.limit) {
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
  // reach one step at a time): the cheapest end wins. Up to kMaxOrderCuts cuts the starts make
  // the cheap moves only and the wide ones polish the best end (the cut-orders move is the
  // dearest; tiny BERT on 8 devices needs it after the fourth start); with more cuts (many
  // more starts) every start makes the wide moves too.
  const bool polish_last = cuts <= kMaxOrderCuts;
  auto best = std::make_unique<Refiner>(r);
  descend(r, ties, &stats, !polish_last);
  if (r.total() < best->total()) best = std::make_unique<Refiner>(r);
  // Other orders of the cuts (of equal factor; not a named mesh's axes) as further starts.
  std::vector<int> perm(cuts);
  for (int j = 0; j < cuts; ++j) perm[j] = j;
  while (options.factors.empty() && !budget.capped && (!polish_last || budget.spent < kStartsShare * budget.limit) &&
         std::next_permutation(perm.begin(), perm.end())) {
    bool equal = true;
    for (int j = 0; j < cuts; ++j) equal = equal && factors[perm[j]] == factors[j];
    if (!equal || !budget.take(kNodeUnits * g.num_nodes() * cuts)) continue;
    Refiner start = *best;
    if (!start.force_order(perm)) continue;
    descend(start, ties, &stats, !polish_last);
    if (start.total() < best->total() * (1 - kGain)) best = std::make_unique<Refiner>(std::move(start)), ++stats.kept;
  }
  if (polish_last && !budget.capped) descend(*best, ties, &stats, true);
  stats.work = budget.spent;
  stats.capped = budget.capped;
  if (best->total() < flat->back()) {
    *s = std::move(best->prefix.back());
    *flat = std::move(best->flat);
  }
  return stats;
}

Plan refine_given_plan(const Graph& g, int devices, const std::vector<std::vector<std::string>>& tensor_tilings,
                       const std::vector<std::vector<std::string>>& node_strategies, const SearchOptions& options) {
  Plan given = price_plan(g, devices, tensor_tilings, node_strategies, options);  // checks every entry
  const int cuts = static_cast<int>(given.factors.size());
  const StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  NamedPlan named{std::vector<std::vector<Tiling>>(g.num_tensors()), node_strategies};
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    for (const std::string& ti : tensor_tilings[t]) named.tiling[t].push_back(Tiling::parse(ti));
  Budget unused;
  Refiner r{g, given.factors, options, provider, cuts, &unused, {}, {}, {}, {}};
  std::vector<SearchState> states;
  std::vector<double> flat;
  if (!r.replay(named, SearchState::initial(g), &states, &flat) || states.empty())
    return given;
  SearchState s = std::move(states.back());
  refine_cuts(g, given.factors, options, provider, std::vector<double>(cuts, 0.0), &s, &flat);
  Plan plan;
  plan.algorithm = "refined";
  plan.devices = devices;
  plan.factors = given.factors;
  finish_plan(g, s, flat, options.bandwidths, &plan, options.bandwidths_in_cut_order);
  return plan;
}

}  // namespace autotile
