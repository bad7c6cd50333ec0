#include "graph/inplace.h"

#include <sstream>
#include <string>

#include "util/error.h"

namespace autotile {

namespace {
std::vector<int> parse_inplace(const Node& node) {
  std::vector<int> idx;
  const std::string& text = node.attrs.at("__inplace__");
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      idx.push_back(std::stoi(item, &used));
      if (item.find_first_not_of(' ', used) != std::string::npos) throw 0;
    } catch (...) {
      fail("node '", node.name, "': attr __inplace__ '", text, "' must be comma-separated input indices");
    }
  }
  if (idx.size() != node.outputs.size())
    fail("node '", node.name, "': attr __inplace__ names ", idx.size(), " inputs for ", node.outputs.size(),
         " outputs");
  for (int i : idx)
    if (i < -1 || i >= static_cast<int>(node.inputs.size()))
      fail("node '", node.name, "': attr __inplace__ index ", i, " is not an input");
  return idx;
}
}  // namespace

std::vector<int> inplace_inputs(const Graph& g, NodeId n) {
  const Node& node = g.node(n);
  std::vector<int> pair(node.outputs.size(), -1);
  if (node.attrs.count("__inplace__")) {
    pair = parse_inplace(node);
  } else if (node.role == NodeRole::kUpdate) {
    std::vector<char> used(node.inputs.size(), 0);
    for (size_t o = 0; o < node.outputs.size(); ++o)
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const Tensor& in = g.tensor(node.inputs[i]);
        if (!used[i] && in.producer == kNone && in.shape == g.tensor(node.outputs[o]).shape) {
          used[i] = 1;
          pair[o] = static_cast<int>(i);
          break;
        }
      }
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (pair[o] < 0) continue;
    const Tensor& out = g.tensor(node.outputs[o]);
    const Tensor& in = g.tensor(node.inputs[pair[o]]);
    if (out.shape != in.shape)
      fail("node '", node.name, "': output '", out.name, "' ", shape_str(out.shape), " reuses input '", in.name,
           "' of another shape ", shape_str(in.shape));
  }
  return pair;
}

}  // namespace autotile
