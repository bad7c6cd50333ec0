#include "search/cut_problem.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "search/cost_model.h"
#include "util/error.h"
#include "util/name_list.h"

namespace autotile {

double CutProblem::node_cost(NodeId n, const std::vector<int>& value, int* best) const {
  double min_cost = kInfCost;
  int arg = -1;
  const auto& es = edges[n];
  const int num_opts = static_cast<int>(options[n].size());
  int only = -1;
  if (node_var[n] >= 0) {
    only = node_var_option[n][value[node_var[n]]];
    if (only < 0) {
      if (best) *best = -1;
      return kInfCost;
    }
  }
  for (int o = 0; o < num_opts; ++o) {
    if (only >= 0 && o != only) continue;
    double c = 0;
    for (const Edge& e : es) c += e.cost[o * domain[e.var] + value[e.var]];
    if (c < min_cost || arg < 0) {
      min_cost = c;
      arg = o;
    }
  }
  if (best) *best = arg;
  return min_cost;
}

namespace {

// Members of each class of a map from items to their classes' representatives (items
// 0..n-1, representatives among them), ascending: members(rep) lists the items of rep's class.
// A run of ids in a flat array.
struct Span {
  const int *b, *e;
  const int* begin() const { return b; }
  const int* end() const { return e; }
  bool empty() const { return b == e; }
  size_t size() const { return static_cast<size_t>(e - b); }
  int operator[](size_t i) const { return b[i]; }
};

struct Classes {
  std::vector<int> start, item;
  Span members(int rep) const { return Span{item.data() + start[rep], item.data() + start[rep + 1]}; }
};

Classes classes_of(const std::vector<int>& rep_of) {
  const int n = static_cast<int>(rep_of.size());
  Classes c;
  c.start.assign(n + 1, 0);
  for (int x = 0; x < n; ++x) ++c.start[rep_of[x] + 1];
  for (int r = 0; r < n; ++r) c.start[r + 1] += c.start[r];
  c.item.resize(n);
  std::vector<int> next(c.start.begin(), c.start.end() - 1);
  for (int x = 0; x < n; ++x) c.item[next[rep_of[x]]++] = x;
  return c;
}

// Hash of a list of ids (the key of a node's tables).
struct IdsHash {
  size_t operator()(const std::vector<int64_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t x : v) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string s;
  for (const Shape& x : shapes) s += (s.empty() ? "" : ", ") + shape_str(x);
  return s;
}

void check_strategy(const Graph& g, NodeId n, const Strategy& st, const std::vector<Shape>& in,
                    const std::vector<Shape>& out, int k) {
  const Node& node = g.node(n);
  auto bad = [&](const std::string& why) {
    fail("node '", node.name, "' (op ", node.op, "): strategy '", st.var, "' is malformed: ", why);
  };
  if (st.inputs.size() != node.inputs.size()) bad("it describes " + std::to_string(st.inputs.size()) + " inputs");
  if (st.outputs.size() != node.outputs.size()) bad("it describes " + std::to_string(st.outputs.size()) + " outputs");
  for (size_t i = 0; i < st.inputs.size(); ++i) {
    const InputNeed& need = st.inputs[i];
    if (need.replicate) continue;
    if (need.dim < 0 || need.dim >= static_cast<int>(in[i].size())) bad("input dim out of range");
    if (static_cast<int>(need.per_worker.size()) != k) bad("input needs " + std::to_string(k) + " worker intervals");
    for (const Interval& iv : need.per_worker)
      if (iv.hi < iv.lo) bad("empty interval");
  }
  for (size_t i = 0; i < st.outputs.size(); ++i) {
    const OutputMake& mk = st.outputs[i];
    if (!mk.partial && (mk.dim < 0 || mk.dim >= static_cast<int>(out[i].size()))) bad("output dim out of range");
  }
}
// The nodes that may also run whole (every group computing all of it) where that moves less,
// as XLA keeps them replicated: forward nodes that compute only from weights (a slice of a
// position table, a transposed weight) and, for a weight such a node reads, its update and
// the backward nodes that read only gradients and feed only that update (the gradient padded
// back to the table's shape). A table of 256 positions of which a sequence reads 16 then moves
// the 16 rows' gradient, not the whole updated table. Nothing that reads data or activations
// runs whole: that would trade the partitioning away. The whole option comes after the node's
// strategies, so a split of equal cost is kept.
std::vector<char> may_run_whole(const Graph& g) {
  const std::vector<NodeId> order = g.topo_order();
  std::vector<char> ok(g.num_nodes(), 0), weights_only(g.num_nodes(), 0);
  auto from_weights = [&](TensorId t) {
    NodeId p = g.tensor(t).producer;
    return p == kNone ? g.tensor(t).is_param : static_cast<bool>(weights_only[p]);
  };
  for (NodeId n : order) {
    const Node& node = g.node(n);
    if (node.role != NodeRole::kForward || node.attrs.count("__timestep_group__")) continue;
    bool w = true;
    for (TensorId t : node.inputs) w = w && from_weights(t);
    weights_only[n] = ok[n] = w;
  }
  for (NodeId n : order) {  // the updates of weights read by weights-only nodes
    const Node& node = g.node(n);
    if (node.role != NodeRole::kUpdate) continue;
    for (TensorId t : node.inputs)
      if (g.tensor(t).producer == kNone && g.tensor(t).is_param)
        for (NodeId c : g.tensor(t).consumers) ok[n] = ok[n] || weights_only[c];
  }
  for (NodeId n : order) {  // the gradient's last steps into such an update
    const Node& node = g.node(n);
    if (node.role != NodeRole::kBackward || node.attrs.count("__timestep_group__") || node.outputs.empty()) continue;
    bool grads = true;
    for (TensorId t : node.inputs) {
      NodeId p = g.tensor(t).producer;
      grads = grads && p != kNone && g.node(p).role != NodeRole::kForward;
    }
    for (TensorId t : node.outputs)
      for (NodeId c : g.tensor(t).consumers) grads = grads && g.node(c).role == NodeRole::kUpdate && ok[c];
    ok[n] = grads;
  }
  return ok;
}
}  // namespace

NodeFacts node_facts(const Graph& g) {
  NodeFacts f;
  f.may_run_whole = may_run_whole(g);
  f.no_split.assign(g.num_nodes(), nullptr);
  f.tdl_id.assign(g.num_nodes(), -1);
  std::unordered_map<std::string, int> ids;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    auto it = node.attrs.find("__no_split__");
    if (it != node.attrs.end()) f.no_split[n] = &it->second;
    if (!node.tdl.empty()) f.tdl_id[n] = ids.emplace(node.tdl, static_cast<int>(ids.size())).first->second;
  }
  return f;
}

