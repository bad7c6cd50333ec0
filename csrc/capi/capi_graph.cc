// C API: building and querying a graph (csrc/graph/graph.h).
#include <mutex>
#include <vector>

#include "capi/handles.h"
#include "tdl/analyze.h"

using namespace autotile;
using namespace autotile::capi;

namespace {

constexpr int32_t kMaxRank = 16;  // the core's limit (Graph::add_tensor)

AT_Graph* graph_handle(uintptr_t key) { return reinterpret_cast<AT_Graph*>(key); }

void check_tensor(const Graph& g, int32_t id, const char* what) { check_index(id, g.num_tensors(), what); }
void check_node(const Graph& g, int32_t id, const char* what) { check_index(id, g.num_nodes(), what); }

std::vector<int32_t> id_list(int32_t count, const int32_t* ids, const char* what) {
  if (count < 0) api_fail(AT_ERR_INVALID_ARGUMENT, what, " count ", count, " is negative");
  if (count > 0 && ids == nullptr) api_fail(AT_ERR_NULL_ARGUMENT, what, " is NULL but its count is ", count);
  return std::vector<int32_t>(ids, ids + count);
}

// Analyses the TDL for a 1-way cut: cheap (the parse is cached) and it catches malformed
// text and rank mismatches when the op is added, where the engine can still tell which of
// its ops is wrong, instead of in the middle of a search.
void check_tdl(const Graph& g, const std::string& name, const std::string& op, const std::string& tdl,
               const std::vector<int32_t>& inputs, const std::vector<int32_t>& outputs) {
  std::vector<Shape> ins, outs;
  for (int32_t t : inputs) ins.push_back(g.tensor(t).shape);
  for (int32_t t : outputs) outs.push_back(g.tensor(t).shape);
  try {
    analyze_tdl(tdl, ins, outs, 1);
  } catch (const Error& e) {
    api_fail(AT_ERR_INVALID_INPUT, "op '", name, "' (", op, "): bad TDL description: ", e.what());
  }
}

}  // namespace

extern "C" {

AT_Status at_graph_create(AT_Graph** out) {
  return guard("at_graph_create", [&] {
    need(out, "out");
    *out = graph_handle(register_object(std::make_shared<GraphObject>()));
  });
}

AT_Status at_graph_free(AT_Graph* graph) {
  return guard("at_graph_free", [&] {
    if (graph == nullptr) return;
    if (!unregister_object(reinterpret_cast<uintptr_t>(graph), Kind::kGraph))
      api_fail(AT_ERR_INVALID_HANDLE, "graph is not a live graph handle (freed twice or never created)");
  });
}

AT_Status at_graph_add_tensor(AT_Graph* graph, const char* name, int32_t ndim, const int64_t* dims, AT_DType dtype,
                              int32_t is_param, int32_t* out_id) {
  return guard("at_graph_add_tensor", [&] {
    auto obj = get_graph(graph);
    need(name, "name");
    need(out_id, "out_id");
    if (ndim < 0 || ndim > kMaxRank)
      api_fail(AT_ERR_INVALID_ARGUMENT, "tensor '", name, "': ndim ", ndim, " not in 0..", kMaxRank);
    if (ndim > 0 && dims == nullptr) api_fail(AT_ERR_NULL_ARGUMENT, "tensor '", name, "': dims is NULL");
    DType t = to_dtype(dtype);
    std::vector<int64_t> shape(dims, dims + ndim);
    std::unique_lock<std::shared_mutex> lock(obj->mutex);
    *out_id = obj->graph.add_tensor(name, shape, t, is_param != 0);
  });
}

AT_Status at_graph_add_op(AT_Graph* graph, const char* name, const char* op_type, int32_t num_inputs,
                          const int32_t* inputs, int32_t num_outputs, const int32_t* outputs, const char* tdl,
                          AT_Role role, int32_t* out_id) {
  return guard("at_graph_add_op", [&] {
    auto obj = get_graph(graph);
    need(name, "name");
    need(op_type, "op_type");
    need(out_id, "out_id");
    std::vector<int32_t> ins = id_list(num_inputs, inputs, "inputs");
    std::vector<int32_t> outs = id_list(num_outputs, outputs, "outputs");
    NodeRole r = to_role(role);
    // Checked here, not left to Graph::add_node, so it is reported before the TDL check
    // (which would only complain that the header's outputs have no shapes).
    if (outs.empty()) api_fail(AT_ERR_INVALID_INPUT, "op '", name, "' (", op_type, ") has no outputs");
    std::string text = tdl ? tdl : "";
    std::unique_lock<std::shared_mutex> lock(obj->mutex);
    Graph& g = obj->graph;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i] < 0 || ins[i] >= g.num_tensors())
        api_fail(AT_ERR_OUT_OF_RANGE, "op '", name, "' (", op_type, "): input ", i, " is tensor id ", ins[i],
                 ", out of range (graph has ", g.num_tensors(), " tensors)");
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] < 0 || outs[i] >= g.num_tensors())
        api_fail(AT_ERR_OUT_OF_RANGE, "op '", name, "' (", op_type, "): output ", i, " is tensor id ", outs[i],
                 ", out of range (graph has ", g.num_tensors(), " tensors)");
    }
    if (!text.empty()) check_tdl(g, name, op_type, text, ins, outs);
    *out_id = g.add_node(name, op_type, ins, outs, text, r);
  });
}

