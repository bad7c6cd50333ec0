// Static memory planning of an execution graph, per device, in the manner of MXNet's
// planner: liveness on the schedule clock, buffers that are never live at the same time
// share memory, and every reuse adds a dependency so the runtime cannot overwrite memory
// that a (possibly remote) reader still needs.
#pragma once
#include "exec/exec_graph.h"

namespace autotile {

/// \brief Assigns arena offsets to every buffer of `eg`, fills arena_bytes and
/// live_peak_bytes, and adds write-after-read dependencies for reused memory.
void plan_memory(ExecGraph& eg, const Graph& graph);

}  // namespace autotile
