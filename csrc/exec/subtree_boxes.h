// Bounding boxes over the cut hierarchy: what the devices of each subtree hold (prefix
// hulls) and what the devices that share a suffix of digits want (suffix hulls). They let the
// execution-graph builder visit only the holders that can contribute to a region, and stage a
// collective one cut at a time (exec_build.cc), in time linear in the device count.
#pragma once
#include <vector>

#include "exec/box.h"

namespace autotile {

/// \brief The smallest box containing both (an empty box is the identity).
Box hull(const Box& a, const Box& b);

/// \brief Prefix hulls: `[level][prefix]` is the hull of `leaf[d]` over the devices `d` whose
/// first `level` digits (mixed radix of `factors`, first cut most significant) are `prefix`.
/// Level `factors.size()` is `leaf` itself, level 0 the hull of everything.
std::vector<std::vector<Box>> prefix_hulls(const std::vector<int>& factors, const std::vector<Box>& leaf);

/// \brief Suffix hulls: `[level][suffix]` is the hull of `leaf[d]` over the devices whose digits
/// from cut `level` on equal those of `suffix` (that is, `d % stride` = `suffix`, stride the
/// product of the factors from `level` on). Level 0 is `leaf`, the last level one hull.
std::vector<std::vector<Box>> suffix_hulls(const std::vector<int>& factors, const std::vector<Box>& leaf);

/// \brief Whether every prefix hull is exactly the union of its children's hulls, the
/// distinct non-empty children being pairwise disjoint (identical children, as replicas
/// are, count once).
bool hulls_nest(const std::vector<int>& factors, const std::vector<std::vector<Box>>& prefix);

}  // namespace autotile
