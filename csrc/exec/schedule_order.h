// The serial order in which every device runs its sub-operators (Tofu Sec 6: control
// dependencies keep each device in the serial graph's order, so that order decides how much
// memory every device needs).
#pragma once
#include <vector>

#include "graph/graph.h"

namespace autotile {

/// \brief The serial order: of two topological orders, the one whose tensors need less
/// memory at once (serial_peak_bytes).
///
/// The per-layer order runs each layer's backward ops together: among the ready nodes,
/// updates and gradient sums first, then backward nodes in reverse order of the forward nodes
/// they differentiate, then forward nodes in id order. A layer's weight gradient then runs
/// right after its output gradient, and the layer's saved input and output gradient die as
/// the backward pass moves down (id order runs every weight gradient after the whole
/// data-gradient chain: VGG-16's serial peak at batch 32 is 1.17x higher). The id order wins where the
/// per-layer order keeps many pieces of one gradient sum alive (an unrolled RNN's weight
/// gradients of every step, summed once all steps are done: 2.3x higher for RNN-4-2K).
std::vector<NodeId> schedule_order(const Graph& graph);

/// \brief `order` itself, after checking that it is a topological order of every node of
/// `graph` (each once, after the producers of its inputs); an error names the node at fault.
std::vector<NodeId> checked_order(const Graph& graph, const std::vector<NodeId>& order);

/// \brief Peak bytes of the graph's tensors live at once when its nodes run in `order`
/// (inputs from the start, outputs to the end, every other tensor until its last reader).
int64_t serial_peak_bytes(const Graph& graph, const std::vector<NodeId>& order);

}  // namespace autotile
