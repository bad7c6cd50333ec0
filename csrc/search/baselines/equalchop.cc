#include "search/baselines/equalchop.h"

#include <memory>

#include "search/baselines/cut_driver.h"

namespace autotile {

Plan equalchop_plan(const Graph& g, int devices, const SearchOptions& options) {
  return staged_plan(g, devices, options, "equalchop", [](const CutContext& ctx) {
    PlanConstraint pc;
    pc.name = "equalchop";
    if (ctx.cut == 0) return pc;
    // first[t]: the first cut's tiling; fits[t]: its split dim still divides by k.
    auto first = std::make_shared<std::vector<Tiling>>();
    auto fits = std::make_shared<std::vector<char>>();
    for (TensorId t = 0; t < ctx.g.num_tensors(); ++t) {
      const Tiling& f = ctx.s.tiling[t][0];
      first->push_back(f);
      fits->push_back(f.kind == Tiling::kSplit && ctx.s.tensor_shape[t][f.dim] % ctx.k == 0);
    }
    pc.allow_tiling = [first, fits](TensorId t, const Tiling& ti, int) {
      const Tiling& f = (*first)[t];
      switch (f.kind) {
        case Tiling::kSplit: return (*fits)[t] ? ti == f : ti.kind == Tiling::kReplicate;
        case Tiling::kPartial: return ti.kind != Tiling::kSplit;
        default: return ti.kind == Tiling::kReplicate;
      }
    };
    return pc;
  });
}

}  // namespace autotile
