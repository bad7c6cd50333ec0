#include "exec/node_template.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace autotile {

namespace {

void put_text(std::string& key, const std::string& s) {
  const uint64_t n = s.size();
  key.append(reinterpret_cast<const char*>(&n), sizeof n);
  key += s;
}

void put_int(std::string& key, int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }

void put_tensor(std::string& key, const Graph& graph, const PlanSpec& plan, TensorId t) {
  const Tensor& ten = graph.tensor(t);
  put_int(key, static_cast<int64_t>(ten.shape.size()));
  for (int64_t d : ten.shape) put_int(key, d);
  put_int(key, static_cast<int64_t>(ten.dtype));
  for (const std::string& tiling : plan.tensor_tilings[t]) put_text(key, tiling);
}

}  // namespace

std::string node_template_key(const Graph& graph, const PlanSpec& plan, NodeId n) {
  const Node& node = graph.node(n);
  std::string key;
  put_text(key, node.op);
  put_text(key, node.tdl);
  auto vetoed = node.attrs.find("__no_split__");
  put_text(key, vetoed == node.attrs.end() ? std::string() : vetoed->second);
  for (const std::string& s : plan.node_strategies[n]) put_text(key, s);
  put_int(key, static_cast<int64_t>(node.inputs.size()));
  for (size_t j = 0; j < node.inputs.size(); ++j) {
    size_t first = 0;  // inputs reading the same tensor read the same tiles
    while (node.inputs[first] != node.inputs[j]) ++first;
    put_int(key, static_cast<int64_t>(first));
    put_tensor(key, graph, plan, node.inputs[j]);
  }
  put_int(key, static_cast<int64_t>(node.outputs.size()));
  for (TensorId t : node.outputs) put_tensor(key, graph, plan, t);
  return key;
}

bool record_node(const ExecGraph& eg, const Graph& graph, NodeId n, int64_t time0, size_t op0, size_t buf0,
                 const std::vector<std::vector<int>>& piece_srcs, NodeTemplate& out) {
  const Node& node = graph.node(n);
  const int devices = eg.devices;
  std::unordered_map<int, int> external;  // tile buffer id -> its reference (the first input reading it)
  for (size_t j = 0; j < node.inputs.size(); ++j)
    for (int e = 0; e < devices; ++e) {
      const int b = eg.tile(node.inputs[j], e);
      if (b >= 0) external.emplace(b, -(2 + static_cast<int>(j) * devices + e));
    }
  bool ok = true;
  auto ref = [&](int b) {
    if (b < 0) return -1;
    if (static_cast<size_t>(b) >= buf0) return b - static_cast<int>(buf0);
    auto it = external.find(b);
    if (it == external.end()) {
      ok = false;
      return -1;
    }
    return it->second;
  };
  out = NodeTemplate{};
  out.buffers.reserve(eg.buffers.size() - buf0);
  for (size_t i = buf0; i < eg.buffers.size(); ++i) {
    const Buffer& b = eg.buffers[i];
    int slot = 0;
    while (slot < static_cast<int>(node.inputs.size()) && node.inputs[slot] != b.tensor) ++slot;
    if (slot == static_cast<int>(node.inputs.size())) {
      int o = 0;
      while (o < static_cast<int>(node.outputs.size()) && node.outputs[o] != b.tensor) ++o;
      if (o == static_cast<int>(node.outputs.size())) return false;
      slot = -(1 + o);
    }
    out.buffers.push_back({b.device, slot, b.box, b.role, b.partial, b.bytes});
  }
  out.ops.reserve(eg.ops.size() - op0);
  for (size_t i = op0; i < eg.ops.size(); ++i) {
    const ExecOp& op = eg.ops[i];
    NodeTemplate::TOp t;
    t.kind = op.kind;
    t.device = op.device;
    for (int b : op.inputs) t.inputs.push_back(ref(b));
    for (int b : op.outputs) {
      // device classes copy a built device's arena to its class: an op writes its own device only
      if (b >= 0 && eg.buffers[b].device != op.device) return false;
      t.outputs.push_back(ref(b));
    }
    for (int b : piece_srcs[i - op0]) t.reads.push_back(ref(b));
    t.accumulate = op.accumulate;
    t.bytes_moved = op.bytes_moved;
    t.time = op.time - time0;
    out.ops.push_back(std::move(t));
  }
  out.out_tiles.reserve(node.outputs.size() * devices);
  for (TensorId t : node.outputs)
    for (int d = 0; d < devices; ++d) {
      const int b = eg.tile(t, d);
      if (b < 0 || static_cast<size_t>(b) < buf0) return false;
      out.out_tiles.push_back(b - static_cast<int>(buf0));
    }
  return ok;
}

