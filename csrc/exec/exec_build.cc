// Construction of the execution graph from a graph and a plan (see exec_graph.h).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "exec/exec_graph.h"
#include "exec/memory_plan.h"
#include "exec/node_template.h"
#include "exec/schedule_order.h"
#include "exec/subtree_boxes.h"
#include "exec/swap_plan.h"
#include "tdl/analyze.h"
#include "util/error.h"
#include "util/name_list.h"

namespace autotile {

namespace {

/// How the holders of a tensor (or of a node's raw outputs) differ at one cut.
enum class LevelKind : uint8_t { kSplit, kReplicate, kPartial };

struct Level {
  LevelKind kind = LevelKind::kReplicate;
  int dim = -1;  // for kSplit
};

Level parse_tiling(const std::string& text, const Tensor& t, int cut) {
  if (text == "replicate" || text == "R") return {LevelKind::kReplicate, -1};
  if (text == "partial" || text == "P") return {LevelKind::kPartial, -1};
  if (text.size() > 7 && text.compare(0, 6, "split(") == 0 && text.back() == ')') {
    int dim = -1;
    try {
      dim = std::stoi(text.substr(6, text.size() - 7));
    } catch (...) {
      dim = -1;
    }
    if (dim < 0 || dim >= static_cast<int>(t.shape.size()))
      fail("plan: tensor '", t.name, "' of shape ", shape_str(t.shape), " has tiling '", text, "' at cut ", cut + 1,
           ": no such dim");
    return {LevelKind::kSplit, dim};
  }
  fail("plan: tensor '", t.name, "' has unknown tiling '", text, "' at cut ", cut + 1,
       " (expected split(d), replicate or partial)");
}

/// The box each device holds of a tensor, given per-cut levels.
Box holder_box(const std::vector<int64_t>& shape, const std::vector<Level>& levels, const std::vector<int>& factors,
               const std::vector<int>& digits) {
  Box b = Box::full(shape);
  for (size_t i = 0; i < levels.size(); ++i)
    if (levels[i].kind == LevelKind::kSplit) b.dims[levels[i].dim] = slab(b.dims[levels[i].dim], digits[i], factors[i]);
  return b;
}

/// The sub-operator of one node on one device: boxes of its inputs and outputs.
struct SubOp {
  std::vector<Box> in;
  std::vector<bool> read;  // false: the op only needs the input's shape (TDL header-only input)
  std::vector<Box> out;
  std::vector<std::vector<Level>> out_levels;  // [output][cut]
};

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

