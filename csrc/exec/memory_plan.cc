#include "exec/memory_plan.h"

#include "exec/arena_fit.h"

#include "graph/inplace.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <unordered_map>

namespace autotile {

namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max() / 4;
constexpr int64_t kAlign = 64;

int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// The last buffer that occupied each address range of one arena.
class Occupancy {
 public:
  /// Buffers whose memory overlaps [lo, hi), then marks the range as owned by `buffer`.
  std::vector<int> claim(int64_t lo, int64_t hi, int buffer) {
    std::vector<int> previous;
    auto it = segs_.upper_bound(lo);
    if (it != segs_.begin()) --it;
    while (it != segs_.end() && it->first < hi) {
      int64_t s = it->first, e = it->second.first;
      int owner = it->second.second;
      if (e <= lo) {
        ++it;
        continue;
      }
      previous.push_back(owner);
      it = segs_.erase(it);
      if (s < lo) segs_[s] = {lo, owner};
      if (e > hi) segs_[hi] = {e, owner};
    }
    segs_[lo] = {hi, buffer};
    return previous;
  }

 private:
  std::map<int64_t, std::pair<int64_t, int>> segs_;  // start -> (end, buffer)
};

}  // namespace

namespace {
/// Ancestors of every node (bit a of row n: node a precedes node n through data dependencies).
std::vector<std::vector<uint64_t>> node_ancestors(const Graph& g) {
  const int n = g.num_nodes();
  const size_t words = (static_cast<size_t>(n) + 63) / 64;
  std::vector<std::vector<uint64_t>> anc(n, std::vector<uint64_t>(words, 0));
  for (NodeId v : g.topo_order()) {
    for (TensorId t : g.node(v).inputs) {
      NodeId p = g.tensor(t).producer;
      if (p == kNone) continue;
      for (size_t w = 0; w < words; ++w) anc[v][w] |= anc[p][w];
      anc[v][p / 64] |= uint64_t{1} << (p % 64);
    }
  }
  return anc;
}
}  // namespace

