// The time objective of the search (objective="time"): each cut's problem priced in seconds of
// one device's step instead of bytes.
//
// Cut i crosses one link level of the hardware (the planner maps cuts to levels: the first
// cuts, the most significant digits of a device's id, separate the nodes). An entry of cut i's
// problem, for a node option o and a tiling value v of one of its tensors, becomes
//
//   bytes(o, v) * seconds_per_byte[i]                      communication at the level's rate
//   + message_seconds[i] * rounds   if the edge starts moving bytes at this cut (none before
//                                   it, bytes(o, v) > 0: the execution graph fetches an edge's
//                                   pieces from every source at once, so its latency is paid
//                                   once, at its outermost level); rounds = 2 for a reduction
//                                   (reduce-scatter, then fetch), else 1
//   + compute(n, tiles after the cut under o) / R           on one edge of the node, every value
//
// bytes(o, v) are the cut problem's own entries (flat bytes over every device after this cut,
// earlier cuts included: a constant per edge), seconds_per_byte[i] = 1 / (K x per-device
// bandwidth of the level), K the final device count, so bytes * rate is one device's share of
// the flat bytes moved over its own link. compute is one device's seconds for the node on its
// tiles (the simulator's roofline, given by the planner); R is the product of the factors of
// the cuts still to come, so before the last cut the compute term assumes they split the node
// evenly (an approximation), and at the last cut it is the exact per-device compute. Every term
// is a unary or pairwise term of the cut problem's form: the per-cut DP, bruteforce and the
// integer program stay exact on it.
//
// A whole plan's time in this model (plan_seconds): the sum over cuts of the bytes each cut
// adds times its rate and its messages, plus the compute of the final tiles. No overlap of
// communication with computation is credited here (the planner's simulation judges overlap).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "search/strategy_provider.h"
#include "search/tiling.h"

namespace autotile {

struct CutProblem;
struct SearchState;

/// \brief Seconds one device takes to run node `n` on tiles of these input and output shapes;
/// read[i] is 0 for an input the op only takes the shape of. NaN: the callback failed.
using ComputeSeconds = std::function<double(NodeId n, const std::vector<Shape>& ins, const std::vector<Shape>& outs,
                                            const std::vector<char>& read)>;

/// \brief The link and compute figures of the time objective (see above).
struct TimeObjective {
  std::vector<double> seconds_per_byte;  ///< per cut (cut order): per-device seconds per flat byte
  std::vector<double> message_seconds;   ///< per cut: latency of one message round at its level
  ComputeSeconds compute;                ///< per-device seconds of a node on its tiles

  /// \brief compute(n, ...), memoised by (op, shapes, read flags); throws Error when it fails.
  double node_seconds(const Graph& g, NodeId n, const std::vector<Shape>& ins, const std::vector<Shape>& outs,
                      const std::vector<char>& read) const;
  /// \brief Error unless there is one rate and one latency per cut, all finite and >= 0.
  void check(size_t cuts) const;

 private:
  struct KeyHash {
    size_t operator()(const std::vector<int64_t>& v) const;
  };
  mutable std::unordered_map<std::string, int64_t> op_ids_;
  mutable std::unordered_map<std::vector<int64_t>, double, KeyHash> memo_;
};

/// \brief Tile shapes (inputs, outputs) and read flags of node `n` after a k-way cut that runs
/// it as option `o`, from the shapes in state `s` (as SearchState::apply shrinks them).
void shapes_after(const Graph& g, const SearchState& s, NodeId n, const NodeOption& o, int k, std::vector<Shape>* ins,
                  std::vector<Shape>* outs, std::vector<char>* read);

/// \brief Rewrites the bytes of cut problem `p` (cut `cut` of state `s`, `remaining` the
/// product of the factors after it) into seconds of the time objective, in place.
void add_time_terms(const Graph& g, const SearchState& s, int cut, int remaining, const TimeObjective& t,
                    CutProblem* p);

/// \brief Message rounds of an input edge that moves bytes to a node, its tensor held as
/// `held` at the cut: 2 when it reduces partial sums (reduce-scatter, then fetch), else 1.
int input_rounds(const Tiling& held);
/// \brief Message rounds of an output edge that moves bytes: 2 when the node makes the output
/// partial (`makes_partial`) and the tensor is not held partial at the cut, else 1.
int output_rounds(bool makes_partial, const Tiling& held);
/// \brief Whether output `i` of option `o` is made partial (not whole, a partial output).
bool makes_partial(const NodeOption& o, size_t i);

/// \brief Seconds one edge adds at cut `cut`: the bytes it gains (`after` - `before`, flat
/// bytes after and before the cut) at the cut's rate, and `rounds` messages of the cut's level
/// when the edge starts moving bytes at this cut.
double edge_cut_seconds(const TimeObjective& t, size_t cut, double before, double after, int rounds);

/// \brief Flat bytes of every edge of state `s` (each node's inputs, then its outputs, node by node).
std::vector<double> edge_bytes_of(const Graph& g, const SearchState& s);

/// \brief Seconds of communication cut `cut` adds, from the edges' flat bytes `before` and
/// `after` it (edge_bytes_of), the tensors' tilings and the nodes' options at that cut.
double cut_comm_seconds(const Graph& g, const std::vector<double>& before, const std::vector<double>& after,
                        const std::vector<Tiling>& tilings, const std::vector<NodeOption>& chosen,
                        const TimeObjective& t, size_t cut);

/// \brief Compute seconds of the final tiles of `fin` (all cuts applied), `last` the options of
/// its last cut (their inputs' read flags; empty: every input read).
double final_compute_seconds(const Graph& g, const SearchState& fin, const std::vector<NodeOption>& last,
                             const TimeObjective& t);

/// \brief The time objective's seconds of the finished plan in `fin` (all cuts applied),
/// replayed cut by cut with each strategy re-derived by name; `per_cut` (may be null) gets
/// each cut's communication seconds followed by one last entry, the final tiles' compute.
/// `tdl_provider`: `provider` is the TDL analysis (its strategies are then derived once per
/// distinct op and shapes, as the search does).
double plan_seconds(const Graph& g, const SearchState& fin, const StrategyProvider& provider, bool replicate_fallback,
                    const TimeObjective& t, std::vector<double>* per_cut = nullptr, bool tdl_provider = false);

}  // namespace autotile
