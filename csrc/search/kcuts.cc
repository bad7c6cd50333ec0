#include "search/kcuts.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "search/bfs_levels.h"
#include "search/bruteforce.h"
#include "search/coarsen.h"
#include "search/coarsen_fold.h"
#include "search/cost_model.h"
#include "search/cut_problem.h"
#include "search/cut_refine.h"
#include "search/elimination.h"
#include "search/one_cut_dp.h"
#include "search/external_solver.h"
#include "search/memory_term.h"
#include "search/pins.h"
#include "search/search_state.h"
#include "util/error.h"

namespace autotile {

std::vector<int> factorize(int devices) {
  if (devices < 1) fail("devices must be >= 1, got ", devices);
  std::vector<int> f;
  for (int p = 2; static_cast<int64_t>(p) * p <= devices; ++p)
    while (devices % p == 0) f.push_back(p), devices /= p;
  if (devices > 1) f.push_back(devices);
  std::sort(f.rbegin(), f.rend());
  return f;
}

namespace {
void check_bandwidths(const std::vector<double>& bw, size_t cuts) {
  if (bw.empty()) return;
  if (bw.size() != cuts)
    fail("bandwidths has ", bw.size(), " entries but the plan has ", cuts, " cuts (one bandwidth per cut)");
  for (double b : bw)
    if (!(b > 0)) fail("bandwidths must be positive, got ", b);
}

// Fills costs, totals and strings of a plan from the final state. Cuts are mapped to links
// slowest first (Soybean Sec 5.1): the first cut, the cheapest, crosses the slowest link.

// CPU time of the calling thread (the search is single-threaded).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Product of the factors of the cuts after `cut`.
int remaining_after(const std::vector<int>& factors, size_t cut) {
  int r = 1;
  for (size_t i = cut + 1; i < factors.size(); ++i) r *= factors[i];
  return r;
}

// The refinement under the time objective: its moves lower the time objective's seconds
// (cut_refine.h); the refined plan is kept only when plan_seconds prices it no higher than the
// recursion's (a check of the refinement's own pricing).
// Returns the kept plan's seconds (and per cut, in *per_cut), as plan_seconds gives them.
double refine_for_time(const Graph& g, const std::vector<int>& factors, const SearchOptions& options,
                       const StrategyProvider& provider, const std::vector<double>& cut_work, SearchState* s,
                       std::vector<double>* flat, size_t first_widest, std::vector<double>* per_cut) {
  const TimeObjective& t = *options.time;
  SearchState before = *s;
  std::vector<double> flat_before = *flat, per_cut_before;
  const double seconds =
      plan_seconds(g, before, provider, options.replicate_fallback, t, &per_cut_before, !options.provider);
  refine_cuts(g, factors, options, provider, cut_work, s, flat, first_widest);
  bool same = s->tiling == before.tiling;
  for (NodeId n = 0; same && n < g.num_nodes(); ++n)
    for (size_t c = 0; same && c < factors.size(); ++c)
      same = s->option[n][c].name == before.option[n][c].name && s->option[n][c].whole == before.option[n][c].whole;
  if (!same) {
    const double refined = plan_seconds(g, *s, provider, options.replicate_fallback, t, per_cut, !options.provider);
    if (refined <= seconds) return refined;
  }
  *s = std::move(before);
  *flat = std::move(flat_before);
  *per_cut = std::move(per_cut_before);
  return seconds;
}
}  // namespace

Plan k_cuts(const Graph& g, int devices, const SearchOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  g.validate();
  Plan plan;
  plan.devices = devices;
  plan.factors = cut_factors(devices, options.factors);
  check_bandwidths(options.bandwidths, plan.factors.size());
  if (options.time) options.time->check(plan.factors.size());
  StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  SearchState s = SearchState::initial(g);
  std::vector<double> flat;
  const bool refine = refine_applies(options, plan.factors.size());
  // DP entries of each cut (as if every table were computed, reused ones too): the
  // refinement's budget, which stays what it was before tables were reused (the same plans).
  std::vector<double> cut_work;
  size_t first_widest = 0;  // most options of a node at the first cut
  // AUTOTILE_SEARCH_PROFILE=1 prints where each cut's time goes (stderr), for bench/ work.
  const bool profile = std::getenv("AUTOTILE_SEARCH_PROFILE") != nullptr;
  // Wall and CPU time of each phase (the CPU column is what the phase costs on a shared machine).
  auto lap = std::chrono::steady_clock::now();
  double cpu_lap = thread_cpu_seconds();
  auto tick = [&](const char* what) {
    if (!profile) return;
    auto now = std::chrono::steady_clock::now();
    const double cpu = thread_cpu_seconds();
    std::fprintf(stderr, "  %-10s %8.4f s  cpu %8.4f s\n", what, std::chrono::duration<double>(now - lap).count(),
                 cpu - cpu_lap);
    lap = now, cpu_lap = cpu;
  };
  tick("validate");
  OptionsMemo memo(g);
  memo.tdl_provider = !options.provider;
  const CoarsenBase coarse = coarsen_base(g);  // what coarsening reads of the graph alone
  std::vector<std::vector<CutProblem::Edge>> spare_edges;  // the last cut's tables (their storage)
  Levels L;
  Coarsening L_groups;  // the groups L was computed for
  for (size_t cut = 0; cut < plan.factors.size(); ++cut) {
    const int k = plan.factors[cut];
    tick("free");  // the previous cut's problem and options, freed
    if (profile) std::fprintf(stderr, "cut %zu (%d-way)\n", cut + 1, k);
    std::vector<char> elementwise;
    auto opts = node_options(g, s, k, static_cast<int>(cut), provider, options.constraint, options.replicate_fallback,
                             &elementwise, &memo);
    tick("options");
    Coarsening c = coarsen(g, elementwise, &opts, &coarse);
    // The levels depend only on the groups, which most cuts keep.
    tick("coarsen");
    CutProblem p = build_cut_problem(g, s, k, static_cast<int>(cut), std::move(opts), c, options.constraint,
                                     &memo.list_id, &spare_edges);
    if (options.time) add_time_terms(g, s, static_cast<int>(cut), remaining_after(plan.factors, cut), *options.time, &p);
    // A joint strategy's internal tensors leave the DP's problem (search/coarsen_fold.h).
    const bool fold = options.solver == CutSolver::kDP && options.memory_weight <= 0 && !options.cut_check;
    const JointFold folded = fold ? fold_joint_internals(&p) : JointFold{};
    tick("tables");
    if (cut == 0 || c.node_group != L_groups.node_group || c.tensor_group != L_groups.tensor_group) {
      L = bfs_levels(g, c);
      L_groups.node_group = c.node_group, L_groups.tensor_group = c.tensor_group;
    }
    tick("levels");
    if (cut == 0) {
      plan.num_groups = c.num_groups;
      plan.num_levels = L.num_levels;
    }
    CutSolution sol;
    {
      // With a memory weight the solver sees the weighted problem; the plan is priced below
      // on the communication-only problem (the weight only moves tensor variables).
      CutProblem weighted = options.memory_weight > 0 ? with_memory_term(g, s, p, options.memory_weight) : CutProblem();
      const CutProblem& q = options.memory_weight > 0 ? weighted : p;
      if (options.solver == CutSolver::kBruteforce) {
        sol = solve_bruteforce(q, options.bruteforce_limit);
      } else if (options.solver == CutSolver::kExternal) {
        sol = solve_external(g, q, options.external_solver);
      } else {
        try {
          sol = solve_one_cut_dp(g, q, level_priority(q, L.level_of_group, c));
        } catch (const WidthError&) {
          // Too wide for the exact DP: the external solver, when one is given (the planner
          // passes the time-limited ILP, which reports its optimality gap), solves this cut.
          if (!options.external_solver) throw;
          sol = solve_external_reduced(g, q, options.external_solver);
        }
      }
      if (options.memory_weight > 0) {
        sol.cost = 0;
        for (NodeId n = 0; n < g.num_nodes(); ++n) sol.cost += p.node_cost(n, sol.value);
      }
    }
    folded.restore(&sol.value);
    if (options.cut_check) {
      CutSolution other = options.external_solver ? solve_external(g, p, options.external_solver)
                                                  : solve_bruteforce(p, options.bruteforce_limit);
      options.cut_check->emplace_back(sol.cost, other.cost);
    }
    if (profile) {
      // (folded variables keep their ids in `p` but no edge: no term of the DP's reads them)
      const int folded_out = static_cast<int>(folded.var.size());
      std::fprintf(stderr,
                   "  (%d variables, %d more folded out, %d groups, %d levels, widest table 2^%.1f, "
                   "%.3g entries visited (%.3g computed), %d layouts, %d priced)\n",
                   p.num_vars() - folded_out, folded_out, c.num_groups, L.num_levels, sol.log2_width, sol.work,
                   sol.computed, s.pool->size(), s.pool->priced());
    }
    tick("solve");
    if (!(sol.cost < kInfCost)) fail("cut ", cut + 1, " (", k, "-way) has no feasible plan");
    std::vector<Tiling> tilings(g.num_tensors());
    for (TensorId t = 0; t < g.num_tensors(); ++t) tilings[t] = p.var_tilings[p.tensor_var[t]][sol.value[p.tensor_var[t]]];
    if (cut == 0)  // the refinement's first move re-derives every node's options of this cut
      for (NodeId n = 0; n < g.num_nodes(); ++n) first_widest = std::max(first_widest, p.options[n].size());
    std::vector<const NodeOption*> chosen(g.num_nodes());
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      int best = -1;
      p.node_cost(n, sol.value, &best);
      chosen[n] = &p.options[n][best];
    }
    cut_work.push_back(sol.work);
    s.apply(g, k, tilings, chosen);
    memo.spare = std::move(p.options);  // the next cut's options reuse their storage
    spare_edges = std::move(p.edges);  // and its tables the tables
    tick("apply");
    // The state prices the chosen plan edge by edge, independently of the solver's tables.
    if (!options.time && std::abs(s.flat_bytes - sol.cost) > 1e-9 * std::max(1.0, std::abs(s.flat_bytes)))
      fail("internal: cut ", cut + 1, " solver cost ", sol.cost, " != priced cost ", s.flat_bytes);
    flat.push_back(s.flat_bytes);
  }
  if (refine && options.time) {
    plan.model_seconds =
        refine_for_time(g, plan.factors, options, provider, cut_work, &s, &flat, first_widest, &plan.cut_seconds);
  } else if (refine) {
    const double recursion = flat.back();
    RefineStats r = refine_cuts(g, plan.factors, options, provider, cut_work, &s, &flat, first_widest);
    if (profile)
      std::fprintf(stderr, "refine: %d of %d moves kept, %.3g work units%s, %.6g -> %.6g bytes\n", r.kept, r.tried,
                   r.work, r.capped ? " (budget spent)" : "", recursion, flat.back());
    tick("refine");
  }
  finish_plan(g, s, flat, options.bandwidths, &plan, options.bandwidths_in_cut_order);
  if (options.time && plan.model_seconds < 0)
    plan.model_seconds = plan_seconds(g, s, provider, options.replicate_fallback, *options.time, &plan.cut_seconds,
                                      !options.provider);
  plan.search_seconds = seconds_since(t0);
  return plan;
}

