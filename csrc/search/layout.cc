#include "search/layout.h"

#include <algorithm>

namespace autotile {

DeviceLayout whole_layout(const Shape& shape) {
  DeviceLayout l;
  Box b;
  for (int64_t d : shape) b.push_back(Interval{0, d});
  l.box.push_back(b);
  return l;
}

namespace {
// Device d of the prefix becomes devices d*k + j (j the digit of the new cut).
DeviceLayout grow(const DeviceLayout& prefix, int k) {
  DeviceLayout l;
  l.partial_mask = prefix.partial_mask;
  l.none = prefix.none;
  l.num_cuts = prefix.num_cuts + 1;
  l.box.reserve(prefix.box.size() * k);
  for (const Box& b : prefix.box)
    for (int j = 0; j < k; ++j) l.box.push_back(b);
  return l;
}

Interval slab(const Interval& iv, int j, int k) {
  int64_t n = iv.size();
  return Interval{iv.lo + n * j / k, iv.lo + n * (j + 1) / k};
}
}  // namespace

DeviceLayout extend_held(const DeviceLayout& prefix, const Tiling& t, int k) {
  DeviceLayout l = grow(prefix, k);
  if (t.kind == Tiling::kPartial) l.partial_mask |= 1u << prefix.num_cuts;
  if (t.kind == Tiling::kSplit)
    for (size_t d = 0; d < l.box.size(); ++d) {
      Interval& iv = l.box[d][t.dim];
      iv = slab(iv, static_cast<int>(d % k), k);
    }
  return l;
}

DeviceLayout extend_need(const DeviceLayout& prefix, const InputNeed& need, int k, const Shape& full) {
  DeviceLayout l = grow(prefix, k);
  l.none = prefix.none || !need.read;
  if (need.replicate) return l;
  for (size_t d = 0; d < l.box.size(); ++d) {
    Interval& iv = l.box[d][need.dim];
    const Interval& rel = need.per_worker[d % k];
    int64_t lo = std::max<int64_t>(0, iv.lo + rel.lo);
    int64_t hi = std::min<int64_t>(full[need.dim], iv.lo + rel.hi);
    iv = Interval{lo, std::max(lo, hi)};
  }
  return l;
}

DeviceLayout extend_make(const DeviceLayout& prefix, const OutputMake& make, bool whole, int k) {
  DeviceLayout l = grow(prefix, k);
  if (whole) return l;
  if (make.partial) {
    l.partial_mask |= 1u << prefix.num_cuts;
    return l;
  }
  for (size_t d = 0; d < l.box.size(); ++d) {
    Interval& iv = l.box[d][make.dim];
    iv = slab(iv, static_cast<int>(d % k), k);
  }
  return l;
}

double box_volume(const Box& b) {
  double v = 1;
  for (const Interval& iv : b) v *= static_cast<double>(iv.size());
  return v;
}

double box_overlap(const Box& a, const Box& b) {
  double v = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t lo = std::max(a[i].lo, b[i].lo), hi = std::min(a[i].hi, b[i].hi);
    if (hi <= lo) return 0;
    v *= static_cast<double>(hi - lo);
  }
  return v;
}

}  // namespace autotile
