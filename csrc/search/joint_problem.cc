#include "search/joint_problem.h"

#include <algorithm>

#include "search/coarsen.h"
#include "search/cost_model.h"
#include "search/cut_problem.h"
#include "search/node_prefix.h"
#include "search/pins.h"
#include "search/search_state.h"
#include "util/error.h"

namespace autotile {

namespace {

// A tensor's layout after some cuts: its shrunk shape, what each device holds, the tilings.
struct TensorPrefix {
  Shape shape;
  int held;
  std::vector<std::string> names;
};

// Most edge-cost entries the joint problem builds (16M doubles: 128 MB here, more in the ILP).
constexpr double kMaxJointCells = 1 << 24;

void check_size(size_t n, int max_values, const std::string& what) {
  if (n > static_cast<size_t>(max_values))
    fail("the joint problem would give ", what, " ", n, " sequences of choices (limit ", max_values,
         "): too many cuts or too large a graph for the joint program");
}

}  // namespace

JointProblem joint_problem(const Graph& g, int devices, const SearchOptions& options, int max_values) {
  g.validate();
  JointProblem jp;
  jp.factors = cut_factors(devices, options.factors);
  const int T = g.num_tensors(), N = g.num_nodes();
  StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  SearchState s = SearchState::initial(g);  // node_in/node_out are overwritten per prefix below
  LayoutPool& pool = *s.pool;

  std::vector<std::vector<TensorPrefix>> tp(T);
  for (TensorId t = 0; t < T; ++t) tp[t].push_back({g.tensor(t).shape, s.held[t], {}});
  std::vector<std::vector<NodePrefix>> np(N);
  for (NodeId n = 0; n < N; ++n) np[n].push_back({s.node_in[n], s.node_out[n], s.need[n], s.make[n], {}});

  std::vector<char> elementwise0(N, 0);  // the element-wise flags of the first cut decide the ties
  for (size_t cut = 0; cut < jp.factors.size(); ++cut) {
    const int k = jp.factors[cut];
    for (TensorId t = 0; t < T; ++t) {
      std::vector<TensorPrefix> next;
      for (const TensorPrefix& p : tp[t]) {
        std::vector<Tiling> cand{Tiling::replicate()};
        for (size_t d = 0; d < p.shape.size(); ++d)
          if (p.shape[d] % k == 0) cand.push_back(Tiling::split(static_cast<int>(d)));
        if (g.tensor(t).producer != kNone) cand.push_back(Tiling::partial());
        for (const Tiling& ti : cand) {
          TensorPrefix q{p.shape, pool.held(p.held, ti, k), p.names};
          if (ti.kind == Tiling::kSplit) q.shape[ti.dim] /= k;
          q.names.push_back(ti.str());
          next.push_back(std::move(q));
        }
      }
      check_size(next.size(), max_values, "tensor '" + g.tensor(t).name + "'");
      tp[t] = std::move(next);
    }
    // The options of a node depend only on its own shapes: state j holds every node's j-th
    // prefix (its last one where it has fewer), so one node_options call serves them all.
    size_t widest = 0;
    for (NodeId n = 0; n < N; ++n) widest = std::max(widest, np[n].size());
    std::vector<std::vector<NodePrefix>> next(N);
    for (size_t j = 0; j < widest; ++j) {
      use_prefix_shapes(np, j, &s);
      std::vector<char> elementwise;
      auto opts = node_options(g, s, k, static_cast<int>(cut), provider, PlanConstraint{}, options.replicate_fallback,
                               &elementwise);
      if (cut == 0 && j == 0) elementwise0 = elementwise;
      // Refuse before enumerating: each later prefix calls the strategy provider for every node.
      if (j == 0)
        for (NodeId n = 0; n < N; ++n)
          check_size(np[n].size() * opts[n].size(), max_values, "node '" + g.node(n).name + "' about");
      for (NodeId n = 0; n < N; ++n) {
        if (j >= np[n].size()) continue;
        for (const NodeOption& o : opts[n]) next[n].push_back(extend_prefix(g.node(n), np[n][j], o, k, pool));
        check_size(next[n].size(), max_values, "node '" + g.node(n).name + "'");
      }
    }
    np = std::move(next);
  }

  // Ties and shares as the search's coarsening makes them (updated weights tiled like the
  // weights, element-wise chains, merged timesteps): a tied class is one variable over the
  // tiling sequences every member can take; a share class one variable over strategy names.
  Coarsening c = coarsen(g, elementwise0);
  CutProblemData& d = jp.data;
  d.cut = static_cast<int>(jp.factors.size());
  d.k = devices;
  std::vector<int> tensor_var(T, -1);
  std::vector<std::vector<int>> held_of(T);  // [tensor][value of its variable] -> held layout
  for (TensorId rep = 0; rep < T; ++rep) {
    if (c.tensor_tie[rep] != rep) continue;
    std::vector<TensorId> members;
    for (TensorId t = 0; t < T; ++t)
      if (c.tensor_tie[t] == rep) members.push_back(t);
    std::vector<std::vector<std::string>> values;
    for (const TensorPrefix& p : tp[rep]) {
      std::vector<int> idx;
      for (TensorId t : members) {
        auto it = std::find_if(tp[t].begin(), tp[t].end(), [&](const TensorPrefix& q) { return q.names == p.names; });
        if (it == tp[t].end()) break;
        idx.push_back(static_cast<int>(it - tp[t].begin()));
      }
      if (idx.size() != members.size()) continue;
      for (size_t m = 0; m < members.size(); ++m) held_of[members[m]].push_back(tp[members[m]][idx[m]].held);
      values.push_back(p.names);
    }
    if (values.empty()) fail("tensor '", g.tensor(rep).name, "': the tensors tied to it share no tiling sequence");
    const int v = static_cast<int>(d.domain.size());
    for (TensorId t : members) tensor_var[t] = v;
    d.domain.push_back(static_cast<int>(values.size()));
    d.var_home.push_back(rep);
    jp.tensor_values.push_back(std::move(values));
  }
  d.node_var.assign(N, -1);
  d.node_var_option.assign(N, {});
  for (NodeId rep = 0; rep < N; ++rep) {
    if (c.node_share[rep] != rep) continue;
    std::vector<NodeId> members;
    for (NodeId n = 0; n < N; ++n)
      if (c.node_share[n] == rep) members.push_back(n);
    if (members.size() < 2) continue;
    std::vector<std::vector<std::string>> names;
    for (NodeId n : members)
      for (const NodePrefix& p : np[n])
        if (std::find(names.begin(), names.end(), p.names) == names.end()) names.push_back(p.names);
    const int v = static_cast<int>(d.domain.size());
    d.domain.push_back(static_cast<int>(names.size()));
    d.var_home.push_back(~rep);
    jp.tensor_values.emplace_back(names.size());  // a strategy variable holds no tilings
    for (NodeId n : members) {
      d.node_var[n] = v;
      for (const auto& seq : names) {
        int idx = -1;
        for (size_t o = 0; o < np[n].size(); ++o)
          if (np[n][o].names == seq) idx = static_cast<int>(o);
        d.node_var_option[n].push_back(idx);
      }
    }
  }
  jp.tensor_var = tensor_var;
  // The edge tables: refuse before allocating what no solver run here could take anyway.
  double cells = 0;
  for (NodeId n = 0; n < N; ++n) {
    const Node& node = g.node(n);
    for (TensorId t : node.inputs) cells += static_cast<double>(np[n].size()) * held_of[t].size();
    for (TensorId t : node.outputs) cells += static_cast<double>(np[n].size()) * held_of[t].size();
  }
  if (cells > kMaxJointCells)
    fail("the joint problem would hold ", cells, " edge cost entries (limit ", kMaxJointCells,
         "): too many cuts or too large a graph for the joint program");
  d.edge_var.resize(N);
  d.edge_cost.resize(N);
  jp.node_values.resize(N);
  for (NodeId n = 0; n < N; ++n) {
    const Node& node = g.node(n);
    const auto& opts = np[n];
    const size_t O = opts.size();
    d.num_options.push_back(static_cast<int>(O));
    for (const NodePrefix& p : opts) jp.node_values[n].push_back(p.names);
    for (size_t i = 0; i < node.inputs.size() + node.outputs.size(); ++i) {
      const bool input = i < node.inputs.size();
      const TensorId t = input ? node.inputs[i] : node.outputs[i - node.inputs.size()];
      const auto& held = held_of[t];
      const size_t D = held.size();
      std::vector<double> cost(O * D);
      for (size_t o = 0; o < O; ++o)
        for (size_t v = 0; v < D; ++v)
          cost[o * D + v] = input ? edge_bytes(g, t, pool, held[v], opts[o].need[i], jp.factors)
                                  : edge_bytes(g, t, pool, opts[o].make[i - node.inputs.size()], held[v], jp.factors);
      d.edge_var[n].push_back(tensor_var[t]);
      d.edge_cost[n].push_back(std::move(cost));
    }
  }
  return jp;
}

}  // namespace autotile
