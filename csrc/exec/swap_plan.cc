#include "exec/swap_plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

namespace autotile {

namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max() / 4;
// How far ahead of its next use (on the memory clock: 6 units per node) a swap-in is placed,
// so the copy stream can bring it back while the device computes the node before.
constexpr int64_t kPrefetch = 6;

struct Live {
  int64_t begin, end, bytes;  // live on [begin, end]
};

// Liveness as plan_memory computes it (exec/memory_plan.cc): from the producer's time (graph
// inputs: before everything) to the last reader's; planned tiles of outputs to the end.
Live liveness(const ExecGraph& eg, const Graph& g, int id) {
  const Buffer& b = eg.buffers[id];
  int64_t begin = b.producer >= 0 ? eg.ops[b.producer].time : -1, end = begin;
  for (int r : b.readers) end = std::max(end, eg.ops[r].time);
  const Tensor& t = g.tensor(b.tensor);
  if ((t.is_output || t.consumers.empty()) && eg.tile(b.tensor, b.device) == id) end = kForever;
  return {begin, end, b.bytes};
}

// (time, bytes live then) of the busiest point of `live` (ties: the earliest).
std::pair<int64_t, int64_t> peak_of(const std::vector<Live>& live) {
  std::vector<std::pair<int64_t, int64_t>> events;  // (time, +bytes at begin / -bytes after end)
  events.reserve(live.size() * 2);
  for (const Live& iv : live) {
    if (iv.bytes == 0) continue;
    events.push_back({iv.begin, iv.bytes});
    if (iv.end < kForever) events.push_back({iv.end + 1, -iv.bytes});
  }
  std::sort(events.begin(), events.end());
  int64_t cur = 0, best = 0, when = 0;
  for (size_t i = 0; i < events.size();) {
    int64_t t = events[i].first;
    for (; i < events.size() && events[i].first == t; ++i) cur += events[i].second;
    if (cur > best) best = cur, when = t;
  }
  return {when, best};
}

// The gap of buffer `id` around time `at`: (last use before, next use after), or {-1, -1}.
std::pair<int64_t, int64_t> gap_around(const ExecGraph& eg, int id, int64_t at) {
  const Buffer& b = eg.buffers[id];
  int64_t before = b.producer >= 0 ? eg.ops[b.producer].time : -1;
  int64_t after = kForever;
  if (before >= at) return {-1, -1};
  for (int r : b.readers) {
    int64_t t = eg.ops[r].time;
    if (t < at) before = std::max(before, t);
    else after = std::min(after, t);
  }
  if (after == kForever) return {-1, -1};
  return {before, after};
}

int add_op(ExecGraph& eg, ExecOp op) {
  eg.ops.push_back(std::move(op));
  return static_cast<int>(eg.ops.size()) - 1;
}

int add_buffer(ExecGraph& eg, const Buffer& like, bool host) {
  Buffer b;
  b.device = like.device;
  b.tensor = like.tensor;
  b.box = like.box;
  b.role = like.role;
  b.partial = like.partial;
  b.bytes = like.bytes;
  b.host = host;
  eg.buffers.push_back(std::move(b));
  return static_cast<int>(eg.buffers.size()) - 1;
}

// Moves buffer `id` out after `last` and back before `next`; readers at or after `next` read
// the copy. Returns the copy's buffer id.
int swap(ExecGraph& eg, int id, int64_t out_time, int64_t in_time) {
  const int device = eg.buffers[id].device;
  const int host = add_buffer(eg, eg.buffers[id], true);
  const int copy = add_buffer(eg, eg.buffers[id], false);
  std::vector<int> later;
  for (int r : eg.buffers[id].readers)
    if (eg.ops[r].time >= in_time) later.push_back(r);
  const NodeId node = later.empty() ? kNone : eg.ops[later.front()].node;

  ExecOp out;
  out.kind = ExecKind::kSwapOut;
  out.device = device;
  out.node = node;
  out.outputs = {host};
  out.pieces = {Piece{id, eg.buffers[id].box}};
  if (eg.buffers[id].producer >= 0) out.deps.push_back(eg.buffers[id].producer);
  out.time = out_time;
  const int out_id = add_op(eg, std::move(out));
  ExecOp in;
  in.kind = ExecKind::kSwapIn;
  in.device = device;
  in.node = node;
  in.outputs = {copy};
  in.pieces = {Piece{host, eg.buffers[id].box}};
  in.deps.push_back(out_id);
  in.time = in_time;
  const int in_id = add_op(eg, std::move(in));

  eg.buffers[host].producer = out_id;
  eg.buffers[host].readers = {in_id};
  eg.buffers[copy].producer = in_id;
  auto& readers = eg.buffers[id].readers;
  readers.erase(std::remove_if(readers.begin(), readers.end(), [&](int r) { return eg.ops[r].time >= in_time; }),
                readers.end());
  readers.push_back(out_id);
  for (int r : later) {
    ExecOp& op = eg.ops[r];
    for (int& x : op.inputs)
      if (x == id) x = copy;
    for (Piece& p : op.pieces)
      if (p.src == id) p.src = copy;
    op.deps.push_back(in_id);
    eg.buffers[copy].readers.push_back(r);
  }
  eg.copy_schedule[device].push_back(out_id);
  eg.copy_schedule[device].push_back(in_id);
  return copy;
}

}  // namespace

