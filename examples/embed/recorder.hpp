// A thin layer over autotile::api::Graph that remembers what the example put into the
// graph, so it can write the graph (and its plan) as JSON for tests/capi to replan in Python.
#pragma once
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <autotile/autotile.hpp>

namespace embed {

/// \brief One op as added (tensor ids, TDL, role, forward op, attributes).
struct OpRecord {
  std::string name, op, tdl;
  std::vector<int32_t> inputs, outputs;
  AT_Role role = AT_ROLE_FORWARD;
  int32_t backward_of = -1;
  std::vector<std::pair<std::string, std::string>> attrs;
};

/// \brief Builds an autotile graph and records every call.
class GraphRecorder {
 public:
  /// \brief Adds a float32 tensor.
  int32_t tensor(const std::string& name, const std::vector<int64_t>& shape, bool is_param = false) {
    int32_t id = graph.add_tensor(name, shape, "float32", is_param);
    ids_[name] = id;
    return id;
  }
  /// \brief Id of a tensor added before.
  int32_t id(const std::string& name) const { return ids_.at(name); }
  /// \brief Adds an op reading/writing tensors by name; returns its id.
  int32_t op(const std::string& name, const std::string& type, const std::vector<std::string>& inputs,
             const std::vector<std::string>& outputs, const std::string& tdl, AT_Role role = AT_ROLE_FORWARD,
             const std::vector<std::pair<std::string, std::string>>& attrs = {}) {
    OpRecord r{name, type, tdl, {}, {}, role, -1, attrs};
    for (const auto& n : inputs) r.inputs.push_back(id(n));
    for (const auto& n : outputs) r.outputs.push_back(id(n));
    int32_t nid = graph.add_op(name, type, r.inputs, r.outputs, tdl, role);
    for (const auto& kv : attrs) graph.set_attr(nid, kv.first, kv.second);
    op_ids_[name] = nid;
    ops.push_back(r);
    return nid;
  }
  /// \brief A backward op of forward op `forward`.
  int32_t backward(const std::string& name, const std::string& type, const std::vector<std::string>& inputs,
                   const std::vector<std::string>& outputs, const std::string& tdl, const std::string& forward) {
    int32_t nid = op(name, type, inputs, outputs, tdl, AT_ROLE_BACKWARD);
    graph.set_backward_of(nid, op_ids_.at(forward));
    ops.back().backward_of = op_ids_.at(forward);
    return nid;
  }
  /// \brief Records that `grad` is the gradient of `tensor`.
  void gradient(const std::string& tensor, const std::string& grad) {
    graph.set_gradient(id(tensor), id(grad));
    gradients.emplace_back(id(tensor), id(grad));
  }
  /// \brief Marks a tensor as a graph result.
  void output(const std::string& tensor) {
    graph.mark_output(id(tensor));
    outputs.push_back(id(tensor));
  }

  autotile::api::Graph graph;                           ///< the graph being built
  std::vector<OpRecord> ops;                            ///< ops in id order
  std::vector<std::pair<int32_t, int32_t>> gradients;   ///< (tensor, gradient)
  std::vector<int32_t> outputs;                         ///< marked outputs

 private:
  std::map<std::string, int32_t> ids_, op_ids_;
};

/// \brief `text` as a JSON string literal.
inline std::string json_str(const std::string& text) {
  std::ostringstream os;
  os << '"';
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      os << '\\' << c;
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      os << "\\u00" << hex[c >> 4] << hex[c & 15];
    } else {
      os << c;
    }
  }
  os << '"';
  return os.str();
}

/// \brief A JSON array of anything streamable (numbers) or of strings (quote = true).
template <typename T>
std::string json_list(const std::vector<T>& v) {
  std::ostringstream os;
  os.precision(17);
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
  return os.str();
}

/// \brief A JSON array of strings.
inline std::string json_strings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + json_str(v[i]);
  return out + "]";
}

}  // namespace embed
