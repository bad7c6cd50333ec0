#include "exec/swap_plan.h"

#include "exec/memory_plan.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace autotile {

namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max() / 4;

struct Live {
  int64_t begin, end, bytes;  // live on [begin, end]
};

// Liveness as plan_memory computes it (exec/memory_plan.cc): from the producer's time (graph
// inputs: before everything) to the last reader's; planned tiles of outputs to the end.
// A buffer moved to the host pool holds no device memory.
Live liveness(const ExecGraph& eg, const Graph& g, int id) {
  const Buffer& b = eg.buffers[id];
  if (b.host) return {-1, -1, 0};
  int64_t begin = b.producer >= 0 ? eg.ops[b.producer].time : -1, end = begin;
  for (int r : b.readers) end = std::max(end, eg.ops[r].time);
  const Tensor& t = g.tensor(b.tensor);
  if ((t.is_output || t.consumers.empty()) && eg.tile(b.tensor, b.device) == id) end = kForever;
  return {begin, end, b.bytes};
}

// The bytes of `live` live at each time: [t + 1] for t in [-1, last] (each interval ends
// before `last` or never).
std::vector<int64_t> live_bytes(const std::vector<Live>& live, int64_t last) {
  std::vector<int64_t> bytes(static_cast<size_t>(last) + 2, 0);  // first the changes: [t + 1] at t
  for (const Live& iv : live) {
    if (iv.bytes == 0) continue;
    bytes[iv.begin + 1] += iv.bytes;
    if (iv.end < kForever) bytes[iv.end + 2] -= iv.bytes;
  }
  for (size_t i = 1; i < bytes.size(); ++i) bytes[i] += bytes[i - 1];
  return bytes;
}

// (time, bytes live then) of the busiest point of `live` (ties: the earliest; {0, 0} when
// nothing is live). The bytes live change only where a buffer begins or ends, so the earliest
// busiest time is one of those; the count runs over the clock (a few times the node count)
// instead of sorting the events.
std::pair<int64_t, int64_t> peak_of(const std::vector<Live>& live) {
  int64_t horizon = 0;
  for (const Live& iv : live)
    if (iv.bytes != 0) horizon = std::max(horizon, iv.end < kForever ? iv.end + 1 : iv.begin);
  const std::vector<int64_t> bytes = live_bytes(live, horizon);
  int64_t best = 0, when = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] > best) best = bytes[i], when = static_cast<int64_t>(i) - 1;
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

// Makes buffer `to` the tile of `id`'s tensor on its device: the buffer the runtimes gather
// the step's result from.
void set_tile(ExecGraph& eg, int id, int to) {
  const Buffer& b = eg.buffers[id];
  eg.tile_of[static_cast<size_t>(b.tensor) * eg.devices + b.device] = to;
}

// A swap-in at `in_time` of host buffer `host` into a new device buffer; every reader of `id`
// at or after `in_time` reads the new buffer instead. Returns the new buffer's id.
int swap_in(ExecGraph& eg, int id, int host, int64_t in_time, std::vector<int> deps) {
  const int device = eg.buffers[id].device;
  const int copy = add_buffer(eg, eg.buffers[id], false);
  std::vector<int> later;
  for (int r : eg.buffers[id].readers)
    if (eg.ops[r].time >= in_time) later.push_back(r);
  ExecOp in;
  in.kind = ExecKind::kSwapIn;
  in.device = device;
  in.node = later.empty() ? kNone : eg.ops[later.front()].node;
  in.outputs = {copy};
  in.pieces = {Piece{host, eg.buffers[id].box}};
  in.deps = std::move(deps);
  in.time = in_time;
  const int in_id = add_op(eg, std::move(in));
  auto& readers = eg.buffers[id].readers;
  readers.erase(std::remove_if(readers.begin(), readers.end(), [&](int r) { return eg.ops[r].time >= in_time; }),
                readers.end());
  eg.buffers[host].readers.push_back(in_id);
  eg.buffers[copy].producer = in_id;
  for (int r : later) {
    ExecOp& op = eg.ops[r];
    for (int& x : op.inputs)
      if (x == id) x = copy;
    for (Piece& p : op.pieces)
      if (p.src == id) p.src = copy;
    op.deps.push_back(in_id);
    eg.buffers[copy].readers.push_back(r);
  }
  eg.copy_schedule[device].push_back(in_id);
  return copy;
}