AT_Status at_graph_set_backward_of(AT_Graph* graph, int32_t node, int32_t forward_node) {
  return guard("at_graph_set_backward_of", [&] {
    auto obj = get_graph(graph);
    std::unique_lock<std::shared_mutex> lock(obj->mutex);
    check_node(obj->graph, node, "node");
    check_node(obj->graph, forward_node, "forward_node");
    obj->graph.set_backward_of(node, forward_node);
  });
}

AT_Status at_graph_set_gradient(AT_Graph* graph, int32_t tensor, int32_t grad) {
  return guard("at_graph_set_gradient", [&] {
    auto obj = get_graph(graph);
    std::unique_lock<std::shared_mutex> lock(obj->mutex);
    check_tensor(obj->graph, tensor, "tensor");
    check_tensor(obj->graph, grad, "grad");
    obj->graph.set_gradient(tensor, grad);
  });
}

AT_Status at_graph_mark_output(AT_Graph* graph, int32_t tensor) {
  return guard("at_graph_mark_output", [&] {
    auto obj = get_graph(graph);
    std::unique_lock<std::shared_mutex> lock(obj->mutex);
    check_tensor(obj->graph, tensor, "tensor");
    obj->graph.mark_output(tensor);
  });
}

AT_Status at_graph_set_attr(AT_Graph* graph, int32_t node, const char* key, const char* value) {
  return guard("at_graph_set_attr", [&] {
    auto obj = get_graph(graph);
    need(key, "key");
    need(value, "value");
    if (*key == '\0') api_fail(AT_ERR_INVALID_ARGUMENT, "empty attribute key");
    std::unique_lock<std::shared_mutex> lock(obj->mutex);
    check_node(obj->graph, node, "node");
    obj->graph.set_attr(node, key, value);
  });
}

AT_Status at_graph_set_role(AT_Graph* graph, int32_t node, AT_Role role) {
  return guard("at_graph_set_role", [&] {
    auto obj = get_graph(graph);
    NodeRole r = to_role(role);
    std::unique_lock<std::shared_mutex> lock(obj->mutex);
    check_node(obj->graph, node, "node");
    obj->graph.set_role(node, r);
  });
}

AT_Status at_graph_validate(AT_Graph* graph) {
  return guard("at_graph_validate", [&] {
    auto obj = get_graph(graph);
    std::shared_lock<std::shared_mutex> lock(obj->mutex);
    obj->graph.validate();
  });
}

AT_Status at_graph_num_tensors(AT_Graph* graph, int32_t* out) {
  return guard("at_graph_num_tensors", [&] {
    auto obj = get_graph(graph);
    need(out, "out");
    std::shared_lock<std::shared_mutex> lock(obj->mutex);
    *out = obj->graph.num_tensors();
  });
}

