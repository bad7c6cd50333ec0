#include "search/baselines/data.h"

#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "search/coarsen.h"
#include "util/error.h"

namespace autotile {

namespace {

// Weights and whatever is tied to them (their updated values, optimizer states): per tensor.
std::vector<char> weight_classes(const Graph& g) {
  Coarsening c = coarsen(g, std::vector<char>(g.num_nodes(), 0));
  std::vector<char> tie_is_weight(g.num_tensors(), 0), weight(g.num_tensors(), 0);
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_param) tie_is_weight[c.tensor_tie[t]] = 1;
  for (TensorId t = 0; t < g.num_tensors(); ++t) weight[t] = tie_is_weight[c.tensor_tie[t]];
  return weight;
}

bool weight_gradient(const Graph& g, const std::vector<char>& weight, TensorId t) {
  TensorId of = g.tensor(t).gradient_of;
  return of != kNone && weight[of];
}

// Whether `var` is in the comma list `list` (a node's "__no_split__" attribute).
bool listed(const std::string& list, const std::string& var) {
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item == var) return true;
  return false;
}

int64_t smallest_prime_factor(int64_t n) {
  for (int64_t p = 2; p * p <= n; ++p)
    if (n % p == 0) return p;
  return n;
}

// Whether a strategy's need of an input split along its batch dim `d` reads each worker's own
// slab of it: equal, disjoint, in order, from 0 (and to `extent` when known, > 0). A dim the
// split variable indexes only in part (a Reshape's split of head_dim reads every batch row)
// does not split the batch.
bool splits_batch(const InputNeed& need, int d, int64_t extent = 0) {
  if (!need.read) return true;
  if (need.replicate || need.dim != d || need.per_worker.empty()) return false;
  const auto& w = need.per_worker;
  const int64_t size = w[0].hi - w[0].lo;
  for (size_t j = 0; j < w.size(); ++j)
    if (size <= 0 || w[j].lo != static_cast<int64_t>(j) * size || w[j].hi != w[j].lo + size) return false;
  return extent <= 0 || w.back().hi == extent;
}

std::string describe(const Graph& g, TensorId t, int dim) {
  std::ostringstream os;
  os << "'" << g.tensor(t).name << "' (batch dim " << dim << " of " << shape_str(g.tensor(t).shape) << ")";
  return os.str();
}

}  // namespace

std::vector<int> input_batch_dims(const Graph& g, const std::vector<int>& given) {
  const int T = g.num_tensors();
  if (!given.empty()) {
    if (static_cast<int>(given.size()) != T) fail("batch_dims has ", given.size(), " entries for ", T, " tensors");
    for (TensorId t = 0; t < T; ++t) {
      const Tensor& x = g.tensor(t);
      if (given[t] < 0) continue;
      if (x.is_param) fail("batch_dims names the weight '", x.name, "' as a data input");
      if (x.producer != kNone) fail("batch_dims names '", x.name, "', which is computed, not a graph input");
      if (given[t] >= static_cast<int>(x.shape.size()))
        fail("data input '", x.name, "' of shape ", shape_str(x.shape), " has no batch dim ", given[t]);
    }
    return given;
  }
  // The C API names no data inputs: the non-weight graph inputs whose dim 0 is that of the
  // largest of them (data and labels share the batch; BatchNorm statistics, an RNN's token ids
  // of (steps, batch) do not).
  std::vector<char> weight = weight_classes(g);
  std::vector<int> dims(T, -1);
  auto candidate = [&](TensorId t) {
    const Tensor& x = g.tensor(t);
    return x.producer == kNone && !weight[t] && x.gradient_of == kNone && !x.shape.empty();
  };
  TensorId largest = kNone;
  for (TensorId t = 0; t < T; ++t)
    if (candidate(t) && (largest == kNone || g.tensor(t).num_elements() > g.tensor(largest).num_elements()))
      largest = t;
  for (TensorId t = 0; t < T; ++t)
    if (largest != kNone && candidate(t) && g.tensor(t).shape[0] == g.tensor(largest).shape[0]) dims[t] = 0;
  return dims;
}

