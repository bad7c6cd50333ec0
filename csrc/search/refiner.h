// The refinement across cuts (search/cut_refine.h), inside: its constants, the plan it moves by
// name, its budget and the Refiner, whose moves are in refine_moves.cc (a cut re-solved, two
// cuts swapped, a plan replayed, projected or reordered) and refine_neighbourhood.cc (the wide
// moves: the joint program over a neighbourhood of the plan). The driver (cut_refine.cc)
// descends with them from several starts. Not part of the bindings.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "search/bfs_levels.h"
#include "search/coarsen.h"
#include "search/cut_problem.h"
#include "search/kcuts.h"
#include "search/node_prefix.h"
#include "search/search_state.h"

namespace autotile {
namespace refine {

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
/// Largest DP table of a move that re-solves one cut (the recursion's own limit, the default of
/// solve_one_cut_dp): a cut the recursion solved fits it.
constexpr int64_t kMaxCutTable = int64_t{1} << 26;
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

// A whole plan by name: tilings [tensor][cut], strategy names [node][cut].
struct NamedPlan {
  std::vector<std::vector<Tiling>> tiling;
  std::vector<std::vector<std::string>> option;
};

// The least a move of cut i costs: its DP, and the node options of its cut, of every later
// cut for at least two of its options, and of the replay from it.
inline double min_move_units(int nodes, int cuts, int i, double dp, double widest = 2.0) {
  return dp + kNodeUnits * nodes * (1.0 + widest * (cuts - 1 - i) + (cuts - i));
}

// A plan's costs after each of its cuts: the cumulative flat bytes and, under the time
// objective (search/time_cost.h), the cumulative seconds of communication and the compute of
// the final tiles, as plan_seconds adds them.
struct PlanCost {
  std::vector<double> flat;
  std::vector<double> secs;
  double compute = 0;
  // The first `cuts` cuts' costs (no compute yet).
  PlanCost upto(int cuts) const {
    PlanCost c;
    c.flat.assign(flat.begin(), flat.begin() + cuts);
    c.secs.assign(secs.begin(), secs.begin() + std::min<size_t>(cuts, secs.size()));
    return c;
  }
};

// One tensor's layouts held after each cut from some cut on, and its tiling at each.
struct TensorPath {
  std::vector<int> held;
  std::vector<Tiling> tiling;
};
// One node's layouts after each cut from some cut on (what each device reads and writes), which
// outputs it makes partial at each, and the read flags of its last cut's option.
struct NodePath {
  std::vector<std::vector<int>> need, make;
  std::vector<std::vector<char>> partial;
  std::vector<char> read;
  // Appends one cut: the layouts after it and the option it ran the node as.
  void push(const std::vector<int>& need_after, const std::vector<int>& make_after, const NodeOption& o);
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

// A plan under refinement (by name), the states before each of its cuts and its cost, with the
// moves that change it; copies share the budget.
struct Refiner {
  const Graph& g;
  const std::vector<int>& factors;
  const SearchOptions& options;
  const StrategyProvider& provider;
  const int cuts;
  Budget* budget;
  NamedPlan plan;
  std::vector<SearchState> prefix;  // prefix[i]: the state after cuts [0, i) of `plan`
  PlanCost cost;                    // of `plan`, after each of its cuts
  std::vector<double> cut_work;     // DP entries of each cut of the recursion
  int version = 0;                  // bumped whenever `plan` changes

  // What the refinement lowers: the time objective's seconds (options.time), else flat bytes.
  double total_of(const PlanCost& c) const { return options.time ? c.secs.back() + c.compute : c.flat.back(); }
  double total() const { return total_of(cost); }

  // Node options of cut `cut` from state `s` (as the recursion derives them).
  std::vector<std::vector<NodeOption>> options_at(const SearchState& s, int cut, std::vector<char>* elementwise) const;
  // The problem of cut `cut` from state `s` (as the recursion builds it), its coarsening and
  // levels; false when some node has no strategy there.
  bool cut_problem_at(const SearchState& s, int cut, CutProblem* p, Coarsening* c, Levels* levels) const;
  // Whether tensor t of shape `shape` may take tiling `ti` in a k-way cut.
  bool fits(TensorId t, const Shape& shape, const Tiling& ti, int k) const;
  // Applies cuts [s.factors.size(), cuts) of `p` to `s` (refine_moves.cc says how), appending
  // each cut's costs to `costs`.
  bool replay(const NamedPlan& p, SearchState s, std::vector<SearchState>* states, PlanCost* costs) const;
  // Takes `p` (equal to the current plan before cut `from`) when it prices, and, with
  // `only_better`, prices below the current plan.
  bool adopt(NamedPlan p, int from, bool only_better);
  bool keep_if_better(NamedPlan p, int from) { return adopt(std::move(p), from, true); }
  // Cuts [from, cuts) of `want` made valid one cut at a time (refine_moves.cc).
  bool project(NamedPlan want, int from);
  // The plan with its cuts in the order `perm`, projected onto a valid plan.
  bool force_order(const std::vector<int>& perm);
  // Cuts i and i+1 exchanged in every tensor's and node's sequence.
  bool swap_move(int i);
  // Cut i re-solved with every other cut kept.
  bool cut_move(int i, double dp_estimate);

  // Under the time objective (refine_time.cc): the seconds edge `e` of node `n` (its inputs,
  // then its outputs) adds over cuts [from, cuts), its flat bytes before cut `from` being
  // `before`, along the tensor's and node's paths from that cut (`upto[j]`: factors[0..j]).
  double edge_seconds(NodeId n, size_t e, int from, double before, const TensorPath& tp, const NodePath& np,
                      const std::vector<std::vector<int>>& upto) const;
  // Compute seconds of node `n` on its final tiles (shapes `at`, read flags of `np`).
  double final_seconds(NodeId n, const NodePrefix& at, const NodePath& np) const;
  // factors[0..j] for each cut j.
  std::vector<std::vector<int>> factors_upto() const;

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
    NodePath path;   // (time objective) its layouts after each of cuts [0, pos)
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
  Outcome neighbourhood_move(const Coarsening& ties, const Levels& levels, Neighbourhood kind);
};

}  // namespace refine
}  // namespace autotile
