// Construction of the execution graph from a graph and a plan (see exec_graph.h).
#include <algorithm>
#include <functional>
#include <map>

#include "exec/exec_graph.h"
#include "exec/memory_plan.h"
#include "tdl/analyze.h"
#include "util/error.h"

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
  void check_plan();
  std::vector<Level> tensor_levels(TensorId t) const { return tensor_levels_[t]; }
  SubOp sub_op(NodeId n, int device);
  int new_buffer(int device, TensorId t, const Box& box, BufferRole role, bool partial);
  int new_op(ExecOp op);
  /// Assemble `want` on `device` from holders described by `levels` and `holder_buffer(e)`.
  /// `keep[i]` keeps the destination partial at cut i. Returns the buffer (maybe an
  /// existing one when nothing needs to move) and appends the fetch op if one is needed.
  int assemble(int device, TensorId t, const Box& want, const std::vector<Level>& levels,
               const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep, BufferRole role,
               NodeId node, int64_t time);

  const Graph& g_;
  const PlanSpec& plan_;
  const ExecOptions& opts_;
  ExecGraph eg_;
  std::vector<std::vector<int>> digits_;
  std::vector<std::vector<Level>> tensor_levels_;
  std::vector<int> last_op_;  // per device: the op scheduled last (control chain)
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


