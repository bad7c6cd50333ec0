// The refinement's wide moves: the joint program over a neighbourhood of the plan, solved
// exactly by the DP, truncated to its cheapest candidates when too wide (search/refiner.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "search/cost_model.h"
#include "search/dominance.h"
#include "search/one_cut_dp.h"
#include "search/refiner.h"
#include "util/error.h"

namespace autotile {
namespace refine {

namespace {

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

}  // namespace

Refiner::Outcome Refiner::neighbourhood_move(const Coarsening& ties, const Levels& levels, Neighbourhood kind) {
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
  const bool timed = options.time != nullptr;
  std::vector<std::vector<TensorPath>> tpath(timed ? T : 0);  // (time objective) [tensor][value]
  auto add_tensor_candidate = [&](int v, const std::vector<Tiling>& seq, int first) {
    std::vector<int> h;
    std::vector<TensorPath> paths;
    for (TensorId t : members[v]) {
      Shape shape = prefix[first].tensor_shape[t];
      int layout = prefix[first].held[t];
      TensorPath path;
      for (int j = 0; j < first && timed; ++j) path.held.push_back(prefix[j + 1].held[t]), path.tiling.push_back(seq[j]);
      for (int j = first; j < cuts; ++j) {
        const Tiling& ti = seq[j];
        if (!fits(t, shape, ti, factors[j])) return;
        if (options.constraint.allow_tiling && !options.constraint.allow_tiling(t, ti, j)) return;
        layout = pool.held(layout, ti, factors[j]);
        if (ti.kind == Tiling::kSplit) shape[ti.dim] /= factors[j];
        if (timed) path.held.push_back(layout), path.tiling.push_back(ti);
      }
      h.push_back(layout);
      paths.push_back(std::move(path));
    }
    tcand[v].push_back(seq);
    for (size_t m = 0; m < members[v].size(); ++m) {
      held[members[v][m]].push_back(h[m]);
      if (timed) tpath[members[v][m]].push_back(std::move(paths[m]));
    }
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
  // (time objective) node n's path through the plan's cuts [0, upto)
  auto plan_path = [&](NodeId n, int upto) {
    NodePath path;
    for (int j = 0; j < upto && timed; ++j)
      for (const NodeOption& o : at_cut[j][n])
        if (o.name == plan.option[n][j]) {
          path.push(prefix[j + 1].need[n], prefix[j + 1].make[n], o);
          break;
        }
    return path;
  };
  for (NodeId n = 0; n < N; ++n) {
    const NodePrefix last{prefix[cuts].node_in[n], prefix[cuts].node_out[n], prefix[cuts].need[n],
                          prefix[cuts].make[n], plan.option[n]};
    const size_t plan_own = ncand[n].size();
    ncand[n].push_back({plan.option[n], cuts, last, true, {}});
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
          if (seq != plan.option[n]) ncand[n].push_back({seq, 0, base(0), true, {}});
        });
      } else if (kind == kOrders) {
        for_each_order(plan.option[n], [&](const std::vector<std::string>& seq, int first) {
          ncand[n].push_back({seq, first, base(first), true, {}});
        });
      }
      for (int i = 0; i < cuts && kind == kOneChange; ++i)
        for (const NodeOption& o : at_cut[i][n]) {
          if (o.name == plan.option[n][i]) continue;
          std::vector<std::string> seq = plan.option[n];
          seq[i] = o.name;
          ncand[n].push_back({seq, i + 1, extend_prefix(g.node(n), base(i), o, factors[i], pool), true, {}});
          if (timed) {
            NodeCandidate& c = ncand[n].back();
            c.path = plan_path(n, i);
            c.path.push(c.at.need, c.at.make, o);
          }
        }
      for (int i = 0; i + 1 < cuts && kind == kOneChange; ++i)
        if (swappable(i) && plan.option[n][i] != plan.option[n][i + 1]) {
          std::vector<std::string> seq = plan.option[n];
          std::swap(seq[i], seq[i + 1]);
          ncand[n].push_back({seq, i, base(i), true, {}});
        }
    }
    for (size_t a = plan_own; a < ncand[n].size() && timed; ++a)
      if (ncand[n][a].path.need.empty()) ncand[n][a].path = plan_path(n, ncand[n][a].pos);
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
          // (`opts` is empty when options_at threw: opts[n] is only read when ok)
          const NodeOption* o = nullptr;
          if (ok)
            for (const NodeOption& x : opts[n])
              if (x.name == c.names[j]) {
                o = &x;
                break;
              }
          if (!o) {
            c.alive = false;
            continue;
          }
          c.at = extend_prefix(g.node(n), c.at, *o, factors[j], pool);
          if (timed) c.path.push(c.at.need, c.at.make, *o);
          c.pos = j + 1;
        }
      }
    }
  }
  // The program: edges at their final bytes, or seconds (each entry priced: charged as kCellUnits).
  double cells = 0;
  for (NodeId n = 0; n < N; ++n) {
    const Node& node = g.node(n);
    for (size_t e = 0; e < node.inputs.size() + node.outputs.size(); ++e) {
      const TensorId t = e < node.inputs.size() ? node.inputs[e] : node.outputs[e - node.inputs.size()];
      cells += static_cast<double>(ncand[n].size()) * q.domain[q.tensor_var[t]];
    }
  }
  if (!budget->take(kCellUnits * cells)) return kFailed;
  const std::vector<std::vector<int>> upto = timed ? factors_upto() : std::vector<std::vector<int>>{};
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
      // (time objective: the seconds each edge adds over every cut, each node's final compute
      // on its first edge: the DP's cost is the whole plan's seconds, refine_time.cc)
      const double before = !timed ? 0.0
                            : e < ins ? edge_bytes(g, t, pool, prefix[0].held[t], prefix[0].need[n][e], prefix[0].factors)
                                      : edge_bytes(g, t, pool, prefix[0].make[n][e - ins], prefix[0].held[t], prefix[0].factors);
      for (size_t o = 0; o < O; ++o) {
        const NodeCandidate& c = ncand[n][o];
        if (!c.alive) continue;
        const double unary = timed && e == 0 ? final_seconds(n, c.at, c.path) : 0.0;
        for (int x = 0; x < D; ++x)
          edge.cost[o * D + x] = timed      ? edge_seconds(n, e, 0, before, tpath[t][x], c.path, upto) + unary
                                 : e < ins ? edge_bytes(g, t, pool, held[t][x], c.at.need[e], factors)
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
  // (too wide is an outcome here, not an error: reported, not thrown)
  try {
    sol = solve_one_cut_dp(g, q, level_priority(q, levels.level_of_group, ties), kMaxTable, WidthPolicy::kReport);
    solved = !sol.too_wide;
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
        sol = solve_one_cut_dp(g, r, level_priority(r, levels.level_of_group, ties), kMaxTable,
                               WidthPolicy::kReport);
        solved = !sol.too_wide;
      } catch (const Error&) {
      }
      if (solved) break;
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

}  // namespace refine
}  // namespace autotile