int plan_swaps(ExecGraph& eg, const Graph& graph, int64_t budget) {
  eg.copy_schedule.resize(eg.devices);
  int swaps = 0;
  for (int dev = 0; dev < eg.devices; ++dev) {
    std::vector<int> ids;
    for (size_t i = 0; i < eg.buffers.size(); ++i)
      if (eg.buffers[i].device == dev && !eg.buffers[i].host) ids.push_back(static_cast<int>(i));
    std::vector<char> swapped(eg.buffers.size(), 0);
    while (true) {
      std::vector<Live> live;
      live.reserve(ids.size());
      for (int id : ids) live.push_back(liveness(eg, graph, id));
      auto [at, bytes] = peak_of(live);
      if (bytes <= budget) break;
      // The buffer idle across the peak that frees the most: largest, then longest gap.
      int best = -1;
      int64_t best_bytes = 0, best_gap = 0, best_out = 0, best_in = 0;
      for (size_t k = 0; k < ids.size(); ++k) {
        int id = ids[k];
        if (swapped[id] || live[k].end >= kForever || eg.buffers[id].bytes == 0) continue;
        auto [last, next] = gap_around(eg, id, at);
        if (last < -1 || next < 0) continue;
        int64_t out_time = last + 1, in_time = std::max(out_time + 1, next - 1 - kPrefetch);
        if (in_time <= at) in_time = next - 1;  // too close to prefetch early: just in time
        if (!(out_time < at && at < in_time)) continue;
        int64_t gap = in_time - out_time;
        if (eg.buffers[id].bytes > best_bytes || (eg.buffers[id].bytes == best_bytes && gap > best_gap)) {
          best = id, best_bytes = eg.buffers[id].bytes, best_gap = gap, best_out = out_time, best_in = in_time;
        }
      }
      // A swap-in prefetched ahead of the peak: bring it back just in time instead.
      int late = -1;
      int64_t late_bytes = 0, late_time = 0;
      for (size_t k = 0; k < ids.size(); ++k) {
        int id = ids[k];
        const Buffer& b = eg.buffers[id];
        if (b.producer < 0 || eg.ops[b.producer].kind != ExecKind::kSwapIn || b.readers.empty()) continue;
        int64_t first = kForever;
        for (int r : b.readers) first = std::min(first, eg.ops[r].time);
        if (eg.ops[b.producer].time < at && at < first - 1 && b.bytes > late_bytes)
          late = id, late_bytes = b.bytes, late_time = first - 1;
      }
      if (late >= 0 && late_bytes >= best_bytes) {
        eg.ops[eg.buffers[late].producer].time = late_time;
        continue;
      }
      if (best < 0) break;  // nothing idle across the peak: swapping cannot lower it
      int copy = swap(eg, best, best_out, best_in);
      swapped.resize(eg.buffers.size(), 0);
      swapped[best] = swapped[copy] = 1;
      ids.push_back(copy);
      ++swaps;
    }
    std::stable_sort(eg.copy_schedule[dev].begin(), eg.copy_schedule[dev].end(),
                     [&](int a, int b) { return eg.ops[a].time < eg.ops[b].time; });
  }
  return swaps;
}

}  // namespace autotile
