// The execution-graph builder's internals (exec_build.cc, exec_convert.cc, staged_collectives.cc):
// per-cut levels of a tensor's holders, a node's sub-operator on one device, and the Builder
// that turns a graph and a plan into an ExecGraph (exec_graph.h is the public interface).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "exec/exec_graph.h"
#include "exec/node_template.h"
#include "tdl/analyze.h"

namespace autotile {
namespace exec_detail {

/// \brief How the holders of a tensor (or of a node's raw outputs) differ at one cut.
enum class LevelKind : uint8_t { kSplit, kReplicate, kPartial };

/// \brief A tensor's holders at one cut: split along `dim`, replicated or partial sums.
struct Level {
  LevelKind kind = LevelKind::kReplicate;
  int dim = -1;  // for kSplit
};

/// \brief The level a tiling string ('split(d)', 'replicate', 'partial') gives tensor `t` at `cut`.
Level parse_tiling(const std::string& text, const Tensor& t, int cut);

/// \brief The box each device holds of a tensor, given per-cut levels.
Box holder_box(const std::vector<int64_t>& shape, const std::vector<Level>& levels, const std::vector<int>& factors,
               const std::vector<int>& digits);

/// \brief The sub-operator of one node on one device: boxes of its inputs and outputs.
struct SubOp {
  std::vector<Box> in;
  std::vector<bool> read;  // false: the op only needs the input's shape (TDL header-only input)
  std::vector<Box> out;
  std::vector<std::vector<Level>> out_levels;  // [output][cut]
};

/// \brief Builds the execution graph of a graph under a plan (build_exec_graph's worker).
class Builder {
 public:
  Builder(const Graph& g, const PlanSpec& p, const ExecOptions& o) : g_(g), plan_(p), opts_(o) {}

  ExecGraph build();

 private:
  /// Appends node `n`'s ops and buffers, at position `pos` of the serial schedule `order`.
  void build_node(NodeId n, size_t pos, const std::vector<NodeId>& order);
  /// The graph inputs' planned tiles, on the `kept` devices (null: all).
  void make_input_tiles(const std::vector<char>* kept);
  /// Node `n`'s template (exec/node_template.h), built on scratch tiles of its inputs and undone.
  NodeTemplate make_template(NodeId n, size_t pos, const std::vector<NodeId>& order);
  /// The arena-only graph: one template per kind of node, replayed at every node; with
  /// ExecOptions::device_classes only on one device of each class (ExecGraph::class_of).
  void build_from_templates(const std::vector<NodeId>& order);
  void check_plan();
  std::vector<Level> tensor_levels(TensorId t) const { return tensor_levels_[t]; }
  /// One index variable the node's strategies split (more than one way) and how.
  struct VarSplit {
    std::string var;
    int64_t count = 1;         ///< product of the factors of the cuts that split it
    std::vector<size_t> cuts;  ///< those cuts, first cut first
    Strategy strategy;         ///< the TDL analysis for `count` workers
  };
  /// The node's split variables, analysed once for all devices (validated against its TDL).
  std::vector<VarSplit> node_splits(NodeId n) const;
  SubOp sub_op(NodeId n, int device, const std::vector<VarSplit>& splits) const;
  int new_buffer(int device, TensorId t, const Box& box, BufferRole role, bool partial);
  int new_op(ExecOp op);
  /// Appends a MultiFetch op on `device` assembling buffer `dest` from `pieces`.
  void new_fetch(int device, NodeId node, int dest, std::vector<Piece> pieces, bool accumulate, int64_t moved,
                 int64_t time);
  /// Assemble `want` on `device` from holders described by `levels` and `holder_buffer(e)`.
  /// `keep[i]` keeps the destination partial at cut i. Returns the buffer (maybe an
  /// existing one when nothing needs to move) and appends the fetch op if one is needed.
  /// `held` (prefix hulls of the holders' boxes, subtree_boxes.h) prunes the subtrees that
  /// hold nothing of `want`, so a device visits the holders it needs, not every device.
  int assemble(int device, TensorId t, const Box& want, const std::vector<Level>& levels,
               const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep, BufferRole role,
               NodeId node, int64_t time, const std::vector<std::vector<Box>>& held);

