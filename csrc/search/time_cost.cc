#include "search/time_cost.h"

#include <algorithm>
#include <cmath>

#include "search/cost_model.h"
#include "search/cut_problem.h"
#include "search/search_state.h"
#include "util/error.h"

namespace autotile {

size_t TimeObjective::KeyHash::operator()(const std::vector<int64_t>& v) const {
  uint64_t h = 1469598103934665603ull;
  for (int64_t x : v) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

double TimeObjective::node_seconds(const Graph& g, NodeId n, const std::vector<Shape>& ins,
                                   const std::vector<Shape>& outs, const std::vector<char>& read) const {
  const std::string& op = g.node(n).op;
  auto id = op_ids_.emplace(op, static_cast<int64_t>(op_ids_.size())).first->second;
  std::vector<int64_t> key{id, static_cast<int64_t>(ins.size())};
  for (size_t i = 0; i < ins.size(); ++i) {
    key.push_back(i < read.size() ? read[i] : 1);
    key.push_back(static_cast<int64_t>(ins[i].size()));
    key.insert(key.end(), ins[i].begin(), ins[i].end());
  }
  for (const Shape& x : outs) {
    key.push_back(static_cast<int64_t>(x.size()));
    key.insert(key.end(), x.begin(), x.end());
  }
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  if (!compute) fail("time objective: no compute-time function given");
  const double sec = compute(n, ins, outs, read);
  if (!(sec >= 0) || !std::isfinite(sec))
    fail("time objective: node '", g.node(n).name, "' (op ", op, "): compute time ", sec, " is not a finite number >= 0");
  memo_.emplace(std::move(key), sec);
  return sec;
}

void TimeObjective::check(size_t cuts) const {
  if (seconds_per_byte.size() != cuts || message_seconds.size() != cuts)
    fail("time objective: ", seconds_per_byte.size(), " link rates and ", message_seconds.size(),
         " latencies given for a plan of ", cuts, " cuts (one each per cut)");
  for (size_t i = 0; i < cuts; ++i)
    if (!(seconds_per_byte[i] >= 0) || !std::isfinite(seconds_per_byte[i]) || !(message_seconds[i] >= 0) ||
        !std::isfinite(message_seconds[i]))
      fail("time objective: cut ", i + 1, ": seconds per byte ", seconds_per_byte[i], " and latency ",
           message_seconds[i], " must be finite and >= 0");
}

void shapes_after(const Graph& g, const SearchState& s, NodeId n, const NodeOption& o, int k, std::vector<Shape>* ins,
                  std::vector<Shape>* outs, std::vector<char>* read) {
  *ins = s.node_in[n];
  *outs = s.node_out[n];
  read->assign(ins->size(), 1);
  if (o.whole) return;
  for (size_t i = 0; i < ins->size(); ++i) {
    const InputNeed& in = o.strategy.inputs[i];
    (*read)[i] = in.read;
    if (in.replicate) continue;
    int64_t ext = 0;
    for (const Interval& iv : in.per_worker) ext = std::max(ext, iv.size());
    (*ins)[i][in.dim] = ext;
  }
  for (size_t i = 0; i < outs->size(); ++i) {
    const OutputMake& mk = o.strategy.outputs[i];
    if (!mk.partial) (*outs)[i][mk.dim] /= k;
  }
  (void)g;
}

int input_rounds(const Tiling& held) { return held.kind == Tiling::kPartial ? 2 : 1; }
int output_rounds(bool makes_partial, const Tiling& held) {
  return makes_partial && held.kind != Tiling::kPartial ? 2 : 1;
}
bool makes_partial(const NodeOption& o, size_t i) { return !o.whole && o.strategy.outputs[i].partial; }

namespace {
// Whether an edge starts moving bytes at this cut. The execution graph moves an edge's
// pieces in one fetch (its pieces from all sources at once), so its latency is paid once: at
// the first cut that moves bytes on it, the outermost of its levels (cuts go outermost first).
bool starts_moving(double after, double before) { return before <= 0 && after > 0; }
}  // namespace

double edge_cut_seconds(const TimeObjective& t, size_t cut, double before, double after, int rounds) {
  return (after - before) * t.seconds_per_byte[cut] + (starts_moving(after, before) ? t.message_seconds[cut] * rounds : 0.0);
}

std::vector<double> edge_bytes_of(const Graph& g, const SearchState& s) {
  std::vector<double> out;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    for (size_t i = 0; i < node.inputs.size(); ++i)
      out.push_back(edge_bytes(g, node.inputs[i], *s.pool, s.held[node.inputs[i]], s.need[n][i], s.factors));
    for (size_t i = 0; i < node.outputs.size(); ++i)
      out.push_back(edge_bytes(g, node.outputs[i], *s.pool, s.make[n][i], s.held[node.outputs[i]], s.factors));
  }
  return out;
}

double cut_comm_seconds(const Graph& g, const std::vector<double>& before, const std::vector<double>& after,
                        const std::vector<Tiling>& tilings, const std::vector<NodeOption>& chosen,
                        const TimeObjective& t, size_t cut) {
  double sec = 0;
  size_t e = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    for (size_t side = 0; side < 2; ++side) {
      const auto& tensors = side == 0 ? node.inputs : node.outputs;
      for (size_t i = 0; i < tensors.size(); ++i, ++e) {
        const Tiling& held = tilings[tensors[i]];
        const int rounds = side == 0 ? input_rounds(held) : output_rounds(makes_partial(chosen[n], i), held);
        sec += edge_cut_seconds(t, cut, before[e], after[e], rounds);
      }
    }
  }
  return sec;
}

