// autotile C++ wrapper: RAII types over the C API (c_api.h), header-only, C++11.
//
//   autotile::api::Graph g;
//   int32_t x = g.add_tensor("x", {64, 512});
//   ...
//   autotile::api::Plan plan = g.search(8);              // throws autotile::api::Error
//   autotile::api::ExecGraph eg(g, plan);
//
// Every failing C call becomes an autotile::api::Error carrying the status and the
// message of at_last_error(). Handles are move-only and freed by the destructors.
#ifndef AUTOTILE_AUTOTILE_HPP_
#define AUTOTILE_AUTOTILE_HPP_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autotile/c_api.h"

namespace autotile {
namespace api {

/// \brief A failed C API call: its status and message.
class Error : public std::runtime_error {
 public:
  /// \brief An error with status `status` and message `message`.
  Error(AT_Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  /// \brief The C status code of the failed call.
  AT_Status status() const { return status_; }

 private:
  AT_Status status_;
};

/// \brief Throws Error if `status` is not AT_OK (message from at_last_error()).
inline void check(AT_Status status) {
  if (status != AT_OK) throw Error(status, at_last_error());
}

namespace detail {

/// \brief Move-only owner of one C handle, freed with `Free`.
template <typename H, AT_Status (*Free)(H*)>
class Handle {
 public:
  /// \brief Owns nothing.
  Handle() = default;
  /// \brief Takes ownership of `h`.
  explicit Handle(H* h) : h_(h) {}
  /// \brief Moves ownership; `o` owns nothing afterwards.
  Handle(Handle&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  /// \brief Frees the current handle, then takes `o`'s.
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = o.h_;
      o.h_ = nullptr;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  /// \brief Frees the handle.
  ~Handle() { reset(); }
  /// \brief The raw handle (still owned).
  H* get() const { return h_; }
  /// \brief Frees the handle now.
  void reset() {
    if (h_) Free(h_);  // cannot fail for a handle this object owns
    h_ = nullptr;
  }

 private:
  H* h_ = nullptr;
};

}  // namespace detail

/// \brief A half-open box of a tensor: lo[d] <= i < hi[d] per dimension.
struct Box {
  std::vector<int64_t> lo;  ///< first index per dimension
  std::vector<int64_t> hi;  ///< one past the last index per dimension
};

/// \brief Knobs of Graph::search (see AT_SearchOptions).
struct SearchOptions {
  bool replicate_fallback = false;  ///< ops without TDL run replicated
  std::vector<double> bandwidths;   ///< bytes/s per cut; empty: unweighted
  int64_t bruteforce_limit = 0;     ///< 0: the library's default
};

class Plan;

/// \brief A training graph under construction (owns an AT_Graph).
class Graph {
 public:
  /// \brief An empty graph.
  Graph() {
    AT_Graph* g = nullptr;
    check(at_graph_create(&g));
    h_ = Handle(g);
  }
  /// \brief Adds a tensor; `dtype` is a NumPy-style name ("float32", ...). Returns its id.
  int32_t add_tensor(const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype = "float32",
                     bool is_param = false) {
    AT_DType t;
    check(at_dtype_from_name(dtype.c_str(), &t));
    int32_t id = -1;
    check(at_graph_add_tensor(h_.get(), name.c_str(), static_cast<int32_t>(shape.size()), shape.data(), t,
                              is_param ? 1 : 0, &id));
    return id;
  }
  /// \brief Adds an op with its TDL description (docs/tdl.md); returns its id.
  int32_t add_op(const std::string& name, const std::string& op_type, const std::vector<int32_t>& inputs,
                 const std::vector<int32_t>& outputs, const std::string& tdl, AT_Role role = AT_ROLE_FORWARD) {
    int32_t id = -1;
    check(at_graph_add_op(h_.get(), name.c_str(), op_type.c_str(), static_cast<int32_t>(inputs.size()),
                          inputs.data(), static_cast<int32_t>(outputs.size()), outputs.data(), tdl.c_str(), role,
                          &id));
    return id;
  }
  /// \brief Marks op `node` as the backward op of `forward_node`.
  void set_backward_of(int32_t node, int32_t forward_node) {
    check(at_graph_set_backward_of(h_.get(), node, forward_node));
  }
  /// \brief Records that `grad` is the gradient of `tensor`.
  void set_gradient(int32_t tensor, int32_t grad) { check(at_graph_set_gradient(h_.get(), tensor, grad)); }
  /// \brief Marks a tensor as a graph result.
  void mark_output(int32_t tensor) { check(at_graph_mark_output(h_.get(), tensor)); }
  /// \brief Sets an op attribute.
  void set_attr(int32_t node, const std::string& key, const std::string& value) {
    check(at_graph_set_attr(h_.get(), node, key.c_str(), value.c_str()));
  }
  /// \brief Sets the role of an op.
  void set_role(int32_t node, AT_Role role) { check(at_graph_set_role(h_.get(), node, role)); }
  /// \brief Checks ids and acyclicity.
  void validate() { check(at_graph_validate(h_.get())); }
  /// \brief Number of tensors.
  int32_t num_tensors() const {
    int32_t n = 0;
    check(at_graph_num_tensors(h_.get(), &n));
    return n;
  }
  /// \brief Number of ops.
  int32_t num_nodes() const {
    int32_t n = 0;
    check(at_graph_num_nodes(h_.get(), &n));
    return n;
  }
  /// \brief Id of a tensor by name, or AT_NONE.
  int32_t find_tensor(const std::string& name) const {
    int32_t id = AT_NONE;
    check(at_graph_find_tensor(h_.get(), name.c_str(), &id));
    return id;
  }
  /// \brief Id of an op by name, or AT_NONE.
  int32_t find_node(const std::string& name) const {
    int32_t id = AT_NONE;
    check(at_graph_find_node(h_.get(), name.c_str(), &id));
    return id;
  }
  /// \brief Name of tensor `tensor`.
  std::string tensor_name(int32_t tensor) const {
    size_t len = 0;
    check(at_graph_tensor_name(h_.get(), tensor, nullptr, 0, &len));
    std::string s(len + 1, '\0');
    check(at_graph_tensor_name(h_.get(), tensor, &s[0], s.size(), &len));
    s.resize(len);
    return s;
  }
  /// \brief Name of op `node`.
  std::string node_name(int32_t node) const {
    size_t len = 0;
    check(at_graph_node_name(h_.get(), node, nullptr, 0, &len));
    std::string s(len + 1, '\0');
    check(at_graph_node_name(h_.get(), node, &s[0], s.size(), &len));
    s.resize(len);
    return s;
  }
  /// \brief Shape of tensor `tensor`.
  std::vector<int64_t> tensor_shape(int32_t tensor) const {
    int32_t ndim = 0;
    check(at_graph_tensor_shape(h_.get(), tensor, nullptr, 0, &ndim));
    std::vector<int64_t> dims(static_cast<size_t>(ndim));
    check(at_graph_tensor_shape(h_.get(), tensor, dims.data(), ndim, &ndim));
    return dims;
  }
  /// \brief Whether tensor `tensor` is a trainable weight.
  bool is_param(int32_t tensor) const {
    int32_t p = 0;
    check(at_graph_tensor_info(h_.get(), tensor, nullptr, &p));
    return p != 0;
  }
  /// \brief Runs the search for `devices` devices with `algorithm` ("tofu", "data", ...).
  inline Plan search(int32_t devices, const std::string& algorithm = "tofu",
                     const SearchOptions& options = SearchOptions()) const;
  /// \brief The raw handle (owned by this object).
  AT_Graph* handle() const { return h_.get(); }

