// TDL analysis: from an op's TDL text (docs/tdl.md) and concrete shapes to its partition
// strategies for one k-way cut (Tofu Sec 4.2). Implemented in csrc/tdl/*.cc.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tdl/strategy.h"

namespace autotile {

using Shape = std::vector<int64_t>;

/// \brief Strategies of the op described by `tdl` for a k-way cut at the given shapes.
///
/// One strategy per index variable that k divides (output variables: the output is split;
/// top-level reduction variables: outputs are partial). Parsing is cached by text, so calling
/// this for every node of a large graph is cheap. Throws Error naming the offending token
/// and position on malformed text, or the input/output on a rank mismatch.
OpStrategies analyze_tdl(const std::string& tdl, const std::vector<Shape>& in_shapes,
                         const std::vector<Shape>& out_shapes, int k);

}  // namespace autotile