double final_compute_seconds(const Graph& g, const SearchState& fin, const std::vector<NodeOption>& last,
                             const TimeObjective& t) {
  double compute = 0;
  std::vector<char> read;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    read.assign(fin.node_in[n].size(), 1);
    if (!last.empty() && !last[n].whole)
      for (size_t i = 0; i < read.size(); ++i) read[i] = last[n].strategy.inputs[i].read;
    compute += t.node_seconds(g, n, fin.node_in[n], fin.node_out[n], read);
  }
  return compute;
}

void add_time_terms(const Graph& g, const SearchState& s, int cut, int remaining, const TimeObjective& t,
                    CutProblem* p) {
  const double rate = t.seconds_per_byte[cut], lat = t.message_seconds[cut];
  std::vector<Shape> ins, outs;
  std::vector<char> read;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    auto& edges = p->edges[n];
    const auto& opts = p->options[n];
    const int O = static_cast<int>(opts.size());
    size_t e = 0;
    for (int side = 0; side < 2; ++side) {
      const auto& tensors = side == 0 ? node.inputs : node.outputs;
      for (size_t i = 0; i < tensors.size(); ++i, ++e) {
        const TensorId x = tensors[i];
        const double before = side == 0 ? edge_bytes(g, x, *s.pool, s.held[x], s.need[n][i], s.factors)
                                         : edge_bytes(g, x, *s.pool, s.make[n][i], s.held[x], s.factors);
        CutProblem::Edge& edge = edges[e];
        const int D = p->domain[edge.var];
        const auto& tilings = p->var_tilings[edge.var];
        for (int o = 0; o < O; ++o)
          for (int v = 0; v < D; ++v) {
            double& c = edge.cost[o * D + v];
            if (!(c < kInfCost)) continue;
            const int rounds =
                side == 0 ? input_rounds(tilings[v]) : output_rounds(makes_partial(opts[o], i), tilings[v]);
            c = c * rate + (starts_moving(c, before) ? lat * rounds : 0.0);
          }
      }
    }
    if (edges.empty()) continue;  // no variable: its compute is the same in every plan
    CutProblem::Edge& first = edges[0];
    const int D = p->domain[first.var];
    for (int o = 0; o < O; ++o) {
      shapes_after(g, s, n, opts[o], p->k, &ins, &outs, &read);
      const double sec = t.node_seconds(g, n, ins, outs, read) / remaining;
      for (int v = 0; v < D; ++v) first.cost[o * D + v] += sec;
    }
  }
}

double plan_seconds(const Graph& g, const SearchState& fin, const StrategyProvider& provider, bool replicate_fallback,
                    const TimeObjective& t, std::vector<double>* per_cut, bool tdl_provider) {
  const size_t cuts = fin.factors.size();
  t.check(cuts);
  SearchState s = SearchState::initial(g);
  OptionsMemo memo(g);
  memo.tdl_provider = tdl_provider;
  if (per_cut) per_cut->clear();
  double total = 0;
  std::vector<NodeOption> last;
  for (size_t cut = 0; cut < cuts; ++cut) {
    const int k = fin.factors[cut];
    std::vector<char> elementwise;
    auto opts = node_options(g, s, k, static_cast<int>(cut), provider, PlanConstraint{}, replicate_fallback,
                             &elementwise, &memo);
    std::vector<NodeOption> chosen;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      const NodeOption& want = fin.option[n][cut];
      auto it = std::find_if(opts[n].begin(), opts[n].end(),
                             [&](const NodeOption& o) { return o.name == want.name && o.whole == want.whole; });
      if (it == opts[n].end())
        fail("time objective: node '", g.node(n).name, "' has no strategy '", want.name, "' at cut ", cut + 1);
      chosen.push_back(*it);
    }
    std::vector<Tiling> tilings(g.num_tensors());
    for (TensorId x = 0; x < g.num_tensors(); ++x) tilings[x] = fin.tiling[x][cut];
    const std::vector<double> before = edge_bytes_of(g, s);
    s.apply(g, k, tilings, chosen);
    const double sec = cut_comm_seconds(g, before, edge_bytes_of(g, s), tilings, chosen, t, cut);
    if (per_cut) per_cut->push_back(sec);
    total += sec;
    last = std::move(chosen);
  }
  const double compute = final_compute_seconds(g, s, last, t);
  if (per_cut) per_cut->push_back(compute);
  return total + compute;
}

}  // namespace autotile
