#include "search/pins.h"

#include <algorithm>
#include <memory>

#include "search/kcuts.h"
#include "util/error.h"

namespace autotile {

std::vector<int> cut_factors(int devices, const std::vector<int>& factors) {
  if (factors.empty()) return factorize(devices);
  int64_t product = 1;
  for (int f : factors) {
    if (f < 2) fail("cut factors must each be at least 2, got ", f);
    product *= f;
    if (product > devices) break;
  }
  if (product != devices) {
    std::string list;
    for (int f : factors) list += (list.empty() ? "" : " x ") + std::to_string(f);
    fail("cut factors ", list, " do not multiply to ", devices, " devices");
  }
  return factors;
}

PlanConstraint pin_table_constraint(const Graph& g, const std::vector<std::vector<std::string>>& pinned,
                                    size_t num_cuts) {
  PlanConstraint pc;
  pc.name = "layout";
  if (pinned.empty()) return pc;
  if (pinned.size() != static_cast<size_t>(g.num_tensors()))
    fail("layout: ", pinned.size(), " pin rows for ", g.num_tensors(), " tensors");
  // table[t * cuts + c]: the pinned tiling, or kind -1 (free).
  auto table = std::make_shared<std::vector<Tiling>>(g.num_tensors() * num_cuts, Tiling{Tiling::kReplicate, -2});
  auto any_pin = std::make_shared<std::vector<char>>(g.num_tensors(), 0);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const auto& row = pinned[t];
    if (row.empty()) continue;
    const Tensor& tensor = g.tensor(t);
    if (row.size() != num_cuts)
      fail("layout: tensor '", tensor.name, "' has ", row.size(), " pinned tilings for ", num_cuts, " cuts");
    for (size_t c = 0; c < num_cuts; ++c) {
      if (row[c].empty()) continue;
      Tiling ti;
      try {
        ti = Tiling::parse(row[c]);
      } catch (const Error& e) {
        fail("layout: tensor '", tensor.name, "' at cut ", c + 1, ": ", e.what());
      }
      if (ti.kind == Tiling::kSplit && ti.dim >= static_cast<int>(tensor.shape.size()))
        fail("layout: tensor '", tensor.name, "' has ", tensor.shape.size(), " dimensions; cannot split dimension ",
             ti.dim, " at cut ", c + 1);
      (*table)[t * num_cuts + c] = ti;
      (*any_pin)[t] = 1;
    }
  }
  pc.allow_tiling = [table, any_pin, num_cuts](TensorId t, const Tiling& ti, int cut) {
    if (!(*any_pin)[t] || cut < 0 || static_cast<size_t>(cut) >= num_cuts) return true;
    const Tiling& want = (*table)[t * num_cuts + cut];
    return want.dim == -2 || want == ti;
  };
  pc.explain = [any_pin](TensorId t) -> std::string {
    if (!(*any_pin)[t]) return "";
    return " (its tiling is fixed by the layout; a split must divide the dimension, and tensors the search ties "
           "together (a tensor and its gradient, element-wise chains) must agree)";
  };
  return pc;
}

}  // namespace autotile
