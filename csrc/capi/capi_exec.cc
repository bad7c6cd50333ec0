// C API: building the per-device execution graph (csrc/exec/exec_graph.h) and walking it.
#include <mutex>
#include <type_traits>

#include "capi/handles.h"

using namespace autotile;
using namespace autotile::capi;

// Id arrays are handed out as int32_t pointers straight into the core's std::vector<int>.
static_assert(std::is_same<int, int32_t>::value, "the C API exposes std::vector<int> as int32_t arrays");

namespace {

const ExecGraph& exec_of(AT_ExecGraph* handle, std::shared_ptr<ExecObject>* keep) {
  *keep = get_exec(handle);
  return (*keep)->exec;
}

const ExecOp& op_of(const ExecGraph& eg, int32_t op) {
  check_index(op, static_cast<int64_t>(eg.ops.size()), "op");
  return eg.ops[static_cast<size_t>(op)];
}

const Buffer& buffer_of(const ExecGraph& eg, int32_t buffer) {
  check_index(buffer, static_cast<int64_t>(eg.buffers.size()), "buffer");
  return eg.buffers[static_cast<size_t>(buffer)];
}

void check_device(const ExecGraph& eg, int32_t device) { check_index(device, eg.devices, "device"); }

void give_array(const std::vector<int>& v, const int32_t** out, int32_t* count) {
  need(out, "out array");
  need(count, "out_count");
  *out = v.empty() ? nullptr : v.data();
  *count = static_cast<int32_t>(v.size());
}

// Writes a box into caller arrays lo/hi (capacity entries each) with the rank query and
// too-small rules of at_graph_tensor_shape.
void give_box(const Box& box, int64_t* lo, int64_t* hi, int32_t capacity, int32_t* out_ndim) {
  need(out_ndim, "out_ndim");
  if (capacity < 0) api_fail(AT_ERR_INVALID_ARGUMENT, "capacity ", capacity, " is negative");
  if (capacity > 0 && (lo == nullptr || hi == nullptr))
    api_fail(AT_ERR_NULL_ARGUMENT, lo == nullptr ? "lo" : "hi", " is NULL but capacity is ", capacity);
  if ((lo == nullptr) != (hi == nullptr)) api_fail(AT_ERR_NULL_ARGUMENT, "lo and hi must both be given or both NULL");
  const int32_t ndim = static_cast<int32_t>(box.dims.size());
  *out_ndim = ndim;
  if (lo == nullptr) return;  // a rank query
  if (capacity < ndim) api_fail(AT_ERR_BUFFER_TOO_SMALL, "the box has rank ", ndim, ", capacity is ", capacity);
  for (int32_t d = 0; d < ndim; ++d) {
    lo[d] = box.dims[static_cast<size_t>(d)].lo;
    hi[d] = box.dims[static_cast<size_t>(d)].hi;
  }
}

// One per-device figure of an execution graph (arena, live peak, bytes received) into *out.
AT_Status device_figure(const char* fn, AT_ExecGraph* exec, int32_t device, int64_t* out,
                        std::vector<int64_t> ExecGraph::*field, const char* what) {
  return guard(fn, [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecGraph& eg = exec_of(exec, &keep);
    need(out, "out");
    check_device(eg, device);
    const std::vector<int64_t>& v = eg.*field;
    // The core fills these per device; a short vector would be a core bug, not bad input.
    if (static_cast<size_t>(device) >= v.size())
      api_fail(AT_ERR_INTERNAL, what, " has ", v.size(), " entries for device ", device);
    *out = v[static_cast<size_t>(device)];
  });
}

}  // namespace

