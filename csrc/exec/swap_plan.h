// Swap planning (SwapAdvisor, Spartan/SwapAdvisor thesis Ch. 4): when a device's tensors do
// not fit its memory, move some of them to host memory between uses.
//
// Given the fixed schedule and liveness of an execution graph, for every device whose live
// bytes exceed the budget: while some point of the schedule is over budget, take the buffer
// that is idle across that point for longest-and-largest (a gap between two uses: an
// activation kept for the backward pass, a weight between its forward and backward use),
// copy it to the host pool after its last use before the gap (swap-out) and back into a new
// buffer shortly before its next use (swap-in), and point the later readers at the copy. A
// buffer swapped in and idle again is swapped in again from the same host buffer (no second
// swap-out). The step's own ends move too (SwapAdvisor keeps them in host memory): a graph
// input (data, weights, optimizer states) may be loaded into the host pool before the step and
// swapped in before its first use, and a step output (updated weights, gradients, new states)
// idle to the end may go to the host and stay there; those host buffers are the tiles the
// runtimes load and gather, so the results live in host memory between steps. The swap ops
// run on the device's copy stream, so they overlap compute; the memory plan then runs on the
// augmented graph and places the arena, and every later writer of reused memory waits for the
// swap-out as for any reader.
#pragma once
#include <cstdint>

#include "exec/exec_graph.h"
#include "graph/graph.h"

namespace autotile {

/// \brief Adds swap-out/swap-in ops to `eg` (before its memory plan) so that, by the live-bytes
/// count of the schedule, no device holds more than `budget` bytes. Returns the number of swaps.
/// A swapped-out buffer keeps its memory `hold` memory-clock units past its last use (never
/// past the point it is swapped for), giving its copy that long before the memory is reused.
/// Buffers that can help least (no gap across the over-budget point) are never swapped; the
/// caller checks the final arena against the budget.
int plan_swaps(ExecGraph& eg, const Graph& graph, int64_t budget, int64_t hold = 0);

/// \brief plan_swaps, then the memory plan of the augmented graph, aiming the live bytes lower
/// than `budget` by the arena's fragmentation until every device's arena fits `budget` (or
/// nothing more can move; the caller checks). Among the targets tried that fit, the highest
/// (fewest swaps) wins.
void swap_to_fit(ExecGraph& eg, const Graph& graph, int64_t budget, int64_t hold = 0);

}  // namespace autotile