 private:
  typedef detail::Handle<AT_Graph, at_graph_free> Handle;
  Handle h_;
};

/// \brief A search result (owns an AT_Plan).
class Plan {
 public:
  /// \brief Takes ownership of a raw plan handle.
  explicit Plan(AT_Plan* p) : h_(p) {}
  /// \brief Algorithm that made the plan.
  std::string algorithm() const {
    const char* s = nullptr;
    check(at_plan_algorithm(h_.get(), &s));
    return s;
  }
  /// \brief Number of devices.
  int32_t devices() const { return get_i(at_plan_devices); }
  /// \brief Number of cuts.
  int32_t num_cuts() const { return get_i(at_plan_num_cuts); }
  /// \brief Number of tensors tiled.
  int32_t num_tensors() const { return get_i(at_plan_num_tensors); }
  /// \brief Number of ops.
  int32_t num_nodes() const { return get_i(at_plan_num_nodes); }
  /// \brief Ways each cut splits, first cut first.
  std::vector<int32_t> factors() const {
    std::vector<int32_t> f(static_cast<size_t>(num_cuts()));
    for (size_t i = 0; i < f.size(); ++i) check(at_plan_factor(h_.get(), static_cast<int32_t>(i), &f[i]));
    return f;
  }
  /// \brief Bytes moved by each cut.
  std::vector<double> cut_costs() const {
    std::vector<double> c(static_cast<size_t>(num_cuts()));
    for (size_t i = 0; i < c.size(); ++i) check(at_plan_cut_cost(h_.get(), static_cast<int32_t>(i), &c[i]));
    return c;
  }
  /// \brief Bytes moved per training step.
  double total_bytes() const { return get_d(at_plan_total_bytes); }
  /// \brief Cost weighted by per-cut bandwidths.
  double weighted_cost() const { return get_d(at_plan_weighted_cost); }
  /// \brief Seconds the search took.
  double search_seconds() const { return get_d(at_plan_search_seconds); }
  /// \brief Tiling of `tensor` at `cut`.
  std::string tiling(int32_t tensor, int32_t cut) const {
    const char* s = nullptr;
    check(at_plan_tiling(h_.get(), tensor, cut, &s));
    return s;
  }
  /// \brief Tilings of `tensor` at every cut, space separated ("split(0) replicate").
  std::string tiling(int32_t tensor) const {
    std::string out;
    for (int32_t c = 0, n = num_cuts(); c < n; ++c) out += (c ? " " : "") + tiling(tensor, c);
    return out;
  }
  /// \brief Strategy of op `node` at `cut`.
  std::string strategy(int32_t node, int32_t cut) const {
    const char* s = nullptr;
    check(at_plan_strategy(h_.get(), node, cut, &s));
    return s;
  }
  /// \brief The raw handle (owned by this object).
  AT_Plan* handle() const { return h_.get(); }