Plan price_plan(const Graph& g, int devices, const std::vector<std::vector<std::string>>& tensor_tilings,
                const std::vector<std::vector<std::string>>& node_strategies, const SearchOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  g.validate();
  Plan plan;
  plan.algorithm = "priced";
  plan.devices = devices;
  plan.factors = cut_factors(devices, options.factors);
  check_bandwidths(options.bandwidths, plan.factors.size());
  const size_t cuts = plan.factors.size();
  if (tensor_tilings.size() != static_cast<size_t>(g.num_tensors()))
    fail("price_plan: ", tensor_tilings.size(), " tensor tilings given for ", g.num_tensors(), " tensors");
  if (node_strategies.size() != static_cast<size_t>(g.num_nodes()))
    fail("price_plan: ", node_strategies.size(), " node strategies given for ", g.num_nodes(), " nodes");
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (tensor_tilings[t].size() != cuts)
      fail("price_plan: tensor '", g.tensor(t).name, "' has ", tensor_tilings[t].size(), " tilings for ", cuts, " cuts");
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    if (node_strategies[n].size() != cuts)
      fail("price_plan: node '", g.node(n).name, "' has ", node_strategies[n].size(), " strategies for ", cuts,
           " cuts");
  StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  SearchState s = SearchState::initial(g);
  std::vector<double> flat;
  for (size_t cut = 0; cut < cuts; ++cut) {
    const int k = plan.factors[cut];
    std::vector<char> elementwise;
    auto opts = node_options(g, s, k, static_cast<int>(cut), provider, PlanConstraint{}, options.replicate_fallback,
                             &elementwise);
    std::vector<Tiling> tilings;
    for (TensorId t = 0; t < g.num_tensors(); ++t) {
      Tiling ti;
      try {
        ti = Tiling::parse(tensor_tilings[t][cut]);
      } catch (const Error& e) {
        fail("price_plan: tensor '", g.tensor(t).name, "' cut ", cut + 1, ": ", e.what());
      }
      const Shape& sh = s.tensor_shape[t];
      if (ti.kind == Tiling::kSplit && (ti.dim < 0 || ti.dim >= static_cast<int>(sh.size()) || sh[ti.dim] % k != 0))
        fail("price_plan: tensor '", g.tensor(t).name, "' ", shape_str(sh), " cannot be ", ti.str(), " in a ", k,
             "-way cut (cut ", cut + 1, ")");
      if (ti.kind == Tiling::kPartial && g.tensor(t).producer == kNone)
        fail("price_plan: tensor '", g.tensor(t).name, "' is a graph input and cannot be partial");
      tilings.push_back(ti);
    }
    std::vector<NodeOption> chosen;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      const std::string& want = node_strategies[n][cut];
      auto it = std::find_if(opts[n].begin(), opts[n].end(), [&](const NodeOption& o) { return o.name == want; });
      if (it == opts[n].end()) {
        std::string avail;
        for (const NodeOption& o : opts[n]) avail += (avail.empty() ? "" : ", ") + o.name;
        fail("price_plan: node '", g.node(n).name, "' (op ", g.node(n).op, ") has no strategy '", want, "' in cut ",
             cut + 1, " (available: ", avail, ")");
      }
      chosen.push_back(*it);
    }
    s.apply(g, k, tilings, chosen);
    if (!(s.flat_bytes < kInfCost))
      fail("price_plan: cut ", cut + 1, " makes a partial tensor from a producer that does not reduce");
    flat.push_back(s.flat_bytes);
  }
  finish_plan(g, s, flat, options.bandwidths, &plan, options.bandwidths_in_cut_order);
  if (options.time)
    plan.model_seconds = plan_seconds(g, s, provider, options.replicate_fallback, *options.time, &plan.cut_seconds,
                                      !options.provider);
  plan.search_seconds = seconds_since(t0);
  return plan;
}

