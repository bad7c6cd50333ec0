// Partition strategies of one operator for one k-way cut (Tofu's partition-n-reduce).
//
// This is the contract between TDL analysis (csrc/tdl: derives strategies from a TDL
// description) and the search (csrc/search: prices them with the cost model). An embedding
// engine may also hand strategies over directly instead of TDL text.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace autotile {

/// \brief Half-open interval [lo, hi) of indices along one tensor dimension.
struct Interval {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t size() const { return hi > lo ? hi - lo : 0; }
  bool operator==(const Interval& o) const { return lo == o.lo && hi == o.hi; }
};

/// \brief Reducer of a partial output (the op's top-level TDL reduction).
enum class Reducer : uint8_t { kSum = 0, kMax, kMin, kProd };

/// \brief What one input of the op needs under a strategy, for each of the k workers.
struct InputNeed {
  /// Every worker reads the whole tensor (the split variable does not index this input).
  bool replicate = true;
  /// False when the op does not read this input at all (it is only in the TDL header, e.g. an
  /// input that supplies a shape). `replicate` stays true then, so a consumer that ignores
  /// this flag is conservative; one that honours it needs no region of the input.
  bool read = true;
  /// The dimension the split variable indexes (valid when !replicate). All other dims are
  /// read in full.
  int dim = -1;
  /// Worker j reads [per_worker[j].lo, per_worker[j].hi) along `dim` (k entries). Intervals
  /// of neighbours overlap by the halo of windowed ops (convolution, pooling).
  std::vector<Interval> per_worker;
};

/// \brief How one output of the op comes out under a strategy.
struct OutputMake {
  /// Each worker holds a partial result of the full shape that must be reduced.
  bool partial = false;
  Reducer reducer = Reducer::kSum;
  /// Otherwise worker j produces the j-th of k equal slabs along `dim`.
  int dim = -1;
};

/// \brief One way to run an op across k workers: split one TDL variable k ways.
struct Strategy {
  std::string var;  ///< the TDL index variable that is split (e.g. "n", "o", "ci")
  bool reduction = false;  ///< `var` is a reduction variable (outputs are partial)
  std::vector<InputNeed> inputs;   ///< one per op input, in node-input order
  std::vector<OutputMake> outputs;  ///< one per op output
};

/// \brief Result of analysing one op for a k-way cut.
struct OpStrategies {
  std::vector<Strategy> strategies;
  /// Element-wise op (no reduction, each input read at the output's own index): coarsening
  /// merges chains of these (Tofu Sec 5.1).
  bool elementwise = false;
};

}  // namespace autotile