 private:
  int32_t get_i(AT_Status (*f)(AT_Plan*, int32_t*)) const {
    int32_t v = 0;
    check(f(h_.get(), &v));
    return v;
  }
  double get_d(AT_Status (*f)(AT_Plan*, double*)) const {
    double v = 0;
    check(f(h_.get(), &v));
    return v;
  }
  detail::Handle<AT_Plan, at_plan_free> h_;
};

inline Plan Graph::search(int32_t devices, const std::string& algorithm, const SearchOptions& options) const {
  AT_SearchOptions o;
  check(at_search_options_init(&o));
  o.replicate_fallback = options.replicate_fallback ? 1 : 0;
  o.bandwidths = options.bandwidths.empty() ? nullptr : options.bandwidths.data();
  o.num_bandwidths = static_cast<int32_t>(options.bandwidths.size());
  o.bruteforce_limit = options.bruteforce_limit;
  AT_Plan* p = nullptr;
  check(at_search(h_.get(), devices, algorithm.c_str(), &o, &p));
  return Plan(p);
}

/// \brief One op of an execution graph, copied out of the C API.
struct ExecOp {
  AT_OpKind kind = AT_OP_COMPUTE;  ///< compute or MultiFetch
  int32_t device = 0;              ///< device running it
  int32_t node = -1;               ///< training-graph op it computes or fetches for
  bool accumulate = false;         ///< fetch: reduce (zero, then add the pieces)
  int64_t bytes_moved = 0;         ///< bytes read from other devices
  std::vector<int32_t> inputs;     ///< compute: buffer per op input (-1: not read)
  std::vector<int32_t> outputs;    ///< buffers written
  std::vector<int32_t> deps;       ///< ops that must finish first
  std::vector<int32_t> piece_src;  ///< fetch: source buffer of each piece
  std::vector<Box> piece_region;   ///< fetch: region of each piece (absolute coordinates)
};

/// \brief One buffer of an execution graph, copied out of the C API.
struct ExecBuffer {
  int32_t device = 0;                   ///< device holding it
  int32_t tensor = -1;                  ///< training-graph tensor it holds part of
  AT_BufferRole role = AT_BUFFER_TILE;  ///< tile, raw output or assembled region
  bool partial = false;                 ///< holds a partial sum
  int32_t producer = -1;                ///< op writing it; -1: a preloaded graph input
  int64_t bytes = 0;                    ///< size
  int64_t offset = -1;                  ///< byte offset in the device arena
  Box box;                              ///< the region of the tensor it holds
};

/// \brief A per-device execution graph (owns an AT_ExecGraph).
class ExecGraph {
 public:
  /// \brief Builds the execution graph of `graph` under `plan`.
  ExecGraph(const Graph& graph, const Plan& plan, bool control_deps = true) {
    AT_ExecGraph* e = nullptr;
    check(at_exec_build(graph.handle(), plan.handle(), control_deps ? 0u : AT_EXEC_NO_CONTROL_DEPS, &e));
    h_ = Handle(e);
  }
  /// \brief Number of devices.
  int32_t devices() const { return get_i(at_exec_num_devices); }
  /// \brief Number of ops.
  int32_t num_ops() const { return get_i(at_exec_num_ops); }
  /// \brief Number of buffers.
  int32_t num_buffers() const { return get_i(at_exec_num_buffers); }
  /// \brief Ops of `device` in execution order.
  std::vector<int32_t> schedule(int32_t device) const {
    const int32_t* ops = nullptr;
    int32_t n = 0;
    check(at_exec_schedule(h_.get(), device, &ops, &n));
    return std::vector<int32_t>(ops, ops + n);
  }
  /// \brief Op `op` with its buffers, dependencies and pieces.
  ExecOp op(int32_t op) const {
    ExecOp o;
    int32_t acc = 0;
    check(at_exec_op(h_.get(), op, &o.kind, &o.device, &o.node, &acc, &o.bytes_moved));
    o.accumulate = acc != 0;
    o.inputs = ids(at_exec_op_inputs, op);
    o.outputs = ids(at_exec_op_outputs, op);
    o.deps = ids(at_exec_op_deps, op);
    int32_t n = 0;
    check(at_exec_op_num_pieces(h_.get(), op, &n));
    for (int32_t i = 0; i < n; ++i) {
      int32_t src = -1, ndim = 0;
      check(at_exec_op_piece(h_.get(), op, i, &src, nullptr, nullptr, 0, &ndim));
      Box b;
      b.lo.resize(static_cast<size_t>(ndim));
      b.hi.resize(static_cast<size_t>(ndim));
      check(at_exec_op_piece(h_.get(), op, i, &src, b.lo.data(), b.hi.data(), ndim, &ndim));
      o.piece_src.push_back(src);
      o.piece_region.push_back(b);
    }
    return o;
  }
  /// \brief Buffer `buffer` with its box.
  ExecBuffer buffer(int32_t buffer) const {
    ExecBuffer b;
    int32_t partial = 0, ndim = 0;
    check(at_exec_buffer(h_.get(), buffer, &b.device, &b.tensor, &b.role, &partial, &b.producer, &b.bytes,
                         &b.offset));
    b.partial = partial != 0;
    check(at_exec_buffer_box(h_.get(), buffer, nullptr, nullptr, 0, &ndim));
    b.box.lo.resize(static_cast<size_t>(ndim));
    b.box.hi.resize(static_cast<size_t>(ndim));
    check(at_exec_buffer_box(h_.get(), buffer, b.box.lo.data(), b.box.hi.data(), ndim, &ndim));
    return b;
  }
  /// \brief Buffer of `device`'s tile of `tensor`.
  int32_t tile(int32_t tensor, int32_t device) const {
    int32_t b = -1;
    check(at_exec_tile(h_.get(), tensor, device, &b));
    return b;
  }
  /// \brief Arena bytes of `device`.
  int64_t arena_bytes(int32_t device) const { return get_l(at_exec_arena_bytes, device); }
  /// \brief Peak live bytes of `device`.
  int64_t live_peak_bytes(int32_t device) const { return get_l(at_exec_live_peak_bytes, device); }
  /// \brief Bytes `device` receives per step.
  int64_t bytes_received(int32_t device) const { return get_l(at_exec_bytes_received, device); }
  /// \brief Bytes moved between devices per step.
  int64_t bytes_moved() const {
    int64_t v = 0;
    check(at_exec_bytes_moved(h_.get(), &v));
    return v;
  }
  /// \brief The raw handle (owned by this object).
  AT_ExecGraph* handle() const { return h_.get(); }

 private:
  typedef detail::Handle<AT_ExecGraph, at_exec_free> Handle;
  int32_t get_i(AT_Status (*f)(AT_ExecGraph*, int32_t*)) const {
    int32_t v = 0;
    check(f(h_.get(), &v));
    return v;
  }
  int64_t get_l(AT_Status (*f)(AT_ExecGraph*, int32_t, int64_t*), int32_t device) const {
    int64_t v = 0;
    check(f(h_.get(), device, &v));
    return v;
  }
  std::vector<int32_t> ids(AT_Status (*f)(AT_ExecGraph*, int32_t, const int32_t**, int32_t*), int32_t op) const {
    const int32_t* p = nullptr;
    int32_t n = 0;
    check(f(h_.get(), op, &p, &n));
    return std::vector<int32_t>(p, p + n);
  }
  Handle h_;
};

}  // namespace api
}  // namespace autotile

#endif  // AUTOTILE_AUTOTILE_HPP_
