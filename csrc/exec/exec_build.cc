// Construction of the execution graph from a graph and a plan (see exec_graph.h).
#include <algorithm>
#include <functional>
#include <map>

#include "exec/exec_graph.h"
#include "exec/memory_plan.h"
#include "exec/schedule_order.h"
#include "exec/swap_plan.h"
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
  /// Appends a MultiFetch op on `device` assembling buffer `dest` from `pieces`.
  void new_fetch(int device, NodeId node, int dest, std::vector<Piece> pieces, bool accumulate, int64_t moved,
                 int64_t time);
  /// Assemble `want` on `device` from holders described by `levels` and `holder_buffer(e)`.
  /// `keep[i]` keeps the destination partial at cut i. Returns the buffer (maybe an
  /// existing one when nothing needs to move) and appends the fetch op if one is needed.
  int assemble(int device, TensorId t, const Box& want, const std::vector<Level>& levels,
               const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep, BufferRole role,
               NodeId node, int64_t time);

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
  new_fetch(device, node, dest, std::move(pieces), reduce, moved, time);
  return dest;
}

std::vector<int> Builder::convert(TensorId t, const std::vector<const Box*>& want, const std::vector<Level>& levels,
                                  const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep,
                                  BufferRole role, NodeId node, int64_t time) {
  const auto& f = plan_.factors;
  const int devices = eg_.devices;
  std::vector<int> out(devices, -1);
  auto direct = [&]() {
    for (int d = 0; d < devices; ++d)
      if (want[d]) out[d] = assemble(d, t, *want[d], levels, holder_buffer, keep, role, node, time);
    return out;
  };
  // Cuts reduced here, and whether this is a plain reduction the search prices.
  int P = 1;
  std::vector<bool> reduce_cut(f.size(), false);
  for (size_t c = 0; c < f.size(); ++c) {
    if (levels[c].kind == LevelKind::kPartial && !keep[c]) {
      reduce_cut[c] = true;
      P *= f[c];
    } else if (keep[c] && levels[c].kind != LevelKind::kPartial && f[c] > 1) {
      return direct();  // partial kept where the producer did not reduce: random plans only
    }
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
  auto held = [&](int d) -> const Box& { return eg_.buffers[holder_buffer(d)].box; };
  double best = 0, rs = 0;
  for (int d = 0; d < devices; ++d) {
    double nv = static_cast<double>(want[d]->volume()), in = static_cast<double>(want[d]->intersect(held(d)).volume());
    best += (P - 1) * in + P * (nv - in);
    if (leader[d] == d) rs += (P - 1) * static_cast<double>(held(d).volume());
  }
  int best_dim = -1;
  const size_t rank = g_.tensor(t).shape.size();
  // Balanced slabs (uneven, or empty when the dim is shorter than the group): the same
  // formula as the cost model's (csrc/search/cost_model.cc).
  auto slab_of = [&](int d, size_t e) {
    Box slab = held(leader[d]);
    const int64_t lo = slab.dims[e].lo, size = slab.dims[e].size();
    slab.dims[e] = {lo + size * member[d] / P, lo + size * (member[d] + 1) / P};
    return slab;
  };
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
  if (rank == 0) {
    // A scalar: member 0 of each group (the group's leader) reduces it, the others fetch it.
    double fetch = 0;
    for (int d = 0; d < devices; ++d)
      if (member[d] != 0) fetch += static_cast<double>(want[d]->volume());
    if (!(rs + fetch < best)) return direct();
    bool partial = false;
    for (size_t c = 0; c < f.size(); ++c) partial = partial || (keep[c] && levels[c].kind == LevelKind::kPartial);
    for (int d = 0; d < devices; ++d) {
      if (member[d] != 0) continue;
      ExecOp op;
      op.kind = ExecKind::kFetch;
      op.device = d;
      op.node = node;
      op.outputs = {new_buffer(d, t, *want[d], role, partial)};
      op.accumulate = true;
      op.time = time;
      for (int g = 0; g < devices; ++g) {
        if (leader[g] != leader[d]) continue;
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
  if (best_dim < 0) return direct();
  // Reduce-scatter: member m of each group sums slab m of the group's partials.
  std::vector<int> reduced(devices);
  for (int d = 0; d < devices; ++d) {
    Box slab = slab_of(d, static_cast<size_t>(best_dim));
    bool partial = false;
    for (size_t c = 0; c < f.size(); ++c) partial = partial || (keep[c] && levels[c].kind == LevelKind::kPartial);
    int dest = new_buffer(d, t, slab, BufferRole::kRegion, partial);
    ExecOp op;
    op.kind = ExecKind::kFetch;
    op.device = d;
    op.node = node;
    op.outputs = {dest};
    op.accumulate = true;
    op.time = time;
    for (int g = 0; g < devices; ++g) {
      if (leader[g] != leader[d]) continue;
      op.pieces.push_back({holder_buffer(g), slab});
      if (g != d) op.bytes_moved += slab.volume() * dsize;
    }
    new_op(std::move(op));
    reduced[d] = dest;
  }
  // Gather: every device assembles what it wants from the reduced slabs, its own first, then
  // from the devices nearest to it (longest common prefix of digits: the fastest links).
  for (int d = 0; d < devices; ++d) {
    const Box& w = *want[d];
    std::vector<int> order(devices);
    for (int e = 0; e < devices; ++e) order[e] = e;
    auto common = [&](int e) {
      size_t c = 0;
      while (c < f.size() && digits_[e][c] == digits_[d][c]) ++c;
      return c;
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return common(a) > common(b); });
    std::vector<Piece> pieces;
    std::vector<Box> used;
    int64_t covered = 0, moved = 0;
    for (int e : order) {
      const Box& slab = eg_.buffers[reduced[e]].box;
      if (std::find(used.begin(), used.end(), slab) != used.end()) continue;
      used.push_back(slab);
      Box region = w.intersect(slab);
      if (region.empty()) continue;
      pieces.push_back({reduced[e], region});
      covered += region.volume();
      if (e != d) moved += region.volume() * dsize;
    }
    if (covered != w.volume())
      fail("internal: reduced slabs of tensor '", g_.tensor(t).name, "' cover ", covered, " of ", w.volume(),
           " elements of region ", w.str(), " on device ", d);
    if (pieces.size() == 1 && pieces[0].src == reduced[d] && eg_.buffers[reduced[d]].box == w) {
      out[d] = reduced[d];
      continue;
    }
    int dest = new_buffer(d, t, w, role, eg_.buffers[reduced[d]].partial);
    new_fetch(d, node, dest, std::move(pieces), false, moved, time);
    out[d] = dest;
  }
  return out;
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
  std::vector<NodeId> order = schedule_order(g_);
  std::vector<bool> no_keep(f.size(), false);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    NodeId n = order[pos];
    const Node& node = g_.node(n);
    int64_t t_fetch = 6 * static_cast<int64_t>(pos), t_compute = t_fetch + 2, t_out = t_fetch + 4;
    std::vector<SubOp> subs;
    for (int d = 0; d < devices; ++d) subs.push_back(sub_op(n, d));
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
        op.input_boxes.push_back(subs[d].in[j]);
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
  for (const ExecOp& op : eg_.ops) eg_.bytes_moved += op.bytes_moved;
  eg_.bytes_received.assign(devices, 0);
  for (const ExecOp& op : eg_.ops) eg_.bytes_received[op.device] += op.bytes_moved;
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
    // The swap planner counts live bytes; the arena also has fragmentation. Aim lower by the
    // overshoot until the placed arena fits (or nothing more can move).
    const ExecGraph base = eg_;
    int64_t target = opts_.swap_budget;
    for (int attempt = 0; attempt < 8; ++attempt) {
      eg_ = base;
      plan_swaps(eg_, g_, target);
      plan_memory(eg_, g_, false);
      int64_t worst = 0;
      for (int64_t a : eg_.arena_bytes) worst = std::max(worst, a);
      if (worst <= opts_.swap_budget || target <= 0) break;
      target -= worst - opts_.swap_budget;
    }
    return std::move(eg_);
  }
  plan_memory(eg_, g_, !opts_.control_deps);
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
