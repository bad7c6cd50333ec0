#include "search/baselines/cut_driver.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "search/bfs_levels.h"
#include "search/cost_model.h"
#include "search/elimination.h"
#include "search/external_solver.h"
#include "search/one_cut_dp.h"
#include "util/error.h"

namespace autotile {

PlanConstraint both(const PlanConstraint& a, const PlanConstraint& b, const std::string& name) {
  PlanConstraint pc;
  pc.name = name;
  auto at = a.allow_tiling, bt = b.allow_tiling;
  if (at || bt)
    pc.allow_tiling = [at, bt](TensorId t, const Tiling& ti, int cut) {
      return (!at || at(t, ti, cut)) && (!bt || bt(t, ti, cut));
    };
  auto as = a.allow_strategy, bs = b.allow_strategy;
  if (as || bs)
    pc.allow_strategy = [as, bs](NodeId n, const NodeOption& o, int cut) {
      return (!as || as(n, o, cut)) && (!bs || bs(n, o, cut));
    };
  auto ae = a.explain, be = b.explain;
  if (ae || be)
    pc.explain = [ae, be](TensorId t) { return (ae ? ae(t) : std::string()) + (be ? be(t) : std::string()); };
  return pc;
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}


std::vector<std::vector<NodeOption>> all_options(const Graph& g, const SearchState& s, int k, int cut,
                                                 const StrategyProvider& provider, bool replicate_fallback,
                                                 std::vector<char>* elementwise) {
  return node_options(g, s, k, cut, provider, PlanConstraint{}, replicate_fallback, elementwise);
}

const NodeOption& option_named(const Graph& g, NodeId n, const std::vector<NodeOption>& opts, const std::string& name) {
  for (const NodeOption& o : opts)
    if (o.name == name) return o;
  fail("node '", g.node(n).name, "': the search chose strategy '", name, "', which the node does not offer");
}
// The plan of `name` for `devices` devices before any cut (validates the graph).
Plan empty_plan(const Graph& g, int devices, const std::string& name) {
  g.validate();
  Plan plan;
  plan.algorithm = name;
  plan.devices = devices;
  plan.factors = factorize(devices);
  return plan;
}
}  // namespace

Plan staged_plan(const Graph& g, int devices, const SearchOptions& options, const std::string& name,
                 const CutRestriction& restrict) {
  auto t0 = std::chrono::steady_clock::now();
  Plan plan = empty_plan(g, devices, name);
  StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  SearchState s = SearchState::initial(g);
  std::vector<double> flat;
  // The choices of the cuts done so far, which the next stage keeps.
  auto fixed_t = std::make_shared<std::vector<std::vector<Tiling>>>(g.num_tensors());
  auto fixed_n = std::make_shared<std::vector<std::vector<std::string>>>(g.num_nodes());
  PlanConstraint keep;
  keep.name = name;
  keep.allow_tiling = [fixed_t](TensorId t, const Tiling& ti, int cut) {
    return cut >= static_cast<int>((*fixed_t)[t].size()) || (*fixed_t)[t][cut] == ti;
  };
  keep.allow_strategy = [fixed_n](NodeId n, const NodeOption& o, int cut) {
    return cut >= static_cast<int>((*fixed_n)[n].size()) || (*fixed_n)[n][cut] == o.name;
  };
  int prefix = 1;
  for (size_t cut = 0; cut < plan.factors.size(); ++cut) {
    const int k = plan.factors[cut];
    const int c = static_cast<int>(cut);
    prefix *= k;
    std::vector<char> ew;
    auto opts = all_options(g, s, k, c, provider, options.replicate_fallback, &ew);
    PlanConstraint here = restrict ? restrict(CutContext{g, s, c, k, opts, provider}) : PlanConstraint{};
    // `here` speaks for this cut only; earlier cuts are pinned by `keep`.
    PlanConstraint only_here;
    if (here.allow_tiling) {
      auto f = here.allow_tiling;
      only_here.allow_tiling = [f, c](TensorId t, const Tiling& ti, int at) { return at != c || f(t, ti, at); };
    }
    if (here.allow_strategy) {
      auto f = here.allow_strategy;
      only_here.allow_strategy = [f, c](NodeId n, const NodeOption& o, int at) { return at != c || f(n, o, at); };
    }
    only_here.explain = here.explain;
    SearchOptions o = options;
    o.constraint = both(both(keep, only_here, name), options.constraint, name);
    o.bandwidths.clear();
    o.cut_check = nullptr;
    o.provider = provider;
    Plan stage = k_cuts(g, prefix, o);
    if (cut == 0) {
      plan.num_groups = stage.num_groups;
      plan.num_levels = stage.num_levels;
    }
    std::vector<Tiling> tilings(g.num_tensors());
    for (TensorId t = 0; t < g.num_tensors(); ++t) {
      tilings[t] = Tiling::parse(stage.tensor_tilings[t][cut]);
      (*fixed_t)[t].push_back(tilings[t]);
    }
    std::vector<NodeOption> chosen;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      chosen.push_back(option_named(g, n, opts[n], stage.node_strategies[n][cut]));
      (*fixed_n)[n].push_back(stage.node_strategies[n][cut]);
    }
    s.apply(g, k, tilings, chosen);
    flat.push_back(s.flat_bytes);
  }
  finish_plan(g, s, flat, options.bandwidths, &plan);
  plan.search_seconds = seconds_since(t0);
  return plan;
}

