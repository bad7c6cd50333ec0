#include "exec/box.h"

#include <algorithm>
#include <sstream>

namespace autotile {

Box Box::full(const std::vector<int64_t>& shape) {
  Box b;
  for (int64_t d : shape) b.dims.push_back({0, d});
  return b;
}

int64_t Box::volume() const {
  int64_t v = 1;
  for (const auto& iv : dims) v *= iv.size();
  return v;
}

std::vector<int64_t> Box::shape() const {
  std::vector<int64_t> s;
  for (const auto& iv : dims) s.push_back(iv.size());
  return s;
}

Box Box::intersect(const Box& other) const {
  Box r;
  for (size_t i = 0; i < dims.size() && i < other.dims.size(); ++i) {
    int64_t lo = std::max(dims[i].lo, other.dims[i].lo);
    int64_t hi = std::min(dims[i].hi, other.dims[i].hi);
    r.dims.push_back({lo, std::max(lo, hi)});
  }
  return r;
}

bool Box::contains(const Box& other) const {
  if (other.dims.size() != dims.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (other.dims[i].lo < dims[i].lo || other.dims[i].hi > dims[i].hi) return false;
  return true;
}

std::string Box::str() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i].lo << ":" << dims[i].hi;
  os << "]";
  return os.str();
}

Interval slab(const Interval& iv, int64_t index, int64_t count) {
  int64_t size = iv.size() / count;
  return {iv.lo + index * size, iv.lo + (index + 1) * size};
}

}  // namespace autotile
