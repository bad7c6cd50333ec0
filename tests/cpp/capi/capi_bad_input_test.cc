// Bad values through the C API: malformed tensors and ops, malformed TDL, cyclic graphs,
// device counts, search options, plans that do not fit, small caller buffers. Each gives
// the documented status and a message naming what is wrong; the graph stays usable.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "graph_spec.h"

namespace capi_test {
namespace {

void expect_message_has(const std::string& needle) {
  std::string msg = at_last_error();
  EXPECT_NE(msg.find(needle), std::string::npos) << "message '" << msg << "' lacks '" << needle << "'";
}

/// An empty graph freed at the end of the test.
struct G {
  AT_Graph* g = nullptr;
  G() { EXPECT_EQ(at_graph_create(&g), AT_OK); }
  ~G() { at_graph_free(g); }
  int32_t tensor(const char* name, std::vector<int64_t> shape) {
    int32_t id = -1;
    EXPECT_EQ(at_graph_add_tensor(g, name, static_cast<int32_t>(shape.size()), shape.data(), AT_FLOAT32, 0, &id),
              AT_OK)
        << at_last_error();
    return id;
  }
  AT_Status op(const char* name, std::vector<int32_t> ins, std::vector<int32_t> outs, const char* tdl,
               int32_t* id = nullptr) {
    int32_t scratch = -1;
    return at_graph_add_op(g, name, "Op", static_cast<int32_t>(ins.size()), ins.data(),
                           static_cast<int32_t>(outs.size()), outs.data(), tdl, AT_ROLE_FORWARD, id ? id : &scratch);
  }
  int32_t count_tensors() {
    int32_t n = -1;
    EXPECT_EQ(at_graph_num_tensors(g, &n), AT_OK);
    return n;
  }
  int32_t count_nodes() {
    int32_t n = -1;
    EXPECT_EQ(at_graph_num_nodes(g, &n), AT_OK);
    return n;
  }
};

TEST(CapiBadInput, Tensors) {
  G g;
  int32_t id = -1;
  const int64_t ok[2] = {4, 8};
  const int64_t zero[2] = {4, 0};
  const int64_t neg[2] = {-4, 8};
  const int64_t huge[3] = {int64_t{1} << 40, int64_t{1} << 40, 2};
  int64_t many[17];
  for (auto& d : many) d = 1;
  expect_error(at_graph_add_tensor(g.g, "t", -1, ok, AT_FLOAT32, 0, &id), AT_ERR_INVALID_ARGUMENT,
               "at_graph_add_tensor");
  expect_error(at_graph_add_tensor(g.g, "t", 17, many, AT_FLOAT32, 0, &id), AT_ERR_INVALID_ARGUMENT,
               "at_graph_add_tensor");
  expect_error(at_graph_add_tensor(g.g, "t", 2, nullptr, AT_FLOAT32, 0, &id), AT_ERR_NULL_ARGUMENT,
               "at_graph_add_tensor");
  expect_error(at_graph_add_tensor(g.g, nullptr, 2, ok, AT_FLOAT32, 0, &id), AT_ERR_NULL_ARGUMENT,
               "at_graph_add_tensor");
  expect_error(at_graph_add_tensor(g.g, "t", 2, zero, AT_FLOAT32, 0, &id), AT_ERR_INVALID_INPUT,
               "at_graph_add_tensor");
  expect_message_has("non-positive");
  expect_error(at_graph_add_tensor(g.g, "t", 2, neg, AT_FLOAT32, 0, &id), AT_ERR_INVALID_INPUT,
               "at_graph_add_tensor");
  expect_error(at_graph_add_tensor(g.g, "t", 3, huge, AT_FLOAT32, 0, &id), AT_ERR_INVALID_INPUT,
               "at_graph_add_tensor");
  expect_message_has("too large");
  expect_error(at_graph_add_tensor(g.g, "", 2, ok, AT_FLOAT32, 0, &id), AT_ERR_INVALID_INPUT, "at_graph_add_tensor");
  expect_error(at_graph_add_tensor(g.g, "t", 2, ok, static_cast<AT_DType>(99), 0, &id), AT_ERR_INVALID_ARGUMENT,
               "at_graph_add_tensor");
  expect_error(at_graph_add_tensor(g.g, "t", 2, ok, static_cast<AT_DType>(-1), 0, &id), AT_ERR_INVALID_ARGUMENT,
               "at_graph_add_tensor");
  EXPECT_EQ(g.count_tensors(), 0) << "failed calls add nothing";
  ASSERT_EQ(at_graph_add_tensor(g.g, "t", 2, ok, AT_FLOAT32, 0, &id), AT_OK);
  EXPECT_EQ(id, 0);
  expect_error(at_graph_add_tensor(g.g, "t", 2, ok, AT_FLOAT32, 0, &id), AT_ERR_INVALID_INPUT, "at_graph_add_tensor");
  expect_message_has("duplicate tensor name 't'");
  ASSERT_EQ(at_graph_add_tensor(g.g, "scalar", 0, nullptr, AT_INT64, 0, &id), AT_OK) << at_last_error();
  int32_t ndim = -1;
  ASSERT_EQ(at_graph_tensor_shape(g.g, id, nullptr, 0, &ndim), AT_OK);
  EXPECT_EQ(ndim, 0);
}

TEST(CapiBadInput, Ops) {
  G g;
  int32_t a = g.tensor("a", {4, 8});
  int32_t b = g.tensor("b", {4, 8});
  int32_t c = g.tensor("c", {4, 8});
  const char* copy = "x -> y: y[i, j] = x[i, j]";
  int32_t id = -1;
  expect_error(at_graph_add_op(g.g, "n", "Op", -1, nullptr, 1, &b, copy, AT_ROLE_FORWARD, &id),
               AT_ERR_INVALID_ARGUMENT, "at_graph_add_op");
  expect_error(at_graph_add_op(g.g, "n", "Op", 1, nullptr, 1, &b, copy, AT_ROLE_FORWARD, &id), AT_ERR_NULL_ARGUMENT,
               "at_graph_add_op");
  expect_error(at_graph_add_op(g.g, "n", "Op", 1, &a, 1, nullptr, copy, AT_ROLE_FORWARD, &id), AT_ERR_NULL_ARGUMENT,
               "at_graph_add_op");
  expect_error(at_graph_add_op(g.g, "n", nullptr, 1, &a, 1, &b, copy, AT_ROLE_FORWARD, &id), AT_ERR_NULL_ARGUMENT,
               "at_graph_add_op");
  expect_error(at_graph_add_op(g.g, "n", "Op", 1, &a, 1, &b, copy, static_cast<AT_Role>(7), &id),
               AT_ERR_INVALID_ARGUMENT, "at_graph_add_op");
  expect_error(g.op("n", {a}, {}, copy), AT_ERR_INVALID_INPUT, "at_graph_add_op");
  expect_message_has("no outputs");
  expect_error(g.op("n", {a}, {b, b}, ""), AT_ERR_INVALID_INPUT, "at_graph_add_op");
  expect_error(g.op("n", {99}, {b}, copy), AT_ERR_OUT_OF_RANGE, "at_graph_add_op");
  expect_message_has("input 0 is tensor id 99");
  expect_error(g.op("n", {a}, {-1}, copy), AT_ERR_OUT_OF_RANGE, "at_graph_add_op");
  int32_t nid = -1;
  expect_error(at_graph_add_op(g.g, "n", "", 1, &a, 1, &b, copy, AT_ROLE_FORWARD, &nid), AT_ERR_INVALID_INPUT,
               "at_graph_add_op");
  EXPECT_EQ(g.count_nodes(), 0);
  ASSERT_EQ(g.op("n", {a}, {b}, copy, &nid), AT_OK) << at_last_error();
  expect_error(g.op("n", {a}, {c}, copy), AT_ERR_INVALID_INPUT, "at_graph_add_op");
  expect_message_has("duplicate node name 'n'");
  expect_error(g.op("m", {a}, {b}, copy), AT_ERR_INVALID_INPUT, "at_graph_add_op");
  expect_message_has("already has producer");
  // Op-level calls on ids.
  expect_error(at_graph_set_backward_of(g.g, nid, nid), AT_ERR_INVALID_INPUT, "at_graph_set_backward_of");
  expect_error(at_graph_set_gradient(g.g, a, a), AT_ERR_INVALID_INPUT, "at_graph_set_gradient");
  int32_t other = g.tensor("other", {8, 4});
  expect_error(at_graph_set_gradient(g.g, a, other), AT_ERR_INVALID_INPUT, "at_graph_set_gradient");
  expect_message_has("shape");
  expect_error(at_graph_set_attr(g.g, nid, "", "v"), AT_ERR_INVALID_ARGUMENT, "at_graph_set_attr");
  expect_error(at_graph_set_attr(g.g, nid, "k", nullptr), AT_ERR_NULL_ARGUMENT, "at_graph_set_attr");
  expect_error(at_graph_set_role(g.g, nid, static_cast<AT_Role>(-1)), AT_ERR_INVALID_ARGUMENT, "at_graph_set_role");
  EXPECT_EQ(g.count_nodes(), 1);
  EXPECT_EQ(at_graph_validate(g.g), AT_OK);
}

TEST(CapiBadInput, MalformedTdlIsRejectedWhenTheOpIsAdded) {
  G g;
  int32_t a = g.tensor("a", {4, 8});
  int32_t w = g.tensor("w", {6, 8});
  int32_t y = g.tensor("y", {4, 6});
  const char* bad[] = {
      "x, w -> y: y[n, o] = sum(k) { x[n, k] * w[o, k] ",    // unbalanced brace
      "x, w -> y: y[n, o] = sum(k) { x[n, k] * w[o, k, 1] }",  // rank of w is 2
      "x -> y: y[n, o] = x[n, o]",                            // 1 header input for 2 inputs
      "x, w -> y: y[n] = sum(k) { x[n, k] * w[0, k] }",       // y has rank 2
      "x, w -> y: y[n, o] = sum(k) { x[n, k] * w[o, q] }",    // unknown variable q
      "x, w -> y y[n, o] = 1",                                // missing ':'
      "\x01\x02\xff",                                         // garbage bytes
  };
  for (const char* tdl : bad) {
    expect_error(g.op("matmul", {a, w}, {y}, tdl), AT_ERR_INVALID_INPUT, "at_graph_add_op");
    expect_message_has("op 'matmul' (Op): bad TDL");
  }
  EXPECT_EQ(g.count_nodes(), 0) << "a rejected op is not added";
  ASSERT_EQ(g.op("matmul", {a, w}, {y}, "x, w -> y: y[n, o] = sum(k) { x[n, k] * w[o, k] }"), AT_OK)
      << at_last_error();
}

TEST(CapiBadInput, CyclicGraph) {
  G g;
  int32_t a = g.tensor("a", {4, 8});
  int32_t b = g.tensor("b", {4, 8});
  const char* copy = "x -> y: y[i, j] = x[i, j]";
  ASSERT_EQ(g.op("first", {a}, {b}, copy), AT_OK);
  ASSERT_EQ(g.op("second", {b}, {a}, copy), AT_OK);  // a's producer now reads b: a cycle
  expect_error(at_graph_validate(g.g), AT_ERR_INVALID_INPUT, "at_graph_validate");
  expect_message_has("cycle");
  AT_Plan* p = nullptr;
  expect_error(at_search(g.g, 2, "tofu", nullptr, &p), AT_ERR_INVALID_INPUT, "at_search");
  expect_message_has("cycle");
  EXPECT_EQ(p, nullptr);
}

TEST(CapiBadInput, SearchArguments) {
  AT_Graph* g = build_capi(mlp_spec());
  AT_Plan* p = nullptr;
  for (int32_t devices : {0, -1, -2147483647 - 1, AT_MAX_DEVICES + 1}) {
    expect_error(at_search(g, devices, "tofu", nullptr, &p), AT_ERR_INVALID_ARGUMENT, "at_search");
    expect_message_has("devices");
  }
  expect_error(at_search(g, 2, "simulated-annealing", nullptr, &p), AT_ERR_INVALID_ARGUMENT, "at_search");
  expect_message_has("unknown search algorithm 'simulated-annealing'");
  AT_SearchOptions o;
  ASSERT_EQ(at_search_options_init(&o), AT_OK);
  AT_SearchOptions bad = o;
  bad.struct_size = 0;
  expect_error(at_search(g, 2, "tofu", &bad, &p), AT_ERR_INVALID_ARGUMENT, "at_search");
  bad = o;
  bad.struct_size = 100000;
  expect_error(at_search(g, 2, "tofu", &bad, &p), AT_ERR_INVALID_ARGUMENT, "at_search");
  bad = o;
  bad.num_bandwidths = -1;
  expect_error(at_search(g, 2, "tofu", &bad, &p), AT_ERR_INVALID_ARGUMENT, "at_search");
  bad = o;
  bad.num_bandwidths = 1;
  expect_error(at_search(g, 2, "tofu", &bad, &p), AT_ERR_NULL_ARGUMENT, "at_search");
  const double nan[1] = {std::numeric_limits<double>::quiet_NaN()};
  const double negative[1] = {-1e9};
  const double inf[1] = {std::numeric_limits<double>::infinity()};
  for (const double* bw : {nan, negative, inf}) {
    bad = o;
    bad.bandwidths = bw;
    bad.num_bandwidths = 1;
    expect_error(at_search(g, 2, "tofu", &bad, &p), AT_ERR_INVALID_ARGUMENT, "at_search");
  }
  const double three[3] = {1e9, 1e9, 1e9};
  bad = o;
  bad.bandwidths = three;
  bad.num_bandwidths = 3;  // 2 devices: one cut
  expect_error(at_search(g, 2, "tofu", &bad, &p), AT_ERR_INVALID_INPUT, "at_search");
  bad = o;
  bad.replicate_fallback = 2;
  expect_error(at_search(g, 2, "tofu", &bad, &p), AT_ERR_INVALID_ARGUMENT, "at_search");
  bad = o;
  bad.bruteforce_limit = -5;
  expect_error(at_search(g, 2, "bruteforce", &bad, &p), AT_ERR_INVALID_ARGUMENT, "at_search");
  bad = o;
  bad.bruteforce_limit = 1;  // far too few combinations: the oracle refuses
  expect_error(at_search(g, 2, "bruteforce", &bad, &p), AT_ERR_INVALID_INPUT, "at_search");
  EXPECT_EQ(p, nullptr);
  // The graph is still usable after all that.
  ASSERT_EQ(at_search(g, 4, "tofu", &o, &p), AT_OK) << at_last_error();
  at_plan_free(p);
  at_graph_free(g);
}

TEST(CapiBadInput, OpWithoutTdlNeedsReplicateFallback) {
  G g;
  int32_t a = g.tensor("a", {4, 8});
  int32_t b = g.tensor("b", {4, 8});
  ASSERT_EQ(g.op("opaque", {a}, {b}, nullptr), AT_OK) << at_last_error();  // NULL TDL: none
  AT_Plan* p = nullptr;
  expect_error(at_search(g.g, 2, "tofu", nullptr, &p), AT_ERR_INVALID_INPUT, "at_search");
  expect_message_has("opaque");
  EXPECT_EQ(p, nullptr);
  AT_SearchOptions o;
  ASSERT_EQ(at_search_options_init(&o), AT_OK);
  o.replicate_fallback = 1;
  ASSERT_EQ(at_search(g.g, 2, "tofu", &o, &p), AT_OK) << at_last_error();
  const char* s = nullptr;
  ASSERT_EQ(at_plan_strategy(p, 0, 0, &s), AT_OK);
  EXPECT_STREQ(s, "replicate");
  at_plan_free(p);
}

TEST(CapiBadInput, PlanForAnotherGraphAndBadFlags) {
  AT_Graph* g = build_capi(mlp_spec());
  AT_Graph* other = build_capi(mlp_spec());
  int32_t t = -1;
  const int64_t dims[1] = {3};
  ASSERT_EQ(at_graph_add_tensor(other, "extra", 1, dims, AT_FLOAT32, 0, &t), AT_OK);
  AT_Plan* p = nullptr;
  ASSERT_EQ(at_search(g, 4, "tofu", nullptr, &p), AT_OK);
  AT_ExecGraph* e = nullptr;
  expect_error(at_exec_build(other, p, 0, &e), AT_ERR_INVALID_INPUT, "at_exec_build");
  expect_message_has("another graph");
  expect_error(at_exec_build(g, p, 0x80u, &e), AT_ERR_INVALID_ARGUMENT, "at_exec_build");
  EXPECT_EQ(e, nullptr);
  // A graph freed after planning does not invalidate the plan.
  at_graph_free(other);
  int32_t cuts = 0;
  EXPECT_EQ(at_plan_num_cuts(p, &cuts), AT_OK);
  EXPECT_EQ(cuts, 2);
  at_plan_free(p);
  at_graph_free(g);
}

TEST(CapiBadInput, CallerBuffers) {
  G g;
  int32_t a = g.tensor("a_rather_long_name", {4, 8, 2});
  char small[4] = {'x', 'x', 'x', 'x'};
  size_t len = 0;
  expect_error(at_graph_tensor_name(g.g, a, small, sizeof small, &len), AT_ERR_BUFFER_TOO_SMALL,
               "at_graph_tensor_name");
  EXPECT_EQ(len, 18u) << "the needed length is reported";
  expect_error(at_graph_tensor_name(g.g, a, nullptr, 10, &len), AT_ERR_NULL_ARGUMENT, "at_graph_tensor_name");
  char exact[19];
  ASSERT_EQ(at_graph_tensor_name(g.g, a, exact, sizeof exact, &len), AT_OK);
  EXPECT_STREQ(exact, "a_rather_long_name");
  int64_t dims[2];
  int32_t ndim = 0;
  expect_error(at_graph_tensor_shape(g.g, a, dims, 2, &ndim), AT_ERR_BUFFER_TOO_SMALL, "at_graph_tensor_shape");
  EXPECT_EQ(ndim, 3);
  expect_error(at_graph_tensor_shape(g.g, a, dims, -1, &ndim), AT_ERR_INVALID_ARGUMENT, "at_graph_tensor_shape");
  expect_error(at_graph_tensor_shape(g.g, a, nullptr, 3, &ndim), AT_ERR_NULL_ARGUMENT, "at_graph_tensor_shape");

  AT_Graph* mg = build_capi(mlp_spec());
  AT_Plan* p = nullptr;
  AT_ExecGraph* e = nullptr;
  ASSERT_EQ(at_search(mg, 2, "tofu", nullptr, &p), AT_OK);
  ASSERT_EQ(at_exec_build(mg, p, 0, &e), AT_OK);
  int64_t lo[1], hi[1];
  expect_error(at_exec_buffer_box(e, 0, lo, hi, 1, &ndim), AT_ERR_BUFFER_TOO_SMALL, "at_exec_buffer_box");
  EXPECT_EQ(ndim, 2);
  expect_error(at_exec_buffer_box(e, 0, lo, nullptr, 1, &ndim), AT_ERR_NULL_ARGUMENT, "at_exec_buffer_box");
  expect_error(at_exec_buffer_box(e, 0, lo, hi, -4, &ndim), AT_ERR_INVALID_ARGUMENT, "at_exec_buffer_box");
  at_exec_free(e);
  at_plan_free(p);
  at_graph_free(mg);
}

TEST(CapiGeneral, StatusNamesVersionAndDtypes) {
  EXPECT_STREQ(at_status_name(AT_OK), "AT_OK");
  EXPECT_STREQ(at_status_name(AT_ERR_INTERNAL), "AT_ERR_INTERNAL");
  EXPECT_STREQ(at_status_name(static_cast<AT_Status>(1234)), "unknown status");
  EXPECT_STREQ(at_status_name(static_cast<AT_Status>(-1)), "unknown status");
  EXPECT_STREQ(at_version(), AUTOTILE_EXPECTED_VERSION);
  const char* names[] = {"float32", "float64", "float16", "int32", "int64", "int8", "uint8", "bool", "bfloat16"};
  const int sizes[] = {4, 8, 2, 4, 8, 1, 1, 1, 2};
  for (int i = 0; i < 9; ++i) {
    AT_DType t;
    ASSERT_EQ(at_dtype_from_name(names[i], &t), AT_OK);
    EXPECT_EQ(static_cast<int>(t), i);
    const char* back = nullptr;
    ASSERT_EQ(at_dtype_name(t, &back), AT_OK);
    EXPECT_STREQ(back, names[i]);
    int32_t size = 0;
    ASSERT_EQ(at_dtype_size(t, &size), AT_OK);
    EXPECT_EQ(size, sizes[i]);
  }
  AT_DType t;
  expect_error(at_dtype_from_name("complex512", &t), AT_ERR_INVALID_ARGUMENT, "at_dtype_from_name");
  expect_message_has("complex512");
  const char* s = nullptr;
  expect_error(at_dtype_name(static_cast<AT_DType>(9), &s), AT_ERR_INVALID_ARGUMENT, "at_dtype_name");
  int32_t size = 0;
  expect_error(at_dtype_size(static_cast<AT_DType>(-3), &size), AT_ERR_INVALID_ARGUMENT, "at_dtype_size");
  expect_error(at_algorithm_name(-1, &s), AT_ERR_OUT_OF_RANGE, "at_algorithm_name");
}

}  // namespace
}  // namespace capi_test
