// Boxes: axis-aligned regions of a tensor (one half-open interval per dim), the unit of
// every tile, fetch and reduction in the execution graph.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tdl/strategy.h"

namespace autotile {

/// \brief A box's intervals, one per dimension, stored inline up to kInline (4) dimensions (on the
/// heap beyond): a large execution graph holds millions of boxes (one per MultiFetch piece),
/// and one allocation each was a quarter of its construction time.
class Dims {
 public:
  static constexpr uint32_t kInline = 4;
  Dims() noexcept {}  // NOLINT: user-provided (the union has a non-trivial member)
  explicit Dims(size_t n) { resize(n); }
  Dims(std::initializer_list<Interval> ivs);
  Dims(const std::vector<Interval>& ivs);  // NOLINT: implicit, as the vector it replaces
  Dims(const Dims& o) {
    if (o.size_ <= kInline) {
      std::copy(o.inline_, o.inline_ + o.size_, inline_);
      size_ = o.size_;
    } else {
      assign(o.heap_, o.size_);
    }
  }
  Dims(Dims&& o) noexcept;
  Dims& operator=(const Dims& o);
  Dims& operator=(Dims&& o) noexcept;
  ~Dims() { release(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Interval* data() { return size_ > kInline ? heap_ : inline_; }
  const Interval* data() const { return size_ > kInline ? heap_ : inline_; }
  Interval& operator[](size_t i) { return data()[i]; }
  const Interval& operator[](size_t i) const { return data()[i]; }
  Interval* begin() { return data(); }
  Interval* end() { return data() + size_; }
  const Interval* begin() const { return data(); }
  const Interval* end() const { return data() + size_; }
  void push_back(const Interval& iv) {
    if (size_ < kInline) {
      inline_[size_++] = iv;
    } else {
      grow_push(iv);
    }
  }
  /// New dimensions are empty intervals [0, 0).
  void resize(size_t n);
  bool operator==(const Dims& o) const;
  bool operator!=(const Dims& o) const { return !(*this == o); }

 private:
  void assign(const Interval* src, size_t n);
  void release();
  void grow_push(const Interval& iv);  // push_back beyond the inline storage
  void steal(Dims& o) noexcept;        // take o's intervals (this holds none), leaving o empty
  uint32_t size_ = 0;
  uint32_t capacity_ = kInline;  // heap capacity when size_ > kInline
  union {
    Interval inline_[kInline];
    Interval* heap_ = nullptr;
  };
};

/// \brief A region of a tensor: one [lo, hi) interval per dimension.
struct Box {
  Dims dims;

  /// \brief The whole of a tensor of this shape.
  static Box full(const std::vector<int64_t>& shape);
  int64_t volume() const {
    int64_t v = 1;
    for (const Interval& iv : dims) v *= iv.size();
    return v;
  }
  bool empty() const { return volume() == 0; }
  std::vector<int64_t> shape() const;
  /// \brief Intersection (empty intervals where they do not overlap).
  Box intersect(const Box& other) const;
  /// \brief Whether the intersection is non-empty (`!intersect(other).empty()`, without building it).
  bool overlaps(const Box& other) const {
    const size_t n = std::min(dims.size(), other.dims.size());
    for (size_t i = 0; i < n; ++i)
      if (std::min(dims[i].hi, other.dims[i].hi) <= std::max(dims[i].lo, other.dims[i].lo)) return false;
    return true;
  }
  bool contains(const Box& other) const;
  bool operator==(const Box& o) const { return dims == o.dims; }
  bool operator!=(const Box& o) const { return !(*this == o); }
  std::string str() const;
};

/// \brief Slab `index` of `count` equal slabs of `iv` (count divides its size).
Interval slab(const Interval& iv, int64_t index, int64_t count);

}  // namespace autotile