extern "C" {

AT_Status at_exec_build(AT_Graph* graph, AT_Plan* plan, uint32_t flags, AT_ExecGraph** out_exec) {
  return guard("at_exec_build", [&] {
    auto g = get_graph(graph);
    auto p = get_plan(plan);
    need(out_exec, "out_exec");
    if (flags & ~AT_EXEC_NO_CONTROL_DEPS)
      api_fail(AT_ERR_INVALID_ARGUMENT, "unknown flags ", flags, " (only AT_EXEC_NO_CONTROL_DEPS is defined)");
    PlanSpec spec;
    spec.factors = p->plan.factors;
    spec.tensor_tilings = p->plan.tensor_tilings;
    spec.node_strategies = p->plan.node_strategies;
    ExecOptions opts;
    opts.control_deps = (flags & AT_EXEC_NO_CONTROL_DEPS) == 0;
    auto e = std::make_shared<ExecObject>();
    {
      std::shared_lock<std::shared_mutex> lock(g->mutex);
      e->exec = build_exec_graph(g->graph, spec, opts);
    }
    *out_exec = reinterpret_cast<AT_ExecGraph*>(register_object(std::move(e)));
  });
}

AT_Status at_exec_free(AT_ExecGraph* exec) {
  return guard("at_exec_free", [&] {
    if (exec == nullptr) return;
    if (!unregister_object(reinterpret_cast<uintptr_t>(exec), Kind::kExec))
      api_fail(AT_ERR_INVALID_HANDLE, "exec is not a live execution-graph handle (freed twice or never created)");
  });
}

AT_Status at_exec_num_devices(AT_ExecGraph* exec, int32_t* out) {
  return guard("at_exec_num_devices", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecGraph& eg = exec_of(exec, &keep);
    need(out, "out");
    *out = eg.devices;
  });
}

AT_Status at_exec_num_ops(AT_ExecGraph* exec, int32_t* out) {
  return guard("at_exec_num_ops", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecGraph& eg = exec_of(exec, &keep);
    need(out, "out");
    *out = static_cast<int32_t>(eg.ops.size());
  });
}

AT_Status at_exec_num_buffers(AT_ExecGraph* exec, int32_t* out) {
  return guard("at_exec_num_buffers", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecGraph& eg = exec_of(exec, &keep);
    need(out, "out");
    *out = static_cast<int32_t>(eg.buffers.size());
  });
}

AT_Status at_exec_schedule(AT_ExecGraph* exec, int32_t device, const int32_t** out_ops, int32_t* out_count) {
  return guard("at_exec_schedule", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecGraph& eg = exec_of(exec, &keep);
    need(out_ops, "out_ops");
    check_device(eg, device);
    give_array(eg.schedule.at(static_cast<size_t>(device)), out_ops, out_count);
  });
}

AT_Status at_exec_op(AT_ExecGraph* exec, int32_t op, AT_OpKind* out_kind, int32_t* out_device, int32_t* out_node,
                     int32_t* out_accumulate, int64_t* out_bytes_moved) {
  return guard("at_exec_op", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecOp& o = op_of(exec_of(exec, &keep), op);
    if (out_kind) *out_kind = o.kind == ExecKind::kCompute ? AT_OP_COMPUTE : AT_OP_FETCH;
    if (out_device) *out_device = o.device;
    if (out_node) *out_node = o.node;
    if (out_accumulate) *out_accumulate = o.accumulate ? 1 : 0;
    if (out_bytes_moved) *out_bytes_moved = o.bytes_moved;
  });
}

AT_Status at_exec_op_inputs(AT_ExecGraph* exec, int32_t op, const int32_t** out_buffers, int32_t* out_count) {
  return guard("at_exec_op_inputs", [&] {
    std::shared_ptr<ExecObject> keep;
    give_array(op_of(exec_of(exec, &keep), op).inputs, out_buffers, out_count);
  });
}

AT_Status at_exec_op_outputs(AT_ExecGraph* exec, int32_t op, const int32_t** out_buffers, int32_t* out_count) {
  return guard("at_exec_op_outputs", [&] {
    std::shared_ptr<ExecObject> keep;
    give_array(op_of(exec_of(exec, &keep), op).outputs, out_buffers, out_count);
  });
}

AT_Status at_exec_op_deps(AT_ExecGraph* exec, int32_t op, const int32_t** out_ops, int32_t* out_count) {
  return guard("at_exec_op_deps", [&] {
    std::shared_ptr<ExecObject> keep;
    give_array(op_of(exec_of(exec, &keep), op).deps, out_ops, out_count);
  });
}

AT_Status at_exec_op_input_box(AT_ExecGraph* exec, int32_t op, int32_t input, int64_t* lo, int64_t* hi,
                               int32_t capacity, int32_t* out_ndim) {
  return guard("at_exec_op_input_box", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecOp& o = op_of(exec_of(exec, &keep), op);
    need(out_ndim, "out_ndim");
    check_index(input, static_cast<int64_t>(o.input_boxes.size()), "input");
    give_box(o.input_boxes[static_cast<size_t>(input)], lo, hi, capacity, out_ndim);
  });
}

