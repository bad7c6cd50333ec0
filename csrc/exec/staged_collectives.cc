// Collectives in stages, one cut at a time (recursive doubling for gathers, halving for
// reductions): the pieces per device stay the sum of the cut factors instead of their product.
#include <algorithm>

#include "exec/exec_builder.h"
#include "exec/subtree_boxes.h"
#include "util/error.h"

namespace autotile {
namespace exec_detail {

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


}  // namespace exec_detail
}  // namespace autotile
