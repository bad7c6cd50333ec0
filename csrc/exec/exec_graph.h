// The per-device execution graph (Soybean Sec 5, Tofu Sec 6).
//
// For every node of the training graph and every device there is one compute op running
// the node's own kernel on the device's tile (partition-n-reduce: kernels are reused, never
// rewritten). Where a compute op needs a region it does not hold, one MultiFetch op
// assembles the whole region in place from the pieces other devices hold; where a strategy
// leaves partial results, an accumulating MultiFetch on every device sums exactly the
// region that device keeps (the reduction is spread over all devices, no aggregation
// point). Control dependencies keep each device's ops in the serial graph's order and put
// fetches just before their consumer (Tofu Fig. 7), so the memory planner can reuse
// buffers as in the serial graph.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "exec/box.h"
#include "graph/graph.h"

namespace autotile {

/// \brief The part of a plan the execution graph is built from (a search result).
struct PlanSpec {
  std::vector<int> factors;                                ///< k_i of each cut, first cut first
  std::vector<std::vector<std::string>> tensor_tilings;    ///< [tensor][cut]: split(d) | replicate | partial
  std::vector<std::vector<std::string>> node_strategies;   ///< [node][cut]: split variable | replicate
};

/// \brief Options of execution-graph construction.
struct ExecOptions {
  /// Keep each device's ops in serial order and fetch just before the consumer. When false,
  /// fetches are placed as early as their sources allow (what a dataflow scheduler without
  /// Tofu's control dependencies does), which lengthens buffer lifetimes.
  bool control_deps = true;
  /// Per-device arena budget in bytes for swap planning (exec/swap_plan.h); 0: no swapping.
  int64_t swap_budget = 0;
  /// Collectives over groups of more devices than this run in stages, one cut at a time
  /// (reduce-scatter by recursive halving, gathers by recursive doubling), each device
  /// exchanging with the k_i devices that differ from it in that cut's digit: sum(k_i) pieces
  /// per device instead of prod(k_i), the same bytes. Smaller groups fetch in one MultiFetch.
  int stage_above = 8;
  /// Collectives that move more than this many bytes per device (a reduction: its tile; a
  /// gather: what a device wants and does not hold) follow the cut hierarchy, the outer
  /// cuts being the slower links (the first cuts separate nodes): staged reductions sum over
  /// the innermost cut first and gathers copy over the outermost cut first, so the slow links
  /// carry the smallest pieces (a two-level all-reduce), also where the plan's slabs (split
  /// along one dim at several cuts, first cut major) need a re-indexing copy for that: one
  /// more round, and a 1/K part of the tensor more bytes than the flat collective the search
  /// prices. They are staged over any group of more than two devices (stage_above does not
  /// apply). Smaller collectives, which cost latency more than bandwidth, and every one when
  /// negative: only where the bytes and rounds are the same.
  int64_t hierarchical_above = -1;
  /// The link level of each cut (any ids; empty: every cut its own). Staged collectives take
  /// consecutive cuts of one level in one stage (the devices differing only in those digits
  /// exchange at once), so a two-level machine needs two stages, not one per cut.
  std::vector<int> cut_levels;
  /// The serial schedule: a topological order of every node (checked_order). Empty: the
  /// default, schedule_order (exec/schedule_order.h). The swap search tries others.
  std::vector<NodeId> order;
  /// Memory-clock units (6 a node) a swapped-out buffer keeps its memory past its last use
  /// before the gap, so that what takes the memory next need not wait for the copy
  /// (exec/swap_plan.h). 0: freed at once.
  int64_t swap_hold = 0;
  /// Only what the arena sizes need (the memory-aware search measures each candidate plan
  /// by its largest arena, planner/memory_fit.py): no dependencies (data, control or memory
  /// reuse), fetch pieces or compute input boxes are kept, so the graph cannot be run; the
  /// buffers (with their readers), lifetimes, offsets, arena_bytes and live_peak_bytes are
  /// those of the full build. Needs control_deps (the clock of a dataflow plan comes from the
  /// dependencies) and no swap_budget.
  bool arena_only = false;
  /// With arena_only: when some device holds more than this many bytes at once (its live
  /// peak), no offsets are placed and each device's arena_bytes is its live peak, a lower
  /// bound of the arena already over the limit (the budgeted search needs no more to reject
  /// the plan). 0: always placed.
  int64_t arena_limit = 0;
  /// With arena_only: build and plan only one device of each class of devices whose memory
  /// plans are provably the same (their parts of every node agree, exec/node_template.h:
  /// device_signatures), e.g. devices that run the same schedule on their own tiles. The other
  /// devices' arena_bytes and live_peak_bytes are their class's; their buffers and ops are not
  /// made (but for ops of theirs that read a built device's buffers, kept as its readers);
  /// bytes_moved and bytes_received are the whole graph's (ExecGraph::class_of).
  bool device_classes = false;
};

enum class BufferRole : uint8_t {
  kTile = 0,    ///< a device's planned tile of a tensor
  kRaw = 1,     ///< a compute op's output before conversion to the planned tiling
  kRegion = 2,  ///< an input region assembled for one compute op
};

/// \brief A piece of memory on one device holding a box of one tensor.
struct Buffer {
  int device = 0;
  TensorId tensor = kNone;
  Box box;
  BufferRole role = BufferRole::kTile;
  bool partial = false;        ///< holds a partial sum (the tensor's tiling is partial at some cut)
  int producer = -1;           ///< exec op writing it; -1 for graph inputs (preloaded)
  std::vector<int> readers;    ///< exec ops reading it (any device)
  int64_t bytes = 0;
  int64_t offset = -1;         ///< byte offset in the device arena (memory plan)
  int64_t live_begin = 0;      ///< memory-plan clock when written
  int64_t live_end = 0;        ///< memory-plan clock of the last read
  bool host = false;           ///< lives in the device's host pool (a swapped-out copy), not its arena
};

/// kSwapOut / kSwapIn copy a buffer between a device's arena and its host pool (SwapAdvisor);
/// they run on the device's copy stream (ExecGraph::copy_schedule), beside its compute.
enum class ExecKind : uint8_t { kCompute = 0, kFetch = 1, kSwapOut = 2, kSwapIn = 3 };

/// \brief One piece of a MultiFetch: `region` (absolute tensor coordinates) of buffer `src`.
struct Piece {
  int src = -1;
  Box region;
};

/// \brief One op of the execution graph.
struct ExecOp {
  ExecKind kind = ExecKind::kCompute;
  int device = 0;
  NodeId node = kNone;              ///< the training-graph node (compute) or the consumer/producer node (fetch)
  std::vector<int> inputs;          ///< compute: one buffer per node input; -1 if the op never reads it
  std::vector<Box> input_boxes;     ///< compute: the region of each input the sub-op works on
  std::vector<int> outputs;         ///< compute: one buffer per node output; fetch: the destination
  std::vector<Piece> pieces;        ///< fetch: what to copy (or add) into outputs[0]
  bool accumulate = false;          ///< fetch: zero the destination, then add the pieces (reduction)
  std::vector<int> deps;            ///< ops that must finish first (data, control and reuse deps)
  int64_t bytes_moved = 0;          ///< bytes read from other devices
  int64_t time = 0;                 ///< position on the memory-plan clock
};

/// \brief The per-device execution graph with its memory plan.
struct ExecGraph {
  int devices = 1;
  std::vector<int> factors;
  std::vector<Buffer> buffers;
  std::vector<ExecOp> ops;
  std::vector<std::vector<int>> schedule;  ///< per device: its ops in execution order
  std::vector<std::vector<int>> copy_schedule;  ///< per device: its swap ops in order (copy stream)
  std::vector<int64_t> host_bytes;         ///< per device: host pool size (swapped-out copies)
  std::vector<int> tile_of;                ///< [tensor * devices + device] -> tile buffer id
  std::vector<int64_t> arena_bytes;        ///< per device: arena size from the memory plan
  std::vector<int64_t> live_peak_bytes;    ///< per device: max bytes live at once (a lower bound)
  int64_t bytes_moved = 0;
  std::vector<int64_t> bytes_received;     ///< per device
  /// Per device: the device whose memory plan it has (itself, except in an
  /// ExecOptions::device_classes build, where only those devices' buffers are made).
  std::vector<int> class_of;

  int tile(TensorId t, int device) const { return tile_of[static_cast<size_t>(t) * devices + device]; }
};

/// \brief Builds the execution graph of `graph` under `plan`, with its memory plan.
///
/// Throws Error when the plan does not fit the graph (tensor or node counts, a tiling that
/// does not divide a dim, a strategy variable the node's TDL does not offer).
ExecGraph build_exec_graph(const Graph& graph, const PlanSpec& plan, const ExecOptions& options = {});

/// \brief Digits of `device` in the mixed radix of `factors` (first cut most significant).
std::vector<int> device_digits(int device, const std::vector<int>& factors);

}  // namespace autotile
