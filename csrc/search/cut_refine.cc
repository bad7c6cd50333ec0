#include "search/cut_refine.h"

#include <algorithm>
#include <memory>
#include <string>

#include "search/bfs_levels.h"
#include "search/coarsen.h"
#include "search/cost_model.h"
#include "search/one_cut_dp.h"
#include "search/refiner.h"
#include "search/time_cost.h"
#include "util/error.h"

namespace autotile {

using namespace refine;  // the refinement's internals (search/refiner.h)

namespace {

// The uncut state of `g` with its layouts interned in `pool`.
SearchState initial_on(const Graph& g, const std::shared_ptr<LayoutPool>& pool) {
  SearchState s = SearchState::initial(g);
  s.pool = pool;
  for (TensorId t = 0; t < g.num_tensors(); ++t) s.held[t] = pool->whole(g.tensor(t).shape);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.node(n);
    for (size_t i = 0; i < node.inputs.size(); ++i) s.need[n][i] = pool->whole(g.tensor(node.inputs[i]).shape);
    for (size_t i = 0; i < node.outputs.size(); ++i) s.make[n][i] = pool->whole(g.tensor(node.outputs[i]).shape);
  }
  return s;
}

// The first cut's ties and levels (the neighbourhood move's variables and elimination
// order), derived when a neighbourhood move is first made.
struct FirstCutTies {
  bool tried = false, ok = false;
  bool too_wide[2] = {false, false};  // a neighbourhood's DP too wide once: not tried again
  Coarsening c;
  Levels levels;
  bool get(const Refiner& r) {
    if (tried) return ok;
    tried = true;
    std::vector<char> elementwise;
    try {
      const auto opts = r.options_at(r.prefix[0], 0, &elementwise);
      c = coarsen(r.g, elementwise, &opts);
      levels = bfs_levels(r.g, c);
      ok = true;
    } catch (const Error&) {
    }
    return ok;
  }
};

// Cheap moves (one cut re-solved, two cuts swapped) until none helps; then, when `wide`, one
// step in a wide neighbourhood (the layers' cut orders, else one change anywhere) to leave
// that local optimum; and again.
void descend(Refiner& r, FirstCutTies& ties, RefineStats* stats, bool wide) {
  constexpr int kMaxRounds = 32;
  const int cuts = r.cuts;
  // The plan version each cut move / swap last ended on: none is made twice on the same plan
  // (each is exact, so once made it cannot help again until another move changes the plan).
  std::vector<int> cut_seen(cuts, -1), swap_seen(cuts, -1);
  int wide_seen[2] = {-1, -1};
  for (int round = 0; round < kMaxRounds && !r.budget->capped; ++round) {
    bool improved = false;
    for (int i = 0; i < cuts && !r.budget->capped; ++i) {
      if (cut_seen[i] == r.version) continue;
      ++stats->tried;
      if (r.cut_move(i, r.cut_work[i])) ++stats->kept, improved = true;
      cut_seen[i] = r.version;
    }
    // Swapping cuts of a named mesh would move tilings between its axes.
    for (int i = 0; i + 1 < cuts && r.options.factors.empty() && !r.budget->capped; ++i) {
      if (r.factors[i] != r.factors[i + 1] || swap_seen[i] == r.version) continue;
      ++stats->tried;
      if (r.swap_move(i)) ++stats->kept, improved = true;
      swap_seen[i] = r.version;
    }
    if (improved) continue;
    if (r.budget->capped || !wide || !ties.get(r)) break;
    // The wide moves, each exact over its neighbourhood: the layers' cut orders first (cheaper).
    bool moved = false;
    for (Refiner::Neighbourhood kind : {Refiner::kOrders, Refiner::kOneChange}) {
      if (moved || ties.too_wide[kind] || wide_seen[kind] == r.version) continue;
      if (kind == Refiner::kOrders && cuts > kMaxOrderCuts) continue;
      ++stats->tried;
      const Refiner::Outcome out = r.neighbourhood_move(ties.c, ties.levels, kind);
      wide_seen[kind] = r.version;
      if (out == Refiner::kTooWide) ties.too_wide[kind] = true;
      if (out == Refiner::kKept) ++stats->kept, moved = true;
    }
    if (!moved) break;
  }
}

}  // namespace

bool refine_applies(const SearchOptions& options, size_t cuts) {
  return options.refine && cuts > 1 && options.solver == CutSolver::kDP && options.memory_weight == 0 &&
         options.bandwidths.empty();
}

