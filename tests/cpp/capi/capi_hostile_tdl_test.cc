// A hostile TDL description through at_graph_add_op, on an embedding engine's worker thread
// with a small stack: a million-term flat sum is accepted (it used to overflow the stack in
// the parser), nesting past the cap gets AT_ERR_INVALID naming the problem, and the graph
// stays usable.
#include <gtest/gtest.h>
#include <pthread.h>

#include <string>

#include "graph_spec.h"

namespace capi_test {
namespace {

struct Outcome {
  AT_Status status = AT_OK;
  std::string message;
};

// at_graph_add_op of `tdl` (one input x[8], one output y[8]) on a 256 KiB-stack thread.
Outcome add_op_on_small_stack(const std::string& tdl) {
  struct Job {
    const std::string* tdl;
    Outcome out;
  } job{&tdl, {}};
  auto body = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    AT_Graph* g = nullptr;
    const int64_t shape[1] = {8};
    int32_t x = -1, y = -1, node = -1;
    at_graph_create(&g);
    at_graph_add_tensor(g, "x", 1, shape, AT_FLOAT32, 0, &x);
    at_graph_add_tensor(g, "y", 1, shape, AT_FLOAT32, 0, &y);
    j->out.status = at_graph_add_op(g, "big", "Op", 1, &x, 1, &y, j->tdl->c_str(), AT_ROLE_FORWARD, &node);
    if (j->out.status != AT_OK) j->out.message = at_last_error();
    int32_t nodes = -1;
    at_graph_num_nodes(g, &nodes);
    if (j->out.status != AT_OK && nodes != 0) j->out.message += " [a refused op was added]";
    at_graph_free(g);
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  EXPECT_EQ(pthread_create(&thread, &attr, body, &job), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return job.out;
}

TEST(CapiHostileTdl, MillionTermSumOnSmallStack) {
  std::string tdl = "x -> y: y[i] = x[i]";
  for (int t = 1; t < 1000000; ++t) tdl += " + x[i]";
  Outcome o = add_op_on_small_stack(tdl);
  EXPECT_EQ(o.status, AT_OK) << o.message;
}

TEST(CapiHostileTdl, NestingPastTheCapIsAnError) {
  std::string tdl = "x -> y: y[i] = " + std::string(500000, '(') + "x[i]" + std::string(500000, ')');
  Outcome o = add_op_on_small_stack(tdl);
  EXPECT_NE(o.status, AT_OK);
  EXPECT_NE(o.message.find("nested too deeply"), std::string::npos) << o.message;
  EXPECT_EQ(o.message.find("a refused op was added"), std::string::npos) << o.message;
}

}  // namespace
}  // namespace capi_test
