// The communication cost model shared by every algorithm (search, baselines, price_plan).
//
// Conversion cost = ghost area minus what each device already holds (Soybean 4.2.1), counted
// over all K devices of the cuts so far ("flat" accounting), in elements:
//
//  * complete values held, need N_d:  sum_d |N_d \ H_d|   (replicate holds everything: 0)
//  * values partial across a set R of cuts (P = prod of their k; the P devices that differ
//    only in those cuts hold partial sums of the same box B), need N_d: the cheapest of
//      - direct fetch: each device pulls the other P-1 partials of N_d ∩ B_d and all P of
//        the part outside B_d;
//      - reduce-scatter inside each reduction group ((P-1)|B| per group, each member keeps a
//        1/P slab of B along some dim e, or a flat 1/P chunk), then fetch what is missing.
//    So partial -> replicate costs 2(P-1)|B| per group (ring all-reduce: 2(P-1)/P |B| per
//    device) and partial -> split costs (P-1)|B| (reduce-scatter). For P = 2 all forms agree
//    with Soybean's "each device fetches the other's partial".
//  * A target that is itself partial across cut c needs no reduction across c; it is
//    reachable only from values partial across c (a producer that splits instead is not
//    allowed to feed a partial tiling: that would only hide work), otherwise infinite.
//
// Soybean's and HyPar's totals count each device's traffic with a parameter server (each
// device pushes and pulls the whole tensor: 2*K*S); this model counts the bytes actually
// moved by the best collective, 2*(K-1)*S for an all-reduce: a factor (K-1)/K below theirs.
#pragma once
#include <limits>

#include "search/layout.h"

namespace autotile {

constexpr double kInfCost = std::numeric_limits<double>::infinity();

/// \brief Elements moved to turn `held` into `need` (both over the same devices and cuts).
/// `factors` are the k of each cut so far.
double conversion_elements(const DeviceLayout& held, const DeviceLayout& need, const std::vector<int>& factors);

}  // namespace autotile
