// TDL parser and analysis on hostile sizes, run on a thread with a small stack (an embedding
// engine's worker thread): a million-term flat sum, nesting at and beyond the depth cap,
// and headers and statements with more names than the caps allow. Each must either succeed
// or throw autotile::Error; none may overflow the stack (a regression crashes this binary).
#include <gtest/gtest.h>
#include <pthread.h>

#include <exception>
#include <functional>
#include <string>

#include "tdl/analyze.h"
#include "tdl/tdl_parser.h"
#include "util/error.h"

namespace autotile {
namespace tdl {
namespace {

constexpr size_t kSmallStack = 256 * 1024;

// Runs `fn` on a fresh thread whose stack is `stack_bytes`; rethrows what it threw.
void on_small_stack(const std::function<void()>& fn, size_t stack_bytes = kSmallStack) {
  struct Job {
    const std::function<void()>* fn;
    std::exception_ptr error;
  } job{&fn, nullptr};
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, stack_bytes), 0);
  pthread_t thread;
  auto body = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    try {
      (*j->fn)();
    } catch (...) {
      j->error = std::current_exception();
    }
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, body, &job), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  if (job.error) std::rethrow_exception(job.error);
}

// The message of the Error `fn` throws on a small stack ("" when it succeeds).
std::string small_stack_error(const std::function<void()>& fn) {
  std::string message;
  on_small_stack([&] {
    try {
      fn();
    } catch (const Error& e) {
      message = e.what();
    }
  });
  return message;
}

std::string flat_sum(size_t terms) {
  std::string text = "x -> y: y[i] = x[i]";
  text.reserve(text.size() + terms * 7);
  for (size_t t = 1; t < terms; ++t) text += (t % 2 ? " + x[i]" : " - x[i]");
  return text;
}

TEST(TdlHostileSize, MillionTermSumParsesOnSmallStack) {
  std::string text = flat_sum(1000000);
  size_t accesses = 0;
  on_small_stack([&] {
    auto prog = parse(text);
    accesses = prog->statements.at(0).accesses.size();
  });
  EXPECT_EQ(accesses, 1000000u);
}

TEST(TdlHostileSize, MillionTermSumAnalysesOnSmallStack) {
  std::string text = flat_sum(1000000);
  size_t strategies = 0;
  on_small_stack([&] {
    OpStrategies s = analyze_tdl(text, {{8}}, {{8}}, 2);
    strategies = s.strategies.size();
  });
  EXPECT_GE(strategies, 1u);  // y[i] splits along i
}

TEST(TdlHostileSize, SumOfReductionsOnSmallStack) {
  // Sibling reductions each declare their own variable: 1,000 of them parse; half a million
  // reach the per-statement variable cap and get an Error, not a crash or a hang.
  auto sum_of_reductions = [](int terms) {
    std::string text = "x -> y: y[i] = sum(k) { x[i, k] }";
    for (int t = 1; t < terms; ++t) text += " + sum(k) { x[i, k] }";
    return text;
  };
  std::string ok = sum_of_reductions(1000), too_many = sum_of_reductions(500000);
  EXPECT_EQ(small_stack_error([&] { parse(ok); }), "");
  EXPECT_NE(small_stack_error([&] { parse(too_many); }).find("index variables in one statement"), std::string::npos);
}

TEST(TdlHostileSize, NestingAtTheCapParsesBeyondItIsAnError) {
  for (const std::string& open : {std::string("("), std::string("-"), std::string("f(")}) {
    auto nested = [&](int depth) {
      std::string text = "x -> y: y[i] = ";
      for (int d = 0; d < depth; ++d) text += open;
      text += "x[i]";
      for (int d = 0; d < depth; ++d) text += open == "-" ? "" : ")";
      return text;
    };
    std::string shallow = nested(40), deep = nested(1000000);  // 40 levels: 80 of the cap of 96
    EXPECT_EQ(small_stack_error([&] { parse(shallow); }), "") << open;
    EXPECT_NE(small_stack_error([&] { parse(deep); }).find("nested too deeply"), std::string::npos) << open;
  }
  std::string deep_index = "x -> y: y[i] = x[" + std::string(1000000, '(') + "i" + std::string(1000000, ')') + "]";
  EXPECT_NE(small_stack_error([&] { parse(deep_index); }).find("nested too deeply"), std::string::npos);
  std::string reductions = "x -> y: y[i] = ";
  for (int d = 0; d < 100000; ++d) reductions += "sum(k" + std::to_string(d) + ") { ";
  reductions += "x[i]";
  reductions += std::string(100000, '}');
  EXPECT_NE(small_stack_error([&] { parse(reductions); }).find("nested too deeply"), std::string::npos);
}

TEST(TdlHostileSize, TooManyNamesIsAnErrorNotAHang) {
  std::string header;
  for (int t = 0; t < 100000; ++t) header += "x" + std::to_string(t) + ", ";
  std::string many_inputs = header + "z -> y: y[i] = z[i]";
  EXPECT_NE(small_stack_error([&] { parse(many_inputs); }).find("tensors in the header"), std::string::npos);

  std::string vars;
  for (int v = 0; v < 100000; ++v) vars += (v ? ", i" : "i") + std::to_string(v);
  std::string many_vars = "x -> y: y[" + vars + "] = x[i0]";
  EXPECT_NE(small_stack_error([&] { parse(many_vars); }).find("index variables in one statement"),
            std::string::npos);
  std::string many_reduction_vars = "x -> y: y[j] = sum(" + vars + ") { x[j] }";
  EXPECT_NE(small_stack_error([&] { parse(many_reduction_vars); }).find("index variables in one statement"),
            std::string::npos);
}

TEST(TdlHostileSize, ManyDistinctInputsWithinTheCap) {
  // 60,000 inputs each read once: name lookups are hashed, not a scan per access.
  std::string header, body;
  for (int t = 0; t < 60000; ++t) {
    header += "x" + std::to_string(t) + ", ";
    body += (t ? " + x" : "x") + std::to_string(t) + "[i]";
  }
  std::string text = header.substr(0, header.size() - 2) + " -> y: y[i] = " + body;
  size_t inputs = 0;
  on_small_stack([&] { inputs = parse(text)->inputs.size(); });
  EXPECT_EQ(inputs, 60000u);
}

}  // namespace
}  // namespace tdl
}  // namespace autotile
