// The refinement's pricing under the time objective (search/refiner.h, search/time_cost.h): a
// move's edge tables in seconds of the whole plan, as plan_seconds prices it. An edge's seconds
// over the cuts from the one a move changes are its flat bytes after each of those cuts (the
// tensor's held layout and the node's need or make after the cut) priced at that cut's rate,
// plus that cut's latency times its message rounds where the edge starts moving bytes; a node's
// compute is that of its final tiles. Each depends only on the tensor's value and the node's
// option at the cuts the move changes, so the move's problem keeps the cut problem's pairwise
// form and the DP is exact on the whole plan's seconds.
#include <vector>

#include "search/cost_model.h"
#include "search/refiner.h"
#include "search/time_cost.h"

namespace autotile {
namespace refine {

void NodePath::push(const std::vector<int>& need_after, const std::vector<int>& make_after, const NodeOption& o) {
  need.push_back(need_after);
  make.push_back(make_after);
  std::vector<char> part(make_after.size());
  for (size_t i = 0; i < part.size(); ++i) part[i] = makes_partial(o, i);
  partial.push_back(std::move(part));
  read.assign(need_after.size(), 1);
  if (!o.whole)
    for (size_t i = 0; i < read.size(); ++i) read[i] = o.strategy.inputs[i].read;
}

std::vector<std::vector<int>> Refiner::factors_upto() const {
  std::vector<std::vector<int>> upto(cuts);
  for (int j = 0; j < cuts; ++j) upto[j].assign(factors.begin(), factors.begin() + j + 1);
  return upto;
}

double Refiner::edge_seconds(NodeId n, size_t e, int from, double before, const TensorPath& tp, const NodePath& np,
                             const std::vector<std::vector<int>>& upto) const {
  const Node& node = g.node(n);
  const size_t ins = node.inputs.size();
  const TensorId t = e < ins ? node.inputs[e] : node.outputs[e - ins];
  LayoutPool& pool = *prefix[0].pool;
  double sec = 0, prev = before;
  for (int j = from; j < cuts; ++j) {
    const size_t a = j - from;
    const double b = e < ins ? edge_bytes(g, t, pool, tp.held[a], np.need[a][e], upto[j])
                             : edge_bytes(g, t, pool, np.make[a][e - ins], tp.held[a], upto[j]);
    if (!(b < kInfCost)) return kInfCost;
    const int rounds = e < ins ? input_rounds(tp.tiling[a]) : output_rounds(np.partial[a][e - ins], tp.tiling[a]);
    sec += edge_cut_seconds(*options.time, j, prev, b, rounds);
    prev = b;
  }
  return sec;
}

double Refiner::final_seconds(NodeId n, const NodePrefix& at, const NodePath& np) const {
  return options.time->node_seconds(g, n, at.in, at.out, np.read);
}

}  // namespace refine
}  // namespace autotile
