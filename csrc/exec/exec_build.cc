// Construction of the execution graph from a graph and a plan (see exec_graph.h): plan checks,
// each node's sub-operators, buffers and ops, the template replay, the memory plan.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "exec/exec_builder.h"
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
namespace exec_detail {

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

}  // namespace exec_detail

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
  return exec_detail::Builder(graph, plan, options).build();
}

}  // namespace autotile
