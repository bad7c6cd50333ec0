#include "search/cost_model.h"

#include <algorithm>

namespace autotile {

namespace {
// Elements of N_d missing from H_d, over all devices (complete values).
double missing(const DeviceLayout& held, const DeviceLayout& need) {
  double total = 0;
  for (int d = 0; d < need.devices(); ++d)
    total += box_volume(need.box[d]) - box_overlap(need.box[d], held.box[d]);
  return total;
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

  double direct = 0, rs = 0, flat = 0;
  for (int d = 0; d < K; ++d) {
    double nv = box_volume(need.box[d]), in = box_overlap(need.box[d], held.box[d]);
    direct += (P - 1) * in + P * (nv - in);
    if (leader[d] == d) rs += (P - 1) * box_volume(held.box[d]);
    flat += nv - in / P;
  }
  double best = std::min(direct, rs + flat);
  const size_t rank = held.box.empty() ? 0 : held.box[0].size();
  for (size_t e = 0; e < rank; ++e) {
    bool even = true;
    for (int d = 0; d < K && even; ++d) even = held.box[d][e].size() % P == 0;
    if (!even) continue;
    double fetch = 0;
    for (int d = 0; d < K; ++d) {
      Box slab = held.box[leader[d]];
      int64_t n = slab[e].size() / P;
      slab[e] = Interval{slab[e].lo + n * member[d], slab[e].lo + n * (member[d] + 1)};
      fetch += box_volume(need.box[d]) - box_overlap(need.box[d], slab);
    }
    best = std::min(best, rs + fetch);
  }
  return best;
}

}  // namespace autotile