  /// \brief A staged gather's plan: per stage (the last level first), each device's pieces
  /// (peer, region; devices as virtual ids, real[v] the device) and the box it then holds.
  struct GatherStages {
    std::vector<int> real;
    std::vector<std::vector<std::vector<std::pair<int, Box>>>> pieces;  ///< [stage][v]
    std::vector<std::vector<Box>> target;                               ///< [stage][v]
  };
  /// \brief Plans the gather of `want[d]` on every device (null: not wanted) from what each
  /// device holds (`held_by[d]`), one cut or level at a time (recursive doubling): at the stage
  /// of cut c a device copies from the k_c devices that differ from it only in digit c the
  /// part of what they have gathered so far that it or the devices it serves later need. The
  /// innermost cut's stage comes first, or with `outer_first` the outermost cut's (the pieces
  /// that cross the outer, slower links are then the smallest: a hierarchical all-gather).
  /// False when the held boxes do not nest cut by cut in that order or the stages would move
  /// more bytes than fetching each region directly from its holder.
  bool plan_gather_stages(TensorId t, const std::vector<const Box*>& want, const std::vector<Box>& held_by,
                          bool partial, bool outer_first, GatherStages* plan) const;
  /// \brief Appends the fetches of a planned gather from the buffers `holders[d]` (-1: none).
  void build_gather_stages(TensorId t, const GatherStages& plan, const std::vector<int>& holders,
                           const std::vector<const Box*>& want, BufferRole role, bool partial, NodeId node,
                           int64_t time, std::vector<int>& out);
  /// \brief plan_gather_stages on the holders' boxes, then build_gather_stages; false, creating
  /// nothing, when it does not apply.
  bool staged_gather(TensorId t, const std::vector<const Box*>& want, const std::vector<int>& holders,
                     BufferRole role, bool partial, bool outer_first, NodeId node, int64_t time,
                     std::vector<int>& out);
  /// \brief The stages of a staged collective: consecutive cuts of one link level
  /// (ExecOptions::cut_levels) form one (unless `merge` is false: one cut each), first cut
  /// first; `outer_first` reverses their order.
  std::vector<std::vector<size_t>> stage_groups(bool outer_first, bool merge = true) const;
  /// \brief Device `d`'s digit in a stage of cuts `group`: its digits there in mixed radix.
  int group_digit(int d, const std::vector<size_t>& group) const;
  /// \brief A gather from the holders (`holder_buffer(d)`, their tiling `levels`) outermost
  /// cut first, where their boxes nest so; else, with `reindex`, first a copy of each device's
  /// slab read with the stages' significance reversed (the same slabs, another device's), on
  /// which the gather outermost cut first nests (ExecOptions::hierarchical_above). False,
  /// creating nothing, where neither applies.
  bool hierarchical_gather(TensorId t, const std::vector<const Box*>& want, const std::vector<Level>& levels,
                           const std::function<int(int)>& holder_buffer, bool reindex, BufferRole role, NodeId node,
                           int64_t time, std::vector<int>& out);

  /// Reduce partial sums over the `reduce_cut` cuts straight into what each device wants
  /// (within what it holds) in stages, outermost reduced cut first: at each, a device sums
  /// from the k_c devices differing in that digit only the hull of what it and the devices
  /// it serves later want. Returns false, creating nothing, unless every device wants a
  /// non-empty part of its own holding and the stages move exactly the direct reduction's bytes.
  bool staged_reduce(TensorId t, const std::vector<const Box*>& want, const std::vector<int>& holders,
                     const std::vector<bool>& reduce_cut, BufferRole role, NodeId node, int64_t time,
                     std::vector<int>& out);

  /// Assemble `want[d]` on every device d (skipping devices whose want is null). When the
  /// holders' partial sums must be reduced over groups of more than two devices, pick the
  /// cheaper of pulling every partial (direct) or a reduce-scatter along one dim followed by
  /// fetching the reduced slabs, exactly as the search's cost model prices it.
  std::vector<int> convert(TensorId t, const std::vector<const Box*>& want, const std::vector<Level>& levels,
                           const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep,
                           BufferRole role, NodeId node, int64_t time);

  const Graph& g_;
  const PlanSpec& plan_;
  const ExecOptions& opts_;
  ExecGraph eg_;
  std::vector<std::vector<int>> digits_;
  std::vector<std::vector<Level>> tensor_levels_;
  std::vector<int> last_op_;  // per device: the op scheduled last (control chain)
  std::vector<int> stride_;   // per cut: product of the later cuts' factors (a digit's weight)
  std::vector<int> dep_mark_;  // per op: the id of the last op that listed it as a dependency (new_op)
  std::vector<Piece> pieces_scratch_;  // assemble's pieces while it collects them
  bool recording_ = false;  // arena-only: new_op keeps each op's piece sources in piece_srcs_
  std::vector<std::vector<int>> piece_srcs_;
};

}  // namespace exec_detail
}  // namespace autotile