BatchMap batch_map(const Graph& g, const std::vector<int>& inputs, const StrategyProvider& provider) {
  const int T = g.num_tensors();
  BatchMap m;
  m.weight = weight_classes(g);
  const std::vector<char>& weight = m.weight;
  m.dim = inputs;
  m.dim.resize(T, -1);
  m.lost.assign(T, 0);
  m.carries.assign(g.num_nodes(), 0);
  // Weights, their gradients and what is tied to them never carry the batch (data
  // parallelism replicates them, or leaves their gradients' reduction to the search).
  auto open = [&](TensorId t) { return !weight[t] && !weight_gradient(g, weight, t); };
  std::vector<Shape> ins, outs;
  for (NodeId n : g.topo_order()) {
    const Node& node = g.node(n);
    // A head gradient (the gradient of a non-loss output, fed in) has its output's batch dim.
    for (TensorId t : node.inputs) {
      const Tensor& x = g.tensor(t);
      if (x.producer == kNone && m.dim[t] < 0 && x.gradient_of != kNone && m.dim[x.gradient_of] >= 0 &&
          g.tensor(x.gradient_of).shape == x.shape)
        m.dim[t] = m.dim[x.gradient_of];
    }
    int64_t common = 0;
    bool reads_batch = false, reads_lost = false;
    for (TensorId t : node.inputs) {
      if (m.dim[t] >= 0) reads_batch = true, common = std::gcd(common, g.tensor(t).shape[m.dim[t]]);
      reads_lost |= m.lost[t] && open(t);
    }
    if (!reads_batch) {
      if (reads_lost)
        for (TensorId t : node.outputs) m.lost[t] = open(t);
      continue;
    }
    // The strategies at the smallest split of the batch (they say which dims go together, the
    // same at every k that divides it); none when the batch is 1.
    OpStrategies st;
    if (common >= 2 && !node.tdl.empty()) {
      ins.clear(), outs.clear();
      for (TensorId t : node.inputs) ins.push_back(g.tensor(t).shape);
      for (TensorId t : node.outputs) outs.push_back(g.tensor(t).shape);
      st = provider(g, n, ins, outs, static_cast<int>(smallest_prime_factor(common)));
    }
    // Per output, the dim the batch goes to: from the strategies splitting every batch input
    // along its batch dim (the node carries the batch), else (the node is stuck and runs whole)
    // from those splitting some batch input so, or the batch dim of a batch input of the
    // output's own shape (a fused BatchNorm reads all of its batch for the statistics, and no
    // strategy splits it, but its output is its input's rows). -1: none, or several.
    std::vector<int> strict_dim(node.outputs.size(), -2), loose_dim(node.outputs.size(), -2);
    auto note = [](std::vector<int>& dims, const Strategy& x) {
      for (size_t j = 0; j < x.outputs.size(); ++j) {
        int d = x.outputs[j].partial ? -1 : x.outputs[j].dim;
        dims[j] = dims[j] == -2 || dims[j] == d ? d : -1;
      }
    };
    auto veto = node.attrs.find("__no_split__");
    bool carried = false;
    for (const Strategy& x : st.strategies) {
      if (veto != node.attrs.end() && listed(veto->second, x.var)) continue;
      if (x.inputs.size() != node.inputs.size() || x.outputs.size() != node.outputs.size()) continue;
      bool all = true, some = false;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        int d = m.dim[node.inputs[i]];
        if (d < 0) continue;
        bool split = splits_batch(x.inputs[i], d, g.tensor(node.inputs[i]).shape[d]);
        all = all && split;
        some = some || (split && x.inputs[i].read);
      }
      // the execution graph only sums partials (exec_build.cc)
      for (const OutputMake& make : x.outputs) all = all && !(make.partial && make.reducer != Reducer::kSum);
      if (all) carried = true, note(strict_dim, x);
      else if (some) note(loose_dim, x);
    }
    if (carried) m.carries[n] = 1, ++m.carriers;
    else m.stuck.push_back(n);
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      TensorId out = node.outputs[j];
      if (!open(out)) continue;
      int d = carried ? strict_dim[j] : loose_dim[j];
      for (size_t i = 0; i < node.inputs.size() && !carried && d < 0; ++i) {
        TensorId t = node.inputs[i];
        if (m.dim[t] >= 0 && g.tensor(t).shape == g.tensor(out).shape) d = m.dim[t];
      }
      if (d >= 0) m.dim[out] = d;
      else if (!carried) m.lost[out] = 1;
      if (!carried && d >= 0) m.carries[n] = 2;
    }
  }
  return m;
}