RefineStats refine_cuts(const Graph& g, const std::vector<int>& factors, const SearchOptions& options,
                        const StrategyProvider& provider, const std::vector<double>& cut_work, SearchState* s,
                        std::vector<double>* flat, size_t first_cut_widest) {
  RefineStats stats;
  const int cuts = static_cast<int>(factors.size());
  if (cuts < 2 || cut_work.size() != factors.size()) return stats;
  double recursion = 0;
  for (double w : cut_work) recursion += w + kNodeUnits * g.num_nodes();
  const bool small = g.num_nodes() <= kSmallGraph;
  const double floor = small && cuts <= kMaxOrderCuts ? kOrdersFloor : kFloor * std::min(1.0, kSmallGraph / g.num_nodes());
  Budget budget{0, std::max(floor, kShareOfRecursion * recursion)};
  // Nothing when the first move, the first cut's, does not fit the budget after the replay
  // (copying the states alone would cost a large graph a good part of its search): priced as
  // cut_move charges it, with the first cut's widest node options, so a refinement that could
  // not make its first move (LLaMA-70B's shapes on 1024 devices: 0.45 s of replay and cut
  // problem for nothing) is not started; the plan is the same either way.
  const double replay = kNodeUnits * g.num_nodes() * cuts;
  if (replay + min_move_units(g.num_nodes(), cuts, 0, cut_work[0], static_cast<double>(first_cut_widest)) >
      budget.limit) {
    stats.capped = true;
    return stats;
  }
  Refiner r{g, factors, options, provider, cuts, &budget, {}, {}, {}, cut_work};
  r.plan.tiling = s->tiling;
  r.plan.option.assign(g.num_nodes(), {});
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    for (const NodeOption& o : s->option[n]) r.plan.option[n].push_back(o.name);
  // The states before each cut: the recursion's plan replayed on its own layout pool.
  budget.take(kNodeUnits * g.num_nodes() * cuts);
  r.prefix.push_back(initial_on(g, s->pool));
  std::vector<SearchState> states;
  if (!r.replay(r.plan, r.prefix[0], &states, &r.cost)) return stats;  // (it is the recursion's own plan)
  for (SearchState& st : states) r.prefix.push_back(std::move(st));
  // (bytes: the recursion's own figure; time: its seconds as the moves price them)
  const double recursion_total = options.time ? r.total() : flat->back();
  FirstCutTies ties;
  // From the recursion's plan, then from the best plan so far with its cuts in each other order
  // (where cuts do not commute, another order can lead to a better optimum the moves cannot
  // reach one step at a time): the cheapest end wins. Up to kMaxOrderCuts cuts the starts make
  // the cheap moves only and the wide ones polish the best end (the cut-orders move is the
  // dearest; tiny BERT on 8 devices needs it after the fourth start); with more cuts (many
  // more starts) every start makes the wide moves too.
  const bool polish_last = cuts <= kMaxOrderCuts;
  auto best = std::make_unique<Refiner>(r);
  descend(r, ties, &stats, !polish_last);
  if (r.total() < best->total()) best = std::make_unique<Refiner>(r);
  // Other orders of the cuts (of equal factor; not a named mesh's axes) as further starts.
  std::vector<int> perm(cuts);
  for (int j = 0; j < cuts; ++j) perm[j] = j;
  while (options.factors.empty() && !budget.capped && (!polish_last || budget.spent < kStartsShare * budget.limit) &&
         std::next_permutation(perm.begin(), perm.end())) {
    bool equal = true;
    for (int j = 0; j < cuts; ++j) equal = equal && factors[perm[j]] == factors[j];
    if (!equal || !budget.take(kNodeUnits * g.num_nodes() * cuts)) continue;
    Refiner start = *best;
    if (!start.force_order(perm)) continue;
    descend(start, ties, &stats, !polish_last);
    if (start.total() < best->total() * (1 - kGain)) best = std::make_unique<Refiner>(std::move(start)), ++stats.kept;
  }
  if (polish_last && !budget.capped) descend(*best, ties, &stats, true);
  stats.work = budget.spent;
  stats.capped = budget.capped;
  if (best->total() < recursion_total) {
    *s = std::move(best->prefix.back());
    *flat = std::move(best->cost.flat);
  }
  return stats;
}

Plan refine_given_plan(const Graph& g, int devices, const std::vector<std::vector<std::string>>& tensor_tilings,
                       const std::vector<std::vector<std::string>>& node_strategies, const SearchOptions& options) {
  Plan given = price_plan(g, devices, tensor_tilings, node_strategies, options);  // checks every entry
  const int cuts = static_cast<int>(given.factors.size());
  const StrategyProvider provider = options.provider ? options.provider : tdl_strategy_provider();
  NamedPlan named{std::vector<std::vector<Tiling>>(g.num_tensors()), node_strategies};
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    for (const std::string& ti : tensor_tilings[t]) named.tiling[t].push_back(Tiling::parse(ti));
  Budget unused;
  Refiner r{g, given.factors, options, provider, cuts, &unused, {}, {}, {}, {}};
  std::vector<SearchState> states;
  PlanCost cost;
  if (!r.replay(named, SearchState::initial(g), &states, &cost) || states.empty())
    return given;
  SearchState s = std::move(states.back());
  std::vector<double>& flat = cost.flat;
  refine_cuts(g, given.factors, options, provider, std::vector<double>(cuts, 0.0), &s, &flat);
  Plan plan;
  plan.algorithm = "refined";
  plan.devices = devices;
  plan.factors = given.factors;
  finish_plan(g, s, flat, options.bandwidths, &plan, options.bandwidths_in_cut_order);
  if (options.time)
    plan.model_seconds = plan_seconds(g, s, provider, options.replicate_fallback, *options.time, &plan.cut_seconds,
                                      !options.provider);
  return plan;
}

}  // namespace autotile