void replay_node(ExecGraph& eg, const Graph& graph, NodeId n, int64_t time0, const NodeTemplate& tpl,
                 const std::vector<char>* kept) {
  const Node& node = graph.node(n);
  const int devices = eg.devices;
  auto keeps = [&](int device) { return !kept || (*kept)[device]; };
  std::vector<int> made(tpl.buffers.size(), -1);  // template buffer -> buffer id (-1: not made)
  for (size_t k = 0; k < tpl.buffers.size(); ++k) {
    const NodeTemplate::TBuffer& tb = tpl.buffers[k];
    if (!keeps(tb.device)) continue;
    Buffer b;
    b.device = tb.device;
    b.tensor = tb.slot >= 0 ? node.inputs[tb.slot] : node.outputs[-1 - tb.slot];
    b.box = tb.box;
    b.role = tb.role;
    b.partial = tb.partial;
    b.bytes = tb.bytes;
    made[k] = static_cast<int>(eg.buffers.size());
    eg.buffers.push_back(std::move(b));
  }
  auto id = [&](int r) {
    if (r >= 0) return made[r];
    if (r == -1) return -1;
    const int x = -r - 2;
    return eg.tile(node.inputs[x / devices], x % devices);  // -1 on a device not kept
  };
  // As Builder::new_op does for an arena-only graph: readers (inputs, then piece sources),
  // producers, the device's schedule; no pieces, boxes or dependencies kept.
  for (const NodeTemplate::TOp& t : tpl.ops) {
    const int op_id = static_cast<int>(eg.ops.size());
    ExecOp op;
    op.kind = t.kind;
    op.device = t.device;
    op.node = n;
    op.accumulate = t.accumulate;
    op.bytes_moved = t.bytes_moved;
    op.time = time0 + t.time;
    if (!keeps(t.device)) {  // only a reader of the kept devices' buffers, if of any
      bool reads = false;
      for (const std::vector<int>* refs : {&t.inputs, &t.reads})
        for (int r : *refs) {
          const int b = id(r);
          if (b < 0) continue;
          eg.buffers[b].readers.push_back(op_id);
          reads = true;
        }
      if (reads) eg.ops.push_back(std::move(op));
      continue;
    }
    op.inputs.reserve(t.inputs.size());
    for (int r : t.inputs) op.inputs.push_back(id(r));
    op.outputs.reserve(t.outputs.size());
    for (int r : t.outputs) op.outputs.push_back(id(r));
    for (int b : op.inputs)
      if (b >= 0) eg.buffers[b].readers.push_back(op_id);
    for (int r : t.reads) {
      const int b = id(r);
      if (b >= 0) eg.buffers[b].readers.push_back(op_id);
    }
    for (int b : op.outputs) eg.buffers[b].producer = op_id;
    eg.schedule[op.device].push_back(op_id);
    eg.ops.push_back(std::move(op));
  }
  for (size_t o = 0; o < node.outputs.size(); ++o)
    for (int d = 0; d < devices; ++d)
      if (keeps(d)) eg.tile_of[static_cast<size_t>(node.outputs[o]) * devices + d] = made[tpl.out_tiles[o * devices + d]];
}

std::vector<std::vector<int64_t>> device_signatures(const NodeTemplate& tpl, int devices) {
  std::vector<std::vector<int64_t>> sig(devices);
  // A buffer as its device sees it: its index among that device's buffers (>= 0), or an input
  // tile, -(10 + input); device_of: whose it is (-1: none).
  std::vector<int> local(tpl.buffers.size());
  std::vector<int> count(devices, 0);
  for (size_t k = 0; k < tpl.buffers.size(); ++k) local[k] = count[tpl.buffers[k].device]++;
  auto device_of = [&](int r) {
    if (r >= 0) return tpl.buffers[r].device;
    if (r == -1) return -1;
    return (-r - 2) % devices;
  };
  auto seen_as = [&](int r) -> int64_t {
    if (r >= 0) return local[r];
    return -10 - (-r - 2) / devices;  // r != -1 here
  };
  // Records with counted lists, so that equal vectors are equal records.
  for (int d = 0; d < devices; ++d) sig[d].push_back(count[d]);
  for (const NodeTemplate::TBuffer& b : tpl.buffers) sig[b.device].insert(sig[b.device].end(), {b.bytes, b.slot});
  for (size_t o = 0; o * devices < tpl.out_tiles.size(); ++o)
    for (int d = 0; d < devices; ++d) sig[d].push_back(local[tpl.out_tiles[o * devices + d]]);
  constexpr int64_t kOp = -1, kRead = -2;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> remote(devices);  // (time, buffer) read by pieces or others
  for (const NodeTemplate::TOp& t : tpl.ops) {
    auto& own = sig[t.device];
    own.insert(own.end(), {kOp, static_cast<int64_t>(t.kind), t.time, static_cast<int64_t>(t.inputs.size())});
    for (int r : t.inputs) own.push_back(r == -1 ? -1 : seen_as(r));
    own.push_back(static_cast<int64_t>(t.outputs.size()));
    for (int r : t.outputs) own.push_back(seen_as(r));
    for (int r : t.inputs) {  // (a compute op reads its own device's buffers)
      const int d = device_of(r);
      if (d >= 0 && d != t.device) remote[d].push_back({t.time, seen_as(r)});
    }
    for (int r : t.reads) {
      const int d = device_of(r);
      if (d >= 0) remote[d].push_back({t.time, seen_as(r)});
    }
  }
  // The pieces' reads (on any device) and other devices' ops' reads: the last of each buffer's.
  // Neither the order, the number nor the device of a buffer's readers changes its lifetime
  // (the last read) or an in-place pair (whether a reader other than the compute op comes as
  // late as the op; the compute ops' inputs are in their records).
  for (int d = 0; d < devices; ++d) {
    std::map<int64_t, int64_t> last;  // buffer -> time
    for (const auto& [time, which] : remote[d]) last[which] = std::max(last.count(which) ? last[which] : time, time);
    sig[d].push_back(kRead);
    for (const auto& [which, time] : last) sig[d].insert(sig[d].end(), {which, time});
  }
  return sig;
}

}  // namespace autotile