// The host buffer already holding the value of device buffer `id` when `id` was swapped in,
// else -1. A buffer is written once; an op the memory plan lets overwrite it in place is its
// last reader, so the copy still holds the host buffer's value wherever it is read.
int host_source(const ExecGraph& eg, int id) {
  const int p = eg.buffers[id].producer;
  return p >= 0 && eg.ops[p].kind == ExecKind::kSwapIn ? eg.ops[p].pieces[0].src : -1;
}

// A swap-out of `id` at `out_time` into a new host buffer (none when `id` was swapped in: the
// host already holds its value); returns the host buffer and the op a swap-in of it waits for.
std::pair<int, int> swap_out(ExecGraph& eg, int id, int64_t out_time) {
  if (int host = host_source(eg, id); host >= 0) return {host, eg.buffers[id].producer};
  const int device = eg.buffers[id].device;
  const int host = add_buffer(eg, eg.buffers[id], true);
  ExecOp out;
  out.kind = ExecKind::kSwapOut;
  out.device = device;
  const int producer = eg.buffers[id].producer;
  out.node = producer >= 0 ? eg.ops[producer].node : eg.ops[eg.buffers[id].readers.front()].node;
  out.outputs = {host};
  out.pieces = {Piece{id, eg.buffers[id].box}};
  if (producer >= 0) out.deps.push_back(producer);
  out.time = out_time;
  const int out_id = add_op(eg, std::move(out));
  eg.buffers[host].producer = out_id;
  eg.buffers[id].readers.push_back(out_id);
  eg.copy_schedule[device].push_back(out_id);
  return {host, out_id};
}

// How buffer `id` leaves the device across the over-budget point (Swap::kind).
struct Swap {
  enum Kind { kGap, kLoad, kStay } kind = kGap;
  int64_t out_time = 0, in_time = 0;
};

// Moves buffer `id` off the device as `how` says, appending the device buffers it adds to
// `added`. A graph input's tile moves to the host pool first (the runtimes load it there before
// the step; it stays the tile) and is swapped in before its first use (kLoad: that is all);
// copies of it are swapped in from there, never out. kGap: out after the last use before the
// gap, back before the next (a step output's tile moves to the copy). kStay: a step output idle
// to the end goes to the host and stays there; its host buffer is the tile the runtimes gather.
void swap(ExecGraph& eg, int id, const Swap& how, bool output, std::vector<int>& added) {
  const Buffer& b = eg.buffers[id];
  if (b.producer < 0 && eg.tile(b.tensor, b.device) == id) {
    eg.buffers[id].host = true;
    if (eg.buffers[id].readers.empty()) return;
    int64_t first = kForever;
    for (int r : eg.buffers[id].readers) first = std::min(first, eg.ops[r].time);
    const int copy = swap_in(eg, id, id, how.kind == Swap::kLoad ? how.in_time : first - 1, {});
    added.push_back(copy);
    if (how.kind == Swap::kLoad) return;
    id = copy, output = false;
  }
  auto [host, ready] = swap_out(eg, id, how.out_time);
  if (how.kind == Swap::kStay) {
    set_tile(eg, id, host);
    return;
  }
  std::vector<int> deps = {ready};
  if (ready == eg.buffers[id].producer) {
    // swapped in again from the host buffer: after the last use of the copy it replaces on this
    // device (there is no swap-out to wait for, and two copies at once would be wasted memory)
    int last = -1;
    for (int r : eg.buffers[id].readers)
      if (eg.ops[r].time < how.in_time && eg.ops[r].device == eg.buffers[id].device &&
          (last < 0 || eg.ops[r].time > eg.ops[last].time))
        last = r;
    if (last >= 0) deps.push_back(last);
  }
  const int copy = swap_in(eg, id, host, how.in_time, std::move(deps));
  added.push_back(copy);
  if (output) set_tile(eg, id, copy);
}