SubOp Builder::sub_op(NodeId n, int device) {
  const Node& node = g_.node(n);
  const auto& f = plan_.factors;
  const auto& digits = digits_[device];
  std::vector<Shape> in_shapes, out_shapes;
  for (TensorId t : node.inputs) in_shapes.push_back(g_.tensor(t).shape);
  for (TensorId t : node.outputs) out_shapes.push_back(g_.tensor(t).shape);
  SubOp s;
  for (const auto& sh : in_shapes) s.in.push_back(Box::full(sh));
  s.read.assign(in_shapes.size(), true);
  for (const auto& sh : out_shapes) s.out.push_back(Box::full(sh));
  s.out_levels.assign(node.outputs.size(), std::vector<Level>(f.size()));
  // Each variable split at one or more cuts is split K = product of those k_i ways; the
  // device's slab index is its digits at those cuts in mixed radix (first cut major).
  std::map<std::string, std::pair<int64_t, int64_t>> slabs;  // var -> (index, count)
  std::vector<std::string> order;
  for (size_t i = 0; i < f.size(); ++i) {
    const std::string& var = plan_.node_strategies[n][i];
    if (var == "replicate") {
      for (auto& lv : s.out_levels) lv[i] = {LevelKind::kReplicate, -1};
      continue;
    }
    auto it = slabs.find(var);
    if (it == slabs.end()) {
      slabs[var] = {digits[i], f[i]};
      order.push_back(var);
    } else {
      it->second = {it->second.first * f[i] + digits[i], it->second.second * f[i]};
    }
  }
  for (const std::string& var : order) {
    auto [index, count] = slabs[var];
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
    for (size_t j = 0; j < node.inputs.size(); ++j) {
      const InputNeed& need = chosen->inputs[j];
      if (!need.read) s.read[j] = false;
      if (need.replicate) continue;
      Interval iv = need.per_worker[index];
      Interval& cur = s.in[j].dims[need.dim];
      cur = {std::max(cur.lo, iv.lo), std::min(cur.hi, iv.hi)};
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const OutputMake& make = chosen->outputs[o];
      if (!make.partial) s.out[o].dims[make.dim] = slab({0, out_shapes[o][make.dim]}, index, count);
    }
    for (size_t i = 0; i < f.size(); ++i) {
      if (plan_.node_strategies[n][i] != var) continue;
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        const OutputMake& make = chosen->outputs[o];
        s.out_levels[o][i] = make.partial ? Level{LevelKind::kPartial, -1} : Level{LevelKind::kSplit, make.dim};
      }
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
  // data deps: producers of everything read
  auto add_dep = [&op](int d) {
    if (d >= 0 && std::find(op.deps.begin(), op.deps.end(), d) == op.deps.end()) op.deps.push_back(d);
  };
  for (int b : op.inputs)
    if (b >= 0) add_dep(eg_.buffers[b].producer);
  for (const Piece& p : op.pieces) add_dep(eg_.buffers[p.src].producer);
  if (opts_.control_deps || op.kind == ExecKind::kCompute) add_dep(last_op_[op.device]);
  eg_.ops.push_back(std::move(op));
  eg_.schedule[eg_.ops.back().device].push_back(id);
  last_op_[eg_.ops.back().device] = id;
  return id;
}

int Builder::assemble(int device, TensorId t, const Box& want, const std::vector<Level>& levels,
                      const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep, BufferRole role,
                      NodeId node, int64_t time) {
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
  std::vector<Piece> pieces;
  std::vector<int> cur(f.size(), 0);
  const int dsize = dtype_size(g_.tensor(t).dtype);
  int64_t moved = 0;
  std::function<void(size_t, int)> visit = [&](size_t i, int dev) {
    if (i == f.size()) {
      int src = holder_buffer(dev);
      Box region = want.intersect(eg_.buffers[src].box);
      if (region.empty()) return;
      if (dev != device) moved += region.volume() * dsize;
      pieces.push_back({src, region});
      return;
    }
    for (int d : choices[i]) visit(i + 1, dev * f[i] + d);
  };
  visit(0, 0);
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
  ExecOp op;
  op.kind = ExecKind::kFetch;
  op.device = device;
  op.node = node;
  op.outputs = {dest};
  op.pieces = std::move(pieces);
  op.accumulate = reduce;
  op.bytes_moved = moved;
  op.time = time;
  new_op(std::move(op));
  return dest;
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
  eg_.tile_of.assign(static_cast<size_t>(g_.num_tensors()) * devices, -1);
  // Graph inputs (data, weights, optimizer state) start out laid out as planned.
  for (TensorId t = 0; t < g_.num_tensors(); ++t) {
    const Tensor& ten = g_.tensor(t);
    if (ten.producer != kNone) continue;
    for (int d = 0; d < devices; ++d) {
      bool partial = false;
      for (const Level& lv : tensor_levels_[t]) partial = partial || lv.kind == LevelKind::kPartial;
      if (partial) fail("plan: graph input '", ten.name, "' cannot be partial");
      Box box = holder_box(ten.shape, tensor_levels_[t], f, digits_[d]);
      eg_.tile_of[static_cast<size_t>(t) * devices + d] = new_buffer(d, t, box, BufferRole::kTile, false);
    }
  }
  std::vector<NodeId> order = g_.topo_order();
  std::vector<bool> no_keep(f.size(), false);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    NodeId n = order[pos];
    const Node& node = g_.node(n);
    int64_t t_fetch = 6 * static_cast<int64_t>(pos), t_compute = t_fetch + 2, t_out = t_fetch + 4;
    std::vector<SubOp> subs;
    for (int d = 0; d < devices; ++d) subs.push_back(sub_op(n, d));
    std::vector<std::vector<int>> raw(devices);
    for (int d = 0; d < devices; ++d) {
      ExecOp op;
      op.kind = ExecKind::kCompute;
      op.device = d;
      op.node = n;
      op.time = t_compute;
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        TensorId t = node.inputs[j];
        op.input_boxes.push_back(subs[d].in[j]);
        if (!subs[d].read[j]) {
          op.inputs.push_back(-1);
          continue;
        }
        int64_t when = t_fetch;
        if (!opts_.control_deps) {
          // as early as the sources allow: right after the tensor was produced
          NodeId p = g_.tensor(t).producer;
          when = p == kNone ? 0 : -1;
          if (p != kNone)
            for (size_t q = 0; q < pos; ++q)
              if (order[q] == p) when = 6 * static_cast<int64_t>(q) + 5;
        }
        op.inputs.push_back(assemble(
            d, t, subs[d].in[j], tensor_levels_[t], [&](int e) { return eg_.tile(t, e); }, no_keep,
            BufferRole::kRegion, n, when));
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
      for (int d = 0; d < devices; ++d) {
        Box box = holder_box(g_.tensor(t).shape, tensor_levels_[t], f, digits_[d]);
        eg_.tile_of[static_cast<size_t>(t) * devices + d] =
            assemble(d, t, box, levels, [&](int e) { return raw[e][o]; }, keep, BufferRole::kTile, n, t_out);
      }
    }
  }
  for (const ExecOp& op : eg_.ops) eg_.bytes_moved += op.bytes_moved;
  eg_.bytes_received.assign(devices, 0);
  for (const ExecOp& op : eg_.ops) eg_.bytes_received[op.device] += op.bytes_moved;
  plan_memory(eg_, g_);
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
  return Builder(graph, plan, options).build();
}

}  // namespace autotile
