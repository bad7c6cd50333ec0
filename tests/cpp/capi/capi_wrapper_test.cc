// The header-only C++ wrapper (autotile.hpp) and the C smoke program (c_smoke.c).
#include <gtest/gtest.h>

#include <type_traits>

#include "autotile/autotile.hpp"
#include "graph_spec.h"

extern "C" int capi_c_smoke(char* msg, size_t cap);

namespace capi_test {
namespace {

namespace api = autotile::api;

TEST(CapiC, SmokeProgramCompiledAsC) {
  char msg[512];
  EXPECT_EQ(capi_c_smoke(msg, sizeof msg), 0) << msg;
}

api::Graph build_wrapped(const GraphSpec& spec) {
  api::Graph g;
  for (const auto& t : spec.tensors) g.add_tensor(t.name, t.shape, "float32", t.is_param);
  for (const auto& o : spec.ops) {
    std::vector<int32_t> ins, outs;
    for (const auto& n : o.inputs) ins.push_back(g.find_tensor(n));
    for (const auto& n : o.outputs) outs.push_back(g.find_tensor(n));
    int32_t id = g.add_op(o.name, o.op, ins, outs, o.tdl, o.role);
    if (!o.backward_of.empty()) g.set_backward_of(id, g.find_node(o.backward_of));
  }
  for (const auto& gr : spec.gradients) g.set_gradient(g.find_tensor(gr.first), g.find_tensor(gr.second));
  for (const auto& n : spec.outputs) g.mark_output(g.find_tensor(n));
  return g;
}

TEST(CapiWrapper, SameResultsAsTheCApi) {
  GraphSpec spec = mlp_spec();
  api::Graph g = build_wrapped(spec);
  EXPECT_EQ(g.num_tensors(), static_cast<int32_t>(spec.tensors.size()));
  EXPECT_EQ(g.tensor_name(1), "fc1_weight");
  EXPECT_EQ(g.node_name(0), "fc1");
  EXPECT_EQ(g.tensor_shape(1), (std::vector<int64_t>{64, 32}));
  EXPECT_TRUE(g.is_param(1));
  api::Plan plan = g.search(8);
  AT_Graph* raw = build_capi(spec);
  AT_Plan* rp = nullptr;
  ASSERT_EQ(at_search(raw, 8, "tofu", nullptr, &rp), AT_OK);
  double total = 0;
  ASSERT_EQ(at_plan_total_bytes(rp, &total), AT_OK);
  EXPECT_EQ(plan.total_bytes(), total);
  EXPECT_EQ(plan.factors(), (std::vector<int32_t>{2, 2, 2}));
  for (int32_t t = 0; t < plan.num_tensors(); ++t) {
    std::string joined;
    for (int32_t c = 0; c < 3; ++c) {
      const char* s = nullptr;
      ASSERT_EQ(at_plan_tiling(rp, t, c, &s), AT_OK);
      joined += (c ? " " : "") + std::string(s);
    }
    EXPECT_EQ(plan.tiling(t), joined);
  }
  api::ExecGraph eg(g, plan);
  AT_ExecGraph* re = nullptr;
  ASSERT_EQ(at_exec_build(raw, rp, 0, &re), AT_OK);
  int32_t nops = 0;
  ASSERT_EQ(at_exec_num_ops(re, &nops), AT_OK);
  EXPECT_EQ(eg.num_ops(), nops);
  int64_t fetched = 0;
  for (int32_t d = 0; d < eg.devices(); ++d)
    for (int32_t op : eg.schedule(d)) {
      api::ExecOp o = eg.op(op);
      EXPECT_EQ(o.device, d);
      EXPECT_EQ(o.piece_src.size(), o.piece_region.size());
      for (size_t k = 0; k < o.piece_src.size(); ++k) {
        api::ExecBuffer src = eg.buffer(o.piece_src[k]);
        // A piece lies inside the box its source buffer holds.
        ASSERT_EQ(src.box.lo.size(), o.piece_region[k].lo.size());
        for (size_t dim = 0; dim < src.box.lo.size(); ++dim) {
          EXPECT_LE(src.box.lo[dim], o.piece_region[k].lo[dim]);
          EXPECT_GE(src.box.hi[dim], o.piece_region[k].hi[dim]);
        }
      }
      fetched += o.bytes_moved;
    }
  EXPECT_EQ(fetched, eg.bytes_moved());
  at_exec_free(re);
  at_plan_free(rp);
  at_graph_free(raw);
}

TEST(CapiWrapper, ErrorsThrowWithStatusAndMessage) {
  api::Graph g;
  g.add_tensor("a", {4, 4});
  try {
    g.add_tensor("a", {4, 4});
    FAIL() << "no exception";
  } catch (const api::Error& e) {
    EXPECT_EQ(e.status(), AT_ERR_INVALID_INPUT);
    EXPECT_NE(std::string(e.what()).find("duplicate tensor name 'a'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.add_tensor("b", {4}, "float128"), api::Error);
  EXPECT_THROW(g.search(0), api::Error);
  EXPECT_THROW(g.tensor_name(5), api::Error);
  try {
    g.search(2, "nope");
    FAIL() << "no exception";
  } catch (const api::Error& e) {
    EXPECT_EQ(e.status(), AT_ERR_INVALID_ARGUMENT);
  }
}

TEST(CapiWrapper, HandlesMoveAndFreeOnce) {
  static_assert(!std::is_copy_constructible<api::Graph>::value, "graphs are move-only");
  static_assert(std::is_nothrow_move_constructible<api::Plan>::value, "plans move without throwing");
  api::Graph a;
  a.add_tensor("x", {2});
  AT_Graph* raw = a.handle();
  api::Graph b(std::move(a));
  EXPECT_EQ(b.handle(), raw);
  EXPECT_EQ(a.handle(), nullptr);
  EXPECT_EQ(b.num_tensors(), 1);
  {
    api::Graph c = std::move(b);
    EXPECT_EQ(c.find_tensor("x"), 0);
  }  // freed here, exactly once
  int32_t n = 0;
  EXPECT_EQ(at_graph_num_tensors(raw, &n), AT_ERR_INVALID_HANDLE);
}

}  // namespace
}  // namespace capi_test