// Moves every swap-in of `ids` (one device's buffers) as early as memory allows, so that the
// copy hides behind compute (the thesis's swap planner prefetches as early as possible): in
// order of next use, each to the earliest time after what it waits for (its swap-out, or the
// start of the step for an input loaded into the host pool) from which its copy, added to the
// live bytes, keeps every point up to its next use within `budget`. Points already over the
// budget (nothing could be swapped there) keep their swap-ins just in time.
void prefetch_swap_ins(ExecGraph& eg, const Graph& graph, const std::vector<int>& ids, int64_t budget) {
  int64_t horizon = 0;
  std::vector<std::pair<int64_t, int>> ins;  // (next use, swap-in op)
  for (int id : ids) {
    const Buffer& b = eg.buffers[id];
    if (b.host) continue;
    for (int r : b.readers) horizon = std::max(horizon, eg.ops[r].time);
    if (b.producer < 0) continue;
    horizon = std::max(horizon, eg.ops[b.producer].time);
    if (eg.ops[b.producer].kind != ExecKind::kSwapIn || b.readers.empty()) continue;
    int64_t first = kForever;
    for (int r : b.readers) first = std::min(first, eg.ops[r].time);
    ins.push_back({first, b.producer});
  }
  if (ins.empty()) return;
  std::vector<Live> lives;
  lives.reserve(ids.size());
  for (int id : ids) lives.push_back(liveness(eg, graph, id));
  // live[t + 1]: bytes live at time t, for t in [-1, horizon + 1]
  std::vector<int64_t> live = live_bytes(lives, horizon + 1);
  std::sort(ins.begin(), ins.end());
  for (auto [next, in_id] : ins) {
    ExecOp& in = eg.ops[in_id];
    const int64_t bytes = eg.buffers[in.outputs[0]].bytes;
    int64_t after = -1;
    for (int d : in.deps) after = std::max(after, eg.ops[d].time);
    int64_t t = in.time;
    while (t - 1 > after && live[t] + bytes <= budget) --t;  // live[t] is time t - 1
    for (int64_t s = t; s < in.time; ++s) live[s + 1] += bytes;
    in.time = t;
  }
}

// How buffer `id` (live as `iv`) can leave the device across time `at`, and for how long
// (the gap); {kGap, -1} when it cannot. `end_time` is the end of the step.
std::pair<Swap, int64_t> way_out(const ExecGraph& eg, int id, const Live& iv, int64_t at, int64_t end_time,
                                 int64_t hold) {
  const Buffer& b = eg.buffers[id];
  const bool output = iv.end >= kForever;
  const bool tile = eg.tile(b.tensor, b.device) == id;
  int64_t first = kForever, last = b.producer >= 0 ? eg.ops[b.producer].time : -1;
  for (int r : b.readers) first = std::min(first, eg.ops[r].time), last = std::max(last, eg.ops[r].time);
  Swap how;
  if (b.producer < 0 && tile) {
    // A graph input (data, a weight, an optimizer state) waits in the host pool from before
    // the step to just before its first use (the runtimes load it there).
    if (at < first - 1 || (output && at > last)) {
      how.kind = Swap::kLoad;
      how.in_time = first >= kForever ? kForever : first - 1;
      return {how, (first >= kForever ? end_time : first) + 1};
    }
  }
  if (output && b.producer >= 0 && at > last) {
    // A step output idle from its last use to the end of the step goes to the host and stays:
    // its host buffer is the tile the runtimes gather.
    how.kind = Swap::kStay;
    how.out_time = std::max(last + 1, std::min(last + 1 + hold, at - 1));
    if (how.out_time >= at && host_source(eg, id) < 0) return {how, -1};
    return {how, end_time - how.out_time};
  }
  auto [before, next] = gap_around(eg, id, at);
  if (before < -1 || next < 0) return {how, -1};
  // swap-ins start just in time; prefetch_swap_ins moves them earlier afterwards
  how.out_time = std::max(before + 1, std::min(before + 1 + hold, at - 1));
  how.in_time = next - 1;
  if (!(how.out_time < at && at < how.in_time)) return {how, -1};
  return {how, how.in_time - how.out_time};
}

