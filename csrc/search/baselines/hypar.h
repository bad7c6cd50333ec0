// The `hypar` baseline: HyPar (hypar-hybrid-parallelism.txt Sec 3-4). For each cut (a
// hierarchy level of Alg. 2; every k_i-way cut is treated as HyPar's two-way partition
// between groups), Alg. 1 chooses dp or mp for every weighted layer by a layer-wise dynamic
// program over HyPar's own communication model, evaluated at the shapes the earlier cuts
// left (the sub-array's workload):
//   intra-layer (Table 1):  dp: A(dW_l)       mp: A(F_(l+1))
//   inter-layer (Table 2):  dp-dp: 0   dp-mp: 0.25 A(F_(l+1)) + 0.25 A(E_(l+1))
//                           mp-mp: 0.5 A(E_(l+1))   mp-dp: 0.5 A(E_(l+1))
// with F_(l+1) the forward output of layer l (intra) and the input of layer l+1 (inter,
// A(E) = A(F)). A layer whose batch tensors no longer divide by k cannot be dp. The chosen
// layer-wise plan is then run through the same DP and cost model as every other algorithm
// (layerwise.h decides the rest), so its cost is comparable.
#pragma once
#include <vector>

#include "search/baselines/layers.h"
#include "search/kcuts.h"
#include "search/plan.h"

namespace autotile {

/// \brief HyPar's per-layer inputs for one cut, in elements (exposed for tests).
struct HyparLayerCost {
  double intra_dp = 0, intra_mp = 0, inter = 0;  ///< inter: A(F) of the layer's input
  bool dp_ok = true;
};

/// \brief Alg. 1 on given per-layer costs: mp[l] for every layer and the minimal HyPar
/// communication (elements). Ties prefer dp.
std::vector<char> hypar_partition(const std::vector<HyparLayerCost>& layers, double* com = nullptr);

/// \brief Plans `g` with HyPar's layer-wise dp/mp choice per cut.
Plan hypar_plan(const Graph& g, int devices, const SearchOptions& options);

}  // namespace autotile