void plan_memory(ExecGraph& eg, const Graph& graph, bool dependency_reuse_only, bool reuse_deps,
                 int64_t place_above) {
  // Liveness on the schedule clock: from the producer's time (inputs: before everything) to
  // the last reader's; the planned tiles of graph outputs (and of tensors nobody consumes)
  // live to the end, where the step's results are read from them. Other buffers of those
  // tensors (partial sums before their reduction, fetched regions) die after their last reader.
  for (size_t i = 0; i < eg.buffers.size(); ++i) {
    Buffer& b = eg.buffers[i];
    b.live_begin = b.producer >= 0 ? eg.ops[b.producer].time : -1;
    b.live_end = b.live_begin;
    for (int r : b.readers) b.live_end = std::max(b.live_end, eg.ops[r].time);
    const Tensor& t = graph.tensor(b.tensor);
    if ((t.is_output || t.consumers.empty()) && eg.tile(b.tensor, b.device) == static_cast<int>(i))
      b.live_end = kForever;
  }
  eg.arena_bytes.assign(eg.devices, 0);
  eg.live_peak_bytes.assign(eg.devices, 0);
  std::vector<std::vector<int>> per_device(eg.devices);
  // Swapped-out copies (exec/swap_plan.h) live in the device's host pool, one slot each.
  eg.host_bytes.assign(eg.devices, 0);
  for (size_t i = 0; i < eg.buffers.size(); ++i) {
    Buffer& b = eg.buffers[i];
    if (b.host) {
      b.offset = eg.host_bytes[b.device];
      eg.host_bytes[b.device] += align_up(std::max<int64_t>(b.bytes, 1));
      continue;
    }
    per_device[b.device].push_back(static_cast<int>(i));
  }
  std::vector<std::vector<uint64_t>> anc;
  if (dependency_reuse_only) anc = node_ancestors(graph);
  // Whether `b` may take the memory of the dead buffer `o`.
  auto reusable_by = [&](const Buffer& o, const Buffer& b) {
    if (!dependency_reuse_only || o.live_end >= kForever) return o.live_end < kForever;
    if (b.producer < 0) return false;
    NodeId nb = eg.ops[b.producer].node;
    for (int r : o.readers) {
      NodeId nr = eg.ops[r].node;
      if (nr != nb && !(anc[nb][nr / 64] >> (nr % 64) & 1u)) return false;
    }
    return true;
  };
  // In-place reuse (MXNet's FInplaceOption): output `b` of a compute op may take the memory of
  // the op's input buffer paired with it when the op is that buffer's last reader (every other
  // reader ran earlier) and the sizes agree; the runtimes compute all outputs before writing.
  std::vector<std::vector<int>> pairs(graph.num_nodes());
  std::vector<char> paired(graph.num_nodes(), 0);
  std::vector<char> taken(eg.buffers.size(), 0);
  auto inplace_source = [&](int id) -> int {
    const Buffer& b = eg.buffers[id];
    if (b.producer < 0) return -1;
    const ExecOp& op = eg.ops[b.producer];
    if (op.kind != ExecKind::kCompute) return -1;
    if (!paired[op.node]) {
      pairs[op.node] = inplace_inputs(graph, op.node);
      paired[op.node] = 1;
    }
    auto at = std::find(op.outputs.begin(), op.outputs.end(), id);
    if (at == op.outputs.end()) return -1;
    int j = pairs[op.node][at - op.outputs.begin()];
    if (j < 0 || op.inputs[j] < 0) return -1;
    int src = op.inputs[j];
    const Buffer& in = eg.buffers[src];
    if (taken[src] || in.device != b.device || in.bytes != b.bytes || in.live_end != op.time) return -1;
    for (int r : in.readers)
      if (r != b.producer && eg.ops[r].time >= op.time) return -1;
    if (!reusable_by(in, b)) return -1;
    return src;
  };
  // Memory groups: a buffer and the buffers that take its memory in place share one offset.
  struct Group {
    std::vector<int> members;
    ArenaBlock block;  // aligned size and the members' span together
  };
  std::vector<int> group_of(eg.buffers.size(), -1);
  std::vector<int> source_of(eg.buffers.size(), -1);  // the input whose memory a buffer took
  std::vector<std::vector<Group>> groups_of(eg.devices);
  for (int dev = 0; dev < eg.devices; ++dev) {
    auto& ids = per_device[dev];
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int a, int b) { return eg.buffers[a].live_begin < eg.buffers[b].live_begin; });
    std::vector<Group>& groups = groups_of[dev];
    for (int id : ids) {
      const Buffer& b = eg.buffers[id];
      int src = inplace_source(id);
      if (src >= 0) {
        taken[src] = 1;
        source_of[id] = src;
        Group& g = groups[group_of[src]];
        g.members.push_back(id);
        g.block.end = std::max(g.block.end, b.live_end);
        group_of[id] = group_of[src];
      } else {
        group_of[id] = static_cast<int>(groups.size());
        groups.push_back({{id}, {align_up(std::max<int64_t>(b.bytes, 1)), b.live_begin, b.live_end}});
      }
    }
  }
  // Bytes live at once on each device, in schedule order (in place, the input dies as the
  // output is written): a lower bound of the arena.
  auto live_peak = [&](int dev) {
    using End = std::pair<int64_t, int>;
    std::priority_queue<End, std::vector<End>, std::greater<End>> ending;
    int64_t live_bytes = 0, peak = 0;
    for (int id : per_device[dev]) {
      const Buffer& b = eg.buffers[id];
      while (!ending.empty() && ending.top().first < b.live_begin) {
        int o = ending.top().second;
        ending.pop();
        if (!taken[o]) live_bytes -= eg.buffers[o].bytes;
      }
      if (source_of[id] >= 0) live_bytes -= eg.buffers[source_of[id]].bytes;
      live_bytes += b.bytes;
      peak = std::max(peak, live_bytes);
      ending.push({b.live_end, id});
    }
    return peak;
  };
  if (place_above > 0) {
    // Some device holds more than place_above at once: no placement can fit it (arena-only builds)
    for (int dev = 0; dev < eg.devices; ++dev) eg.live_peak_bytes[dev] = live_peak(dev);
    if (*std::max_element(eg.live_peak_bytes.begin(), eg.live_peak_bytes.end()) > place_above) {
      eg.arena_bytes = eg.live_peak_bytes;
      return;
    }
  }
  // Offsets (exec/arena_fit.h: best fit, largest first). The placement depends only on the
  // groups' sizes and lifetimes in order, so devices whose groups agree (all of them, in a
  // plan whose devices run the same schedule on their own tiles) share one placement. With
  // dataflow planning, whether two groups may share memory also depends on who reads them:
  // every device is placed on its own.
  std::vector<std::vector<int64_t>> offsets_of(eg.devices);
  std::unordered_map<uint64_t, std::vector<int>> placed_like;  // hash of a device's blocks -> devices placed
  for (int dev = 0; dev < eg.devices; ++dev) {
    const std::vector<Group>& groups = groups_of[dev];
    std::vector<ArenaBlock> blocks;
    blocks.reserve(groups.size());
    for (const Group& g : groups) blocks.push_back(g.block);
    if (dependency_reuse_only) {
      // Whether the earlier group's memory may not pass to the later one: some writer of the
      // later is not ordered after every reader of the earlier.
      auto ordered_conflict = [&](int first, int second) {
        for (int e : groups[first].members)
          for (int l : groups[second].members)
            if (!reusable_by(eg.buffers[e], eg.buffers[l])) return true;
        return false;
      };
      offsets_of[dev] = place_best_fit(blocks, ordered_conflict);
      continue;
    }
    uint64_t h = 1469598103934665603ull;
    for (const ArenaBlock& b : blocks)
      for (int64_t v : {b.size, b.begin, b.end}) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    auto same_blocks = [&](int other) {
      const std::vector<Group>& og = groups_of[other];
      if (og.size() != groups.size()) return false;
      for (size_t i = 0; i < og.size(); ++i)
        if (og[i].block.size != blocks[i].size || og[i].block.begin != blocks[i].begin ||
            og[i].block.end != blocks[i].end)
          return false;
      return true;
    };
    auto& like = placed_like[h];
    auto twin = std::find_if(like.begin(), like.end(), same_blocks);
    if (twin != like.end()) {
      offsets_of[dev] = offsets_of[*twin];
      continue;
    }
    offsets_of[dev] = place_best_fit(blocks);
    like.push_back(dev);
  }
  std::vector<int64_t> dep_mark(eg.ops.size(), -1);
  int64_t stamp = 0;
  for (int dev = 0; dev < eg.devices; ++dev) {
    auto& ids = per_device[dev];
    std::vector<Group>& groups = groups_of[dev];
    int64_t arena = 0;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const int64_t offset = offsets_of[dev][gi];
      arena = std::max(arena, offset + groups[gi].block.size);
      for (int m : groups[gi].members) eg.buffers[m].offset = offset;
    }
    eg.arena_bytes[dev] = arena;
    if (place_above <= 0) eg.live_peak_bytes[dev] = live_peak(dev);  // else computed above
    if (!reuse_deps) continue;
    // In schedule order, whoever writes a buffer waits for the readers (and the writer) of
    // what used its memory before.
    Occupancy occupancy;
    for (int id : ids) {
      Buffer& b = eg.buffers[id];
      const int64_t offset = b.offset, size = groups[group_of[id]].block.size;
      std::vector<int> previous = occupancy.claim(offset, offset + size, id);
      if (b.producer < 0 || previous.empty()) continue;  // graph inputs are written before the step starts
      auto& deps = eg.ops[b.producer].deps;
      ++stamp;  // dep_mark[o] == stamp: o is in deps (linear in deps, not deps x readers)
      for (int d : deps) dep_mark[d] = stamp;
      auto add_dep = [&](int o) {
        if (dep_mark[o] == stamp) return;
        dep_mark[o] = stamp;
        deps.push_back(o);
      };
      for (int prev : previous) {
        const Buffer& p = eg.buffers[prev];
        for (int r : p.readers)
          if (r != b.producer) add_dep(r);
        if (p.producer >= 0 && p.producer != b.producer) add_dep(p.producer);
      }
    }
  }
}

}  // namespace autotile
