#include "search/cost_model.h"

#include <algorithm>

namespace autotile {

namespace {
// Elements of N_d missing from H_d, over all devices (complete values).
double missing(const DeviceLayout& held, const DeviceLayout& need) {
  double total = 0;
  for (int d = 0; d < need.devices(); ++d)
    total += box_volume(need.box(d)) - box_overlap(need.box(d), held.box(d));
  return total;
}
// box_overlap(a, b with dim e replaced by `iv`), without building that box.
double overlap_with(Box a, Box b, size_t e, const Interval& iv) {
  double v = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    const Interval& bi = i == e ? iv : b[i];
    int64_t lo = std::max(a[i].lo, bi.lo), hi = std::min(a[i].hi, bi.hi);
    if (hi <= lo) return 0;
    v *= static_cast<double>(hi - lo);
  }
  return v;
}
}  // namespace

double conversion_elements(const DeviceLayout& held, const DeviceLayout& need, const std::vector<int>& factors) {
  if (need.none) return 0;
  if ((need.partial_mask & ~held.partial_mask) != 0) return kInfCost;
  uint32_t reduce = held.partial_mask & ~need.partial_mask;
  if (reduce == 0) return missing(held, need);

  const int K = held.devices();
  const int m = static_cast<int>(factors.size());
  // Digit strides (cut 0 most significant) and the reduction group of every device.
  std::vector<int> stride(m, 1);
  for (int c = m - 2; c >= 0; --c) stride[c] = stride[c + 1] * factors[c + 1];
  int P = 1;
  for (int c = 0; c < m; ++c)
    if (reduce >> c & 1u) P *= factors[c];
  std::vector<int> leader(K), member(K);
  for (int d = 0; d < K; ++d) {
    int lead = d, idx = 0;
    for (int c = 0; c < m; ++c) {
      if (!(reduce >> c & 1u)) continue;
      int digit = d / stride[c] % factors[c];
      lead -= digit * stride[c];
      idx = idx * factors[c] + digit;
    }
    leader[d] = lead;
    member[d] = idx;
  }

  // Options the execution graph can build from box-shaped pieces: pull every partial
  // (direct), or reduce-scatter along one dim then fetch the reduced slabs (csrc/exec).
  double direct = 0, rs = 0;
  for (int d = 0; d < K; ++d) {
    double nv = box_volume(need.box(d)), in = box_overlap(need.box(d), held.box(d));
    direct += (P - 1) * in + P * (nv - in);
    if (leader[d] == d) rs += (P - 1) * box_volume(held.box(d));
  }
  double best = direct;
  const size_t rank = static_cast<size_t>(held.rank);
  // Reduce-scatter along dim e: member m of a group reduces the balanced slab m of the
  // group's box (slabs may be uneven, or empty when the dim is shorter than the group).
  for (size_t e = 0; e < rank; ++e) {
    double fetch = 0;
    for (int d = 0; d < K; ++d) {
      const Box box = held.box(leader[d]);
      const int64_t lo = box[e].lo, size = box[e].size();
      const Interval slab{lo + size * member[d] / P, lo + size * (member[d] + 1) / P};
      fetch += box_volume(need.box(d)) - overlap_with(need.box(d), box, e, slab);
    }
    best = std::min(best, rs + fetch);
  }
  if (rank == 0) {  // a scalar: member 0 of each group reduces it, the others fetch it
    double fetch = 0;
    for (int d = 0; d < K; ++d)
      if (member[d] != 0) fetch += box_volume(need.box(d));
    best = std::min(best, rs + fetch);
  }
  return best;
}

}  // namespace autotile
