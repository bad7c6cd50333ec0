// Interned per-device layouts and memoised conversion costs.
//
// A layout is fully determined by the tensor's shape and the sequence of per-cut steps that
// built it (tilings for what a tensor holds, strategy needs/makes for a node edge), so equal
// histories give equal layouts. Deep models repeat the same block many times and their
// tensors end up with the same histories: the pool builds each distinct layout once (O(K)
// boxes) and prices each distinct (held, need) pair once, so search time and memory grow
// with the number of distinct layouts rather than edges x devices.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "search/layout.h"
#include "search/tiling.h"
#include "tdl/strategy.h"

namespace autotile {

/// \brief Ids of interned layouts; one pool serves one search (its cut factors are fixed).
class LayoutPool {
 public:
  /// \brief The whole tensor of `shape` on a single device (no cut yet).
  int whole(const Shape& shape);
  /// \brief `prefix` extended by one k-way cut holding the tensor as `t` (extend_held).
  int held(int prefix, const Tiling& t, int k);
  /// \brief `prefix` extended by a strategy's need for one input (extend_need).
  int need(int prefix, const InputNeed& need, int k);
  /// \brief `prefix` extended by how a strategy makes one output (extend_make).
  int make(int prefix, const OutputMake& make, bool whole, int k);
  /// \brief The layout of an id.
  const DeviceLayout& get(int id) const { return layouts_[id]; }
  /// \brief conversion_elements(get(held), get(need), factors), memoised per pair; `factors`
  /// must be the same prefix for every call with layouts of the same number of cuts.
  double elements(int held, int need, const std::vector<int>& factors);
  /// \brief Number of distinct layouts built so far.
  int size() const { return static_cast<int>(layouts_.size()); }
  /// \brief Number of distinct (held, need) pairs priced so far.
  int priced() const { return static_cast<int>(elements_.size()); }

 private:
  // Id of `key_` if interned, else -1.
  int find() const;
  int add(DeviceLayout layout, Shape shape);
  int push(DeviceLayout layout, Shape shape);
  std::vector<DeviceLayout> layouts_;
  std::vector<Shape> shape_;  ///< full shape of the tensor each layout belongs to
  std::unordered_map<std::string, int> index_;  ///< whole and need layouts by their key_
  /// One step of a held or made layout: the prefix, k and what the step does.
  struct Step {
    int prefix, k, what, dim;
    bool operator==(const Step& o) const { return prefix == o.prefix && k == o.k && what == o.what && dim == o.dim; }
  };
  struct StepHash {
    size_t operator()(const Step& s) const {
      uint64_t h = (static_cast<uint64_t>(static_cast<uint32_t>(s.prefix)) << 32) ^ static_cast<uint32_t>(s.k);
      h = (h ^ (static_cast<uint64_t>(static_cast<uint32_t>(s.what)) << 40) ^ static_cast<uint32_t>(s.dim)) *
          0x9E3779B97F4A7C15ull;
      return static_cast<size_t>(h ^ (h >> 31));
    }
  };
  std::unordered_map<Step, int, StepHash> held_index_, make_index_;
  std::unordered_map<uint64_t, double> elements_;
  std::string key_;  ///< scratch
};

}  // namespace autotile
