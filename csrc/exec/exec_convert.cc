// Re-layout of a tensor between tilings in the execution graph: each device assembles the
// region it wants from the holders (assemble), or a reduction of partial sums runs as a
// reduce-scatter and a gather (convert), staged by cut when the groups are large.
#include <algorithm>
#include <set>

#include "exec/exec_builder.h"
#include "exec/subtree_boxes.h"
#include "util/error.h"

namespace autotile {
namespace exec_detail {

int Builder::assemble(int device, TensorId t, const Box& want, const std::vector<Level>& levels,
                      const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep, BufferRole role,
                      NodeId node, int64_t time, const std::vector<std::vector<Box>>& held) {
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
  std::vector<Piece>& pieces = pieces_scratch_;  // reused: the op gets an exact-size copy
  pieces.clear();
  const int dsize = dtype_size(g_.tensor(t).dtype);
  int64_t moved = 0;
  auto visit = [&](auto&& self, size_t i, int dev) -> void {  // recursive, without std::function's calls
    if (i == f.size()) {
      int src = holder_buffer(dev);
      Box region = want.intersect(eg_.buffers[src].box);
      if (region.empty()) return;
      if (dev != device) moved += region.volume() * dsize;
      pieces.push_back({src, std::move(region)});
      return;
    }
    for (int d : choices[i]) {
      const int child = dev * f[i] + d;
      if (!held[i + 1][child].overlaps(want)) continue;  // nothing of want down there
      self(self, i + 1, child);
    }
  };
  visit(visit, 0, 0);
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
  new_fetch(device, node, dest, std::vector<Piece>(pieces.begin(), pieces.end()), reduce, moved, time);
  return dest;
}

std::vector<int> Builder::convert(TensorId t, const std::vector<const Box*>& want, const std::vector<Level>& levels,
                                  const std::function<int(int)>& holder_buffer, const std::vector<bool>& keep,
                                  BufferRole role, NodeId node, int64_t time) {
  const auto& f = plan_.factors;
  const int devices = eg_.devices;
  std::vector<int> out(devices, -1);
  std::vector<Box> held_box(devices);
  for (int d = 0; d < devices; ++d) held_box[d] = eg_.buffers[holder_buffer(d)].box;
  const std::vector<std::vector<Box>> held_hulls = prefix_hulls(f, held_box);
  auto direct = [&]() {
    for (int d = 0; d < devices; ++d)
      if (want[d]) out[d] = assemble(d, t, *want[d], levels, holder_buffer, keep, role, node, time, held_hulls);
    return out;
  };
  // Cuts reduced here, and whether this is a plain reduction the search prices.
  int P = 1, G = 1;
  bool any_partial = false, any_keep = false;
  std::vector<bool> reduce_cut(f.size(), false);
  for (size_t c = 0; c < f.size(); ++c) {
    any_partial = any_partial || levels[c].kind == LevelKind::kPartial;
    any_keep = any_keep || keep[c];
    if (levels[c].kind == LevelKind::kSplit) G *= f[c];
    if (levels[c].kind == LevelKind::kPartial && !keep[c]) {
      reduce_cut[c] = true;
      P *= f[c];
    } else if (keep[c] && levels[c].kind != LevelKind::kPartial && f[c] > 1) {
      return direct();  // partial kept where the producer did not reduce: random plans only
    }
  }
  // Collectives that move much per device run hierarchically in a hierarchical build, staged
  // over every group of more than two (ExecOptions::hierarchical_above): a reduction moves
  // about its whole tile, a gather what a device wants and does not hold (a halo exchange
  // on a large tile moves little and stays in one round).
  int64_t moving = 0;
  for (int d = 0; d < devices; ++d) {
    if (any_partial) moving = std::max(moving, held_box[d].volume());
    if (want[d]) moving = std::max(moving, want[d]->volume() - want[d]->intersect(held_box[d]).volume());
  }
  const bool hier = opts_.hierarchical_above >= 0 && moving * dtype_size(g_.tensor(t).dtype) > opts_.hierarchical_above;
  const int stage_above = hier ? 2 : opts_.stage_above;
  if (!any_partial && !any_keep && G > stage_above) {
    // A gather from many holders: in stages when that moves no more bytes, outermost cut
    // first where the holders nest so (the slow links carry the smallest pieces).
    if (hierarchical_gather(t, want, levels, holder_buffer, hier, role, node, time, out)) return out;
    std::vector<int> holders(devices);
    for (int d = 0; d < devices; ++d) holders[d] = holder_buffer(d);
    if (staged_gather(t, want, holders, role, false, false, node, time, out)) return out;
  }
  if (P <= 2) return direct();  // pulling the partner's partial is already optimal
  for (int d = 0; d < devices; ++d)
    if (!want[d]) return direct();
  // Reduction groups: devices equal in every digit but the reduced cuts. The stages of a
  // staged reduce-scatter, each the reduced cuts of one stage group (stage_groups), outermost
  // first or innermost first; member: the index of a device's slab among its group's, its
  // reduced digits read first cut major; inner: read in the innermost-first stages' order
  // (the slab a hierarchical reduce-scatter leaves it).
  auto reduced_stages = [&](bool innermost_first) {
    std::vector<std::vector<size_t>> stages;
    for (const auto& group : stage_groups(innermost_first)) {
      std::vector<size_t> cuts;
      for (size_t c : group)
        if (reduce_cut[c]) cuts.push_back(c);
      if (!cuts.empty()) stages.push_back(std::move(cuts));
    }
    return stages;
  };
  const auto inner_stages = reduced_stages(true);
  std::vector<int> leader(devices), member(devices), inner(devices);
  for (int d = 0; d < devices; ++d) {
    int lead = 0, idx = 0, rev = 0;
    for (size_t c = 0; c < f.size(); ++c) {
      lead = lead * f[c] + (reduce_cut[c] ? 0 : digits_[d][c]);
      if (reduce_cut[c]) idx = idx * f[c] + digits_[d][c];
    }
    for (const auto& cuts : inner_stages)
      for (size_t c : cuts) rev = rev * f[c] + digits_[d][c];
    leader[d] = lead;
    member[d] = idx;
    inner[d] = rev;
  }
  std::vector<std::vector<int>> members(devices);  // by leader, in member order
  for (int d = 0; d < devices; ++d) members[leader[d]].push_back(d);
  auto held = [&](int d) -> const Box& { return held_box[d]; };
  double best = 0, rs = 0;
  for (int d = 0; d < devices; ++d) {
    double nv = static_cast<double>(want[d]->volume()), in = static_cast<double>(want[d]->intersect(held(d)).volume());
    best += (P - 1) * in + P * (nv - in);
    if (leader[d] == d) rs += (P - 1) * static_cast<double>(held(d).volume());
  }
  int best_dim = -1;
  const size_t rank = g_.tensor(t).shape.size();
  // Balanced slabs of the members' block [m_lo, m_hi) (uneven, or empty when the dim is
  // shorter than the group): the same formula as the cost model's (csrc/search/cost_model.cc).
  auto block_slab = [&](int d, size_t e, int64_t m_lo, int64_t m_hi) {
    Box slab = held(leader[d]);
    const int64_t lo = slab.dims[e].lo, size = slab.dims[e].size();
    slab.dims[e] = {lo + size * m_lo / P, lo + size * m_hi / P};
    return slab;
  };
  auto slab_of = [&](int d, size_t e) { return block_slab(d, e, member[d], member[d] + 1); };
  for (size_t e = 0; e < rank; ++e) {
    double fetch = 0;
    for (int d = 0; d < devices; ++d)
      fetch += static_cast<double>(want[d]->volume() - want[d]->intersect(slab_of(d, e)).volume());
    if (rs + fetch < best) {
      best = rs + fetch;
      best_dim = static_cast<int>(e);
    }
  }
  const double direct_bytes = best;
  if (hier && P > stage_above && best_dim < 0) {
    // A reduce-scatter straight into a split layout (no dim beats the direct reduction): run
    // it hierarchically along the dim whose re-indexing copy afterwards is smallest, when that
    // copy is at most what the devices want (the collective is then <= 1/(P - 1) above).
    double allowed = 0;
    for (int d = 0; d < devices; ++d) allowed += static_cast<double>(want[d]->volume());
    for (size_t e = 0; e < rank; ++e) {
      double fetch = 0;
      for (int d = 0; d < devices; ++d)
        fetch += static_cast<double>(want[d]->volume() -
                                     want[d]->intersect(block_slab(d, e, inner[d], inner[d] + 1)).volume());
      if (rs + fetch <= direct_bytes + allowed && (best_dim < 0 || rs + fetch < best)) {
        best = rs + fetch;
        best_dim = static_cast<int>(e);
      }
    }
  }
  const int dsize = dtype_size(g_.tensor(t).dtype);
  bool partial = false;
  for (size_t c = 0; c < f.size(); ++c) partial = partial || (keep[c] && levels[c].kind == LevelKind::kPartial);
  if (rank == 0) {
    // A scalar: member 0 of each group (the group's leader) reduces it, the others fetch it.
    double fetch = 0;
    for (int d = 0; d < devices; ++d)
      if (member[d] != 0) fetch += static_cast<double>(want[d]->volume());
    if (!(rs + fetch < best)) return direct();
    for (int d = 0; d < devices; ++d) {
      if (member[d] != 0) continue;
      ExecOp op;
      op.kind = ExecKind::kFetch;
      op.device = d;
      op.node = node;
      op.outputs = {new_buffer(d, t, *want[d], role, partial)};
      op.accumulate = true;
      op.time = time;
      for (int g : members[leader[d]]) {
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
  if (best_dim < 0) {
    if (P > stage_above && !any_keep) {
      std::vector<int> holders(devices);
      for (int d = 0; d < devices; ++d) holders[d] = holder_buffer(d);
      if (staged_reduce(t, want, holders, reduce_cut, role, node, time, out)) return out;
    }
    return direct();
  }
  const size_t e_dim = static_cast<size_t>(best_dim);
  // Reduce-scatter: member m of each group ends up with slab m of the group's sum.
  std::vector<int> reduced(devices, -1);
  auto rs_op = [&](int d, const Box& slab, const std::vector<int>& sources) {
    ExecOp op;
    op.kind = ExecKind::kFetch;
    op.device = d;
    op.node = node;
    op.outputs = {new_buffer(d, t, slab, BufferRole::kRegion, partial)};
    op.accumulate = true;
    op.time = time;
    for (int g : sources) {
      op.pieces.push_back({g, slab});
      if (eg_.buffers[g].device != d) op.bytes_moved += slab.volume() * dsize;
    }
    int dest = op.outputs[0];
    new_op(std::move(op));
    return dest;
  };
  if (P > stage_above) {
    // By recursive halving: at each reduced cut the k_c devices that differ only in that digit
    // split their block of slabs k_c ways and each sums its part. The bytes are those of the
    // one-step reduce-scatter (each level moves (k_c - 1)/k_c of what the group holds), the
    // pieces per device sum(k_c) instead of P. Hierarchically (innermost reduced cut first,
    // then the gather outermost cut first) the outer, slower links carry the smallest blocks,
    // as a two-level all-reduce does; that leaves member m with slab m of the reduced digits
    // read innermost first, so it is taken when the gather after it moves the same bytes as
    // from the slabs read outermost first (the bytes the search priced; a reduce-scatter into
    // a split layout needs the outermost-first slabs).
    int64_t in_place_outer = 0, in_place_inner = 0;  // wanted elements already in the own slab
    for (int d = 0; d < devices; ++d) {
      in_place_outer += want[d]->intersect(slab_of(d, e_dim)).volume();
      in_place_inner += want[d]->intersect(block_slab(d, e_dim, inner[d], inner[d] + 1)).volume();
    }
    const bool inner_first = hier || in_place_inner == in_place_outer;
    const auto stages = inner_first ? inner_stages : reduced_stages(false);
    std::vector<int> cur(devices);
    for (int d = 0; d < devices; ++d) cur[d] = holder_buffer(d);
    std::vector<int64_t> block_lo(devices, 0);
    int64_t span = P;
    for (const auto& cuts : stages) {
      int k = 1;
      for (size_t c : cuts) k *= f[c];
      span /= k;
      std::vector<int> next(devices, -1);
      for (int d = 0; d < devices; ++d) {
        const int64_t m_lo = block_lo[d] + group_digit(d, cuts) * span;
        Box slab = block_slab(d, e_dim, m_lo, m_lo + span);
        if (slab.empty()) continue;
        std::vector<int> sources;  // the k devices differing from d only in these digits
        for (int j = 0; j < k; ++j) {
          int peer = d, rest = j;
          for (size_t q = cuts.size(); q-- > 0;) {
            const size_t c = cuts[q];
            peer += (rest % f[c] - digits_[d][c]) * stride_[c];
            rest /= f[c];
          }
          sources.push_back(cur[peer]);
        }
        next[d] = rs_op(d, slab, sources);
      }
      for (int d = 0; d < devices; ++d) block_lo[d] += group_digit(d, cuts) * span;
      cur = std::move(next);
    }
    reduced = std::move(cur);
    if (staged_gather(t, want, reduced, role, partial, inner_first, node, time, out)) return out;
  } else {
    for (int d = 0; d < devices; ++d) {
      std::vector<int> sources;
      for (int g : members[leader[d]]) sources.push_back(holder_buffer(g));
      reduced[d] = rs_op(d, slab_of(d, e_dim), sources);
    }
  }
  // Gather: every device assembles what it wants from the reduced slabs, its own first, then
  // from the devices nearest to it (longest common prefix of digits: the fastest links),
  // visiting only the subtrees whose slabs meet what it wants.
  std::vector<Box> slab_box(devices, Box::full(g_.tensor(t).shape).intersect(Box{std::vector<Interval>(rank)}));
  for (int d = 0; d < devices; ++d)
    if (reduced[d] >= 0) slab_box[d] = eg_.buffers[reduced[d]].box;
  const std::vector<std::vector<Box>> slab_hulls = prefix_hulls(f, slab_box);
  for (int d = 0; d < devices; ++d) {
    const Box& w = *want[d];
    std::vector<Piece> pieces;
    std::set<std::vector<int64_t>> used;
    int64_t covered = 0, moved = 0;
    auto take = [&](int e) {
      if (reduced[e] < 0) return;
      const Box& slab = slab_box[e];
      std::vector<int64_t> key;
      for (const Interval& iv : slab.dims) key.insert(key.end(), {iv.lo, iv.hi});
      if (!used.insert(key).second) return;
      Box region = w.intersect(slab);
      if (region.empty()) return;
      pieces.push_back({reduced[e], region});
      covered += region.volume();
      if (e != d) moved += region.volume() * dsize;
    };
    // Depth-first from the root, the device's own digit first at every cut: devices come in
    // order of decreasing common prefix with d.
    auto visit = [&](auto&& self, size_t c, int prefix) -> void {
      if (c == f.size()) return take(prefix);
      const int mine = digits_[d][c];
      for (int j = 0; j < f[c]; ++j) {
        const int digit = j == 0 ? mine : (j <= mine ? j - 1 : j);
        const int child = prefix * f[c] + digit;
        if (!slab_hulls[c + 1][child].overlaps(w)) continue;
        self(self, c + 1, child);
      }
    };
    take(d);
    visit(visit, 0, 0);
    if (covered != w.volume())
      fail("internal: reduced slabs of tensor '", g_.tensor(t).name, "' cover ", covered, " of ", w.volume(),
           " elements of region ", w.str(), " on device ", d);
    if (pieces.size() == 1 && pieces[0].src == reduced[d] && slab_box[d] == w) {
      out[d] = reduced[d];
      continue;
    }
    int dest = new_buffer(d, t, w, role, partial);
    new_fetch(d, node, dest, std::move(pieces), false, moved, time);
    out[d] = dest;
  }
  return out;
}


}  // namespace exec_detail
}  // namespace autotile