  /// Assemble `want[d]` on every device (null: not wanted) from `holders[e]` (buffer ids, -1:
  /// holds nothing) in stages, innermost cut first (recursive doubling): at the stage of cut
  /// c a device copies from the k_c devices that differ from it only in digit c the part of
  /// what they have gathered so far that it or the devices it serves later need. Returns
  /// false, creating nothing, when the holders' boxes do not nest cut by cut or the stages
  /// would move more bytes than fetching each region directly from its holder.
  bool staged_gather(TensorId t, const std::vector<const Box*>& want, const std::vector<int>& holders,
                     BufferRole role, bool partial, NodeId node, int64_t time, std::vector<int>& out);

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

void Builder::check_plan() {
  const auto& f = plan_.factors;
  for (int k : f)
    if (k < 1) fail("plan: cut factor ", k, " must be at least 1");
  if (static_cast<int>(plan_.tensor_tilings.size()) != g_.num_tensors())
    fail("plan was made for another graph: it tiles ", plan_.tensor_tilings.size(), " tensors, the graph has ",
         g_.num_tensors());
  if (static_cast<int>(plan_.node_strategies.size()) != g_.num_nodes())
    fail("plan was made for another graph: it has strategies for ", plan_.node_strategies.size(),
         " nodes, the graph has ", g_.num_nodes());
  tensor_levels_.resize(g_.num_tensors());
  for (TensorId t = 0; t < g_.num_tensors(); ++t) {
    const Tensor& ten = g_.tensor(t);
    if (plan_.tensor_tilings[t].size() != f.size())
      fail("plan: tensor '", ten.name, "' has ", plan_.tensor_tilings[t].size(), " tilings for ", f.size(), " cuts");
    std::vector<int64_t> extent = ten.shape;
    for (size_t i = 0; i < f.size(); ++i) {
      Level lv = parse_tiling(plan_.tensor_tilings[t][i], ten, static_cast<int>(i));
      if (lv.kind == LevelKind::kSplit) {
        if (extent[lv.dim] % f[i] != 0)
          fail("plan: tensor '", ten.name, "' of shape ", shape_str(ten.shape), " cannot be split ", f[i],
               " ways along dim ", lv.dim, " at cut ", i + 1, " (remaining extent ", extent[lv.dim], ")");
        extent[lv.dim] /= f[i];
      }
      tensor_levels_[t].push_back(lv);
    }
  }
  for (NodeId n = 0; n < g_.num_nodes(); ++n)
    if (plan_.node_strategies[n].size() != f.size())
      fail("plan: node '", g_.node(n).name, "' has ", plan_.node_strategies[n].size(), " strategies for ", f.size(),
           " cuts");
}


std::vector<Builder::VarSplit> Builder::node_splits(NodeId n) const {
  const Node& node = g_.node(n);
  const auto& f = plan_.factors;
  std::vector<Shape> in_shapes, out_shapes;
  for (TensorId t : node.inputs) in_shapes.push_back(g_.tensor(t).shape);
  for (TensorId t : node.outputs) out_shapes.push_back(g_.tensor(t).shape);
  // Each variable split at one or more cuts is split K = product of those k_i ways.
  std::vector<VarSplit> splits;
  for (size_t i = 0; i < f.size(); ++i) {
    const std::string& var = plan_.node_strategies[n][i];
    if (var == "replicate") continue;
    auto it = std::find_if(splits.begin(), splits.end(), [&](const VarSplit& v) { return v.var == var; });
    if (it == splits.end()) {
      splits.push_back({var, f[i], {}, {}});
      it = splits.end() - 1;
    } else {
      it->count *= f[i];
    }
    it->cuts.push_back(i);
  }
  std::vector<VarSplit> out;
  for (VarSplit& split : splits) {
    const std::string& var = split.var;
    const int64_t count = split.count;
    if (count == 1) continue;
    if (node.tdl.empty())
      fail("plan splits node '", node.name, "' (op ", node.op, ") along '", var, "' but the node has no TDL");
    OpStrategies st = analyze_tdl(node.tdl, in_shapes, out_shapes, static_cast<int>(count));
    const Strategy* chosen = nullptr;
    for (const auto& cand : st.strategies)
      if (cand.var == var) chosen = &cand;
    if (!chosen)
      fail("plan splits node '", node.name, "' (op ", node.op, ") ", count, " ways along '", var,
           "', which its TDL does not allow at these shapes");
    // The search never picks these; a plan from elsewhere (a file, a hand-made Plan) would
    // otherwise run a kernel that cannot run so, or sum partials that need another reducer.
    auto vetoed = node.attrs.find("__no_split__");
    if (vetoed != node.attrs.end() && is_listed(vetoed->second, var))
      fail("plan splits node '", node.name, "' (op ", node.op, ") along '", var,
           "', which the op vetoes (its kernel cannot run split along it)");
    for (const OutputMake& make : chosen->outputs)
      if (make.partial && make.reducer != Reducer::kSum)
        fail("plan splits node '", node.name, "' (op ", node.op, ") along reduction variable '", var,
             "', whose partial results need a max, min or product; the execution graph only sums partials");
    split.strategy = *chosen;
    out.push_back(std::move(split));
  }
  return out;
}

SubOp Builder::sub_op(NodeId n, int device, const std::vector<VarSplit>& splits) const {
  const Node& node = g_.node(n);
  const auto& f = plan_.factors;
  const auto& digits = digits_[device];
  SubOp s;
  for (TensorId t : node.inputs) s.in.push_back(Box::full(g_.tensor(t).shape));
  s.read.assign(node.inputs.size(), true);
  for (TensorId t : node.outputs) s.out.push_back(Box::full(g_.tensor(t).shape));
  s.out_levels.assign(node.outputs.size(), std::vector<Level>(f.size(), Level{LevelKind::kReplicate, -1}));
  for (const VarSplit& split : splits) {
    // The device's slab index: its digits at the variable's cuts in mixed radix (first cut major).
    int64_t index = 0;
    for (size_t i : split.cuts) index = index * f[i] + digits[i];
    const Strategy& chosen = split.strategy;
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      const InputNeed& need = chosen.inputs[j];
      if (!need.read) s.read[j] = false;
      if (need.replicate) continue;
      Interval iv = need.per_worker[index];
      Interval& cur = s.in[j].dims[need.dim];
      cur = {std::max(cur.lo, iv.lo), std::min(cur.hi, iv.hi)};
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const OutputMake& make = chosen.outputs[o];
      if (!make.partial) s.out[o].dims[make.dim] = slab({0, g_.tensor(node.outputs[o]).shape[make.dim]}, index, split.count);
      for (size_t i : split.cuts)
        s.out_levels[o][i] = make.partial ? Level{LevelKind::kPartial, -1} : Level{LevelKind::kSplit, make.dim};
    }
  }
  return s;
}

int Builder::new_buffer(int device, TensorId t, const Box& box, BufferRole role, bool partial) {
  Buffer b;
  b.device = device;
  b.tensor = t;
  b.box = box;
  b.role = role;
  b.partial = partial;
  b.bytes = box.volume() * dtype_size(g_.tensor(t).dtype);
  eg_.buffers.push_back(std::move(b));
  return static_cast<int>(eg_.buffers.size()) - 1;
}

int Builder::new_op(ExecOp op) {
  int id = static_cast<int>(eg_.ops.size());
  for (int b : op.inputs)
    if (b >= 0) eg_.buffers[b].readers.push_back(id);
  for (const Piece& p : op.pieces) eg_.buffers[p.src].readers.push_back(id);
  for (int b : op.outputs) eg_.buffers[b].producer = id;
  if (opts_.arena_only) {  // no dependencies: the memory plan needs the readers and the clock only
    if (recording_) {  // the node becomes a template (exec/node_template.h): keep what its pieces read
      piece_srcs_.emplace_back();
      for (const Piece& p : op.pieces) piece_srcs_.back().push_back(p.src);
    }
    // nor the regions: freed now, their memory serves the next op's (not millions freed at the end)
    std::vector<Piece>().swap(op.pieces);
    std::vector<Box>().swap(op.input_boxes);
    eg_.ops.push_back(std::move(op));
    eg_.schedule[eg_.ops.back().device].push_back(id);
    return id;
  }
  // data deps: producers of everything read, each once (dep_mark_[d] == id: already a dep)
  if (dep_mark_.size() < eg_.ops.size()) dep_mark_.resize(std::max(eg_.ops.size(), 2 * dep_mark_.size()), -1);
  for (int d : op.deps) dep_mark_[d] = id;
  op.deps.reserve(op.deps.size() + op.inputs.size() + op.pieces.size() + 1);  // at most one per source
  auto add_dep = [&op, id, this](int d) {
    if (d < 0 || dep_mark_[d] == id) return;
    dep_mark_[d] = id;
    op.deps.push_back(d);
  };
  for (int b : op.inputs)
    if (b >= 0) add_dep(eg_.buffers[b].producer);
  for (const Piece& p : op.pieces) add_dep(eg_.buffers[p.src].producer);
  if (opts_.control_deps) add_dep(last_op_[op.device]);
  eg_.ops.push_back(std::move(op));
  eg_.schedule[eg_.ops.back().device].push_back(id);
  last_op_[eg_.ops.back().device] = id;
  return id;
}

void Builder::new_fetch(int device, NodeId node, int dest, std::vector<Piece> pieces, bool accumulate,
                        int64_t moved, int64_t time) {
  ExecOp op;
  op.kind = ExecKind::kFetch;
  op.device = device;
  op.node = node;
  op.outputs = {dest};
  op.pieces = std::move(pieces);
  op.accumulate = accumulate;
  op.bytes_moved = moved;
  op.time = time;
  new_op(std::move(op));
}

int Builder::assemble(int device, TensorId t, const Box& want, const std::vector<Level>& levels,
                      const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep, BufferRole role,
                      NodeId node, int64_t time, const std::vector<std::vector<Box>>& held) {
  const auto& f = plan_.factors;
  const auto& mine = digits_[device];
  // Digits to visit at each cut: every group at split cuts (geometry picks the pieces),
  // every group at partial cuts that are reduced here, only our own group otherwise.
  std::vector<std::vector<int>> choices(f.size());
  bool reduce = false;
  for (size_t i = 0; i < f.size(); ++i) {
    bool all = !keep[i] && (levels[i].kind == LevelKind::kSplit || levels[i].kind == LevelKind::kPartial);
    if (all) {
      for (int d = 0; d < f[i]; ++d) choices[i].push_back(d);
      if (levels[i].kind == LevelKind::kPartial && f[i] > 1) reduce = true;
    } else if (keep[i] && levels[i].kind == LevelKind::kReplicate && mine[i] != 0) {
      // Replicated values kept as a partial sum: group 0 holds them, the others hold zeros.
      reduce = true;
    } else {
      choices[i].push_back(mine[i]);
      if (keep[i] && levels[i].kind == LevelKind::kSplit && f[i] > 1) reduce = true;  // zero outside our slab
    }
  }
  std::vector<Piece>& pieces = pieces_scratch_;  // reused: the op gets an exact-size copy
  pieces.clear();
  const int dsize = dtype_size(g_.tensor(t).dtype);
  int64_t moved = 0;
  auto visit = [&](auto&& self, size_t i, int dev) -> void {  // recursive, without std::function's calls
    if (i == f.size()) {
      int src = holder_buffer(dev);
      Box region = want.intersect(eg_.buffers[src].box);
      if (region.empty()) return;
      if (dev != device) moved += region.volume() * dsize;
      pieces.push_back({src, std::move(region)});
      return;
    }
    for (int d : choices[i]) {
      const int child = dev * f[i] + d;
      if (!held[i + 1][child].overlaps(want)) continue;  // nothing of want down there
      self(self, i + 1, child);
    }
  };
  visit(visit, 0, 0);
  bool partial_dest = false;
  for (size_t i = 0; i < f.size(); ++i) partial_dest = partial_dest || (keep[i] && levels[i].kind == LevelKind::kPartial);
  if (!reduce && pieces.size() == 1 && eg_.buffers[pieces[0].src].device == device &&
      eg_.buffers[pieces[0].src].box == want)
    return pieces[0].src;  // already there: no op, no copy
  if (!reduce) {
    int64_t covered = 0;
    for (const Piece& p : pieces) covered += p.region.volume();
    if (covered != want.volume())
      fail("internal: pieces of tensor '", g_.tensor(t).name, "' cover ", covered, " of ", want.volume(),
           " elements of region ", want.str(), " on device ", device);
  }
  int dest = new_buffer(device, t, want, role, partial_dest);
  new_fetch(device, node, dest, std::vector<Piece>(pieces.begin(), pieces.end()), reduce, moved, time);
  return dest;
}

std::vector<int> Builder::convert(TensorId t, const std::vector<const Box*>& want, const std::vector<Level>& levels,
                                  const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep,
                                  BufferRole role, NodeId node, int64_t time) {
  const auto& f = plan_.factors;
  const int devices = eg_.devices;
  std::vector<int> out(devices, -1);
  std::vector<Box> held_box(devices);
  for (int d = 0; d < devices; ++d) held_box[d] = eg_.buffers[holder_buffer(d)].box;
  const std::vector<std::vector<Box>> held_hulls = prefix_hulls(f, held_box);
  auto direct = [&]() {
    for (int d = 0; d < devices; ++d)
      if (want[d]) out[d] = assemble(d, t, *want[d], levels, holder_buffer, keep, role, node, time, held_hulls);
    return out;
  };
  // Cuts reduced here, and whether this is a plain reduction the search prices.
  int P = 1, G = 1;
  bool any_partial = false, any_keep = false;
  std::vector<bool> reduce_cut(f.size(), false);
  for (size_t c = 0; c < f.size(); ++c) {
    any_partial = any_partial || levels[c].kind == LevelKind::kPartial;
    any_keep = any_keep || keep[c];
    if (levels[c].kind == LevelKind::kSplit) G *= f[c];
    if (levels[c].kind == LevelKind::kPartial && !keep[c]) {
      reduce_cut[c] = true;
      P *= f[c];
    } else if (keep[c] && levels[c].kind != LevelKind::kPartial && f[c] > 1) {
      return direct();  // partial kept where the producer did not reduce: random plans only
    }
  }
  if (!any_partial && !any_keep && G > opts_.stage_above) {
    // A gather from many holders: in stages when that moves no more bytes.
    std::vector<int> holders(devices);
    for (int d = 0; d < devices; ++d) holders[d] = holder_buffer(d);
    if (staged_gather(t, want, holders, role, false, node, time, out)) return out;
  }
  if (P <= 2) return direct();  // pulling the partner's partial is already optimal
  for (int d = 0; d < devices; ++d)
    if (!want[d]) return direct();
  // Reduction groups: devices equal in every digit but the reduced cuts.
  std::vector<int> leader(devices), member(devices);
  for (int d = 0; d < devices; ++d) {
    int lead = 0, idx = 0;
    for (size_t c = 0; c < f.size(); ++c) {
      lead = lead * f[c] + (reduce_cut[c] ? 0 : digits_[d][c]);
      if (reduce_cut[c]) idx = idx * f[c] + digits_[d][c];
    }
    leader[d] = lead;
    member[d] = idx;
  }
  std::vector<std::vector<int>> members(devices);  // by leader, in member order
  for (int d = 0; d < devices; ++d) members[leader[d]].push_back(d);
  auto held = [&](int d) -> const Box& { return held_box[d]; };
  double best = 0, rs = 0;
  for (int d = 0; d < devices; ++d) {
    double nv = static_cast<double>(want[d]->volume()), in = static_cast<double>(want[d]->intersect(held(d)).volume());
    best += (P - 1) * in + P * (nv - in);
    if (leader[d] == d) rs += (P - 1) * static_cast<double>(held(d).volume());
  }
  int best_dim = -1;
  const size_t rank = g_.tensor(t).shape.size();
  // Balanced slabs of the members' block [m_lo, m_hi) (uneven, or empty when the dim is
  // shorter than the group): the same formula as the cost model's (csrc/search/cost_model.cc).
  auto block_slab = [&](int d, size_t e, int64_t m_lo, int64_t m_hi) {
    Box slab = held(leader[d]);
    const int64_t lo = slab.dims[e].lo, size = slab.dims[e].size();
    slab.dims[e] = {lo + size * m_lo / P, lo + size * m_hi / P};
    return slab;
  };
  auto slab_of = [&](int d, size_t e) { return block_slab(d, e, member[d], member[d] + 1); };
  for (size_t e = 0; e < rank; ++e) {
    double fetch = 0;
    for (int d = 0; d < devices; ++d)
      fetch += static_cast<double>(want[d]->volume() - want[d]->intersect(slab_of(d, e)).volume());
    if (rs + fetch < best) {
      best = rs + fetch;
      best_dim = static_cast<int>(e);
    }
  }
  const int dsize = dtype_size(g_.tensor(t).dtype);
  bool partial = false;
  for (size_t c = 0; c < f.size(); ++c) partial = partial || (keep[c] && levels[c].kind == LevelKind::kPartial);
  if (rank == 0) {
    // A scalar: member 0 of each group (the group's leader) reduces it, the others fetch it.
    double fetch = 0;
    for (int d = 0; d < devices; ++d)
      if (member[d] != 0) fetch += static_cast<double>(want[d]->volume());
    if (!(rs + fetch < best)) return direct();
    for (int d = 0; d < devices; ++d) {
      if (member[d] != 0) continue;
      ExecOp op;
      op.kind = ExecKind::kFetch;
      op.device = d;
      op.node = node;
      op.outputs = {new_buffer(d, t, *want[d], role, partial)};
      op.accumulate = true;
      op.time = time;
      for (int g : members[leader[d]]) {
        op.pieces.push_back({holder_buffer(g), *want[d]});
        if (g != d) op.bytes_moved += dsize;
      }
      out[d] = op.outputs[0];
      new_op(std::move(op));
    }
    for (int d = 0; d < devices; ++d) {
      if (member[d] == 0) continue;
      ExecOp op;
      op.kind = ExecKind::kFetch;
      op.device = d;
      op.node = node;
      op.outputs = {new_buffer(d, t, *want[d], role, partial)};
      op.pieces.push_back({out[leader[d]], *want[d]});
      op.bytes_moved = dsize;
      op.time = time;
      out[d] = op.outputs[0];
      new_op(std::move(op));
    }
    return out;
  }
  if (best_dim < 0) {
    if (P > opts_.stage_above && !any_keep) {
      std::vector<int> holders(devices);
      for (int d = 0; d < devices; ++d) holders[d] = holder_buffer(d);
      if (staged_reduce(t, want, holders, reduce_cut, role, node, time, out)) return out;
    }
    return direct();
  }
  const size_t e_dim = static_cast<size_t>(best_dim);
  // Reduce-scatter: member m of each group ends up with slab m of the group's sum.
  std::vector<int> reduced(devices, -1);
  auto rs_op = [&](int d, const Box& slab, const std::vector<int>& sources) {
    ExecOp op;
    op.kind = ExecKind::kFetch;
    op.device = d;
    op.node = node;
    op.outputs = {new_buffer(d, t, slab, BufferRole::kRegion, partial)};
    op.accumulate = true;
    op.time = time;
    for (int g : sources) {
      op.pieces.push_back({g, slab});
      if (eg_.buffers[g].device != d) op.bytes_moved += slab.volume() * dsize;
    }
    int dest = op.outputs[0];
    new_op(std::move(op));
    return dest;
  };
  if (P > opts_.stage_above) {
    // By recursive halving, outermost reduced cut first: at each, the k_c devices that differ
    // only in that digit split their block of slabs k_c ways and each sums its part. The
    // bytes are those of the one-step reduce-scatter (each level moves (k_c - 1)/k_c of what
    // the group holds), the pieces per device sum(k_c) instead of P.
    std::vector<int> cur(devices);
    for (int d = 0; d < devices; ++d) cur[d] = holder_buffer(d);
    std::vector<int64_t> block_lo(devices, 0);
    int64_t span = P;
    for (size_t c = 0; c < f.size(); ++c) {
      if (!reduce_cut[c]) continue;
      span /= f[c];
      std::vector<int> next(devices, -1);
      for (int d = 0; d < devices; ++d) {
        const int64_t m_lo = block_lo[d] + digits_[d][c] * span;
        Box slab = block_slab(d, e_dim, m_lo, m_lo + span);
        if (slab.empty()) continue;
        std::vector<int> sources;
        for (int j = 0; j < f[c]; ++j) sources.push_back(cur[d + (j - digits_[d][c]) * stride_[c]]);
        next[d] = rs_op(d, slab, sources);
      }
      for (int d = 0; d < devices; ++d) block_lo[d] += digits_[d][c] * span;
      cur = std::move(next);
    }
    reduced = std::move(cur);
    if (staged_gather(t, want, reduced, role, partial, node, time, out)) return out;
  } else {
    for (int d = 0; d < devices; ++d) {
      std::vector<int> sources;
      for (int g : members[leader[d]]) sources.push_back(holder_buffer(g));
      reduced[d] = rs_op(d, slab_of(d, e_dim), sources);
    }
  }
  // Gather: every device assembles what it wants from the reduced slabs, its own first, then
  // from the devices nearest to it (longest common prefix of digits: the fastest links),
  // visiting only the subtrees whose slabs meet what it wants.
  std::vector<Box> slab_box(devices, Box::full(g_.tensor(t).shape).intersect(Box{std::vector<Interval>(rank)}));
  for (int d = 0; d < devices; ++d)
    if (reduced[d] >= 0) slab_box[d] = eg_.buffers[reduced[d]].box;
  const std::vector<std::vector<Box>> slab_hulls = prefix_hulls(f, slab_box);
  for (int d = 0; d < devices; ++d) {
    const Box& w = *want[d];
    std::vector<Piece> pieces;
    std::set<std::vector<int64_t>> used;
    int64_t covered = 0, moved = 0;
    auto take = [&](int e) {
      if (reduced[e] < 0) return;
      const Box& slab = slab_box[e];
      std::vector<int64_t> key;
      for (const Interval& iv : slab.dims) key.insert(key.end(), {iv.lo, iv.hi});
      if (!used.insert(key).second) return;
      Box region = w.intersect(slab);
      if (region.empty()) return;
      pieces.push_back({reduced[e], region});
      covered += region.volume();
      if (e != d) moved += region.volume() * dsize;
    };
    // Depth-first from the root, the device's own digit first at every cut: devices come in
    // order of decreasing common prefix with d.
    auto visit = [&](auto&& self, size_t c, int prefix) -> void {
      if (c == f.size()) return take(prefix);
      const int mine = digits_[d][c];
      for (int j = 0; j < f[c]; ++j) {
        const int digit = j == 0 ? mine : (j <= mine ? j - 1 : j);
        const int child = prefix * f[c] + digit;
        if (!slab_hulls[c + 1][child].overlaps(w)) continue;
        self(self, c + 1, child);
      }
    };
    take(d);
    visit(visit, 0, 0);
    if (covered != w.volume())
      fail("internal: reduced slabs of tensor '", g_.tensor(t).name, "' cover ", covered, " of ", w.volume(),
           " elements of region ", w.str(), " on device ", d);
    if (pieces.size() == 1 && pieces[0].src == reduced[d] && slab_box[d] == w) {
      out[d] = reduced[d];
      continue;
    }
    int dest = new_buffer(d, t, w, role, partial);
    new_fetch(d, node, dest, std::move(pieces), false, moved, time);
    out[d] = dest;
  }
  return out;
}

bool Builder::staged_gather(TensorId t, const std::vector<const Box*>& want, const std::vector<int>& holders,
                            BufferRole role, bool partial, NodeId node, int64_t time, std::vector<int>& out) {
  const auto& f = plan_.factors;
  const int devices = eg_.devices;
  const size_t n = f.size();
  const int dsize = dtype_size(g_.tensor(t).dtype);
  const Box none = Box::full(g_.tensor(t).shape).intersect(Box{std::vector<Interval>(g_.tensor(t).shape.size())});
  std::vector<Box> held(devices, none), wanted(devices, none);
  for (int d = 0; d < devices; ++d) {
    if (holders[d] >= 0) held[d] = eg_.buffers[holders[d]].box;
    if (want[d]) wanted[d] = *want[d];
  }
  if (none.dims.empty()) return false;  // scalars: nothing to stage
  // A[c][d / stride_c]: what d's subtree below cut c holds; B[c][d % stride_c]: what the
  // devices sharing d's digits from cut c on want. After the stage of cut c, device d holds
  // Y_c(d) = A ∩ B: everything its subtree has that it, or a device it serves later, wants.
  const auto A = prefix_hulls(f, held);
  if (!hulls_nest(f, A)) return false;
  const auto B = suffix_hulls(f, wanted);
  std::vector<int> stride_from(n + 1, 1);  // product of the factors from cut c on
  for (size_t c = n; c-- > 0;) stride_from[c] = stride_from[c + 1] * f[c];
  auto Y = [&](size_t c, int d) { return A[c][d / stride_from[c]].intersect(B[c][d % stride_from[c]]); };
  // Bytes of the direct fetch: every wanted element its device does not hold, once.
  int64_t direct = 0, staged = 0;
  for (int d = 0; d < devices; ++d) {
    if (!want[d]) continue;
    if (want[d]->empty() || !A[0][0].contains(*want[d])) return false;  // empty regions: direct
    direct += want[d]->volume() - want[d]->intersect(held[d]).volume();
  }
  // One stage per cut, innermost first: the pieces of Y_c(d) from d's peers at cut c.
  struct Stage {
    std::vector<std::vector<std::pair<int, Box>>> pieces;  // per device: (peer, region)
  };
  std::vector<Stage> stages(n);
  std::vector<Box> have = held;  // the box each device's current buffer holds
  for (size_t c = n; c-- > 0;) {
    stages[c].pieces.assign(devices, {});
    std::vector<Box> next = have;
    for (int d = 0; d < devices; ++d) {
      Box target = c == 0 ? wanted[d] : Y(c, d);
      if (target.empty()) {
        next[d] = none;
        continue;
      }
      auto& pieces = stages[c].pieces[d];
      std::vector<const Box*> seen;
      int64_t covered = 0;
      for (int j = 0; j < f[c]; ++j) {
        const int digit = j == 0 ? digits_[d][c] : (j <= digits_[d][c] ? j - 1 : j);
        const int e = d + (digit - digits_[d][c]) * stride_[c];
        const Box& sub = A[c + 1][e / stride_from[c + 1]];
        if (std::find_if(seen.begin(), seen.end(), [&](const Box* b) { return *b == sub; }) != seen.end()) continue;
        seen.push_back(&sub);
        Box region = target.intersect(have[e]);
        if (region.empty()) continue;
        if (!have[e].contains(region)) return false;
        covered += region.volume();
        if (e != d) staged += region.volume();
        pieces.push_back({e, std::move(region)});
      }
      if (covered != target.volume()) return false;
      next[d] = std::move(target);
    }
    have = std::move(next);
    if (staged > direct) return false;
  }
  if (staged != direct) return false;
  // Build it: per stage, a MultiFetch on each device whose target is not already its buffer.
  std::vector<int> cur = holders;
  std::vector<Box> cur_box = held;
  for (size_t c = n; c-- > 0;) {
    std::vector<int> next(devices, -1);
    std::vector<Box> next_box(devices, none);
    for (int d = 0; d < devices; ++d) {
      const auto& stage = stages[c].pieces[d];
      if (stage.empty()) continue;
      const Box target = c == 0 ? wanted[d] : Y(c, d);
      if (stage.size() == 1 && stage[0].first == d && (c > 0 || cur_box[d] == target)) {
        next[d] = cur[d];  // all of it is here already: keep the buffer
        next_box[d] = cur_box[d];
        continue;
      }
      std::vector<Piece> pieces;
      int64_t moved = 0;
      for (const auto& [e, region] : stage) {
        pieces.push_back({cur[e], region});
        if (e != d) moved += region.volume() * dsize;
      }
      int dest = new_buffer(d, t, target, c == 0 ? role : BufferRole::kRegion, partial);
      new_fetch(d, node, dest, std::move(pieces), false, moved, time);
      next[d] = dest;
      next_box[d] = target;
    }
    cur = std::move(next);
    cur_box = std::move(next_box);
  }
  for (int d = 0; d < devices; ++d)
    if (want[d]) out[d] = cur[d];
  return true;
}

bool Builder::staged_reduce(TensorId t, const std::vector<const Box*>& want, const std::vector<int>& holders,
                            const std::vector<bool>& reduce_cut, BufferRole role, NodeId node, int64_t time,
                            std::vector<int>& out) {
  const auto& f = plan_.factors;
  const int devices = eg_.devices;
  const int dsize = dtype_size(g_.tensor(t).dtype);
  std::vector<size_t> cuts;  // the reduced cuts, outermost first
  for (size_t c = 0; c < f.size(); ++c)
    if (reduce_cut[c]) cuts.push_back(c);
  int64_t P = 1, direct = 0, staged = 0;
  for (size_t c : cuts) P *= f[c];
  for (int d = 0; d < devices; ++d) {
    if (!want[d] || want[d]->empty() || !eg_.buffers[holders[d]].box.contains(*want[d])) return false;
    direct += (P - 1) * want[d]->volume();
  }
  // Q[L][d]: the hull of the wants of the devices that differ from d only in reduced cuts
  // from cuts[L] on (Q[m] = want). Stage L leaves device d with the sum over its group at
  // cuts[L] of exactly Q[L + 1][d], which contains everything it serves later.
  const size_t m = cuts.size();
  std::vector<std::vector<Box>> Q(m + 1, std::vector<Box>(devices));
  for (int d = 0; d < devices; ++d) Q[m][d] = *want[d];
  for (size_t L = m; L-- > 0;) {
    const size_t c = cuts[L];
    for (int d = 0; d < devices; ++d) {
      Box h = Q[L + 1][d];
      for (int j = 0; j < f[c]; ++j) h = hull(h, Q[L + 1][d + (j - digits_[d][c]) * stride_[c]]);
      Q[L][d] = std::move(h);
    }
  }
  for (size_t L = 0; L < m; ++L)
    for (int d = 0; d < devices; ++d) staged += (f[cuts[L]] - 1) * Q[L + 1][d].volume();
  if (staged != direct) return false;
  std::vector<int> cur = holders;
  for (size_t L = 0; L < m; ++L) {
    const size_t c = cuts[L];
    std::vector<int> next(devices);
    for (int d = 0; d < devices; ++d) {
      ExecOp op;
      op.kind = ExecKind::kFetch;
      op.device = d;
      op.node = node;
      op.outputs = {new_buffer(d, t, Q[L + 1][d], L + 1 == m ? role : BufferRole::kRegion, false)};
      op.accumulate = true;
      op.time = time;
      for (int j = 0; j < f[c]; ++j) {
        const int e = d + (j - digits_[d][c]) * stride_[c];
        op.pieces.push_back({cur[e], Q[L + 1][d]});
        if (e != d) op.bytes_moved += Q[L + 1][d].volume() * dsize;
      }
      next[d] = op.outputs[0];
      new_op(std::move(op));
    }
    cur = std::move(next);
  }
  out = std::move(cur);
  return true;
}

void Builder::make_input_tiles(const std::vector<char>* kept) {
  // Graph inputs (data, weights, optimizer state) start out laid out as planned.
  const auto& f = plan_.factors;
  const int devices = eg_.devices;
  for (TensorId t = 0; t < g_.num_tensors(); ++t) {
    const Tensor& ten = g_.tensor(t);
    if (ten.producer != kNone) continue;
    for (int d = 0; d < devices; ++d) {
      bool partial = false;
      for (const Level& lv : tensor_levels_[t]) partial = partial || lv.kind == LevelKind::kPartial;
      if (partial) fail("plan: graph input '", ten.name, "' cannot be partial");
      if (kept && !(*kept)[d]) continue;
      Box box = holder_box(ten.shape, tensor_levels_[t], f, digits_[d]);
      eg_.tile_of[static_cast<size_t>(t) * devices + d] = new_buffer(d, t, box, BufferRole::kTile, false);
    }
  }
}

NodeTemplate Builder::make_template(NodeId n, size_t pos, const std::vector<NodeId>& order) {
  const Node& node = g_.node(n);
  const int devices = eg_.devices;
  const size_t op0 = eg_.ops.size(), buf0 = eg_.buffers.size();
  // The node's inputs laid out as planned, on scratch buffers: every tile is its holder box
  // (what convert makes), which is all the node's build reads of them.
  for (TensorId t : node.inputs) {
    if (eg_.tile(t, 0) >= 0) continue;  // read twice
    bool partial = false;
    for (const Level& lv : tensor_levels_[t]) partial = partial || lv.kind == LevelKind::kPartial;
    for (int d = 0; d < devices; ++d)
      eg_.tile_of[static_cast<size_t>(t) * devices + d] =
          new_buffer(d, t, holder_box(g_.tensor(t).shape, tensor_levels_[t], plan_.factors, digits_[d]),
                     BufferRole::kTile, partial);
  }
  const size_t made = eg_.buffers.size();
  piece_srcs_.clear();
  recording_ = true;
  build_node(n, pos, order);
  recording_ = false;
  NodeTemplate tpl;
  const bool ok = record_node(eg_, g_, n, 6 * static_cast<int64_t>(pos), op0, made, piece_srcs_, tpl);
  eg_.ops.resize(op0);  // undone: the graph is made by replaying templates
  eg_.buffers.resize(buf0);
  for (auto& sched : eg_.schedule)
    while (!sched.empty() && sched.back() >= static_cast<int>(op0)) sched.pop_back();
  for (const std::vector<TensorId>* ts : {&node.inputs, &node.outputs})
    for (TensorId t : *ts)
      for (int d = 0; d < devices; ++d) eg_.tile_of[static_cast<size_t>(t) * devices + d] = -1;
  if (!ok)
    fail("internal: node '", node.name, "' (op ", node.op, ") cannot be replayed: one of its ops reads a buffer "
         "that is not one of its inputs' tiles, writes another device's buffer, or leaves an output tile unmade");
  return tpl;
}

void Builder::build_from_templates(const std::vector<NodeId>& order) {
  const int devices = eg_.devices;
  std::unordered_map<std::string, int> index;
  std::vector<NodeTemplate> templates;
  std::vector<int> tpl_of(order.size());
  for (size_t pos = 0; pos < order.size(); ++pos) {
    auto [it, fresh] = index.emplace(node_template_key(g_, plan_, order[pos]), static_cast<int>(templates.size()));
    if (fresh) templates.push_back(make_template(order[pos], pos, order));
    tpl_of[pos] = it->second;
  }
  std::vector<char> kept(devices, 1);
  eg_.class_of.resize(devices);
  for (int d = 0; d < devices; ++d) eg_.class_of[d] = d;
  if (opts_.device_classes) {
    // Per template, each device's part as a number (equal numbers: equal signatures) ...
    std::vector<std::vector<int>> part(templates.size(), std::vector<int>(devices));
    eg_.bytes_received.assign(devices, 0);
    std::vector<std::vector<int64_t>> received(templates.size(), std::vector<int64_t>(devices, 0));
    for (size_t i = 0; i < templates.size(); ++i) {
      std::map<std::vector<int64_t>, int> ids;
      const auto sigs = device_signatures(templates[i], devices);
      for (int d = 0; d < devices; ++d) part[i][d] = ids.emplace(sigs[d], static_cast<int>(ids.size())).first->second;
      for (const NodeTemplate::TOp& op : templates[i].ops) received[i][op.device] += op.bytes_moved;
    }
    // ... and a device's class: its graph-input tiles' sizes and its parts along the schedule.
    std::map<std::vector<int64_t>, int> classes;
    for (int d = 0; d < devices; ++d) {
      std::vector<int64_t> v;
      v.reserve(order.size() + 16);
      for (TensorId t = 0; t < g_.num_tensors(); ++t)
        if (g_.tensor(t).producer == kNone)
          v.push_back(holder_box(g_.tensor(t).shape, tensor_levels_[t], plan_.factors, digits_[d]).volume());
      for (size_t pos = 0; pos < order.size(); ++pos) {
        v.push_back(part[tpl_of[pos]][d]);
        eg_.bytes_received[d] += received[tpl_of[pos]][d];
      }
      auto [it, fresh] = classes.emplace(std::move(v), d);
      eg_.class_of[d] = it->second;
      kept[d] = fresh;
    }
  }
  make_input_tiles(&kept);
  for (size_t pos = 0; pos < order.size(); ++pos)
    replay_node(eg_, g_, order[pos], 6 * static_cast<int64_t>(pos), templates[tpl_of[pos]],
                opts_.device_classes ? &kept : nullptr);
}

void Builder::build_node(NodeId n, size_t pos, const std::vector<NodeId>& order) {
  const auto& f = plan_.factors;
  const int devices = eg_.devices;
  const Node& node = g_.node(n);
  const std::vector<bool> no_keep(f.size(), false);
  int64_t t_fetch = 6 * static_cast<int64_t>(pos), t_compute = t_fetch + 2, t_out = t_fetch + 4;
  const std::vector<VarSplit> splits = node_splits(n);
  std::vector<SubOp> subs;
  for (int d = 0; d < devices; ++d) subs.push_back(sub_op(n, d, splits));
  // Input regions of every device's sub-op (one MultiFetch per region that is not local).
  std::vector<std::vector<int>> in_buf(node.inputs.size());
  for (size_t j = 0; j < node.inputs.size(); ++j) {
    TensorId t = node.inputs[j];
    int64_t when = t_fetch;
    if (!opts_.control_deps) {
      // as early as the sources allow: right after the tensor was produced
      NodeId p = g_.tensor(t).producer;
      when = 0;
      if (p != kNone)
        for (size_t q = 0; q < pos; ++q)
          if (order[q] == p) when = 6 * static_cast<int64_t>(q) + 5;
    }
    std::vector<const Box*> wants(devices, nullptr);
    for (int d = 0; d < devices; ++d)
      if (subs[d].read[j]) wants[d] = &subs[d].in[j];
    in_buf[j] = convert(t, wants, tensor_levels_[t], [&](int e) { return eg_.tile(t, e); }, no_keep,
                        BufferRole::kRegion, n, when);
  }
  std::vector<std::vector<int>> raw(devices);
  for (int d = 0; d < devices; ++d) {
    ExecOp op;
    op.kind = ExecKind::kCompute;
    op.device = d;
    op.node = n;
    op.time = t_compute;
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      if (!opts_.arena_only) op.input_boxes.push_back(subs[d].in[j]);
      op.inputs.push_back(subs[d].read[j] ? in_buf[j][d] : -1);
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      bool partial = false;
      for (const Level& lv : subs[d].out_levels[o]) partial = partial || lv.kind == LevelKind::kPartial;
      raw[d].push_back(new_buffer(d, node.outputs[o], subs[d].out[o], BufferRole::kRaw, partial));
    }
    op.outputs = raw[d];
    new_op(std::move(op));
  }
  // Convert raw outputs to the planned tilings (reductions and re-layouts).
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    TensorId t = node.outputs[o];
    const auto& levels = subs[0].out_levels[o];
    std::vector<bool> keep(f.size());
    for (size_t i = 0; i < f.size(); ++i) keep[i] = tensor_levels_[t][i].kind == LevelKind::kPartial;
    std::vector<Box> boxes;
    for (int d = 0; d < devices; ++d) boxes.push_back(holder_box(g_.tensor(t).shape, tensor_levels_[t], f, digits_[d]));
    std::vector<const Box*> wants;
    for (const Box& b : boxes) wants.push_back(&b);
    std::vector<int> tiles = convert(t, wants, levels, [&](int e) { return raw[e][o]; }, keep, BufferRole::kTile, n, t_out);
    for (int d = 0; d < devices; ++d) eg_.tile_of[static_cast<size_t>(t) * devices + d] = tiles[d];
  }
}

