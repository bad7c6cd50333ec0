#include "search/coarsen.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string_view>
#include <unordered_map>
#include <numeric>
#include <sstream>
#include <tuple>

#include "graph/inplace.h"
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

// Nodes per value of attr `__joint_strategy__`, each with its backward nodes, in the order of
// their first node (a forward node precedes its backward nodes).
std::vector<std::vector<NodeId>> joint_strategies(const Graph& g) {
  std::vector<std::vector<NodeId>> joint;
  std::unordered_map<std::string_view, int> index;
  auto id = [&](const std::string& key) {
    auto [pos, fresh] = index.emplace(key, static_cast<int>(joint.size()));
    if (fresh) joint.emplace_back();
    return pos->second;
  };
  std::vector<int> own(g.num_nodes(), -1);  // node -> the joint strategy its own attr names
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    int j = -1;
    auto it = node.attrs.find("__joint_strategy__");
    if (it != node.attrs.end()) {
      j = own[n] = id(it->second);
    } else if (node.forward_node != kNone) {  // a backward node joins its forward node's
      const auto& fa = g.node(node.forward_node).attrs;
      if (node.forward_node < n)
        j = own[node.forward_node];
      else if ((it = fa.find("__joint_strategy__")) != fa.end())
        j = id(it->second);
    }
    if (j >= 0) joint[j].push_back(n);
  }
  return joint;
}

// Whether nodes a and b offer the same split variables (option names; a list has no repeats).
bool same_names(const std::vector<NodeOption>& a, const std::vector<NodeOption>& b) {
  if (a.size() != b.size()) return false;
  for (const NodeOption& o : a)
    if (std::none_of(b.begin(), b.end(), [&](const NodeOption& x) { return x.name == o.name; })) return false;
  return true;
}

bool joint_enabled() {
  const char* env = std::getenv("AUTOTILE_SEARCH_JOINT");
  return !(env && std::string(env) == "off");
}

}  // namespace

CoarsenBase coarsen_base(const Graph& g) {
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
    if (is_gradient_sum(g, n)) {
      for (TensorId o : node.outputs) groups.join(node_el(n), o);
      // The sum of a timestep tensor's gradients is part of that step (the autodiff does not
      // mark it): it joins the step's group, keyed by the forward producer and output index.
      for (TensorId o : node.outputs) {
        if (node.attrs.count("__timestep_group__")) break;
        TensorId f = g.tensor(o).gradient_of;
        NodeId p = g.tensor(f).producer;
        if (p == kNone) continue;
        auto pts = g.node(p).attrs.find("__timestep_group__");
        if (pts == g.node(p).attrs.end()) continue;
        const auto& outs = g.node(p).outputs;
        size_t idx = std::find(outs.begin(), outs.end(), f) - outs.begin();
        steps[pts->second + "|grad_sum" + std::to_string(idx)].push_back(n);
        break;
      }
    }
    auto ts = node.attrs.find("__timestep_group__");
    if (ts != node.attrs.end()) steps[ts->second].push_back(n);
    if (node.role == NodeRole::kUpdate) {
      std::vector<int> pair = inplace_inputs(g, n);
      for (size_t o = 0; o < node.outputs.size(); ++o) {
        if (pair[o] < 0) continue;
        TensorId a = node.outputs[o], b = node.inputs[pair[o]];
        tie.join(a, b);
        groups.join(a, b);
      }
    }
  }
  for (auto& [key, members] : steps) {
    // Steps share a strategy when they run the same op on the same shapes (a step with other
    // shapes may lack the others' strategies: sharing would make the cut infeasible).
    std::map<std::tuple<std::string, std::string, std::vector<Shape>>, NodeId> first;
    for (NodeId n : members) {
      groups.join(node_el(n), node_el(members[0]));
      const Node& node = g.node(n);
      std::vector<Shape> shapes;
      for (const auto* ts : {&node.inputs, &node.outputs})
        for (TensorId t : *ts) shapes.push_back(g.tensor(t).shape);
      auto it = first.emplace(std::make_tuple(node.op, node.tdl, std::move(shapes)), n).first;
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
  CoarsenBase b;
  b.groups = std::move(groups.p);
  b.tie = std::move(tie.p);
  b.share = std::move(share.p);
  b.joint = joint_strategies(g);
  return b;
}

Coarsening coarsen(const Graph& g, const std::vector<char>& elementwise,
                   const std::vector<std::vector<NodeOption>>* options, const CoarsenBase* base) {
  const int T = g.num_tensors(), N = g.num_nodes();
  CoarsenBase own;
  if (!base) own = coarsen_base(g), base = &own;
  // The base's classes, then the joins that depend on the cut (element-wise chains and joint
  // strategies): the classes and their roots (smallest members) are those of joining all at once.
  UnionFind groups(0), tie(0), share(0);
  groups.p = base->groups, tie.p = base->tie, share.p = base->share;
  auto node_el = [T](NodeId n) { return T + n; };
  for (NodeId n = 0; n < N; ++n)
    if (elementwise[n])
      for (TensorId in : g.node(n).inputs) {
        NodeId p = g.tensor(in).producer;
        if (p != kNone && elementwise[p]) groups.join(node_el(n), node_el(p));
      }
  if (options && joint_enabled()) {
    // One strategy for the whole joint group, only where every member offers the same split
    // variables (a value some member lacks would be infeasible for the group).
    for (const std::vector<NodeId>& members : base->joint) {
      const auto& first = (*options)[members[0]];
      if (members.size() < 2 || first.size() < 2) continue;
      if (!std::all_of(members.begin(), members.end(), [&](NodeId n) { return same_names((*options)[n], first); }))
        continue;
      for (NodeId n : members) {
        share.join(n, members[0]);
        groups.join(node_el(n), node_el(members[0]));
      }
    }
  }

  Coarsening c;
  std::vector<int> id(T + N, -1);
  auto group_of = [&](int el) {
    int r = groups.find(el);
    if (id[r] < 0) id[r] = c.num_groups++;
    return id[r];
  };
  c.node_group.reserve(N);
  c.tensor_group.reserve(T);
  for (NodeId n = 0; n < N; ++n) c.node_group.push_back(group_of(node_el(n)));
  for (TensorId t = 0; t < T; ++t) c.tensor_group.push_back(group_of(t));
  c.tensor_tie.reserve(T);
  c.node_share.reserve(N);
  for (TensorId t = 0; t < T; ++t) c.tensor_tie.push_back(tie.find(t));
  for (NodeId n = 0; n < N; ++n) c.node_share.push_back(share.find(n));
  return c;
}

}  // namespace autotile
