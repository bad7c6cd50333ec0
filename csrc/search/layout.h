// Per-device regions of one tensor after a sequence of cuts (Soybean's flattening, Theorem 2).
//
// After cuts with factors k_1..k_m there are K = prod k_i devices; device d has digits
// (j_1..j_m), j_1 most significant. A DeviceLayout gives every device's box of the tensor
// (what it holds, needs or produces) and the set of cuts across which the values are still
// partial sums. Layouts are built cut by cut, so a search step extends the prefix it keeps.
#pragma once
#include <cstdint>
#include <vector>

#include "search/tiling.h"
#include "tdl/strategy.h"

namespace autotile {

using Shape = std::vector<int64_t>;

/// \brief A box: one half-open interval per tensor dimension (a view into a layout's array).
struct Box {
  const Interval* iv = nullptr;
  int rank = 0;
  /// \brief Number of dimensions.
  size_t size() const { return static_cast<size_t>(rank); }
  /// \brief The interval of dimension i.
  const Interval& operator[](size_t i) const { return iv[i]; }
};

/// \brief Boxes of one tensor on each of K devices, plus the cuts its values are partial over.
/// The boxes are stored flat (device after device, `rank` intervals each): a layout of 1024
/// devices is one allocation, not 1024.
struct DeviceLayout {
  std::vector<Interval> iv;    ///< device d's box: iv[d * rank, (d + 1) * rank)
  int rank = 0;                ///< dimensions of the tensor
  int num_devices = 0;         ///< K
  uint32_t partial_mask = 0;   ///< bit c: values are partial sums across the groups of cut c
  int num_cuts = 0;
  bool none = false;           ///< a need for nothing (an input the op does not read)

  int devices() const { return num_devices; }
  /// \brief The box of device d.
  Box box(int d) const { return Box{iv.data() + static_cast<size_t>(d) * rank, rank}; }
  /// \brief The interval of dimension `dim` of device d's box.
  Interval& at(int d, int dim) { return iv[static_cast<size_t>(d) * rank + dim]; }
};

/// \brief The whole tensor on a single device (no cut yet).
DeviceLayout whole_layout(const Shape& shape);
/// \brief Extends `prefix` by one k-way cut that tiles the tensor by `t` (split: even slabs).
DeviceLayout extend_held(const DeviceLayout& prefix, const Tiling& t, int k);
/// \brief Extends by a strategy's need for one input: `need.per_worker` intervals are relative
/// to each device's current box (the node's shapes at this cut); clipped to `full`.
DeviceLayout extend_need(const DeviceLayout& prefix, const InputNeed& need, int k, const Shape& full);
/// \brief Extends by how a strategy makes one output: even slabs along `make.dim`, or partial;
/// `whole` (replicated execution) keeps every device's box.
DeviceLayout extend_make(const DeviceLayout& prefix, const OutputMake& make, bool whole, int k);

/// \brief Number of elements of a box.
double box_volume(Box b);
/// \brief Number of elements of the intersection of two boxes (of equal rank).
double box_overlap(Box a, Box b);

}  // namespace autotile