AT_Status at_exec_op_num_pieces(AT_ExecGraph* exec, int32_t op, int32_t* out) {
  return guard("at_exec_op_num_pieces", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecOp& o = op_of(exec_of(exec, &keep), op);
    need(out, "out");
    *out = static_cast<int32_t>(o.pieces.size());
  });
}

AT_Status at_exec_op_piece(AT_ExecGraph* exec, int32_t op, int32_t piece, int32_t* out_src_buffer, int64_t* lo,
                           int64_t* hi, int32_t capacity, int32_t* out_ndim) {
  return guard("at_exec_op_piece", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecOp& o = op_of(exec_of(exec, &keep), op);
    need(out_src_buffer, "out_src_buffer");
    need(out_ndim, "out_ndim");
    check_index(piece, static_cast<int64_t>(o.pieces.size()), "piece");
    const Piece& pc = o.pieces[static_cast<size_t>(piece)];
    give_box(pc.region, lo, hi, capacity, out_ndim);
    *out_src_buffer = pc.src;
  });
}

AT_Status at_exec_buffer(AT_ExecGraph* exec, int32_t buffer, int32_t* out_device, int32_t* out_tensor,
                         AT_BufferRole* out_role, int32_t* out_partial, int32_t* out_producer, int64_t* out_bytes,
                         int64_t* out_offset) {
  return guard("at_exec_buffer", [&] {
    std::shared_ptr<ExecObject> keep;
    const Buffer& b = buffer_of(exec_of(exec, &keep), buffer);
    if (out_device) *out_device = b.device;
    if (out_tensor) *out_tensor = b.tensor;
    if (out_role) {
      *out_role = b.role == BufferRole::kTile  ? AT_BUFFER_TILE
                  : b.role == BufferRole::kRaw ? AT_BUFFER_RAW
                                               : AT_BUFFER_REGION;
    }
    if (out_partial) *out_partial = b.partial ? 1 : 0;
    if (out_producer) *out_producer = b.producer;
    if (out_bytes) *out_bytes = b.bytes;
    if (out_offset) *out_offset = b.offset;
  });
}

AT_Status at_exec_buffer_box(AT_ExecGraph* exec, int32_t buffer, int64_t* lo, int64_t* hi, int32_t capacity,
                             int32_t* out_ndim) {
  return guard("at_exec_buffer_box", [&] {
    std::shared_ptr<ExecObject> keep;
    give_box(buffer_of(exec_of(exec, &keep), buffer).box, lo, hi, capacity, out_ndim);
  });
}

AT_Status at_exec_tile(AT_ExecGraph* exec, int32_t tensor, int32_t device, int32_t* out_buffer) {
  return guard("at_exec_tile", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecGraph& eg = exec_of(exec, &keep);
    need(out_buffer, "out_buffer");
    check_device(eg, device);
    check_index(tensor, static_cast<int64_t>(eg.tile_of.size() / static_cast<size_t>(eg.devices)), "tensor");
    *out_buffer = eg.tile(tensor, device);
  });
}

AT_Status at_exec_arena_bytes(AT_ExecGraph* exec, int32_t device, int64_t* out) {
  return device_figure("at_exec_arena_bytes", exec, device, out, &ExecGraph::arena_bytes, "arena_bytes");
}

AT_Status at_exec_live_peak_bytes(AT_ExecGraph* exec, int32_t device, int64_t* out) {
  return device_figure("at_exec_live_peak_bytes", exec, device, out, &ExecGraph::live_peak_bytes, "live_peak_bytes");
}

AT_Status at_exec_bytes_received(AT_ExecGraph* exec, int32_t device, int64_t* out) {
  return device_figure("at_exec_bytes_received", exec, device, out, &ExecGraph::bytes_received, "bytes_received");
}

AT_Status at_exec_bytes_moved(AT_ExecGraph* exec, int64_t* out) {
  return guard("at_exec_bytes_moved", [&] {
    std::shared_ptr<ExecObject> keep;
    const ExecGraph& eg = exec_of(exec, &keep);
    need(out, "out");
    *out = eg.bytes_moved;
  });
}

}  // extern "C"
