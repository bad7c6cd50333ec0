// Boxes: axis-aligned regions of a tensor (one half-open interval per dim), the unit of
// every tile, fetch and reduction in the execution graph.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tdl/strategy.h"

namespace autotile {

/// \brief A region of a tensor: one [lo, hi) interval per dimension.
struct Box {
  std::vector<Interval> dims;

  /// \brief The whole of a tensor of this shape.
  static Box full(const std::vector<int64_t>& shape);
  int64_t volume() const;
  bool empty() const { return volume() == 0; }
  std::vector<int64_t> shape() const;
  /// \brief Intersection (empty intervals where they do not overlap).
  Box intersect(const Box& other) const;
  bool contains(const Box& other) const;
  bool operator==(const Box& o) const { return dims == o.dims; }
  bool operator!=(const Box& o) const { return !(*this == o); }
  std::string str() const;
};

/// \brief Slab `index` of `count` equal slabs of `iv` (count divides its size).
Interval slab(const Interval& iv, int64_t index, int64_t count);

}  // namespace autotile
