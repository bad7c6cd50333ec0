// The C API against the core it wraps: the same graph built through at_graph_* and through
// autotile::Graph must give the same plan (plan_graph) and the same execution graph
// (build_exec_graph), field by field, and the graph read back must be what was put in.
#include <gtest/gtest.h>

#include "exec/exec_graph.h"
#include "graph_spec.h"
#include "search/planner.h"

namespace capi_test {
namespace {

struct Handles {
  AT_Graph* g = nullptr;
  AT_Plan* p = nullptr;
  AT_ExecGraph* e = nullptr;
  ~Handles() {
    at_exec_free(e);
    at_plan_free(p);
    at_graph_free(g);
  }
};

TEST(CapiGraph, ReadBackMatchesSpec) {
  GraphSpec spec = mlp_spec();
  Handles h;
  h.g = build_capi(spec);
  int32_t n = 0;
  ASSERT_EQ(at_graph_num_tensors(h.g, &n), AT_OK);
  EXPECT_EQ(n, static_cast<int32_t>(spec.tensors.size()));
  ASSERT_EQ(at_graph_num_nodes(h.g, &n), AT_OK);
  EXPECT_EQ(n, static_cast<int32_t>(spec.ops.size()));
  for (size_t i = 0; i < spec.tensors.size(); ++i) {
    const auto& t = spec.tensors[i];
    int32_t id = -2;
    ASSERT_EQ(at_graph_find_tensor(h.g, t.name.c_str(), &id), AT_OK);
    EXPECT_EQ(id, static_cast<int32_t>(i));
    char buf[64];
    size_t len = 0;
    ASSERT_EQ(at_graph_tensor_name(h.g, id, buf, sizeof buf, &len), AT_OK);
    EXPECT_EQ(std::string(buf), t.name);
    EXPECT_EQ(len, t.name.size());
    int64_t dims[16];
    int32_t ndim = -1;
    ASSERT_EQ(at_graph_tensor_shape(h.g, id, dims, 16, &ndim), AT_OK);
    EXPECT_EQ(std::vector<int64_t>(dims, dims + ndim), t.shape);
    AT_DType dt = AT_BOOL;
    int32_t is_param = -1;
    ASSERT_EQ(at_graph_tensor_info(h.g, id, &dt, &is_param), AT_OK);
    EXPECT_EQ(dt, AT_FLOAT32);
    EXPECT_EQ(is_param, t.is_param ? 1 : 0);
  }
  for (size_t i = 0; i < spec.ops.size(); ++i) {
    int32_t id = -2;
    ASSERT_EQ(at_graph_find_node(h.g, spec.ops[i].name.c_str(), &id), AT_OK);
    EXPECT_EQ(id, static_cast<int32_t>(i));
    size_t len = 0;
    ASSERT_EQ(at_graph_node_name(h.g, id, nullptr, 0, &len), AT_OK);  // length query
    EXPECT_EQ(len, spec.ops[i].name.size());
  }
  int32_t id = 7;
  ASSERT_EQ(at_graph_find_tensor(h.g, "no_such_tensor", &id), AT_OK);
  EXPECT_EQ(id, AT_NONE);
  ASSERT_EQ(at_graph_find_node(h.g, "no_such_op", &id), AT_OK);
  EXPECT_EQ(id, AT_NONE);
  EXPECT_EQ(at_graph_validate(h.g), AT_OK);
}

void expect_same_plan(AT_Plan* p, const autotile::Plan& want) {
  int32_t v = 0;
  ASSERT_EQ(at_plan_devices(p, &v), AT_OK);
  EXPECT_EQ(v, want.devices);
  ASSERT_EQ(at_plan_num_cuts(p, &v), AT_OK);
  ASSERT_EQ(v, static_cast<int32_t>(want.factors.size()));
  for (int32_t c = 0; c < v; ++c) {
    int32_t f = 0;
    double cost = -1;
    ASSERT_EQ(at_plan_factor(p, c, &f), AT_OK);
    EXPECT_EQ(f, want.factors[c]);
    ASSERT_EQ(at_plan_cut_cost(p, c, &cost), AT_OK);
    EXPECT_DOUBLE_EQ(cost, want.cut_costs[c]);
  }
  double d = -1;
  ASSERT_EQ(at_plan_total_bytes(p, &d), AT_OK);
  EXPECT_DOUBLE_EQ(d, want.total_bytes);
  ASSERT_EQ(at_plan_weighted_cost(p, &d), AT_OK);
  EXPECT_DOUBLE_EQ(d, want.weighted_cost);
  ASSERT_EQ(at_plan_search_seconds(p, &d), AT_OK);
  EXPECT_GE(d, 0.0);
  const char* algo = nullptr;
  ASSERT_EQ(at_plan_algorithm(p, &algo), AT_OK);
  EXPECT_EQ(std::string(algo), want.algorithm);
  int32_t nt = 0, nn = 0;
  ASSERT_EQ(at_plan_num_tensors(p, &nt), AT_OK);
  ASSERT_EQ(at_plan_num_nodes(p, &nn), AT_OK);
  ASSERT_EQ(nt, static_cast<int32_t>(want.tensor_tilings.size()));
  ASSERT_EQ(nn, static_cast<int32_t>(want.node_strategies.size()));
  for (int32_t t = 0; t < nt; ++t)
    for (int32_t c = 0; c < v; ++c) {
      const char* s = nullptr;
      ASSERT_EQ(at_plan_tiling(p, t, c, &s), AT_OK);
      EXPECT_EQ(std::string(s), want.tensor_tilings[t][c]) << "tensor " << t << " cut " << c;
    }
  for (int32_t n = 0; n < nn; ++n)
    for (int32_t c = 0; c < v; ++c) {
      const char* s = nullptr;
      ASSERT_EQ(at_plan_strategy(p, n, c, &s), AT_OK);
      EXPECT_EQ(std::string(s), want.node_strategies[n][c]) << "node " << n << " cut " << c;
    }
}

class CapiPlan : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(CapiPlan, EqualsCorePlan) {
  const int devices = std::get<0>(GetParam());
  const std::string algo = std::get<1>(GetParam());
  GraphSpec spec = mlp_spec();
  Handles h;
  h.g = build_capi(spec);
  ASSERT_EQ(at_search(h.g, devices, algo.c_str(), nullptr, &h.p), AT_OK) << at_last_error();
  autotile::Graph core = build_core(spec);
  autotile::Plan want = autotile::plan_graph(core, devices, algo, autotile::SearchOptions());
  expect_same_plan(h.p, want);
}

INSTANTIATE_TEST_SUITE_P(Devices, CapiPlan,
                         ::testing::Combine(::testing::Values(1, 2, 4, 6, 8),
                                            ::testing::Values(std::string("tofu"), std::string("data"))));

TEST(CapiPlanOptions, BandwidthsAndReplicateFallbackReachTheCore) {
  GraphSpec spec = mlp_spec();
  // An op without TDL: planned only with replicate_fallback, and then replicated.
  spec.tensors.push_back({"probe_out", {24, 16}, false});
  spec.ops.push_back({"probe", "Opaque", {"softmax_output"}, {"probe_out"}, "", AT_ROLE_FORWARD, ""});
  Handles h;
  h.g = build_capi(spec);
  AT_SearchOptions o;
  ASSERT_EQ(at_search_options_init(&o), AT_OK);
  EXPECT_EQ(o.struct_size, sizeof(AT_SearchOptions));
  EXPECT_EQ(at_search(h.g, 4, "tofu", &o, &h.p), AT_ERR_INVALID_INPUT);
  EXPECT_NE(std::string(at_last_error()).find("probe"), std::string::npos) << at_last_error();
  const double bw[2] = {1e9, 1e10};
  o.replicate_fallback = 1;
  o.bandwidths = bw;
  o.num_bandwidths = 2;
  ASSERT_EQ(at_search(h.g, 4, "tofu", &o, &h.p), AT_OK) << at_last_error();
  autotile::Graph core = build_core(spec);
  autotile::SearchOptions so;
  so.replicate_fallback = true;
  so.bandwidths = {1e9, 1e10};
  expect_same_plan(h.p, autotile::plan_graph(core, 4, "tofu", so));
  const char* s = nullptr;
  ASSERT_EQ(at_plan_strategy(h.p, static_cast<int32_t>(spec.ops.size()) - 1, 0, &s), AT_OK);
  EXPECT_EQ(std::string(s), "replicate");
  // The exec pass accepts the replicated op too.
  ASSERT_EQ(at_exec_build(h.g, h.p, 0, &h.e), AT_OK) << at_last_error();
}

TEST(CapiPlanOptions, NullAlgorithmMeansTofuAndAllAlgorithmsAreListed) {
  Handles h;
  h.g = build_capi(mlp_spec());
  ASSERT_EQ(at_search(h.g, 2, nullptr, nullptr, &h.p), AT_OK) << at_last_error();
  const char* algo = nullptr;
  ASSERT_EQ(at_plan_algorithm(h.p, &algo), AT_OK);
  EXPECT_EQ(std::string(algo), "tofu");
  int32_t n = 0;
  ASSERT_EQ(at_num_algorithms(&n), AT_OK);
  ASSERT_EQ(n, static_cast<int32_t>(autotile::search_algorithms().size()));
  for (int32_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    ASSERT_EQ(at_algorithm_name(i, &name), AT_OK);
    EXPECT_EQ(std::string(name), autotile::search_algorithms()[i]);
  }
}

void expect_same_box(const autotile::Box& b, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  ASSERT_EQ(b.dims.size(), lo.size());
  for (size_t d = 0; d < lo.size(); ++d) {
    EXPECT_EQ(b.dims[d].lo, lo[d]);
    EXPECT_EQ(b.dims[d].hi, hi[d]);
  }
}

void expect_same_exec(AT_ExecGraph* e, const autotile::ExecGraph& want) {
  int32_t devices = 0, nops = 0, nbuf = 0;
  ASSERT_EQ(at_exec_num_devices(e, &devices), AT_OK);
  ASSERT_EQ(at_exec_num_ops(e, &nops), AT_OK);
  ASSERT_EQ(at_exec_num_buffers(e, &nbuf), AT_OK);
  ASSERT_EQ(devices, want.devices);
  ASSERT_EQ(nops, static_cast<int32_t>(want.ops.size()));
  ASSERT_EQ(nbuf, static_cast<int32_t>(want.buffers.size()));
  int64_t moved = -1;
  ASSERT_EQ(at_exec_bytes_moved(e, &moved), AT_OK);
  EXPECT_EQ(moved, want.bytes_moved);
  for (int32_t d = 0; d < devices; ++d) {
    const int32_t* sched = nullptr;
    int32_t count = -1;
    ASSERT_EQ(at_exec_schedule(e, d, &sched, &count), AT_OK);
    EXPECT_EQ(std::vector<int>(sched, sched + count), want.schedule[d]);
    int64_t v = -1;
    ASSERT_EQ(at_exec_arena_bytes(e, d, &v), AT_OK);
    EXPECT_EQ(v, want.arena_bytes[d]);
    ASSERT_EQ(at_exec_live_peak_bytes(e, d, &v), AT_OK);
    EXPECT_EQ(v, want.live_peak_bytes[d]);
    ASSERT_EQ(at_exec_bytes_received(e, d, &v), AT_OK);
    EXPECT_EQ(v, want.bytes_received[d]);
  }
  int64_t lo[16], hi[16];
  for (int32_t i = 0; i < nops; ++i) {
    const autotile::ExecOp& w = want.ops[i];
    AT_OpKind kind;
    int32_t device = -1, node = -2, acc = -1;
    int64_t bytes = -1;
    ASSERT_EQ(at_exec_op(e, i, &kind, &device, &node, &acc, &bytes), AT_OK);
    EXPECT_EQ(kind == AT_OP_COMPUTE, w.kind == autotile::ExecKind::kCompute);
    EXPECT_EQ(device, w.device);
    EXPECT_EQ(node, w.node);
    EXPECT_EQ(acc != 0, w.accumulate);
    EXPECT_EQ(bytes, w.bytes_moved);
    const int32_t* ids = nullptr;
    int32_t n = -1;
    ASSERT_EQ(at_exec_op_inputs(e, i, &ids, &n), AT_OK);
    EXPECT_EQ(std::vector<int>(ids, ids + n), w.inputs);
    ASSERT_EQ(at_exec_op_outputs(e, i, &ids, &n), AT_OK);
    EXPECT_EQ(std::vector<int>(ids, ids + n), w.outputs);
    ASSERT_EQ(at_exec_op_deps(e, i, &ids, &n), AT_OK);
    EXPECT_EQ(std::vector<int>(ids, ids + n), w.deps);
    for (size_t k = 0; k < w.input_boxes.size(); ++k) {
      int32_t ndim = -1;
      ASSERT_EQ(at_exec_op_input_box(e, i, static_cast<int32_t>(k), lo, hi, 16, &ndim), AT_OK);
      expect_same_box(w.input_boxes[k], std::vector<int64_t>(lo, lo + ndim), std::vector<int64_t>(hi, hi + ndim));
    }
    ASSERT_EQ(at_exec_op_num_pieces(e, i, &n), AT_OK);
    ASSERT_EQ(n, static_cast<int32_t>(w.pieces.size()));
    for (int32_t k = 0; k < n; ++k) {
      int32_t src = -2, ndim = -1;
      ASSERT_EQ(at_exec_op_piece(e, i, k, &src, lo, hi, 16, &ndim), AT_OK);
      EXPECT_EQ(src, w.pieces[k].src);
      expect_same_box(w.pieces[k].region, std::vector<int64_t>(lo, lo + ndim), std::vector<int64_t>(hi, hi + ndim));
    }
  }
  for (int32_t i = 0; i < nbuf; ++i) {
    const autotile::Buffer& w = want.buffers[i];
    int32_t device = -1, tensor = -2, partial = -1, producer = -2, ndim = -1;
    AT_BufferRole role;
    int64_t bytes = -1, offset = -2;
    ASSERT_EQ(at_exec_buffer(e, i, &device, &tensor, &role, &partial, &producer, &bytes, &offset), AT_OK);
    EXPECT_EQ(device, w.device);
    EXPECT_EQ(tensor, w.tensor);
    EXPECT_EQ(static_cast<int>(role), static_cast<int>(w.role));
    EXPECT_EQ(partial != 0, w.partial);
    EXPECT_EQ(producer, w.producer);
    EXPECT_EQ(bytes, w.bytes);
    EXPECT_EQ(offset, w.offset);
    ASSERT_EQ(at_exec_buffer_box(e, i, lo, hi, 16, &ndim), AT_OK);
    expect_same_box(w.box, std::vector<int64_t>(lo, lo + ndim), std::vector<int64_t>(hi, hi + ndim));
  }
  const int32_t tensors = static_cast<int32_t>(want.tile_of.size() / want.devices);
  for (int32_t t = 0; t < tensors; ++t)
    for (int32_t d = 0; d < devices; ++d) {
      int32_t b = -2;
      ASSERT_EQ(at_exec_tile(e, t, d, &b), AT_OK);
      EXPECT_EQ(b, want.tile(t, d));
    }
}

class CapiExec : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(CapiExec, EqualsCoreExecGraph) {
  const int devices = std::get<0>(GetParam());
  const bool control_deps = std::get<1>(GetParam());
  GraphSpec spec = mlp_spec();
  Handles h;
  h.g = build_capi(spec);
  ASSERT_EQ(at_search(h.g, devices, "tofu", nullptr, &h.p), AT_OK) << at_last_error();
  ASSERT_EQ(at_exec_build(h.g, h.p, control_deps ? 0u : AT_EXEC_NO_CONTROL_DEPS, &h.e), AT_OK) << at_last_error();
  autotile::Graph core = build_core(spec);
  autotile::Plan plan = autotile::plan_graph(core, devices, "tofu", autotile::SearchOptions());
  autotile::PlanSpec ps{plan.factors, plan.tensor_tilings, plan.node_strategies};
  autotile::ExecOptions eo;
  eo.control_deps = control_deps;
  expect_same_exec(h.e, autotile::build_exec_graph(core, ps, eo));
}

INSTANTIATE_TEST_SUITE_P(Devices, CapiExec, ::testing::Combine(::testing::Values(1, 4, 6, 8), ::testing::Bool()));

TEST(CapiExecWalk, EveryDeviceRunsEveryNodeOnceAndFetchesHavePieces) {
  // Independent of the core oracle: the structural promises of the execution graph.
  GraphSpec spec = mlp_spec();
  Handles h;
  h.g = build_capi(spec);
  ASSERT_EQ(at_search(h.g, 8, "tofu", nullptr, &h.p), AT_OK) << at_last_error();
  ASSERT_EQ(at_exec_build(h.g, h.p, 0, &h.e), AT_OK) << at_last_error();
  int32_t nodes = 0;
  ASSERT_EQ(at_graph_num_nodes(h.g, &nodes), AT_OK);
  int64_t fetched = 0;
  for (int32_t d = 0; d < 8; ++d) {
    const int32_t* sched = nullptr;
    int32_t count = 0;
    ASSERT_EQ(at_exec_schedule(h.e, d, &sched, &count), AT_OK);
    std::vector<int> computed(static_cast<size_t>(nodes), 0);
    for (int32_t i = 0; i < count; ++i) {
      AT_OpKind kind;
      int32_t device = -1, node = -1;
      int64_t bytes = 0;
      ASSERT_EQ(at_exec_op(h.e, sched[i], &kind, &device, &node, nullptr, &bytes), AT_OK);
      EXPECT_EQ(device, d);
      int32_t pieces = 0;
      ASSERT_EQ(at_exec_op_num_pieces(h.e, sched[i], &pieces), AT_OK);
      if (kind == AT_OP_COMPUTE) {
        ++computed[static_cast<size_t>(node)];
        EXPECT_EQ(pieces, 0);
      } else {
        EXPECT_GT(pieces, 0);
        fetched += bytes;
      }
    }
    for (int32_t n = 0; n < nodes; ++n) EXPECT_EQ(computed[n], 1) << "device " << d << " node " << n;
  }
  int64_t moved = 0;
  ASSERT_EQ(at_exec_bytes_moved(h.e, &moved), AT_OK);
  EXPECT_EQ(moved, fetched);
}

}  // namespace
}  // namespace capi_test

