#include "search/baselines/allrow.h"

#include <memory>

#include "search/baselines/cut_driver.h"

namespace autotile {

Plan allrow_plan(const Graph& g, int devices, const SearchOptions& options) {
  return staged_plan(g, devices, options, "allrow", [](const CutContext& ctx) {
    auto rows = std::make_shared<std::vector<char>>(ctx.g.num_tensors(), 0);
    for (TensorId t = 0; t < ctx.g.num_tensors(); ++t) {
      const Shape& sh = ctx.s.tensor_shape[t];
      (*rows)[t] = !sh.empty() && sh[0] % ctx.k == 0;
    }
    PlanConstraint pc;
    pc.name = "allrow";
    pc.allow_tiling = [rows](TensorId t, const Tiling& ti, int) {
      return (*rows)[t] ? ti == Tiling::split(0) : ti.kind == Tiling::kReplicate;
    };
    return pc;
  });
}

}  // namespace autotile
