#include "graph/graph.h"

#include <queue>
#include <sstream>

#include "util/error.h"

namespace autotile {

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

void Graph::check_tensor(TensorId id, const char* what) const {
  if (id < 0 || id >= num_tensors())
    fail(what, ": tensor id ", id, " out of range (graph has ", num_tensors(), " tensors)");
}

void Graph::check_node(NodeId id, const char* what) const {
  if (id < 0 || id >= num_nodes()) fail(what, ": node id ", id, " out of range (graph has ", num_nodes(), " nodes)");
}

TensorId Graph::add_tensor(const std::string& name, const std::vector<int64_t>& shape, DType dtype, bool is_param) {
  if (name.empty()) fail("add_tensor: empty tensor name");
  if (tensor_by_name_.count(name)) fail("add_tensor: duplicate tensor name '", name, "'");
  if (static_cast<int>(dtype) < 0 || static_cast<int>(dtype) > static_cast<int>(DType::kBFloat16))
    fail("add_tensor: tensor '", name, "' has an invalid dtype code ", static_cast<int>(dtype));
  if (shape.size() > 16) fail("add_tensor: tensor '", name, "' has rank ", shape.size(), " (at most 16)");
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) fail("add_tensor: tensor '", name, "' has shape ", shape_str(shape), " with a non-positive dim");
    if (n > (int64_t{1} << 50) / d) fail("add_tensor: tensor '", name, "' of shape ", shape_str(shape), " is too large");
    n *= d;
  }
  Tensor t;
  t.name = name;
  t.shape = shape;
  t.dtype = dtype;
  t.is_param = is_param;
  tensors_.push_back(std::move(t));
  TensorId id = num_tensors() - 1;
  tensor_by_name_[name] = id;
  return id;
}

NodeId Graph::add_node(const std::string& name, const std::string& op, const std::vector<TensorId>& inputs,
                       const std::vector<TensorId>& outputs, const std::string& tdl, NodeRole role) {
  if (name.empty()) fail("add_node: empty node name (op '", op, "')");
  if (node_by_name_.count(name)) fail("add_node: duplicate node name '", name, "'");
  if (op.empty()) fail("add_node: node '", name, "' has an empty op name");
  if (outputs.empty()) fail("add_node: node '", name, "' (op ", op, ") has no outputs");
  if (static_cast<int>(role) > static_cast<int>(NodeRole::kUpdate))
    fail("add_node: node '", name, "' has an invalid role code ", static_cast<int>(role));
  for (TensorId t : inputs) {
    if (t < 0 || t >= num_tensors())
      fail("add_node: node '", name, "' (op ", op, ") reads tensor id ", t, " which does not exist");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorId t = outputs[i];
    if (t < 0 || t >= num_tensors())
      fail("add_node: node '", name, "' (op ", op, ") writes tensor id ", t, " which does not exist");
    if (tensors_[t].producer != kNone)
      fail("add_node: tensor '", tensors_[t].name, "' written by node '", name, "' already has producer '",
           nodes_[tensors_[t].producer].name, "'");
    for (size_t j = 0; j < i; ++j)
      if (outputs[j] == t) fail("add_node: node '", name, "' lists output '", tensors_[t].name, "' twice");
  }
  NodeId id = num_nodes();
  Node n;
  n.name = name;
  n.op = op;
  n.inputs = inputs;
  n.outputs = outputs;
  n.tdl = tdl;
  n.role = role;
  nodes_.push_back(std::move(n));
  for (TensorId t : inputs) tensors_[t].consumers.push_back(id);
  for (TensorId t : outputs) tensors_[t].producer = id;
  node_by_name_[name] = id;
  return id;
}

void Graph::set_attr(NodeId node, const std::string& key, const std::string& value) {
  check_node(node, "set_attr");
  nodes_[node].attrs[key] = value;
}

void Graph::set_backward_of(NodeId node, NodeId forward_node) {
  check_node(node, "set_backward_of");
  check_node(forward_node, "set_backward_of");
  if (node == forward_node) fail("set_backward_of: node '", nodes_[node].name, "' cannot be its own backward");
  nodes_[node].forward_node = forward_node;
  nodes_[node].role = NodeRole::kBackward;
}

void Graph::set_gradient(TensorId tensor, TensorId grad) {
  check_tensor(tensor, "set_gradient");
  check_tensor(grad, "set_gradient");
  Tensor& t = tensors_[tensor];
  Tensor& g = tensors_[grad];
  if (tensor == grad) fail("set_gradient: tensor '", t.name, "' cannot be its own gradient");
  if (t.shape != g.shape)
    fail("set_gradient: gradient '", g.name, "' has shape ", shape_str(g.shape), " but tensor '", t.name, "' has ",
         shape_str(t.shape));
  t.gradient = grad;
  g.gradient_of = tensor;
}

void Graph::mark_output(TensorId tensor) {
  check_tensor(tensor, "mark_output");
  tensors_[tensor].is_output = true;
}

void Graph::set_role(NodeId node, NodeRole role) {
  check_node(node, "set_role");
  if (static_cast<int>(role) > static_cast<int>(NodeRole::kUpdate))
    fail("set_role: invalid role code ", static_cast<int>(role));
  nodes_[node].role = role;
}

const Tensor& Graph::tensor(TensorId id) const {
  check_tensor(id, "tensor");
  return tensors_[id];
}

const Node& Graph::node(NodeId id) const {
  check_node(id, "node");
  return nodes_[id];
}

TensorId Graph::tensor_id(const std::string& name) const {
  auto it = tensor_by_name_.find(name);
  if (it == tensor_by_name_.end()) fail("no tensor named '", name, "'");
  return it->second;
}

NodeId Graph::find_node(const std::string& name) const {
  auto it = node_by_name_.find(name);
  return it == node_by_name_.end() ? kNone : it->second;
}

std::vector<NodeId> Graph::topo_order() const {
  // Node u precedes v when v reads a tensor u writes. add_node forbids reading a tensor
  // before it exists but not wiring a later node's output back into an earlier node's input,
  // so cycles are possible and are reported here.
  std::vector<int> indegree(nodes_.size(), 0);
  for (size_t v = 0; v < nodes_.size(); ++v)
    for (TensorId t : nodes_[v].inputs)
      if (tensors_[t].producer != kNone) ++indegree[v];
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<NodeId>> ready;
  for (size_t v = 0; v < nodes_.size(); ++v)
    if (indegree[v] == 0) ready.push(static_cast<NodeId>(v));
  std::vector<NodeId> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    NodeId u = ready.top();
    ready.pop();
    order.push_back(u);
    for (TensorId t : nodes_[u].outputs)
      for (NodeId v : tensors_[t].consumers)
        if (--indegree[v] == 0) ready.push(v);
  }
  if (order.size() != nodes_.size()) {
    for (size_t v = 0; v < nodes_.size(); ++v)
      if (indegree[v] > 0) fail("graph has a cycle through node '", nodes_[v].name, "' (op ", nodes_[v].op, ")");
  }
  return order;
}

void Graph::validate() const {
  for (const Node& n : nodes_)
    for (TensorId t : n.inputs)
      if (t < 0 || t >= num_tensors()) fail("node '", n.name, "' reads a tensor id out of range");
  topo_order();
}

bool is_gradient_sum(const Graph& g, NodeId n) {
  const Node& node = g.node(n);
  if (node.forward_node != kNone || node.role == NodeRole::kUpdate || node.outputs.empty()) return false;
  for (TensorId o : node.outputs)
    if (g.tensor(o).gradient_of == kNone) return false;
  return true;
}

}  // namespace autotile