void finish_plan(const Graph& g, const SearchState& s, const std::vector<double>& flat,
                 const std::vector<double>& bw, Plan* plan, bool bandwidths_in_cut_order) {
  if (!bw.empty() && bw.size() != plan->factors.size())
    fail("bandwidths has ", bw.size(), " entries but the plan has ", plan->factors.size(),
         " cuts (one bandwidth per cut)");
  for (double b : bw)
    if (!(b > 0)) fail("bandwidths must be positive, got ", b);
  double prev = 0;
  for (double f : flat) {
    plan->cut_costs.push_back(f - prev);
    prev = f;
  }
  plan->total_bytes = prev;
  std::vector<double> sorted = bw;
  if (!bandwidths_in_cut_order) std::sort(sorted.begin(), sorted.end());
  plan->weighted_cost = 0;
  for (size_t i = 0; i < plan->cut_costs.size(); ++i)
    plan->weighted_cost += sorted.empty() ? plan->cut_costs[i] : plan->cut_costs[i] / sorted[i];
  plan->tensor_tilings.assign(g.num_tensors(), {});
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    for (const Tiling& ti : s.tiling[t]) plan->tensor_tilings[t].push_back(ti.str());
  plan->node_strategies.assign(g.num_nodes(), {});
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    for (const NodeOption& o : s.option[n]) plan->node_strategies[n].push_back(o.name);
}

}  // namespace autotile
