#include "exec/swap_plan.h"

#include "exec/memory_plan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

namespace autotile {

namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max() / 4;

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
// the copy, and for a step output (`output`) the copy becomes the tile. Returns the copy's id.
int swap(ExecGraph& eg, int id, int64_t out_time, int64_t in_time, bool output) {
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
  // A step output's tile comes back by the end of the step: the copy is now the tile (the
  // result the runtime gathers), and the original's memory is free after the swap-out.
  if (output) eg.tile_of[static_cast<size_t>(eg.buffers[id].tensor) * eg.devices + device] = copy;
  eg.copy_schedule[device].push_back(out_id);
  eg.copy_schedule[device].push_back(in_id);
  return copy;
}

// Moves every swap-in of `ids` (one device's buffers) as early as memory allows, so that the
// copy hides behind compute (the thesis's swap planner prefetches as early as possible): in
// order of next use, each to the earliest time after its swap-out from which its copy, added
// to the live bytes, keeps every point up to its next use within `budget`. Points already
// over the budget (nothing could be swapped there) keep their swap-ins just in time.
void prefetch_swap_ins(ExecGraph& eg, const Graph& graph, const std::vector<int>& ids, int64_t budget) {
  int64_t horizon = 0;
  std::vector<std::pair<int64_t, int>> ins;  // (next use, swap-in op)
  for (int id : ids) {
    const Buffer& b = eg.buffers[id];
    for (int r : b.readers) horizon = std::max(horizon, eg.ops[r].time);
    if (b.producer < 0) continue;
    horizon = std::max(horizon, eg.ops[b.producer].time);
    if (eg.ops[b.producer].kind != ExecKind::kSwapIn) continue;
    int64_t first = b.readers.empty() ? eg.ops[b.producer].time + 1 : kForever;  // an output: the end
    for (int r : b.readers) first = std::min(first, eg.ops[r].time);
    ins.push_back({first, b.producer});
  }
  if (ins.empty()) return;
  // live[t + 1]: bytes live at time t, for t in [-1, horizon]
  std::vector<int64_t> live(static_cast<size_t>(horizon) + 3, 0);
  for (int id : ids) {
    Live iv = liveness(eg, graph, id);
    if (iv.bytes == 0) continue;
    live[iv.begin + 1] += iv.bytes;
    if (iv.end < kForever) live[iv.end + 2] -= iv.bytes;
  }
  for (size_t t = 1; t < live.size(); ++t) live[t] += live[t - 1];
  std::sort(ins.begin(), ins.end());
  for (auto [next, in_id] : ins) {
    ExecOp& in = eg.ops[in_id];
    const int64_t bytes = eg.buffers[in.outputs[0]].bytes, after = eg.ops[in.deps.front()].time;
    int64_t t = in.time;
    while (t - 1 > after && live[t] + bytes <= budget) --t;  // live[t] is time t - 1
    for (int64_t s = t; s < in.time; ++s) live[s + 1] += bytes;
    in.time = t;
  }
}

}  // namespace

int plan_swaps(ExecGraph& eg, const Graph& graph, int64_t budget, int64_t hold) {
  eg.copy_schedule.resize(eg.devices);
  int swaps = 0;
  // The end of the step on the memory clock: a step output's tile must be back by then.
  int64_t end_time = 0;
  for (const ExecOp& op : eg.ops) end_time = std::max(end_time, op.time + 2);
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
      bool best_output = false;
      for (size_t k = 0; k < ids.size(); ++k) {
        int id = ids[k];
        if (swapped[id] || eg.buffers[id].bytes == 0) continue;
        // A step output's tile (the updated weights) idles from its last use to the end of the
        // step: it may wait on the host and come back at the end. Inputs kept to the end are
        // not moved (the runtime loads them into this very buffer).
        const bool output = live[k].end >= kForever;
        if (output && eg.buffers[id].producer < 0) continue;
        auto [last, next] = output ? std::pair<int64_t, int64_t>{live[k].begin, end_time} : gap_around(eg, id, at);
        if (output)
          for (int r : eg.buffers[id].readers) last = std::max(last, eg.ops[r].time);
        if (output && last >= at) continue;
        if (last < -1 || next < 0) continue;
        // swap-ins start just in time; prefetch_swap_ins moves them earlier afterwards
        int64_t out_time = std::max(last + 1, std::min(last + 1 + hold, at - 1)), in_time = next - 1;
        if (!(out_time < at && at < in_time)) continue;
        int64_t gap = in_time - out_time;
        if (eg.buffers[id].bytes > best_bytes || (eg.buffers[id].bytes == best_bytes && gap > best_gap)) {
          best = id, best_bytes = eg.buffers[id].bytes, best_gap = gap, best_out = out_time, best_in = in_time;
          best_output = output;
        }
      }
      if (best < 0) break;  // nothing idle across the peak: swapping cannot lower it
      int copy = swap(eg, best, best_out, best_in, best_output);
      swapped.resize(eg.buffers.size(), 0);
      swapped[best] = swapped[copy] = 1;
      ids.push_back(copy);
      ++swaps;
    }
    prefetch_swap_ins(eg, graph, ids, budget);
    std::stable_sort(eg.copy_schedule[dev].begin(), eg.copy_schedule[dev].end(),
                     [&](int a, int b) { return eg.ops[a].time < eg.ops[b].time; });
  }
  return swaps;
}

void swap_to_fit(ExecGraph& eg, const Graph& graph, int64_t budget, int64_t hold) {
  const ExecGraph base = eg;
  ExecGraph best;
  // Fragmentation does not shrink in proportion to the target (the prefetched swap-ins fill
  // memory up to it), so the step below the budget grows geometrically until the arena fits,
  // then bisects between the highest target that missed and the lowest that fit.
  auto fits_at = [&](int64_t target) {
    eg = base;
    plan_swaps(eg, graph, target, hold);
    plan_memory(eg, graph, false);
    int64_t worst = 0;
    for (int64_t a : eg.arena_bytes) worst = std::max(worst, a);
    if (worst <= budget) best = eg;
    return worst;
  };
  int64_t missed = budget, fit = -1, step = 0, target = budget;
  for (int attempt = 0; attempt < 10; ++attempt) {
    int64_t worst = fits_at(target);
    if (worst <= budget) {
      fit = target;
      break;
    }
    missed = target;
    if (target <= 0) return;  // nothing fits: the caller reports the arena
    step = std::max(2 * step, worst - budget);
    target = std::max<int64_t>(0, target - step);
  }
  if (fit < 0) return;
  for (int attempt = 0; attempt < 3 && missed - fit > budget / 256; ++attempt) {
    int64_t mid = fit + (missed - fit) / 2;
    if (fits_at(mid) <= budget) fit = mid;
    else missed = mid;
  }
  eg = std::move(best);
}

}  // namespace autotile