size_t OptionsMemo::KeyHash::operator()(const std::vector<int64_t>& v) const { return IdsHash()(v); }

namespace {
// Sets `o` to the option of running whole (keeping its storage).
void set_whole(NodeOption& o) {
  o.name = "replicate";
  o.whole = true;
  o.strategy.var.clear();
  o.strategy.reduction = false;
  o.strategy.inputs.clear();
  o.strategy.outputs.clear();
}
}  // namespace

std::vector<std::vector<NodeOption>> node_options(const Graph& g, const SearchState& s, int k, int cut,
                                                  const StrategyProvider& provider, const PlanConstraint& constraint,
                                                  bool replicate_fallback, std::vector<char>* elementwise,
                                                  OptionsMemo* memo) {
  const int N = g.num_nodes();
  std::vector<std::vector<NodeOption>> opts;
  if (memo) opts.swap(memo->spare);
  opts.resize(N);
  elementwise->assign(N, 0);
  NodeOption whole;
  set_whole(whole);
  NodeFacts own;
  const NodeFacts& facts = memo ? memo->facts : (own = node_facts(g));
  const std::vector<char>& whole_ok = facts.may_run_whole;
  std::vector<int64_t> key;
  OpStrategies asked;
  // Ids of equal option lists: by the strategies' entry in the memo, the node's __no_split__
  // list and whether it may run whole (a constraint may tell nodes apart: no ids then).
  const bool list_ids = memo && memo->tdl_provider && !constraint.allow_strategy;
  if (memo) memo->list_id.assign(N, -1);
  std::unordered_map<std::vector<int64_t>, int, IdsHash> lists;
  std::vector<int64_t> list_key;
  for (NodeId n = 0; n < N; ++n) {
    const Node& node = g.node(n);
    // The node's options are list[0, used): the slots after the last cut's are reused.
    std::vector<NodeOption>& list = opts[n];
    size_t used = 0;
    auto slot = [&]() -> NodeOption& {
      if (used == list.size()) list.emplace_back();
      return list[used];
    };
    auto add_whole = [&] {
      if (constraint.allow_strategy && !constraint.allow_strategy(n, whole, cut)) return;
      set_whole(slot());
      ++used;
    };
    const void* source = nullptr;  // the memo's strategies this node's options come from
    if (node.tdl.empty()) {
      if (!replicate_fallback)
        fail("node '", node.name, "' (op ", node.op,
             ") has no TDL description; pass replicate_fallback=True to run it replicated");
      add_whole();
      source = &whole;
    } else {
      const OpStrategies* st = &asked;
      if (memo && memo->tdl_provider) {
        key.assign({facts.tdl_id[n], k});
        for (const auto* shapes : {&s.node_in[n], &s.node_out[n]}) {
          key.push_back(static_cast<int64_t>(shapes->size()));
          for (const Shape& x : *shapes) {
            key.push_back(static_cast<int64_t>(x.size()));
            key.insert(key.end(), x.begin(), x.end());
          }
        }
        auto it = memo->strategies.find(key);
        if (it == memo->strategies.end())
          it = memo->strategies.emplace(key, provider(g, n, s.node_in[n], s.node_out[n], k)).first;
        st = &it->second;
        source = st;
      } else {
        asked = provider(g, n, s.node_in[n], s.node_out[n], k);
      }
      (*elementwise)[n] = st->elementwise;
      // Variables the op's kernel cannot run split along (attribute "__no_split__", a comma
      // list set by the lowering from the op's definition, e.g. channels of a grouped conv).
      const std::string* vetoed = facts.no_split[n];
      for (const Strategy& x : st->strategies) {
        if (vetoed && is_listed(*vetoed, x.var)) continue;
        // Partial outputs reduced by max, min or product (a split reduction of such a TDL):
        // the execution graph only sums partials and refuses these plans (exec_build.cc).
        bool non_sum_partial = false;
        for (const OutputMake& make : x.outputs) non_sum_partial |= make.partial && make.reducer != Reducer::kSum;
        if (non_sum_partial) continue;
        check_strategy(g, n, x, s.node_in[n], s.node_out[n], k);
        NodeOption& o = slot();
        o.name = x.var;
        o.whole = false;
        o.strategy = x;
        if (constraint.allow_strategy && !constraint.allow_strategy(n, o, cut)) continue;
        ++used;
      }
      // No dim of this op divides k ways (a bias of 8 on a 3-way cut): it runs replicated,
      // as a replicated op computes the same thing on every device (no error: the plan is
      // still valid, only redundant for this op).
      if (used == 0 || whole_ok[n]) add_whole();
    }
    // The constraint rules out every strategy (data parallelism at a Concat along the batch
    // dim of an unrolled RNN): with replicate_fallback the op runs replicated, reading whole
    // inputs however they are tiled.
    if (used == 0 && replicate_fallback) set_whole(slot()), ++used;
    list.resize(used);
    if (list_ids && source) {
      list_key.assign({reinterpret_cast<intptr_t>(source), reinterpret_cast<intptr_t>(facts.no_split[n]), whole_ok[n]});
      memo->list_id[n] = lists.emplace(list_key, static_cast<int>(lists.size())).first->second;
    }
    if (list.empty())
      fail("node '", node.name, "' (op ", node.op, "): no partition strategy ",
           constraint.name.empty() ? "" : "allowed by '" + constraint.name + "' ", "for a ", k,
           "-way cut (cut ", cut + 1, ") at input shapes ", shapes_str(s.node_in[n]), " and output shapes ",
           shapes_str(s.node_out[n]), "; pass replicate_fallback=True to run it replicated");
  }
  return opts;
}

