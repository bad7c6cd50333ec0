#include "exec/subtree_boxes.h"

#include <algorithm>

namespace autotile {

Box hull(const Box& a, const Box& b) {
  if (b.empty()) return a.dims.empty() ? b : a;
  if (a.empty()) return b;
  Box r = a;
  for (size_t i = 0; i < r.dims.size() && i < b.dims.size(); ++i)
    r.dims[i] = {std::min(a.dims[i].lo, b.dims[i].lo), std::max(a.dims[i].hi, b.dims[i].hi)};
  return r;
}

std::vector<std::vector<Box>> prefix_hulls(const std::vector<int>& factors, const std::vector<Box>& leaf) {
  const size_t n = factors.size();
  std::vector<std::vector<Box>> out(n + 1);
  out[n] = leaf;
  for (size_t c = n; c-- > 0;) {
    const std::vector<Box>& below = out[c + 1];
    const size_t groups = below.size() / static_cast<size_t>(factors[c]);
    out[c].resize(groups);
    for (size_t p = 0; p < groups; ++p) {
      Box h = below[p * factors[c]];
      for (int j = 1; j < factors[c]; ++j) h = hull(h, below[p * factors[c] + j]);
      out[c][p] = std::move(h);
    }
  }
  return out;
}

std::vector<std::vector<Box>> suffix_hulls(const std::vector<int>& factors, const std::vector<Box>& leaf) {
  const size_t n = factors.size();
  std::vector<std::vector<Box>> out(n + 1);
  out[0] = leaf;
  size_t stride = leaf.size();  // product of the factors from cut c on
  for (size_t c = 0; c < n; ++c) {
    const size_t next = stride / static_cast<size_t>(factors[c]);
    out[c + 1].resize(next);
    for (size_t s = 0; s < next; ++s) {
      Box h = out[c][s];
      for (int j = 1; j < factors[c]; ++j) h = hull(h, out[c][j * next + s]);
      out[c + 1][s] = std::move(h);
    }
    stride = next;
  }
  return out;
}

bool hulls_nest(const std::vector<int>& factors, const std::vector<std::vector<Box>>& prefix) {
  for (size_t c = 0; c < factors.size(); ++c) {
    const int f = factors[c];
    for (size_t p = 0; p < prefix[c].size(); ++p) {
      std::vector<const Box*> distinct;
      int64_t volume = 0;
      for (int j = 0; j < f; ++j) {
        const Box& child = prefix[c + 1][p * f + j];
        if (child.empty()) continue;
        bool seen = false;
        for (const Box* o : distinct) {
          if (*o == child) {
            seen = true;
            break;
          }
          if (o->overlaps(child)) return false;  // overlapping, not equal
        }
        if (seen) continue;
        distinct.push_back(&child);
        volume += child.volume();
      }
      if (volume != prefix[c][p].volume()) return false;
    }
  }
  return true;
}

}  // namespace autotile