// Everything plan_swaps' choices on one device's buffers `ids` depend on: each buffer's
// bytes, producer, tile and output status and readers (times, and whether on this device), in
// `ids`' order (all on the device, none in its host pool).
// Two devices of equal signatures take the same moves, buffer for buffer (a data-parallel or
// otherwise symmetric plan: all devices, or a few classes of them).
std::vector<int64_t> swap_signature(const ExecGraph& eg, const Graph& g, int dev, const std::vector<int>& ids) {
  std::vector<int64_t> sig;
  sig.reserve(ids.size() * 8);
  for (int id : ids) {
    const Buffer& b = eg.buffers[id];
    const Tensor& t = g.tensor(b.tensor);
    const int p = b.producer;
    sig.insert(sig.end(), {b.bytes, p >= 0 ? eg.ops[p].time : -1,
                           p >= 0 ? static_cast<int64_t>(eg.ops[p].kind) : -1,
                           static_cast<int64_t>(eg.tile(b.tensor, b.device) == id),
                           static_cast<int64_t>(t.is_output || t.consumers.empty()),
                           static_cast<int64_t>(b.readers.size())});
    // (the readers' order does not matter to the choices: only their times, and which are here)
    const size_t first = sig.size();
    for (int r : b.readers) sig.push_back(2 * eg.ops[r].time + static_cast<int64_t>(eg.ops[r].device == dev));
    std::sort(sig.begin() + static_cast<std::ptrdiff_t>(first), sig.end());
  }
  return sig;
}

// One move of a device's search, replayed on devices of the same swap_signature.
struct Move {
  size_t k;  // the moved buffer's place in the device's `ids`
  Swap how;
  bool output;
};

// The moves that bring one device's buffers `ids` within `budget` (as far as swapping can):
// at the busiest point, the buffer idle across it that frees the most, until none is over the
// budget or none can move. Applied to `eg` and appended to `moves`.
void search_swaps(ExecGraph& eg, const Graph& graph, std::vector<int>& ids, int64_t budget, int64_t hold,
                  int64_t end_time, std::vector<Move>& moves) {
  std::vector<char> swapped(eg.buffers.size(), 0);
  // Liveness of ids[k]; a swap changes only the buffer it moves and the ones it adds (the
  // readers it points at a copy are other buffers' ops, their times unchanged).
  std::vector<Live> live;
  live.reserve(ids.size());
  for (int id : ids) live.push_back(liveness(eg, graph, id));
  // ids[k] by their bytes, largest first, equal bytes in k order: the scan for the buffer to
  // move stops at the first smaller than one found (what it picks is the same as a scan of
  // all in k order). A buffer's bytes change only when it moves to the host (then skipped).
  std::vector<int64_t> sorted_bytes;
  std::vector<size_t> by_bytes;
  auto insert_sorted = [&](size_t k) {
    sorted_bytes.push_back(live[k].bytes);
    auto pos = std::upper_bound(by_bytes.begin(), by_bytes.end(), live[k].bytes,
                                [&](int64_t b, size_t j) { return b > sorted_bytes[j]; });
    by_bytes.insert(pos, k);
  };
  for (size_t k = 0; k < ids.size(); ++k) insert_sorted(k);
  while (true) {
    auto [at, bytes] = peak_of(live);
    if (bytes <= budget) break;
    // The buffer idle across the peak that frees the most: largest, then longest gap.
    int best = -1;
    size_t best_k = 0;
    int64_t best_bytes = 0, best_gap = 0;
    Swap best_how;
    for (size_t k : by_bytes) {
      if (sorted_bytes[k] < best_bytes) break;
      const int id = ids[k];
      if (swapped[id] || live[k].bytes == 0 || live[k].begin > at || live[k].end < at) continue;
      auto [how, gap] = way_out(eg, id, live[k], at, end_time, hold);
      if (gap < 0) continue;
      if (live[k].bytes > best_bytes || (live[k].bytes == best_bytes && gap > best_gap))
        best = id, best_k = k, best_bytes = live[k].bytes, best_gap = gap, best_how = how;
    }
    if (best < 0) break;  // nothing idle across the peak: swapping cannot lower it
    const bool output = live[best_k].end >= kForever;
    // A copy may move again across a later point (a weight between its forward and backward
    // use): it is swapped in again from the host buffer that still holds its value.
    const size_t known = ids.size();
    swap(eg, best, best_how, output, ids);
    moves.push_back({best_k, best_how, output});
    live[best_k] = liveness(eg, graph, best);
    for (size_t k = known; k < ids.size(); ++k) {
      live.push_back(liveness(eg, graph, ids[k]));
      insert_sorted(k);
    }
    swapped.resize(eg.buffers.size(), 0);
    swapped[best] = 1;
  }
}

}  // namespace