PlanConstraint data_parallel_constraint(const Graph& g, const SearchOptions& options, bool strict) {
  std::vector<int> inputs = input_batch_dims(g, options.batch_dims);
  return data_parallel_constraint(g, inputs, batch_map(g, inputs, options.provider ? options.provider
                                                                                      : tdl_strategy_provider()),
                                  strict);
}

PlanConstraint data_parallel_constraint(const Graph& g, const std::vector<int>& inputs, const BatchMap& m,
                                        bool strict) {
  if (strict) {
    TensorId any = kNone;
    for (TensorId t = 0; t < g.num_tensors(); ++t) {
      if (inputs[t] < 0) continue;
      any = t;
      // Every reader of this input is stuck: the batch is nowhere split.
      const Tensor& x = g.tensor(t);
      NodeId stuck = kNone;
      bool split = false;
      for (NodeId n : x.consumers) split |= m.carries[n] != 0, stuck = m.carries[n] ? stuck : n;
      if (!split && stuck != kNone)
        fail("data parallelism cannot split the batch of input ", describe(g, t, inputs[t]), ": node '",
             g.node(stuck).name, "' (op ", g.node(stuck).op, ") reads it and has no strategy splitting that dim",
             x.shape[inputs[t]] < 2 ? " (a batch of 1)" : "", "; plan it with another algorithm (e.g. tofu)");
    }
    if (any == kNone)
      fail("data parallelism needs a data input with a batch dim to split; this graph has none "
           "(plan it with another algorithm, e.g. tofu)");
  }
  enum Kind : char { kBatch = 0, kWeight, kFree, kScalar, kLost };
  const std::vector<char>& weight = m.weight;
  auto kind = std::make_shared<std::vector<char>>(g.num_tensors(), kFree);
  auto dim = std::make_shared<std::vector<int>>(m.dim);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const Tensor& x = g.tensor(t);
    char& k = (*kind)[t];
    if (weight[t]) k = kWeight;
    else if (weight_gradient(g, weight, t)) k = kFree;
    else if (x.shape.empty()) k = kScalar;
    else if (m.dim[t] >= 0) k = kBatch;
    else if (m.lost[t] && strict) k = kLost;
  }
  PlanConstraint pc;
  pc.name = "data";
  pc.allow_tiling = [kind, dim](TensorId t, const Tiling& ti, int) {
    switch ((*kind)[t]) {
      case kFree: return true;
      case kBatch: return ti.kind == Tiling::kSplit && ti.dim == (*dim)[t];
      default: return ti.kind == Tiling::kReplicate;
    }
  };
  const Graph* gp = &g;
  pc.allow_strategy = [kind, dim, gp](NodeId n, const NodeOption& o, int) {
    const Node& node = gp->node(n);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if ((*kind)[node.inputs[i]] != kBatch) continue;
      if (o.whole) return false;
      if (!splits_batch(o.strategy.inputs[i], (*dim)[node.inputs[i]])) return false;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      char k = (*kind)[node.outputs[i]];
      // what a stuck node computed from the batch is computed whole, not split another way
      if (k == kLost && !o.whole) return false;
      if (k != kBatch) continue;
      const OutputMake& make = o.strategy.outputs[i];
      if (o.whole || make.partial || make.dim != (*dim)[node.outputs[i]]) return false;
    }
    return true;
  };
  pc.explain = [kind, dim](TensorId t) -> std::string {
    if ((*kind)[t] != kBatch) return "";
    return " (data parallelism splits it along its batch dim " + std::to_string((*dim)[t]) +
           ", which the device count must divide)";
  };
  return pc;
}

}  // namespace autotile
