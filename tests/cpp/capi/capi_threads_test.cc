// Concurrency: the messages are per thread, one graph can be searched from several threads
// at once, and a handle freed while other threads use it gives error codes, not crashes
// (the sanitizer build would report a use-after-free).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "graph_spec.h"

namespace capi_test {
namespace {

TEST(CapiThreads, LastErrorIsPerThread) {
  int32_t n = 0;
  expect_error(at_graph_num_tensors(nullptr, &n), AT_ERR_INVALID_HANDLE, "at_graph_num_tensors");
  std::string other;
  std::thread t([&] {
    AT_DType dt;
    at_dtype_from_name("bogus_type", &dt);
    other = at_last_error();
  });
  t.join();
  EXPECT_NE(other.find("bogus_type"), std::string::npos) << other;
  EXPECT_NE(std::string(at_last_error()).find("at_graph_num_tensors"), std::string::npos)
      << "another thread's failure must not overwrite this thread's message";
}

TEST(CapiThreads, ConcurrentSearchesOfOneGraphAgree) {
  AT_Graph* g = build_capi(mlp_spec());
  AT_Plan* reference = nullptr;
  ASSERT_EQ(at_search(g, 8, "tofu", nullptr, &reference), AT_OK);
  double want = 0;
  ASSERT_EQ(at_plan_total_bytes(reference, &want), AT_OK);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 3; ++rep) {
        AT_Plan* p = nullptr;
        AT_ExecGraph* e = nullptr;
        double got = -1;
        if (at_search(g, 8, "tofu", nullptr, &p) != AT_OK || at_plan_total_bytes(p, &got) != AT_OK || got != want ||
            at_exec_build(g, p, 0, &e) != AT_OK)
          ++mismatches;
        // Readers and a writer on the same graph at once: attributes serialize with searches.
        if (at_graph_set_attr(g, i, "touched", "yes") != AT_OK) ++mismatches;
        at_exec_free(e);
        at_plan_free(p);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  at_plan_free(reference);
  at_graph_free(g);
}

TEST(CapiThreads, FreeWhileOthersRead) {
  AT_Graph* g = build_capi(mlp_spec());
  AT_Plan* p = nullptr;
  AT_ExecGraph* e = nullptr;
  ASSERT_EQ(at_search(g, 4, "tofu", nullptr, &p), AT_OK);
  ASSERT_EQ(at_exec_build(g, p, 0, &e), AT_OK);
  std::atomic<bool> go{false};
  std::atomic<int> bad_status{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([&] {
      while (!go.load()) {
      }
      for (int k = 0; k < 2000; ++k) {
        int32_t n = 0;
        const int32_t* ops = nullptr;
        AT_Status s1 = at_exec_schedule(e, 0, &ops, &n);
        AT_Status s2 = at_plan_num_cuts(p, &n);
        AT_Status s3 = at_graph_num_nodes(g, &n);
        for (AT_Status s : {s1, s2, s3})
          if (s != AT_OK && s != AT_ERR_INVALID_HANDLE) ++bad_status;
      }
    });
  }
  go = true;
  EXPECT_EQ(at_exec_free(e), AT_OK);
  EXPECT_EQ(at_plan_free(p), AT_OK);
  EXPECT_EQ(at_graph_free(g), AT_OK);
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad_status.load(), 0);
}

}  // namespace
}  // namespace capi_test
