#include "search/baselines/soybean.h"

#include "search/baselines/cut_driver.h"
#include "search/coarsen.h"
#include "search/bfs_levels.h"
#include "search/one_cut_dp.h"

namespace autotile {

Coarsening uncoarsened(const Graph& g, const Coarsening& c) {
  Coarsening u = c;
  const int T = g.num_tensors(), N = g.num_nodes();
  for (TensorId t = 0; t < T; ++t) u.tensor_group[t] = t;
  for (NodeId n = 0; n < N; ++n) u.node_group[n] = T + n;
  u.num_groups = T + N;
  return u;
}

Plan soybean_plan(const Graph& g, int devices, const SearchOptions& options) {
  Plan plan = direct_plan(g, devices, options, "soybean", [](const CutContext& ctx, const CutProblem& p, const Coarsening& c) {
    Coarsening u = uncoarsened(ctx.g, c);
    Levels L = bfs_levels(ctx.g, u);
    return solve_one_cut_dp(ctx.g, p, level_priority(p, L.level_of_group, u)).value;
  });
  // Report the size of the graph the DP actually walked: every node and tensor a group.
  Coarsening u = uncoarsened(g, coarsen(g, std::vector<char>(g.num_nodes(), 0)));
  plan.num_groups = u.num_groups;
  plan.num_levels = bfs_levels(g, u).num_levels;
  return plan;
}

}  // namespace autotile
