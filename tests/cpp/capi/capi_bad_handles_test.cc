// Every C API function with bad handles (NULL, freed, of another kind), NULL out-pointers
// and out-of-range ids: an error code and a message naming the function, never a crash
// (this binary also runs under ASan/UBSan, .ci/cpp-tests.sh). A header scan makes sure no
// function of c_api.h is left out of the table.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include "graph_spec.h"

namespace capi_test {
namespace {

/// The handles a call is made with; scenarios replace them with bad ones. The ids were
/// looked up with the valid handles, so each case makes exactly one C API call (its
/// message must name that function).
struct Ctx {
  AT_Graph* g;
  AT_Plan* p;
  AT_ExecGraph* e;
  int32_t spare = 0;       ///< a tensor nobody produces
  int32_t compute_op = 0;  ///< an execution-graph op with input boxes
  int32_t fetch_op = 0;    ///< an execution-graph op with pieces
};

/// One C API function: a call with valid arguments (given ctx's handles), and optionally
/// the same call with a NULL required out-pointer and with an out-of-range id.
struct Case {
  const char* name;
  std::function<AT_Status(const Ctx&)> call;
  std::function<AT_Status(const Ctx&)> null_out;      ///< empty: no required out-pointer
  std::function<AT_Status(const Ctx&)> out_of_range;  ///< empty: takes no id
  bool takes_handle = true;
};

std::vector<Case> cases() {
  // Out-parameters of the valid calls live in one shared block that every lambda keeps
  // alive (x), so a table outliving this function never points at a dead stack frame.
  struct Scratch {
    int32_t i;
    int64_t l;
    double d;
    const char* s;
    const int32_t* a;
    AT_DType dt;
    AT_OpKind k;
    AT_BufferRole r;
    size_t z;
    char buf[64];
    int64_t lo[16], hi[16];
    int64_t dims[2] = {4, 4};
    int32_t ids[1] = {0};
  };
  auto x = std::make_shared<Scratch>();
  Scratch* q = x.get();
  std::vector<Case> v = {
      {"at_dtype_from_name", [x, q](const Ctx&) { return at_dtype_from_name("float32", &q->dt); },
       [](const Ctx&) { return at_dtype_from_name("float32", nullptr); }, nullptr, false},
      {"at_dtype_name", [x, q](const Ctx&) { return at_dtype_name(AT_INT64, &q->s); },
       [](const Ctx&) { return at_dtype_name(AT_INT64, nullptr); }, nullptr, false},
      {"at_dtype_size", [x, q](const Ctx&) { return at_dtype_size(AT_INT64, &q->i); },
       [](const Ctx&) { return at_dtype_size(AT_INT64, nullptr); }, nullptr, false},
      {"at_num_algorithms", [x, q](const Ctx&) { return at_num_algorithms(&q->i); },
       [](const Ctx&) { return at_num_algorithms(nullptr); }, nullptr, false},
      {"at_algorithm_name", [x, q](const Ctx&) { return at_algorithm_name(0, &q->s); },
       [](const Ctx&) { return at_algorithm_name(0, nullptr); },
       [x, q](const Ctx&) { return at_algorithm_name(1000, &q->s); }, false},
      {"at_search_options_init",
       [x, q](const Ctx&) {
         AT_SearchOptions o;
         return at_search_options_init(&o);
       },
       [](const Ctx&) { return at_search_options_init(nullptr); }, nullptr, false},
      {"at_graph_create",
       [](const Ctx&) {
         AT_Graph* g = nullptr;
         AT_Status st = at_graph_create(&g);
         if (st == AT_OK) at_graph_free(g);
         return st;
       },
       [](const Ctx&) { return at_graph_create(nullptr); }, nullptr, false},
      // The free functions are exercised by the scenarios themselves (see below).
      {"at_graph_free", nullptr, nullptr, nullptr},
      {"at_plan_free", nullptr, nullptr, nullptr},
      {"at_exec_free", nullptr, nullptr, nullptr},
      {"at_graph_add_tensor",
       [x, q](const Ctx& c) { return at_graph_add_tensor(c.g, "fresh_tensor", 2, q->dims, AT_FLOAT32, 0, &q->i); },
       [x, q](const Ctx& c) { return at_graph_add_tensor(c.g, "fresh_tensor", 2, q->dims, AT_FLOAT32, 0, nullptr); },
       nullptr},
      {"at_graph_add_op",
       [x, q](const Ctx& c) {
         return at_graph_add_op(c.g, "fresh_op", "Copy", 1, q->ids, 1, &c.spare, "", AT_ROLE_FORWARD, &q->i);
       },
       [x, q](const Ctx& c) {
         return at_graph_add_op(c.g, "fresh_op", "Copy", 1, q->ids, 1, &c.spare, "", AT_ROLE_FORWARD, nullptr);
       },
       [x, q](const Ctx& c) {
         int32_t bad = 100000;
         return at_graph_add_op(c.g, "fresh_op", "Copy", 1, &bad, 1, &c.spare, "", AT_ROLE_FORWARD, &q->i);
       }},
      {"at_graph_set_backward_of", [](const Ctx& c) { return at_graph_set_backward_of(c.g, 4, 3); }, nullptr,
       [](const Ctx& c) { return at_graph_set_backward_of(c.g, 4, 100000); }},
      {"at_graph_set_gradient", [](const Ctx& c) { return at_graph_set_gradient(c.g, 3, 12); }, nullptr,
       [](const Ctx& c) { return at_graph_set_gradient(c.g, -1, 12); }},
      {"at_graph_mark_output", [](const Ctx& c) { return at_graph_mark_output(c.g, 3); }, nullptr,
       [](const Ctx& c) { return at_graph_mark_output(c.g, 100000); }},
      {"at_graph_set_attr", [](const Ctx& c) { return at_graph_set_attr(c.g, 0, "num_hidden", "64"); },
       [](const Ctx& c) { return at_graph_set_attr(c.g, 0, nullptr, "64"); },
       [](const Ctx& c) { return at_graph_set_attr(c.g, -5, "k", "v"); }},
      {"at_graph_set_role", [](const Ctx& c) { return at_graph_set_role(c.g, 0, AT_ROLE_FORWARD); }, nullptr,
       [](const Ctx& c) { return at_graph_set_role(c.g, 100000, AT_ROLE_FORWARD); }},
      {"at_graph_validate", [](const Ctx& c) { return at_graph_validate(c.g); }, nullptr, nullptr},
      {"at_graph_num_tensors", [x, q](const Ctx& c) { return at_graph_num_tensors(c.g, &q->i); },
       [](const Ctx& c) { return at_graph_num_tensors(c.g, nullptr); }, nullptr},
      {"at_graph_num_nodes", [x, q](const Ctx& c) { return at_graph_num_nodes(c.g, &q->i); },
       [](const Ctx& c) { return at_graph_num_nodes(c.g, nullptr); }, nullptr},
      {"at_graph_find_tensor", [x, q](const Ctx& c) { return at_graph_find_tensor(c.g, "data", &q->i); },
       [](const Ctx& c) { return at_graph_find_tensor(c.g, "data", nullptr); }, nullptr},
      {"at_graph_find_node", [x, q](const Ctx& c) { return at_graph_find_node(c.g, "fc1", &q->i); },
       [](const Ctx& c) { return at_graph_find_node(c.g, "fc1", nullptr); }, nullptr},
      {"at_graph_tensor_name",
       [x, q](const Ctx& c) { return at_graph_tensor_name(c.g, 0, q->buf, sizeof q->buf, &q->z); },
       [x, q](const Ctx& c) { return at_graph_tensor_name(c.g, 0, q->buf, sizeof q->buf, nullptr); },
       [x, q](const Ctx& c) { return at_graph_tensor_name(c.g, 100000, q->buf, sizeof q->buf, &q->z); }},
      {"at_graph_node_name",
       [x, q](const Ctx& c) { return at_graph_node_name(c.g, 0, q->buf, sizeof q->buf, &q->z); },
       [x, q](const Ctx& c) { return at_graph_node_name(c.g, 0, q->buf, sizeof q->buf, nullptr); },
       [x, q](const Ctx& c) { return at_graph_node_name(c.g, -1, q->buf, sizeof q->buf, &q->z); }},
      {"at_graph_tensor_shape", [x, q](const Ctx& c) { return at_graph_tensor_shape(c.g, 0, q->lo, 16, &q->i); },
       [x, q](const Ctx& c) { return at_graph_tensor_shape(c.g, 0, q->lo, 16, nullptr); },
       [x, q](const Ctx& c) { return at_graph_tensor_shape(c.g, 100000, q->lo, 16, &q->i); }},
      {"at_graph_tensor_info", [x, q](const Ctx& c) { return at_graph_tensor_info(c.g, 0, &q->dt, &q->i); }, nullptr,
       [x, q](const Ctx& c) { return at_graph_tensor_info(c.g, -3, &q->dt, &q->i); }},
      {"at_search",
       [](const Ctx& c) {
         AT_Plan* p = nullptr;
         AT_Status st = at_search(c.g, 2, "tofu", nullptr, &p);
         if (st == AT_OK) at_plan_free(p);  // only on success: a free would clear the message
         return st;
       },
       [](const Ctx& c) { return at_search(c.g, 2, "tofu", nullptr, nullptr); }, nullptr},
      {"at_plan_algorithm", [x, q](const Ctx& c) { return at_plan_algorithm(c.p, &q->s); },
       [](const Ctx& c) { return at_plan_algorithm(c.p, nullptr); }, nullptr},
      {"at_plan_devices", [x, q](const Ctx& c) { return at_plan_devices(c.p, &q->i); },
       [](const Ctx& c) { return at_plan_devices(c.p, nullptr); }, nullptr},
      {"at_plan_num_cuts", [x, q](const Ctx& c) { return at_plan_num_cuts(c.p, &q->i); },
       [](const Ctx& c) { return at_plan_num_cuts(c.p, nullptr); }, nullptr},
      {"at_plan_factor", [x, q](const Ctx& c) { return at_plan_factor(c.p, 0, &q->i); },
       [](const Ctx& c) { return at_plan_factor(c.p, 0, nullptr); },
       [x, q](const Ctx& c) { return at_plan_factor(c.p, 3, &q->i); }},
      {"at_plan_cut_cost", [x, q](const Ctx& c) { return at_plan_cut_cost(c.p, 0, &q->d); },
       [](const Ctx& c) { return at_plan_cut_cost(c.p, 0, nullptr); },
       [x, q](const Ctx& c) { return at_plan_cut_cost(c.p, -1, &q->d); }},
      {"at_plan_total_bytes", [x, q](const Ctx& c) { return at_plan_total_bytes(c.p, &q->d); },
       [](const Ctx& c) { return at_plan_total_bytes(c.p, nullptr); }, nullptr},
      {"at_plan_weighted_cost", [x, q](const Ctx& c) { return at_plan_weighted_cost(c.p, &q->d); },
       [](const Ctx& c) { return at_plan_weighted_cost(c.p, nullptr); }, nullptr},
      {"at_plan_search_seconds", [x, q](const Ctx& c) { return at_plan_search_seconds(c.p, &q->d); },
       [](const Ctx& c) { return at_plan_search_seconds(c.p, nullptr); }, nullptr},
      {"at_plan_num_tensors", [x, q](const Ctx& c) { return at_plan_num_tensors(c.p, &q->i); },
       [](const Ctx& c) { return at_plan_num_tensors(c.p, nullptr); }, nullptr},
      {"at_plan_num_nodes", [x, q](const Ctx& c) { return at_plan_num_nodes(c.p, &q->i); },
       [](const Ctx& c) { return at_plan_num_nodes(c.p, nullptr); }, nullptr},
      {"at_plan_tiling", [x, q](const Ctx& c) { return at_plan_tiling(c.p, 1, 0, &q->s); },
       [](const Ctx& c) { return at_plan_tiling(c.p, 1, 0, nullptr); },
       [x, q](const Ctx& c) { return at_plan_tiling(c.p, 1, 2, &q->s); }},
      {"at_plan_strategy", [x, q](const Ctx& c) { return at_plan_strategy(c.p, 0, 0, &q->s); },
       [](const Ctx& c) { return at_plan_strategy(c.p, 0, 0, nullptr); },
       [x, q](const Ctx& c) { return at_plan_strategy(c.p, 100000, 0, &q->s); }},
      {"at_exec_build",
       [](const Ctx& c) {
         AT_ExecGraph* e = nullptr;
         AT_Status st = at_exec_build(c.g, c.p, 0, &e);
         if (st == AT_OK) at_exec_free(e);
         return st;
       },
       [](const Ctx& c) { return at_exec_build(c.g, c.p, 0, nullptr); }, nullptr},
      {"at_exec_num_devices", [x, q](const Ctx& c) { return at_exec_num_devices(c.e, &q->i); },
       [](const Ctx& c) { return at_exec_num_devices(c.e, nullptr); }, nullptr},
      {"at_exec_num_ops", [x, q](const Ctx& c) { return at_exec_num_ops(c.e, &q->i); },
       [](const Ctx& c) { return at_exec_num_ops(c.e, nullptr); }, nullptr},
      {"at_exec_num_buffers", [x, q](const Ctx& c) { return at_exec_num_buffers(c.e, &q->i); },
       [](const Ctx& c) { return at_exec_num_buffers(c.e, nullptr); }, nullptr},
      {"at_exec_schedule", [x, q](const Ctx& c) { return at_exec_schedule(c.e, 1, &q->a, &q->i); },
       [x, q](const Ctx& c) { return at_exec_schedule(c.e, 1, nullptr, &q->i); },
       [x, q](const Ctx& c) { return at_exec_schedule(c.e, 2, &q->a, &q->i); }},
      {"at_exec_op", [x, q](const Ctx& c) { return at_exec_op(c.e, 0, &q->k, &q->i, &q->i, &q->i, &q->l); }, nullptr,
       [x, q](const Ctx& c) { return at_exec_op(c.e, 1 << 30, &q->k, nullptr, nullptr, nullptr, nullptr); }},
      {"at_exec_op_inputs", [x, q](const Ctx& c) { return at_exec_op_inputs(c.e, 0, &q->a, &q->i); },
       [x, q](const Ctx& c) { return at_exec_op_inputs(c.e, 0, &q->a, nullptr); },
       [x, q](const Ctx& c) { return at_exec_op_inputs(c.e, -1, &q->a, &q->i); }},
      {"at_exec_op_outputs", [x, q](const Ctx& c) { return at_exec_op_outputs(c.e, 0, &q->a, &q->i); },
       [x, q](const Ctx& c) { return at_exec_op_outputs(c.e, 0, nullptr, &q->i); },
       [x, q](const Ctx& c) { return at_exec_op_outputs(c.e, 1 << 30, &q->a, &q->i); }},
      {"at_exec_op_deps", [x, q](const Ctx& c) { return at_exec_op_deps(c.e, 0, &q->a, &q->i); },
       [x, q](const Ctx& c) { return at_exec_op_deps(c.e, 0, &q->a, nullptr); },
       [x, q](const Ctx& c) { return at_exec_op_deps(c.e, -7, &q->a, &q->i); }},
      {"at_exec_op_input_box",
       [x, q](const Ctx& c) { return at_exec_op_input_box(c.e, c.compute_op, 0, q->lo, q->hi, 16, &q->i); },
       [x, q](const Ctx& c) { return at_exec_op_input_box(c.e, c.compute_op, 0, q->lo, q->hi, 16, nullptr); },
       [x, q](const Ctx& c) { return at_exec_op_input_box(c.e, c.compute_op, 99, q->lo, q->hi, 16, &q->i); }},
      {"at_exec_op_num_pieces", [x, q](const Ctx& c) { return at_exec_op_num_pieces(c.e, 0, &q->i); },
       [](const Ctx& c) { return at_exec_op_num_pieces(c.e, 0, nullptr); },
       [x, q](const Ctx& c) { return at_exec_op_num_pieces(c.e, 1 << 30, &q->i); }},
      {"at_exec_op_piece",
       [x, q](const Ctx& c) { return at_exec_op_piece(c.e, c.fetch_op, 0, &q->i, q->lo, q->hi, 16, &q->i); },
       [x, q](const Ctx& c) { return at_exec_op_piece(c.e, c.fetch_op, 0, &q->i, q->lo, q->hi, 16, nullptr); },
       [x, q](const Ctx& c) { return at_exec_op_piece(c.e, c.fetch_op, 1 << 20, &q->i, q->lo, q->hi, 16, &q->i); }},
      {"at_exec_buffer",
       [x, q](const Ctx& c) { return at_exec_buffer(c.e, 0, &q->i, &q->i, &q->r, &q->i, &q->i, &q->l, &q->l); },
       nullptr,
       [x, q](const Ctx& c) {
         return at_exec_buffer(c.e, 1 << 30, &q->i, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
       }},
      {"at_exec_buffer_box", [x, q](const Ctx& c) { return at_exec_buffer_box(c.e, 0, q->lo, q->hi, 16, &q->i); },
       [x, q](const Ctx& c) { return at_exec_buffer_box(c.e, 0, q->lo, q->hi, 16, nullptr); },
       [x, q](const Ctx& c) { return at_exec_buffer_box(c.e, -2, q->lo, q->hi, 16, &q->i); }},
      {"at_exec_tile", [x, q](const Ctx& c) { return at_exec_tile(c.e, 0, 1, &q->i); },
       [](const Ctx& c) { return at_exec_tile(c.e, 0, 1, nullptr); },
       [x, q](const Ctx& c) { return at_exec_tile(c.e, 0, 2, &q->i); }},
      {"at_exec_arena_bytes", [x, q](const Ctx& c) { return at_exec_arena_bytes(c.e, 0, &q->l); },
       [](const Ctx& c) { return at_exec_arena_bytes(c.e, 0, nullptr); },
       [x, q](const Ctx& c) { return at_exec_arena_bytes(c.e, -1, &q->l); }},
      {"at_exec_live_peak_bytes", [x, q](const Ctx& c) { return at_exec_live_peak_bytes(c.e, 0, &q->l); },
       [](const Ctx& c) { return at_exec_live_peak_bytes(c.e, 0, nullptr); },
       [x, q](const Ctx& c) { return at_exec_live_peak_bytes(c.e, 2, &q->l); }},
      {"at_exec_bytes_received", [x, q](const Ctx& c) { return at_exec_bytes_received(c.e, 0, &q->l); },
       [](const Ctx& c) { return at_exec_bytes_received(c.e, 0, nullptr); },
       [x, q](const Ctx& c) { return at_exec_bytes_received(c.e, 9, &q->l); }},
      {"at_exec_bytes_moved", [x, q](const Ctx& c) { return at_exec_bytes_moved(c.e, &q->l); },
       [](const Ctx& c) { return at_exec_bytes_moved(c.e, nullptr); }, nullptr},
  };
  return v;
}

/// A fresh graph (with a spare tensor) + 2-device plan + execution graph for each test
/// (cases mutate the graph).
struct Live {
  Ctx ctx{};
  Live() {
    ctx.g = build_capi(mlp_spec());
    const int64_t dims[2] = {4, 4};
    EXPECT_EQ(at_graph_add_tensor(ctx.g, "spare", 2, dims, AT_FLOAT32, 0, &ctx.spare), AT_OK) << at_last_error();
    EXPECT_EQ(at_search(ctx.g, 2, "tofu", nullptr, &ctx.p), AT_OK) << at_last_error();
    EXPECT_EQ(at_exec_build(ctx.g, ctx.p, 0, &ctx.e), AT_OK) << at_last_error();
    int32_t n = 0;
    EXPECT_EQ(at_exec_num_ops(ctx.e, &n), AT_OK);
    ctx.compute_op = ctx.fetch_op = -1;
    for (int32_t op = 0; op < n; ++op) {
      AT_OpKind kind;
      EXPECT_EQ(at_exec_op(ctx.e, op, &kind, nullptr, nullptr, nullptr, nullptr), AT_OK);
      if (kind == AT_OP_COMPUTE && ctx.compute_op < 0) ctx.compute_op = op;
      if (kind == AT_OP_FETCH && ctx.fetch_op < 0) ctx.fetch_op = op;
    }
    EXPECT_GE(ctx.compute_op, 0);
    EXPECT_GE(ctx.fetch_op, 0) << "a 2-device plan of the MLP moves data";
  }
  ~Live() {
    at_exec_free(ctx.e);
    at_plan_free(ctx.p);
    at_graph_free(ctx.g);
  }
};

TEST(CapiBadArgs, EveryHeaderFunctionIsInTheTable) {
  std::ifstream in(AUTOTILE_CAPI_HEADER);
  ASSERT_TRUE(in) << AUTOTILE_CAPI_HEADER;
  std::stringstream text;
  text << in.rdbuf();
  std::string header = text.str();
  std::set<std::string> listed;
  for (const Case& c : cases()) listed.insert(c.name);
  // Functions not returning AT_Status cannot fail and are checked in CapiGeneral.
  const std::set<std::string> no_status = {"at_version", "at_last_error", "at_status_name"};
  std::regex decl(R"(AT_API\s+[A-Za-z_ ]+\*?\s*(at_[a-z_]+)\s*\()");
  int found = 0;
  for (std::sregex_iterator it(header.begin(), header.end(), decl), end; it != end; ++it) {
    std::string name = (*it)[1];
    ++found;
    if (no_status.count(name)) continue;
    EXPECT_TRUE(listed.count(name)) << name << " is declared in c_api.h but has no bad-argument case";
  }
  EXPECT_GT(found, 50);
}

TEST(CapiBadArgs, ValidCallsSucceed) {
  for (const Case& c : cases()) {
    if (!c.call) continue;
    Live live;
    EXPECT_EQ(c.call(live.ctx), AT_OK) << c.name << ": " << at_last_error();
    EXPECT_STREQ(at_last_error(), "") << c.name << ": a success clears the message";
  }
}

TEST(CapiBadArgs, NullHandles) {
  Live live;
  Ctx null_ctx = live.ctx;
  null_ctx.g = nullptr;
  null_ctx.p = nullptr;
  null_ctx.e = nullptr;
  for (const Case& c : cases())
    if (c.call && c.takes_handle) expect_error(c.call(null_ctx), AT_ERR_INVALID_HANDLE, c.name);
  // Freeing NULL is a no-op, as free(NULL) is.
  EXPECT_EQ(at_graph_free(nullptr), AT_OK);
  EXPECT_EQ(at_plan_free(nullptr), AT_OK);
  EXPECT_EQ(at_exec_free(nullptr), AT_OK);
}

TEST(CapiBadArgs, StaleHandles) {
  Ctx stale;
  {
    Live dead;
    stale = dead.ctx;
  }  // all three freed here
  Live live;  // new handles are never the freed ones
  stale.spare = live.ctx.spare;
  EXPECT_NE(live.ctx.g, stale.g);
  for (const Case& c : cases())
    if (c.call && c.takes_handle) expect_error(c.call(stale), AT_ERR_INVALID_HANDLE, c.name);
  expect_error(at_graph_free(stale.g), AT_ERR_INVALID_HANDLE, "at_graph_free");
  expect_error(at_plan_free(stale.p), AT_ERR_INVALID_HANDLE, "at_plan_free");
  expect_error(at_exec_free(stale.e), AT_ERR_INVALID_HANDLE, "at_exec_free");
}

TEST(CapiBadArgs, WrongKindAndForgedHandles) {
  Live live;
  const Ctx& v = live.ctx;
  Ctx swapped = v;
  swapped.g = reinterpret_cast<AT_Graph*>(v.p);
  swapped.p = reinterpret_cast<AT_Plan*>(v.e);
  swapped.e = reinterpret_cast<AT_ExecGraph*>(v.g);
  for (const Case& c : cases())
    if (c.call && c.takes_handle) expect_error(c.call(swapped), AT_ERR_INVALID_HANDLE, c.name);
  // A pointer to real memory that was never a handle is not dereferenced.
  int junk[4] = {1, 2, 3, 4};
  Ctx forged = v;
  forged.g = reinterpret_cast<AT_Graph*>(junk);
  forged.p = reinterpret_cast<AT_Plan*>(junk + 1);
  forged.e = reinterpret_cast<AT_ExecGraph*>(junk + 2);
  for (const Case& c : cases())
    if (c.call && c.takes_handle) expect_error(c.call(forged), AT_ERR_INVALID_HANDLE, c.name);
  expect_error(at_graph_free(swapped.g), AT_ERR_INVALID_HANDLE, "at_graph_free");
  expect_error(at_plan_free(swapped.p), AT_ERR_INVALID_HANDLE, "at_plan_free");
  expect_error(at_exec_free(swapped.e), AT_ERR_INVALID_HANDLE, "at_exec_free");
  // The wrong-kind frees left the real handles alive.
  int32_t n = 0;
  EXPECT_EQ(at_graph_num_tensors(v.g, &n), AT_OK);
  EXPECT_EQ(at_plan_num_cuts(v.p, &n), AT_OK);
  EXPECT_EQ(at_exec_num_ops(v.e, &n), AT_OK);
}

TEST(CapiBadArgs, NullOutPointers) {
  for (const Case& c : cases()) {
    if (!c.null_out) continue;
    Live live;
    expect_error(c.null_out(live.ctx), AT_ERR_NULL_ARGUMENT, c.name);
  }
}

TEST(CapiBadArgs, OutOfRangeIds) {
  for (const Case& c : cases()) {
    if (!c.out_of_range) continue;
    Live live;
    expect_error(c.out_of_range(live.ctx), AT_ERR_OUT_OF_RANGE, c.name);
  }
}

TEST(CapiBadArgs, FailedCallsWriteNoOutput) {
  Live live;
  int32_t i = 12345;
  EXPECT_NE(at_plan_factor(live.ctx.p, 99, &i), AT_OK);
  EXPECT_EQ(i, 12345);
  AT_Plan* p = reinterpret_cast<AT_Plan*>(&i);
  EXPECT_NE(at_search(live.ctx.g, 0, "tofu", nullptr, &p), AT_OK);
  EXPECT_EQ(p, reinterpret_cast<AT_Plan*>(&i));
}

}  // namespace
}  // namespace capi_test
