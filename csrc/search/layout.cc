#include "search/layout.h"

#include <algorithm>

namespace autotile {

DeviceLayout whole_layout(const Shape& shape) {
  DeviceLayout l;
  l.rank = static_cast<int>(shape.size());
  l.num_devices = 1;
  for (int64_t d : shape) l.iv.push_back(Interval{0, d});
  return l;
}

namespace {
// Device d of the prefix becomes devices d*k + j (j the digit of the new cut).
DeviceLayout grow(const DeviceLayout& prefix, int k) {
  DeviceLayout l;
  l.partial_mask = prefix.partial_mask;
  l.none = prefix.none;
  l.num_cuts = prefix.num_cuts + 1;
  l.rank = prefix.rank;
  l.num_devices = prefix.num_devices * k;
  const size_t r = static_cast<size_t>(prefix.rank);
  l.iv.resize(prefix.iv.size() * k);
  Interval* out = l.iv.data();
  for (int d = 0; d < prefix.num_devices; ++d) {
    const Interval* b = prefix.iv.data() + d * r;
    for (int j = 0; j < k; ++j, out += r) std::copy(b, b + r, out);
  }
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
    for (int d = 0; d < l.num_devices; ++d) {
      Interval& iv = l.at(d, t.dim);
      iv = slab(iv, d % k, k);
    }
  return l;
}

DeviceLayout extend_need(const DeviceLayout& prefix, const InputNeed& need, int k, const Shape& full) {
  DeviceLayout l = grow(prefix, k);
  l.none = prefix.none || !need.read;
  if (need.replicate) return l;
  for (int d = 0; d < l.num_devices; ++d) {
    Interval& iv = l.at(d, need.dim);
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
  for (int d = 0; d < l.num_devices; ++d) {
    Interval& iv = l.at(d, make.dim);
    iv = slab(iv, d % k, k);
  }
  return l;
}

double box_volume(Box b) {
  double v = 1;
  for (int i = 0; i < b.rank; ++i) v *= static_cast<double>(b[i].size());
  return v;
}

double box_overlap(Box a, Box b) {
  double v = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t lo = std::max(a[i].lo, b[i].lo), hi = std::min(a[i].hi, b[i].hi);
    if (hi <= lo) return 0;
    v *= static_cast<double>(hi - lo);
  }
  return v;
}

}  // namespace autotile
