// Static memory planning of an execution graph, per device, in the manner of MXNet's
// planner: liveness on the schedule clock, buffers that are never live at the same time
// share memory, and every reuse adds a dependency so the runtime cannot overwrite memory
// that a (possibly remote) reader still needs.
#pragma once
#include "exec/exec_graph.h"

namespace autotile {

/// \brief Assigns arena offsets to every buffer of `eg`, fills arena_bytes and
/// live_peak_bytes, and adds write-after-read dependencies for reused memory.
///
/// With `dependency_reuse_only` (the graph has no control dependencies), a buffer's memory
/// is reused only by an op whose node depends, in the training graph, on every node that read
/// the buffer — what a planner for a dataflow engine without a fixed order can prove safe
/// (Tofu Sec 6: partitioning breaks those dependencies, so reuse is lost).
///
/// Without `reuse_deps` the write-after-read dependencies are not added (ExecOptions::arena_only):
/// offsets, arena_bytes and live_peak_bytes are the same. With `place_above` > 0, when some
/// device's live peak exceeds it nothing is placed: arena_bytes are the live peaks (a lower
/// bound, ExecOptions::arena_limit).
void plan_memory(ExecGraph& eg, const Graph& graph, bool dependency_reuse_only = false, bool reuse_deps = true,
                 int64_t place_above = 0);

}  // namespace autotile