AT_Status at_graph_num_nodes(AT_Graph* graph, int32_t* out) {
  return guard("at_graph_num_nodes", [&] {
    auto obj = get_graph(graph);
    need(out, "out");
    std::shared_lock<std::shared_mutex> lock(obj->mutex);
    *out = obj->graph.num_nodes();
  });
}

AT_Status at_graph_find_tensor(AT_Graph* graph, const char* name, int32_t* out_id) {
  return guard("at_graph_find_tensor", [&] {
    auto obj = get_graph(graph);
    need(name, "name");
    need(out_id, "out_id");
    std::shared_lock<std::shared_mutex> lock(obj->mutex);
    // Graph::tensor_id throws when absent (an O(log n) map lookup); a miss is an ordinary
    // answer here, not an error.
    int32_t found = AT_NONE;
    try {
      found = obj->graph.tensor_id(name);
    } catch (const Error&) {
    }
    *out_id = found;
  });
}

AT_Status at_graph_find_node(AT_Graph* graph, const char* name, int32_t* out_id) {
  return guard("at_graph_find_node", [&] {
    auto obj = get_graph(graph);
    need(name, "name");
    need(out_id, "out_id");
    std::shared_lock<std::shared_mutex> lock(obj->mutex);
    *out_id = obj->graph.find_node(name);
  });
}

AT_Status at_graph_tensor_name(AT_Graph* graph, int32_t tensor, char* buf, size_t capacity, size_t* out_len) {
  return guard("at_graph_tensor_name", [&] {
    auto obj = get_graph(graph);
    std::shared_lock<std::shared_mutex> lock(obj->mutex);
    check_tensor(obj->graph, tensor, "tensor");
    copy_string(obj->graph.tensor(tensor).name, buf, capacity, out_len);
  });
}

AT_Status at_graph_node_name(AT_Graph* graph, int32_t node, char* buf, size_t capacity, size_t* out_len) {
  return guard("at_graph_node_name", [&] {
    auto obj = get_graph(graph);
    std::shared_lock<std::shared_mutex> lock(obj->mutex);
    check_node(obj->graph, node, "node");
    copy_string(obj->graph.node(node).name, buf, capacity, out_len);
  });
}

AT_Status at_graph_tensor_shape(AT_Graph* graph, int32_t tensor, int64_t* dims, int32_t capacity, int32_t* out_ndim) {
  return guard("at_graph_tensor_shape", [&] {
    auto obj = get_graph(graph);
    need(out_ndim, "out_ndim");
    if (capacity < 0) api_fail(AT_ERR_INVALID_ARGUMENT, "capacity ", capacity, " is negative");
    if (capacity > 0 && dims == nullptr) api_fail(AT_ERR_NULL_ARGUMENT, "dims is NULL but capacity is ", capacity);
    std::shared_lock<std::shared_mutex> lock(obj->mutex);
    check_tensor(obj->graph, tensor, "tensor");
    const auto& shape = obj->graph.tensor(tensor).shape;
    const int32_t ndim = static_cast<int32_t>(shape.size());
    *out_ndim = ndim;
    if (dims == nullptr) return;  // a rank query
    if (capacity < ndim)
      api_fail(AT_ERR_BUFFER_TOO_SMALL, "tensor '", obj->graph.tensor(tensor).name, "' has rank ", ndim,
               ", capacity is ", capacity);
    for (int32_t d = 0; d < ndim; ++d) dims[d] = shape[static_cast<size_t>(d)];
  });
}

AT_Status at_graph_tensor_info(AT_Graph* graph, int32_t tensor, AT_DType* out_dtype, int32_t* out_is_param) {
  return guard("at_graph_tensor_info", [&] {
    auto obj = get_graph(graph);
    std::shared_lock<std::shared_mutex> lock(obj->mutex);
    check_tensor(obj->graph, tensor, "tensor");
    const Tensor& t = obj->graph.tensor(tensor);
    if (out_dtype) *out_dtype = static_cast<AT_DType>(t.dtype);
    if (out_is_param) *out_is_param = t.is_param ? 1 : 0;
  });
}

}  // extern "C"