CutProblem build_cut_problem(const Graph& g, const SearchState& s, int k, int cut,
                             std::vector<std::vector<NodeOption>> options, const Coarsening& c,
                             const PlanConstraint& constraint, const std::vector<int>* list_id,
                             std::vector<std::vector<CutProblem::Edge>>* spare_edges) {
  CutProblem p;
  if (spare_edges) p.edges.swap(*spare_edges);
  p.cut = cut;
  p.k = k;
  p.options = std::move(options);
  const int T = g.num_tensors(), N = g.num_nodes();

  // Tiling variables: one per class of tied tensors, by representative.
  const Classes classes = classes_of(c.tensor_tie);
  p.tensor_var.assign(T, -1);
  std::vector<Tiling> cand;
  for (int rep = 0; rep < T; ++rep) {
    const auto members = classes.members(rep);
    if (members.empty()) continue;
    // Among tilings of equal cost the search keeps the first. A data input (no producer, not a
    // parameter) costs nothing to lay out however it is tiled: list its splits first, which
    // hold 1/k of it where a replica holds all of it.
    bool produced = true, data_input = true;
    for (TensorId t : members) {
      produced = produced && g.tensor(t).producer != kNone;
      data_input = data_input && g.tensor(t).producer == kNone && !g.tensor(t).is_param;
    }
    cand.clear();  // (declared outside the loop: its storage is kept)
    if (!data_input) cand.push_back(Tiling::replicate());
    const size_t rank = s.tensor_shape[rep].size();
    for (size_t d = 0; d < rank; ++d) {
      bool ok = true;
      for (TensorId t : members) ok = ok && s.tensor_shape[t].size() == rank && s.tensor_shape[t][d] % k == 0;
      if (ok) cand.push_back(Tiling::split(static_cast<int>(d)));
    }
    if (data_input) cand.push_back(Tiling::replicate());
    if (produced) cand.push_back(Tiling::partial());
    std::vector<Tiling> dom;
    dom.reserve(cand.size());
    for (const Tiling& ti : cand) {
      bool ok = true;
      for (TensorId t : members) ok = ok && (!constraint.allow_tiling || constraint.allow_tiling(t, ti, cut));
      if (ok) dom.push_back(ti);
    }
    if (dom.empty()) {
      const Tensor& t = g.tensor(rep);
      fail("tensor '", t.name, "' ", shape_str(s.tensor_shape[rep]), ": no tiling ",
           constraint.name.empty() ? "" : "allowed by '" + constraint.name + "' ", "for a ", k, "-way cut (cut ",
           cut + 1, ")", constraint.explain ? constraint.explain(rep) : std::string());
    }
    int v = p.num_vars();
    p.domain.push_back(static_cast<int>(dom.size()));
    p.var_tilings.push_back(std::move(dom));
    p.var_names.emplace_back();
    p.var_home.push_back(rep);
    for (TensorId t : members) p.tensor_var[t] = v;
  }

  // Shared strategy variables (merged timesteps).
  const Classes shares = classes_of(c.node_share);
  p.node_var.assign(N, -1);
  p.node_var_option.resize(N);
  for (NodeId rep = 0; rep < N; ++rep) {
    const auto members = shares.members(rep);
    if (members.size() < 2) continue;
    std::vector<std::string> names;
    for (NodeId n : members)
      for (const NodeOption& o : p.options[n])
        if (std::find(names.begin(), names.end(), o.name) == names.end()) names.push_back(o.name);
    int v = p.num_vars();
    p.domain.push_back(static_cast<int>(names.size()));
    p.var_tilings.emplace_back();
    p.var_names.push_back(names);
    p.var_home.push_back(~rep);
    for (NodeId n : members) {
      p.node_var[n] = v;
      for (const std::string& name : names) {
        int idx = -1;
        for (size_t o = 0; o < p.options[n].size(); ++o)
          if (p.options[n][o].name == name) idx = static_cast<int>(o);
        p.node_var_option[n].push_back(idx);
      }
    }
  }

  // Edge cost tables, from the prefix layouts extended by each candidate (interned, so a
  // layout or a (held, need) price repeated across blocks or timesteps is computed once).
  LayoutPool& pool = *s.pool;
  // Each tensor's layout under each value of its variable (held_ids[held_at[t]...], -1: not yet).
  std::vector<int> held_at(T, -1), held_ids;
  auto held_of = [&](TensorId t) -> Span {
    const auto& tilings = p.var_tilings[p.tensor_var[t]];
    if (held_at[t] < 0) {
      held_at[t] = static_cast<int>(held_ids.size());
      for (const Tiling& ti : tilings) held_ids.push_back(pool.held(s.held[t], ti, k));
    }
    const int* b = held_ids.data() + held_at[t];
    return Span{b, b + tilings.size()};
  };
  std::vector<int> factors = s.factors;
  factors.push_back(k);
  const InputNeed whole_need;
  const OutputMake no_make;
  // A node's tables depend only on what its options need and make, the layouts its edges
  // start from and its tensors' candidate layouts and dtypes: nodes that agree on all of it
  // (the same op in every layer of a deep model) share tables, priced once. The key lists
  // exactly what LayoutPool::need/make and the pricing read.
  std::unordered_map<std::vector<int64_t>, std::vector<std::vector<double>>, IdsHash> priced;
  std::vector<int64_t> key;
  p.edges.resize(N);
  for (NodeId n = 0; n < N; ++n) {
    const Node& node = g.node(n);
    const auto& opts = p.options[n];
    const int O = static_cast<int>(opts.size());
    // Nodes of one option list (list_id) need and make alike: the id stands for the options.
    const int list = list_id ? (*list_id)[n] : -1;
    key.clear();
    key.push_back(O);
    key.push_back(static_cast<int64_t>(node.inputs.size()));
    key.push_back(static_cast<int64_t>(node.outputs.size()));
    key.push_back(list);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorId t = node.inputs[i];
      const Span held = held_of(t);
      key.push_back(s.need[n][i]);
      key.push_back(static_cast<int64_t>(g.tensor(t).dtype));
      key.push_back(static_cast<int64_t>(held.size()));
      key.insert(key.end(), held.begin(), held.end());
      for (int o = 0; o < O && list < 0; ++o) {
        const InputNeed& need = opts[o].whole ? whole_need : opts[o].strategy.inputs[i];
        key.push_back(need.replicate);
        key.push_back(need.read);
        if (need.replicate) continue;
        key.push_back(need.dim);
        key.push_back(static_cast<int64_t>(need.per_worker.size()));
        for (const Interval& iv : need.per_worker) key.push_back(iv.lo), key.push_back(iv.hi);
      }
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const TensorId t = node.outputs[i];
      const Span held = held_of(t);
      key.push_back(s.make[n][i]);
      key.push_back(static_cast<int64_t>(g.tensor(t).dtype));
      key.push_back(static_cast<int64_t>(held.size()));
      key.insert(key.end(), held.begin(), held.end());
      for (int o = 0; o < O && list < 0; ++o) {
        key.push_back(opts[o].whole);
        if (opts[o].whole) continue;
        key.push_back(opts[o].strategy.outputs[i].partial);
        key.push_back(opts[o].strategy.outputs[i].dim);
      }
    }
    auto [it, fresh] = priced.try_emplace(key);
    std::vector<std::vector<double>>& costs = it->second;
    auto& edges = p.edges[n];
    // The node's edges, written over the slots a spare list left (their storage kept).
    edges.resize(node.inputs.size() + node.outputs.size());
    if (!fresh) {
      size_t e = 0;
      for (const auto* ts : {&node.inputs, &node.outputs})
        for (TensorId t : *ts) edges[e].var = p.tensor_var[t], edges[e].cost = costs[e], ++e;
      continue;
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      TensorId t = node.inputs[i];
      const Span held = held_of(t);
      CutProblem::Edge& e = edges[i];
      e.var = p.tensor_var[t];
      const int D = p.domain[e.var];
      e.cost.resize(static_cast<size_t>(O) * D);
      for (int o = 0; o < O; ++o) {
        const InputNeed& need = opts[o].whole ? whole_need : opts[o].strategy.inputs[i];
        int nl = pool.need(s.need[n][i], need, k);
        for (int v = 0; v < D; ++v) e.cost[o * D + v] = edge_bytes(g, t, pool, held[v], nl, factors);
      }
      costs.push_back(e.cost);
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      TensorId t = node.outputs[i];
      const Span held = held_of(t);
      CutProblem::Edge& e = edges[node.inputs.size() + i];
      e.var = p.tensor_var[t];
      const int D = p.domain[e.var];
      e.cost.resize(static_cast<size_t>(O) * D);
      for (int o = 0; o < O; ++o) {
        const OutputMake& mk = opts[o].whole ? no_make : opts[o].strategy.outputs[i];
        int ml = pool.make(s.make[n][i], mk, opts[o].whole, k);
        for (int v = 0; v < D; ++v) e.cost[o * D + v] = edge_bytes(g, t, pool, ml, held[v], factors);
      }
      costs.push_back(e.cost);
    }
  }
  return p;
}

}  // namespace autotile
