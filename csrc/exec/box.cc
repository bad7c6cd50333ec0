#include "exec/box.h"

#include <algorithm>
#include <sstream>

namespace autotile {

Dims::Dims(std::initializer_list<Interval> ivs) { assign(ivs.begin(), ivs.size()); }

Dims::Dims(const std::vector<Interval>& ivs) { assign(ivs.data(), ivs.size()); }

Dims::Dims(Dims&& o) noexcept { steal(o); }

void Dims::steal(Dims& o) noexcept {
  size_ = o.size_;
  capacity_ = o.capacity_;
  if (o.size_ > kInline) {
    heap_ = o.heap_;
  } else {
    std::copy(o.inline_, o.inline_ + o.size_, inline_);
  }
  o.size_ = 0;
  o.capacity_ = kInline;
}

Dims& Dims::operator=(const Dims& o) {
  if (this != &o) assign(o.data(), o.size_);
  return *this;
}

Dims& Dims::operator=(Dims&& o) noexcept {
  if (this == &o) return *this;
  release();
  steal(o);
  return *this;
}

void Dims::release() {
  if (size_ > kInline) delete[] heap_;
  size_ = 0;
  capacity_ = kInline;
}

void Dims::assign(const Interval* src, size_t n) {
  if (n <= kInline) {
    Interval copy[kInline];  // src may alias our heap: copy before releasing it
    std::copy(src, src + n, copy);
    release();
    std::copy(copy, copy + n, inline_);
    size_ = static_cast<uint32_t>(n);
    return;
  }
  Interval* mem = new Interval[n];
  std::copy(src, src + n, mem);
  release();
  heap_ = mem;
  size_ = capacity_ = static_cast<uint32_t>(n);
}

void Dims::resize(size_t n) {
  while (size_ > n) {
    if (size_ == kInline + 1) {  // back to inline storage
      Interval* mem = heap_;
      std::copy(mem, mem + kInline, inline_);
      delete[] mem;
      size_ = kInline;
      capacity_ = kInline;
      continue;
    }
    --size_;
  }
  while (size_ < n) push_back({0, 0});
}

void Dims::grow_push(const Interval& iv) {
  if (size_ == kInline || size_ == capacity_) {
    const uint32_t cap = size_ == kInline ? 2 * kInline : 2 * capacity_;
    Interval* mem = new Interval[cap];
    const Interval* old = data();
    std::copy(old, old + size_, mem);
    if (size_ > kInline) delete[] heap_;
    heap_ = mem;
    capacity_ = cap;
  }
  heap_[size_++] = iv;
}

bool Dims::operator==(const Dims& o) const {
  if (size_ != o.size_) return false;
  return std::equal(begin(), end(), o.begin());
}

Box Box::full(const std::vector<int64_t>& shape) {
  Box b;
  for (int64_t d : shape) b.dims.push_back({0, d});
  return b;
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
