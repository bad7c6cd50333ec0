// Reuse of one node's share of an arena-only execution graph by the nodes built the same way
// (issue #24: the memory-aware search measures every candidate plan by its arena).
//
// What the builder makes for a node -- its compute op on every device, the MultiFetch ops that
// assemble its input regions and convert its raw outputs to the planned tilings, and their
// buffers -- depends only on the node's TDL, the shapes, dtypes and tilings of its inputs and
// outputs and its strategy at every cut (exec/exec_build.cc): the node's id, its position in
// the schedule and the ids of the tile buffers it reads enter only as labels. A Transformer's
// layers are such nodes, 32 times over in LLaMA-7B. The first node of a kind is built and
// recorded as a template (buffers and ops, with the input tiles it reads named by input and
// device); the next ones replay it: the same buffers, ops, readers and clock times as building
// them, without the boxes' geometry, staged collectives or TDL analysis.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "exec/exec_graph.h"

namespace autotile {

/// \brief One node's buffers and ops in an arena-only execution graph, relative to the node.
///
/// A buffer reference is an index into `buffers` (>= 0), -1 (an input the op does not read),
/// or an input tile, -(2 + input * devices + device): the tile buffer of the node's input that
/// device holds when the node starts.
struct NodeTemplate {
  /// \brief A buffer the node makes; `slot` >= 0: of input `slot`, else of output -(1 + slot).
  struct TBuffer {
    int device = 0;
    int slot = 0;
    Box box;
    BufferRole role = BufferRole::kTile;
    bool partial = false;
    int64_t bytes = 0;
  };
  /// \brief An op of the node; `reads` are its piece sources (fetch) in order.
  struct TOp {
    ExecKind kind = ExecKind::kCompute;
    int device = 0;
    std::vector<int> inputs, outputs, reads;
    bool accumulate = false;
    int64_t bytes_moved = 0;
    int64_t time = 0;  ///< on the memory-plan clock, from the node's first time
  };
  std::vector<TBuffer> buffers;
  std::vector<TOp> ops;
  std::vector<int> out_tiles;  ///< [output * devices + device]: the planned tile (an index into buffers)
};

/// \brief What decides a node's share of the execution graph under `plan` (see the file
/// comment): its op, TDL and vetoed variables, its strategy at every cut, and the shape, dtype
/// and tiling of each input and output (and which inputs are the same tensor). Nodes of equal
/// keys are built alike.
std::string node_template_key(const Graph& graph, const PlanSpec& plan, NodeId node);

/// \brief Records the node's ops [op0, end) and buffers [buf0, end) of `eg` as a template;
/// `piece_srcs[i]`: the piece sources of op op0 + i (the arena-only graph drops its pieces),
/// `time0`: the node's first clock time. False when the node reads a buffer that is not one
/// of its inputs' tiles or leaves an output tile it did not make (then it cannot be replayed).
bool record_node(const ExecGraph& eg, const Graph& graph, NodeId node, int64_t time0, size_t op0, size_t buf0,
                 const std::vector<std::vector<int>>& piece_srcs, NodeTemplate& out);

/// \brief Appends `tpl`'s buffers and ops to the arena-only graph `eg` for `node` starting at
/// clock `time0`, as building it would (readers, producers, schedule, planned tiles).
///
/// With `kept` (per device), only the kept devices' buffers and ops are made; an op of another
/// device that reads a kept device's buffer is made without inputs or outputs, as a reader
/// (the clock time its memory must live to): the kept devices' memory plans are the full graph's.
void replay_node(ExecGraph& eg, const Graph& graph, NodeId node, int64_t time0, const NodeTemplate& tpl,
                 const std::vector<char>* kept = nullptr);

/// \brief Per device, what the node's template does to that device's memory, as numbers:
/// its buffers in order (bytes, tensor slot, planned-tile output), its ops (kind, time, the
/// device's buffers and input tiles they read and write) and the other devices' reads of its
/// buffers and input tiles (time, which). Two devices of equal vectors at every node (and equal
/// graph-input tiles) have the same memory plan: the same buffers with the same sizes,
/// lifetimes and in-place pairs, in the same order.
std::vector<std::vector<int64_t>> device_signatures(const NodeTemplate& tpl, int devices);

}  // namespace autotile
