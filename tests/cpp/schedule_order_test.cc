// The serial schedule order (csrc/exec/schedule_order.h): its memory estimate against hand
// counts, and the choice of the order that needs less memory.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "exec/schedule_order.h"

namespace autotile {
namespace {

// x (input, 400 B) -> a (40 B) -> b (4 B), and x -> c (400 B) -> d (4 B); b, d are outputs.
Graph two_branches() {
  Graph g;
  TensorId x = g.add_tensor("x", {100}, DType::kFloat32);
  TensorId a = g.add_tensor("a", {10}, DType::kFloat32);
  TensorId b = g.add_tensor("b", {1}, DType::kFloat32);
  TensorId c = g.add_tensor("c", {100}, DType::kFloat32);
  TensorId d = g.add_tensor("d", {1}, DType::kFloat32);
  g.add_node("na", "op", {x}, {a}, "");
  g.add_node("nc", "op", {x}, {c}, "");
  g.add_node("nb", "op", {a}, {b}, "");
  g.add_node("nd", "op", {c}, {d}, "");
  g.mark_output(b);
  g.mark_output(d);
  return g;
}

TEST(ScheduleOrder, PeakBytesCountsLiveTensors) {
  Graph g = two_branches();
  // na nc nb nd: x 400 + a 40 + c 400 = 840 while nc runs (x dies after nc)
  EXPECT_EQ(serial_peak_bytes(g, {0, 1, 2, 3}), 840);
  // na nb nc nd: x + a + b = 444, then x + b + c = 804, then b + c + d = 408
  EXPECT_EQ(serial_peak_bytes(g, {0, 2, 1, 3}), 804);
}

TEST(ScheduleOrder, NeverNeedsMoreThanTheIdOrder) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    Graph g;
    std::vector<TensorId> pool;
    for (int i = 0; i < 3; ++i)
      pool.push_back(g.add_tensor("in" + std::to_string(i), {1 + static_cast<int64_t>(rng() % 50)}, DType::kFloat32));
    const int nodes = 3 + static_cast<int>(rng() % 12);
    for (int n = 0; n < nodes; ++n) {
      std::vector<TensorId> ins;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) ins.push_back(pool[rng() % pool.size()]);
      TensorId out = g.add_tensor("t" + std::to_string(n), {1 + static_cast<int64_t>(rng() % 50)}, DType::kFloat32);
      NodeId id = g.add_node("n" + std::to_string(n), "op", ins, {out}, "",
                             rng() % 3 == 0 ? NodeRole::kBackward : NodeRole::kForward);
      if (n > 0 && rng() % 2 == 0) g.set_backward_of(id, static_cast<NodeId>(rng() % n));
      pool.push_back(out);
    }
    std::vector<NodeId> order = schedule_order(g);
    ASSERT_EQ(order.size(), static_cast<size_t>(g.num_nodes()));
    std::vector<int> pos(g.num_nodes());
    for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
    for (NodeId v = 0; v < g.num_nodes(); ++v)  // a topological order
      for (TensorId t : g.node(v).inputs)
        if (g.tensor(t).producer != kNone) EXPECT_LT(pos[g.tensor(t).producer], pos[v]);
    EXPECT_LE(serial_peak_bytes(g, order), serial_peak_bytes(g, g.topo_order()));
  }
}

}  // namespace
}  // namespace autotile