namespace capi_test {
namespace {

TEST(CapiEdgeGraphs, EmptyGraphAndScalarOps) {
  Handles empty;
  ASSERT_EQ(at_graph_create(&empty.g), AT_OK);
  ASSERT_EQ(at_search(empty.g, 4, "tofu", nullptr, &empty.p), AT_OK) << at_last_error();
  double total = -1;
  ASSERT_EQ(at_plan_total_bytes(empty.p, &total), AT_OK);
  EXPECT_EQ(total, 0.0);
  ASSERT_EQ(at_exec_build(empty.g, empty.p, 0, &empty.e), AT_OK) << at_last_error();
  int32_t n = -1;
  ASSERT_EQ(at_exec_num_ops(empty.e, &n), AT_OK);
  EXPECT_EQ(n, 0);
  const int32_t* ops = reinterpret_cast<const int32_t*>(&n);
  ASSERT_EQ(at_exec_schedule(empty.e, 3, &ops, &n), AT_OK);
  EXPECT_EQ(n, 0);

  // A rank-0 tensor cannot be split: every device holds it whole and runs the op.
  Handles h;
  ASSERT_EQ(at_graph_create(&h.g), AT_OK);
  int32_t s = -1, o = -1, node = -1;
  ASSERT_EQ(at_graph_add_tensor(h.g, "s", 0, nullptr, AT_FLOAT64, 0, &s), AT_OK);
  ASSERT_EQ(at_graph_add_tensor(h.g, "o", 0, nullptr, AT_FLOAT64, 0, &o), AT_OK);
  ASSERT_EQ(at_graph_add_op(h.g, "neg", "Neg", 1, &s, 1, &o, "x -> y: y[] = -x[]", AT_ROLE_FORWARD, &node), AT_OK)
      << at_last_error();
  ASSERT_EQ(at_search(h.g, 3, "tofu", nullptr, &h.p), AT_OK) << at_last_error();
  const char* tiling = nullptr;
  ASSERT_EQ(at_plan_tiling(h.p, s, 0, &tiling), AT_OK);
  EXPECT_STREQ(tiling, "replicate");
  ASSERT_EQ(at_exec_build(h.g, h.p, 0, &h.e), AT_OK) << at_last_error();
  ASSERT_EQ(at_exec_num_ops(h.e, &n), AT_OK);
  EXPECT_EQ(n, 3);
  int32_t ndim = -1, buffer = -1;
  ASSERT_EQ(at_exec_tile(h.e, o, 2, &buffer), AT_OK);
  ASSERT_EQ(at_exec_buffer_box(h.e, buffer, nullptr, nullptr, 0, &ndim), AT_OK);
  EXPECT_EQ(ndim, 0);
}

}  // namespace
}  // namespace capi_test
