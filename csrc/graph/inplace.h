// Which input's memory each output of a node may take over (MXNet's FInplaceOption).
#pragma once
#include <vector>

#include "graph/graph.h"

namespace autotile {

/// \brief Per output of node `n`: the index of the input whose memory the output may reuse
/// when `n` is that input's last reader, or -1.
///
/// Read from the node attr `__inplace__` (one comma-separated input index per output, -1 for
/// none). An update node without the attr pairs each output with the first unused graph
/// input of its shape (the weight or optimizer state it updates). A pair whose shapes differ
/// is an Error naming the node.
std::vector<int> inplace_inputs(const Graph& g, NodeId n);

}  // namespace autotile
