// Collectives in stages, one cut (or one link level's cuts) at a time (recursive doubling for
// gathers, halving for reductions): the pieces per device stay the sum of the stages' factors
// instead of their product.
#include <algorithm>
#include <functional>

#include "exec/exec_builder.h"
#include "exec/subtree_boxes.h"
#include "util/error.h"

namespace autotile {
namespace exec_detail {

std::vector<std::vector<size_t>> Builder::stage_groups(bool outer_first, bool merge) const {
  const size_t n = plan_.factors.size();
  const auto& lv = opts_.cut_levels;
  std::vector<std::vector<size_t>> groups;
  for (size_t c = 0; c < n; ++c) {
    const bool same = merge && !groups.empty() && lv.size() == n && lv[c] == lv[groups.back().back()];
    if (same)
      groups.back().push_back(c);
    else
      groups.push_back({c});
  }
  if (outer_first) std::reverse(groups.begin(), groups.end());
  return groups;
}

int Builder::group_digit(int d, const std::vector<size_t>& group) const {
  int digit = 0;
  for (size_t c : group) digit = digit * plan_.factors[c] + digits_[d][c];
  return digit;
}

bool Builder::plan_gather_stages(TensorId t, const std::vector<const Box*>& want, const std::vector<Box>& held_by,
                                 bool partial, bool outer_first, GatherStages* plan) const {
  const int devices = eg_.devices;
  const Box none = Box::full(g_.tensor(t).shape).intersect(Box{std::vector<Interval>(g_.tensor(t).shape.size())});
  if (none.dims.empty()) return false;  // scalars: nothing to stage
  // The stages run from the hierarchy's last level to its first. The hierarchy is the plan's
  // cut order (the innermost stage first) or, outer_first, its stages reversed (the outermost
  // first: the slow links between nodes carry the smallest pieces); a stage is a cut, or the
  // consecutive cuts of one link level (stage_groups). Below, a device is its virtual id v:
  // its stage digits in the hierarchy's order, first most significant; real[v] is the device.
  // (Kept partial sums: one cut a stage. Devices that differ only at a kept-partial cut hold
  // the same box but different sums; a stage takes each box once, its own digit first, which
  // is the right sum only when the stage's peers differ in that cut's digit alone.)
  const auto groups = stage_groups(outer_first, !partial);
  const size_t n = groups.size();
  std::vector<int> f(n, 1), stride(n, 1);
  for (size_t j = 0; j < n; ++j)
    for (size_t c : groups[j]) f[j] *= plan_.factors[c];
  for (size_t j = n; j-- > 1;) stride[j - 1] = stride[j] * f[j];
  std::vector<int>& real = plan->real;
  real.assign(devices, 0);
  for (int d = 0; d < devices; ++d) {
    int v = 0;
    for (size_t j = 0; j < n; ++j) v += group_digit(d, groups[j]) * stride[j];
    real[v] = d;
  }
  auto digit_of = [&](int v, size_t j) { return (v / stride[j]) % f[j]; };
  std::vector<Box> held(devices), wanted(devices, none);
  for (int v = 0; v < devices; ++v) {
    held[v] = held_by[real[v]];
    if (want[real[v]]) wanted[v] = *want[real[v]];
  }
  // A[j][v / stride_j]: what v's subtree below level j holds; B[j][v % stride_j]: what the
  // devices sharing v's digits from level j on want. After the stage of level j, device v
  // holds Y_j(v) = A ∩ B: everything its subtree has that it, or a device it serves later, wants.
  const auto A = prefix_hulls(f, held);
  if (!hulls_nest(f, A)) return false;
  const auto B = suffix_hulls(f, wanted);
  std::vector<int> stride_from(n + 1, 1);  // product of the factors from level j on
  for (size_t j = n; j-- > 0;) stride_from[j] = stride_from[j + 1] * f[j];
  // Bytes of the direct fetch: every wanted element its device does not hold, once.
  int64_t direct = 0, staged = 0;
  for (int v = 0; v < devices; ++v) {
    if (!want[real[v]]) continue;
    if (wanted[v].empty() || !A[0][0].contains(wanted[v])) return false;  // empty regions: direct
    direct += wanted[v].volume() - wanted[v].intersect(held[v]).volume();
  }
  // One stage per level, the last first: the pieces of its target Y_j(v) from v's peers at level j.
  plan->pieces.assign(n, {});
  plan->target.assign(n, {});
  std::vector<Box> have = held;  // the box each device's current buffer holds
  for (size_t c = n; c-- > 0;) {
    plan->pieces[c].assign(devices, {});
    plan->target[c].assign(devices, none);
    std::vector<Box> next = have;
    for (int v = 0; v < devices; ++v) {
      Box target = c == 0 ? wanted[v]
                          : A[c][v / stride_from[c]].intersect(B[c][v % stride_from[c]]);
      if (target.empty()) {
        next[v] = none;
        continue;
      }
      auto& pieces = plan->pieces[c][v];
      std::vector<const Box*> seen;
      int64_t covered = 0;
      const int mine = digit_of(v, c);
      for (int j = 0; j < f[c]; ++j) {
        const int digit = j == 0 ? mine : (j <= mine ? j - 1 : j);
        const int e = v + (digit - mine) * stride[c];
        const Box& sub = A[c + 1][e / stride_from[c + 1]];
        if (std::find_if(seen.begin(), seen.end(), [&](const Box* b) { return *b == sub; }) != seen.end()) continue;
        seen.push_back(&sub);
        Box region = target.intersect(have[e]);
        if (region.empty()) continue;
        if (!have[e].contains(region)) return false;
        covered += region.volume();
        if (e != v) staged += region.volume();
        pieces.push_back({e, std::move(region)});
      }
      if (covered != target.volume()) return false;
      plan->target[c][v] = target;
      next[v] = std::move(target);
    }
    have = std::move(next);
    if (staged > direct) return false;
  }
  return staged == direct;
}

void Builder::build_gather_stages(TensorId t, const GatherStages& plan, const std::vector<int>& holders,
                                  const std::vector<const Box*>& want, BufferRole role, bool partial, NodeId node,
                                  int64_t time, std::vector<int>& out) {
  const int devices = eg_.devices;
  const int dsize = dtype_size(g_.tensor(t).dtype);
  const auto& real = plan.real;
  // Per stage, a MultiFetch on each device whose target is not already its buffer.
  std::vector<int> cur(devices);
  std::vector<Box> cur_box(devices);
  for (int v = 0; v < devices; ++v) {
    cur[v] = holders[real[v]];
    if (cur[v] >= 0) cur_box[v] = eg_.buffers[cur[v]].box;
  }
  for (size_t c = plan.pieces.size(); c-- > 0;) {
    std::vector<int> next(devices, -1);
    std::vector<Box> next_box(devices);
    for (int v = 0; v < devices; ++v) {
      const auto& stage = plan.pieces[c][v];
      if (stage.empty()) continue;
      const Box& target = plan.target[c][v];
      if (stage.size() == 1 && stage[0].first == v && (c > 0 || cur_box[v] == target)) {
        next[v] = cur[v];  // all of it is here already: keep the buffer
        next_box[v] = cur_box[v];
        continue;
      }
      std::vector<Piece> pieces;
      int64_t moved = 0;
      for (const auto& [e, region] : stage) {
        pieces.push_back({cur[e], region});
        if (e != v) moved += region.volume() * dsize;
      }
      int dest = new_buffer(real[v], t, target, c == 0 ? role : BufferRole::kRegion, partial);
      new_fetch(real[v], node, dest, std::move(pieces), false, moved, time);
      next[v] = dest;
      next_box[v] = target;
    }
    cur = std::move(next);
    cur_box = std::move(next_box);
  }
  for (int v = 0; v < devices; ++v)
    if (want[real[v]]) out[real[v]] = cur[v];
}

bool Builder::staged_gather(TensorId t, const std::vector<const Box*>& want, const std::vector<int>& holders,
                            BufferRole role, bool partial, bool outer_first, NodeId node, int64_t time,
                            std::vector<int>& out) {
  const int devices = eg_.devices;
  const Box none = Box::full(g_.tensor(t).shape).intersect(Box{std::vector<Interval>(g_.tensor(t).shape.size())});
  std::vector<Box> held(devices, none);
  for (int d = 0; d < devices; ++d)
    if (holders[d] >= 0) held[d] = eg_.buffers[holders[d]].box;
  GatherStages plan;
  if (!plan_gather_stages(t, want, held, partial, outer_first, &plan)) return false;
  build_gather_stages(t, plan, holders, want, role, partial, node, time, out);
  return true;
}

bool Builder::hierarchical_gather(TensorId t, const std::vector<const Box*>& want,
                                  const std::vector<Level>& levels, const std::function<int(int)>& holder_buffer,
                                  bool reindex, BufferRole role, NodeId node, int64_t time, std::vector<int>& out) {
  const int devices = eg_.devices;
  std::vector<int> holders(devices);
  for (int d = 0; d < devices; ++d) holders[d] = holder_buffer(d);
  if (staged_gather(t, want, holders, role, false, true, node, time, out)) return true;
  if (!reindex) return false;
  // The holders' slabs with the significance of the stages reversed (the last stage's cuts
  // major): the gather outermost stage first nests on those. Each device first copies its
  // slab of that arrangement from the device that holds it (one piece; none where the digits
  // read the same both ways).
  std::vector<size_t> order;
  for (const auto& group : stage_groups(true)) order.insert(order.end(), group.begin(), group.end());
  std::vector<int> rf;
  std::vector<Level> rlevels;
  for (size_t c : order) {
    rf.push_back(plan_.factors[c]);
    rlevels.push_back(levels[c]);
  }
  std::vector<Box> rbox(devices);
  for (int d = 0; d < devices; ++d) {
    std::vector<int> rd;
    for (size_t c : order) rd.push_back(digits_[d][c]);
    rbox[d] = holder_box(g_.tensor(t).shape, rlevels, rf, rd);
  }
  GatherStages plan;  // planned on the re-indexed boxes before anything is built
  if (!plan_gather_stages(t, want, rbox, false, true, &plan)) return false;
  const auto& f = plan_.factors;
  const std::vector<bool> no_keep(f.size(), false);
  std::vector<Box> held_box(devices);
  for (int d = 0; d < devices; ++d) held_box[d] = eg_.buffers[holders[d]].box;
  const auto held = prefix_hulls(f, held_box);
  std::vector<int> moved(devices);
  for (int d = 0; d < devices; ++d)
    moved[d] = assemble(d, t, rbox[d], levels, holder_buffer, no_keep, BufferRole::kRegion, node, time, held);
  build_gather_stages(t, plan, moved, want, role, false, node, time, out);
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