int plan_swaps(ExecGraph& eg, const Graph& graph, int64_t budget, int64_t hold) {
  eg.copy_schedule.resize(eg.devices);
  int swaps = 0;
  std::map<std::vector<int64_t>, std::vector<Move>> moves_of;  // by swap_signature
  const char* replay_env = std::getenv("AUTOTILE_SWAP_REPLAY");  // "off": every device planned (tests)
  const bool replay = !(replay_env && std::string(replay_env) == "off");
  int64_t end_time = 0;  // the end of the step on the memory clock
  for (const ExecOp& op : eg.ops) end_time = std::max(end_time, op.time + 2);
  for (int dev = 0; dev < eg.devices; ++dev) {
    std::vector<int> ids;
    for (size_t i = 0; i < eg.buffers.size(); ++i)
      if (eg.buffers[i].device == dev && !eg.buffers[i].host) ids.push_back(static_cast<int>(i));
    // A device whose buffers look as an earlier one's did takes the same moves (replayed).
    std::vector<int64_t> signature = replay ? swap_signature(eg, graph, dev, ids) : std::vector<int64_t>{dev};
    auto same = moves_of.find(signature);
    if (same != moves_of.end()) {
      for (const Move& m : same->second) swap(eg, ids[m.k], m.how, m.output, ids);
    } else {
      same = moves_of.emplace(std::move(signature), std::vector<Move>{}).first;
      search_swaps(eg, graph, ids, budget, hold, end_time, same->second);
    }
    swaps += static_cast<int>(same->second.size());
    prefetch_swap_ins(eg, graph, ids, budget);
    std::stable_sort(eg.copy_schedule[dev].begin(), eg.copy_schedule[dev].end(),
                     [&](int a, int b) { return eg.ops[a].time < eg.ops[b].time; });
  }
  return swaps;
}


void swap_to_fit(ExecGraph& eg, const Graph& graph, int64_t budget, int64_t hold) {
  const ExecGraph base = eg;
  // Fragmentation does not shrink in proportion to the target (the prefetched swap-ins fill
  // memory up to it), so the step below the budget grows geometrically until the arena fits,
  // then bisects between the highest target that missed and the lowest that fit. Each target
  // tried is planned for its arenas only (no write-after-read dependencies: the same offsets);
  // the graph kept gets its dependencies at the end.
  int64_t planned = -1;  // the target eg holds
  auto fits_at = [&](int64_t target) {
    eg = base;
    plan_swaps(eg, graph, target, hold);
    plan_memory(eg, graph, false, /*reuse_deps=*/false);
    planned = target;
    int64_t worst = 0;
    for (int64_t a : eg.arena_bytes) worst = std::max(worst, a);
    return worst;
  };
  auto keep = [&](int64_t target) {  // eg: the swaps at `target`, with its dependencies
    if (planned != target) {
      eg = base;
      plan_swaps(eg, graph, target, hold);
    }
    plan_memory(eg, graph, false);
  };
  int64_t missed = budget, fit = -1, step = 0, target = budget;
  for (int attempt = 0; attempt < 10; ++attempt) {
    int64_t worst = fits_at(target);
    if (worst <= budget) {
      fit = target;
      break;
    }
    missed = target;
    if (target <= 0) return keep(target);  // nothing fits: the caller reports the arena
    step = std::max(2 * step, worst - budget);
    target = std::max<int64_t>(0, target - step);
  }
  if (fit < 0) return keep(planned);
  for (int attempt = 0; attempt < 3 && missed - fit > budget / 256; ++attempt) {
    int64_t mid = fit + (missed - fit) / 2;
    if (fits_at(mid) <= budget) fit = mid;
    else missed = mid;
  }
  keep(fit);  // among the targets that fit, the highest: the fewest swaps
}

}  // namespace autotile
