// The graph IR of the core: dense ids, per-node and per-tensor records, no pointers.
//
// A Graph is a bipartite dataflow graph: Tensors (static shape and dtype) and Nodes (one
// operator application each) reading and writing tensors by id. Training graphs carry two
// extra relations that coarsening needs (Tofu Sec 5.1): which forward node a backward node
// was generated for, and which tensor is the gradient of which.
//
// Every mutating call validates its arguments and throws autotile::Error naming the node
// or tensor at fault, so nothing a user passes through the bindings can corrupt the graph.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace autotile {

using TensorId = int32_t;
using NodeId = int32_t;
constexpr int32_t kNone = -1;

/// \brief What a node does in a training step.
enum class NodeRole : uint8_t { kForward = 0, kBackward, kUpdate };

/// \brief A tensor: static shape, dtype, its producer and consumers.
struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  NodeId producer = kNone;        ///< kNone for graph inputs (data, weights)
  std::vector<NodeId> consumers;  ///< one entry per use (a node reading it twice appears twice)
  TensorId gradient = kNone;      ///< id of this tensor's gradient, if any
  TensorId gradient_of = kNone;   ///< inverse of `gradient`
  bool is_param = false;          ///< a trainable weight (replicated by data parallelism)
  bool is_output = false;         ///< a result of the graph (kept alive to the end)

  /// \brief Number of elements (1 for a scalar).
  int64_t num_elements() const;
  /// \brief Size in bytes.
  int64_t bytes() const { return num_elements() * dtype_size(dtype); }
};

/// \brief One operator application.
struct Node {
  std::string name;
  std::string op;
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  std::map<std::string, std::string> attrs;
  std::string tdl;               ///< TDL description text (docs/tdl.md); empty if none
  NodeRole role = NodeRole::kForward;
  NodeId forward_node = kNone;   ///< for backward nodes: the forward node they differentiate
};

/// \brief A dataflow graph with dense ids.
class Graph {
 public:
  /// \brief Adds a tensor; names must be unique and dims positive.
  TensorId add_tensor(const std::string& name, const std::vector<int64_t>& shape, DType dtype,
                      bool is_param = false);
  /// \brief Adds a node reading `inputs` and producing `outputs` (each output has one producer).
  NodeId add_node(const std::string& name, const std::string& op, const std::vector<TensorId>& inputs,
                  const std::vector<TensorId>& outputs, const std::string& tdl = "",
                  NodeRole role = NodeRole::kForward);
  /// \brief Sets one attribute of a node.
  void set_attr(NodeId node, const std::string& key, const std::string& value);
  /// \brief Marks `node` as a backward node generated for `forward_node`.
  void set_backward_of(NodeId node, NodeId forward_node);
  /// \brief Records that `grad` is the gradient of `tensor`.
  void set_gradient(TensorId tensor, TensorId grad);
  /// \brief Marks a tensor as a result of the graph (loss, gradient, updated weight).
  void mark_output(TensorId tensor);
  /// \brief Sets the role of a node (forward, backward, update).
  void set_role(NodeId node, NodeRole role);

  int32_t num_tensors() const { return static_cast<int32_t>(tensors_.size()); }
  int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
  const Tensor& tensor(TensorId id) const;
  const Node& node(NodeId id) const;
  /// \brief Id of the tensor with this name; throws if absent.
  TensorId tensor_id(const std::string& name) const;
  /// \brief Id of the node with this name; kNone if absent.
  NodeId find_node(const std::string& name) const;

  /// \brief Nodes in a topological order (Kahn, ties by id); throws Error on a cycle.
  std::vector<NodeId> topo_order() const;
  /// \brief Checks the whole graph (ids, acyclicity); throws Error describing the first problem.
  void validate() const;

 private:
  void check_tensor(TensorId id, const char* what) const;
  void check_node(NodeId id, const char* what) const;

  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
  std::map<std::string, TensorId> tensor_by_name_;
  std::map<std::string, NodeId> node_by_name_;
};

/// \brief Whether node `n` sums the gradient pieces of a multi-use tensor: no forward node
/// of its own and only gradients as outputs (the autodiff may give it the forward role).
bool is_gradient_sum(const Graph& g, NodeId n);

/// \brief Formats a shape as "(2, 3)".
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace autotile
