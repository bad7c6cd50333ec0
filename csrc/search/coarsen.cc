#include "search/coarsen.h"

#include <map>
#include <numeric>
#include <sstream>
#include <tuple>

#include "util/error.h"

namespace autotile {

namespace {
struct UnionFind {
  std::vector<int> p;
  explicit UnionFind(int n) : p(n) { std::iota(p.begin(), p.end(), 0); }
  int find(int x) {
    while (p[x] != x) x = p[x] = p[p[x]];
    return x;
  }
  void join(int a, int b) {
    a = find(a), b = find(b);
    if (a != b) p[std::max(a, b)] = std::min(a, b);
  }
};

std::vector<int> parse_inplace(const Node& node) {
  std::vector<int> idx;
  std::stringstream ss(node.attrs.at("__inplace__"));
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      idx.push_back(std::stoi(item));
    } catch (...) {
      fail("node '", node.name, "': attr __inplace__ '", node.attrs.at("__inplace__"),
           "' must be comma-separated input indices");
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

Coarsening coarsen(const Graph& g, const std::vector<char>& elementwise) {
  const int T = g.num_tensors(), N = g.num_nodes();
  UnionFind groups(T + N);  // tensors 0..T-1, nodes T..T+N-1
  UnionFind tie(T), share(N);
  auto node_el = [T](NodeId n) { return T + n; };

  for (TensorId t = 0; t < T; ++t)
    if (g.tensor(t).gradient != kNone) groups.join(t, g.tensor(t).gradient);
  std::map<std::string, std::vector<NodeId>> steps;
  for (NodeId n = 0; n < N; ++n) {
    const Node& node = g.node(n);
    if (node.forward_node != kNone) groups.join(node_el(n), node_el(node.forward_node));
    if (node.role == NodeRole::kBackward && node.forward_node == kNone)
      for (TensorId o : node.outputs)
        if (g.tensor(o).gradient_of != kNone) groups.join(node_el(n), o);
    if (elementwise[n])
      for (TensorId in : node.inputs) {
        NodeId p = g.tensor(in).producer;
        if (p != kNone && elementwise[p]) groups.join(node_el(n), node_el(p));
      }
    auto ts = node.attrs.find("__timestep_group__");
    if (ts != node.attrs.end()) steps[ts->second].push_back(n);
    if (node.role == NodeRole::kUpdate) {
      std::vector<int> pair(node.outputs.size(), -1);
      if (node.attrs.count("__inplace__")) {
        pair = parse_inplace(node);
      } else {
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
        TensorId a = node.outputs[o], b = node.inputs[pair[o]];
        if (g.tensor(a).shape != g.tensor(b).shape)
          fail("node '", node.name, "': output '", g.tensor(a).name, "' ", shape_str(g.tensor(a).shape),
               " updates input '", g.tensor(b).name, "' of another shape ", shape_str(g.tensor(b).shape));
        tie.join(a, b);
        groups.join(a, b);
      }
    }
  }
  for (auto& [key, members] : steps) {
    std::map<std::tuple<std::string, std::string>, NodeId> first;
    for (NodeId n : members) {
      groups.join(node_el(n), node_el(members[0]));
      const Node& node = g.node(n);
      auto it = first.emplace(std::make_tuple(node.op, node.tdl), n).first;
      NodeId rep = it->second;
      if (rep == n) continue;
      share.join(n, rep);
      const Node& r = g.node(rep);
      for (size_t o = 0; o < node.outputs.size() && o < r.outputs.size(); ++o)
        if (g.tensor(node.outputs[o]).shape == g.tensor(r.outputs[o]).shape) tie.join(node.outputs[o], r.outputs[o]);
    }
  }
  // Tied tensors are one DP variable: keep them in one group.
  for (TensorId t = 0; t < T; ++t) groups.join(t, tie.find(t));

  Coarsening c;
  std::vector<int> id(T + N, -1);
  auto group_of = [&](int el) {
    int r = groups.find(el);
    if (id[r] < 0) id[r] = c.num_groups++;
    return id[r];
  };
  for (NodeId n = 0; n < N; ++n) c.node_group.push_back(group_of(node_el(n)));
  for (TensorId t = 0; t < T; ++t) c.tensor_group.push_back(group_of(t));
  for (TensorId t = 0; t < T; ++t) c.tensor_tie.push_back(tie.find(t));
  for (NodeId n = 0; n < N; ++n) c.node_share.push_back(share.find(n));
  return c;
}

}  // namespace autotile