ExecGraph Builder::build() {
  g_.validate();
  check_plan();
  const auto& f = plan_.factors;
  int devices = 1;
  for (int k : f) devices *= k;
  eg_.devices = devices;
  eg_.factors = f;
  eg_.schedule.resize(devices);
  last_op_.assign(devices, -1);
  for (int d = 0; d < devices; ++d) digits_.push_back(device_digits(d, f));
  stride_.assign(f.size(), 1);
  for (size_t c = f.size(); c-- > 1;) stride_[c - 1] = stride_[c] * f[c];
  eg_.tile_of.assign(static_cast<size_t>(g_.num_tensors()) * devices, -1);
  const std::vector<NodeId> order = opts_.order.empty() ? schedule_order(g_) : checked_order(g_, opts_.order);
  if (opts_.arena_only) {
    build_from_templates(order);
  } else {
    eg_.class_of.resize(devices);
    for (int d = 0; d < devices; ++d) eg_.class_of[d] = d;
    make_input_tiles(nullptr);
    for (size_t pos = 0; pos < order.size(); ++pos) build_node(order[pos], pos, order);
  }
  if (eg_.bytes_received.empty()) {  // (a device-class build counted them from its templates)
    eg_.bytes_received.assign(devices, 0);
    for (const ExecOp& op : eg_.ops) eg_.bytes_received[op.device] += op.bytes_moved;
  }
  for (int64_t b : eg_.bytes_received) eg_.bytes_moved += b;
  if (!opts_.control_deps) {
    // A dataflow scheduler without control dependencies runs every op as soon as its inputs
    // exist: the memory clock becomes the ASAP level of each op (data dependencies only).
    for (ExecOp& op : eg_.ops) {
      int64_t level = 0;
      for (int d : op.deps) level = std::max(level, eg_.ops[d].time + 1);
      op.time = level;
    }
    // Each device runs its ops in that order (every dependency, reuse ones included, points
    // to an earlier time, so no device can wait on an op queued behind its own).
    for (auto& sched : eg_.schedule)
      std::stable_sort(sched.begin(), sched.end(), [&](int a, int b) { return eg_.ops[a].time < eg_.ops[b].time; });
  }
  eg_.copy_schedule.assign(devices, {});
  if (opts_.swap_budget > 0) {
    if (!opts_.control_deps) fail("swap planning needs control dependencies (a fixed schedule)");
    swap_to_fit(eg_, g_, opts_.swap_budget, opts_.swap_hold);
    return std::move(eg_);
  }
  plan_memory(eg_, g_, !opts_.control_deps, !opts_.arena_only, opts_.arena_only ? opts_.arena_limit : 0);
  if (opts_.device_classes)  // each device's memory plan is its representative's
    for (int d = 0; d < devices; ++d) {
      eg_.arena_bytes[d] = eg_.arena_bytes[eg_.class_of[d]];
      eg_.live_peak_bytes[d] = eg_.live_peak_bytes[eg_.class_of[d]];
    }
  return std::move(eg_);
}

}  // namespace

std::vector<int> device_digits(int device, const std::vector<int>& factors) {
  std::vector<int> digits(factors.size());
  for (int i = static_cast<int>(factors.size()) - 1; i >= 0; --i) {
    digits[i] = device % factors[i];
    device /= factors[i];
  }
  return digits;
}

ExecGraph build_exec_graph(const Graph& graph, const PlanSpec& plan, const ExecOptions& options) {
  if (options.arena_only && (!options.control_deps || options.swap_budget > 0))
    fail("an arena-only execution graph needs control dependencies and no swap budget");
  if (options.device_classes && !options.arena_only) fail("device classes are built for arena-only execution graphs only");
  return Builder(graph, plan, options).build();
}

}  // namespace autotile
