// Tiling: how one tensor is laid out across the k groups of one cut (Soybean Sec 4.1).
#pragma once
#include <cstdint>
#include <string>

namespace autotile {

/// \brief One basic tiling of a tensor for one cut: split(d), replicate or partial.
struct Tiling {
  enum Kind : int8_t { kReplicate = 0, kSplit = 1, kPartial = 2 };
  Kind kind = kReplicate;
  int dim = -1;  ///< split dimension (kSplit only)

  /// \brief Every group holds the whole tensor.
  static Tiling replicate() { return Tiling{kReplicate, -1}; }
  /// \brief Group j holds the j-th of k equal slabs along `d`.
  static Tiling split(int d) { return Tiling{kSplit, d}; }
  /// \brief Every group holds a partial sum of the whole tensor (not yet reduced).
  static Tiling partial() { return Tiling{kPartial, -1}; }

  bool operator==(const Tiling& o) const { return kind == o.kind && dim == o.dim; }
  bool operator!=(const Tiling& o) const { return !(*this == o); }
  /// \brief Short form: "split(1)", "replicate", "partial".
  std::string str() const;
  /// \brief Parses the short form; throws Error on anything else.
  static Tiling parse(const std::string& text);
};

}  // namespace autotile