Plan direct_plan(const Graph& g, int devices, const SearchOptions& options, const std::string& name,
                 const CutChooser& choose, const CutRestriction& restrict) {
  auto t0 = std::chrono::steady_clock::now();
  Plan plan = empty_plan(g, devices, name);
  StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  SearchState s = SearchState::initial(g);
  std::vector<double> flat;
  for (size_t cut = 0; cut < plan.factors.size(); ++cut) {
    const int k = plan.factors[cut];
    const int c = static_cast<int>(cut);
    std::vector<char> ew;
    auto unrestricted = all_options(g, s, k, c, provider, options.replicate_fallback, &ew);
    CutContext ctx{g, s, c, k, unrestricted, provider};
    PlanConstraint pc = options.constraint;
    if (restrict) pc = both(restrict(ctx), options.constraint, name);
    auto opts = node_options(g, s, k, c, provider, pc, options.replicate_fallback, &ew);
    Coarsening co = coarsen(g, ew);
    CutProblem p = build_cut_problem(g, s, k, c, std::move(opts), co, pc);
    if (cut == 0) {
      plan.num_groups = co.num_groups;
      plan.num_levels = bfs_levels(g, co).num_levels;
    }
    std::vector<int> value;
    try {
      value = choose(ctx, p, co);
    } catch (const WidthError&) {
      if (!options.external_solver) throw;  // too wide for the exact DP: the bounded solver
      value = solve_external(g, p, options.external_solver).value;
    }
    if (static_cast<int>(value.size()) != p.num_vars()) fail(name, ": the cut solver returned a wrong assignment");
    std::vector<Tiling> tilings(g.num_tensors());
    for (TensorId t = 0; t < g.num_tensors(); ++t) tilings[t] = p.var_tilings[p.tensor_var[t]][value[p.tensor_var[t]]];
    std::vector<NodeOption> chosen(g.num_nodes());
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      int best = -1;
      double cost = p.node_cost(n, value, &best);
      if (best < 0 || !(cost < kInfCost))
        fail(name, ": node '", g.node(n).name, "' (op ", g.node(n).op, ") has no feasible strategy for the tilings ",
             "chosen in cut ", cut + 1, " (", k, "-way)");
      chosen[n] = p.options[n][best];
    }
    s.apply(g, k, tilings, chosen);
    if (!(s.flat_bytes < kInfCost)) fail(name, ": cut ", cut + 1, " (", k, "-way) has no feasible plan");
    flat.push_back(s.flat_bytes);
  }
  finish_plan(g, s, flat, options.bandwidths, &plan);
  plan.search_seconds = seconds_since(t0);
  return plan;
}

}  // namespace autotile
