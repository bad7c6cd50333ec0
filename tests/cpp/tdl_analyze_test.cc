// analyze_tdl: strategies on hand-worked examples, errors, and thread safety.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tdl/analyze.h"
#include "tdl/tdl_parser.h"
#include "util/error.h"

namespace autotile {

// Readable failure messages for interval comparisons.
void PrintTo(const Interval& v, std::ostream* os) { *os << "[" << v.lo << ", " << v.hi << ")"; }

namespace {

const char* kFc = "data, weight, bias -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] } + bias[o]";
const char* kFcNoBias = "data, weight -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] }";
const char* kConv =
    "data, weight -> out: out[n, co, y, x] = sum(ci, ky, kx) "
    "{ data[n, ci, 2*y + ky - 1, 2*x + kx - 1] * weight[co, ci, ky, kx] }";

const Strategy* find(const OpStrategies& s, const std::string& var) {
  for (const auto& st : s.strategies)
    if (st.var == var) return &st;
  return nullptr;
}

std::vector<Interval> iv(std::initializer_list<std::pair<int64_t, int64_t>> l) {
  std::vector<Interval> out;
  for (auto [lo, hi] : l) out.push_back(Interval{lo, hi});
  return out;
}

TEST(TdlAnalyze, FullyConnected) {
  OpStrategies s = analyze_tdl(kFcNoBias, {{4, 6}, {8, 6}}, {{4, 8}}, 2);
  ASSERT_EQ(s.strategies.size(), 3u);
  EXPECT_FALSE(s.elementwise);
  const Strategy* k = find(s, "k");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->reduction);
  EXPECT_TRUE(k->outputs[0].partial);
  EXPECT_EQ(k->outputs[0].reducer, Reducer::kSum);
  EXPECT_EQ(k->inputs[0].dim, 1);
  EXPECT_EQ(k->inputs[0].per_worker, iv({{0, 3}, {3, 6}}));
  EXPECT_EQ(k->inputs[1].per_worker, iv({{0, 3}, {3, 6}}));
}

TEST(TdlAnalyze, FullyConnectedWithBias) {
  // The bias term outside the sum would be added by every worker: no reduction split.
  OpStrategies s = analyze_tdl(kFc, {{4, 6}, {8, 6}, {8}}, {{4, 8}}, 2);
  ASSERT_EQ(s.strategies.size(), 2u);
  EXPECT_EQ(find(s, "k"), nullptr);
  const Strategy* o = find(s, "o");
  EXPECT_EQ(o->outputs[0].dim, 1);
  EXPECT_TRUE(o->inputs[0].replicate);
  EXPECT_EQ(o->inputs[2].per_worker, iv({{0, 4}, {4, 8}}));
}

TEST(TdlAnalyze, StridedConvolutionHalo) {
  // out 4x4 from data 8x8, stride 2, pad 1, kernel 3: worker 0 rows y 0..1 read 2y+ky-1 in
  // [-1, 3] -> [0, 3]; worker 1 rows 2..3 read [3, 7].
  OpStrategies s = analyze_tdl(kConv, {{2, 4, 8, 8}, {6, 4, 3, 3}}, {{2, 6, 4, 4}}, 2);
  const Strategy* y = find(s, "y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->inputs[0].dim, 2);
  EXPECT_EQ(y->inputs[0].per_worker, iv({{0, 4}, {3, 8}}));
  EXPECT_TRUE(y->inputs[1].replicate);
  EXPECT_EQ(find(s, "ky"), nullptr);  // extent 3 is not divisible by 2
  OpStrategies s4 = analyze_tdl(kConv, {{2, 4, 8, 8}, {6, 4, 3, 3}}, {{2, 6, 4, 4}}, 4);
  EXPECT_EQ(find(s4, "y")->inputs[0].per_worker, iv({{0, 2}, {1, 4}, {3, 6}, {5, 8}}));
}

TEST(TdlAnalyze, UnreadInputIsFlagged) {
  OpStrategies s = analyze_tdl("dy, w, data -> dx: dx[n, k] = sum(o) { dy[n, o] * w[o, k] }",
                               {{4, 3}, {3, 6}, {4, 6}}, {{4, 6}}, 2);
  for (const auto& st : s.strategies) {
    EXPECT_FALSE(st.inputs[2].read);
    EXPECT_TRUE(st.inputs[2].replicate);
    EXPECT_TRUE(st.inputs[0].read);
  }
}

TEST(TdlAnalyze, Elementwise) {
  EXPECT_TRUE(analyze_tdl("a, b -> y: y[i, j] = f(a[i, j], b[0, j])", {{4, 6}, {1, 6}}, {{4, 6}}, 2).elementwise);
  EXPECT_FALSE(analyze_tdl("a, b -> y: y[i, j] = f(a[i, j], b[0, j])", {{4, 6}, {3, 6}}, {{4, 6}}, 2).elementwise);
}

std::string error_of(const std::vector<Shape>& in, const std::vector<Shape>& out, int k, const char* text = kFc) {
  try {
    analyze_tdl(text, in, out, k);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TdlAnalyze, ErrorsNameTheFault) {
  EXPECT_NE(error_of({{4, 6}, {8}, {8}}, {{4, 8}}, 2).find("input 'weight' has rank 1"), std::string::npos);
  EXPECT_NE(error_of({{4, 6}, {8, 6}}, {{4, 8}}, 2).find("3 input(s) but 2 input shape(s)"), std::string::npos);
  EXPECT_NE(error_of({{4, 6}, {8, 6}, {8}}, {{4, 8}}, 0).find("at least 1"), std::string::npos);
  EXPECT_NE(error_of({{4, 6}, {8, 5}, {8}}, {{4, 8}}, 2).find("different extents"), std::string::npos);
}

TEST(TdlAnalyze, MutatedTextsAndShapesNeverCrash) {
  // Random edits of valid descriptions with random shapes and k: Error or a result, never
  // a crash (run under -fsanitize=address,undefined to check for undefined behaviour too).
  const std::vector<std::string> seeds = {
      kFc, kConv, "x -> lo, hi: lo[i] = x[i]; hi[i] = x[(i + 4) / 2]",
      "x -> y: y[i] = sum(r) { x[3*i + r - 1] }", "s, x -> y: y[] = sum(i) { x[i] * s[] }"};
  const std::string pieces = "ij[](){}+-*/:,;0123456789 ";
  uint64_t state = 88172645463325252ull;
  auto rnd = [&](uint64_t n) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return n ? state % n : 0;
  };
  int results = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text = seeds[rnd(seeds.size())];
    for (uint64_t e = rnd(4); e > 0; --e) {
      size_t pos = rnd(text.size() + 1);
      switch (rnd(3)) {
        case 0: text.insert(pos, 1, pieces[rnd(pieces.size())]); break;
        case 1: if (pos < text.size()) text.erase(pos, 1); break;
        default: if (pos < text.size()) text[pos] = pieces[rnd(pieces.size())]; break;
      }
    }
    std::vector<Shape> in(rnd(5)), out(1 + rnd(2));
    for (auto* group : {&in, &out})
      for (Shape& s : *group) {
        s.resize(rnd(5));
        for (int64_t& d : s) d = rnd(20) == 0 ? INT64_MAX / static_cast<int64_t>(1 + rnd(3)) : static_cast<int64_t>(rnd(10)) - 1;
      }
    int k = static_cast<int>(rnd(6)) - 1;
    try {
      OpStrategies s = analyze_tdl(text, in, out, k);
      ++results;
      // Whatever comes back honours the contract of strategy.h.
      for (const Strategy& st : s.strategies) {
        ASSERT_EQ(st.inputs.size(), in.size()) << text;
        ASSERT_EQ(st.outputs.size(), out.size()) << text;
        for (size_t i = 0; i < in.size(); ++i) {
          const InputNeed& n = st.inputs[i];
          if (n.replicate) {
            EXPECT_TRUE(n.per_worker.empty()) << text;
            continue;
          }
          ASSERT_TRUE(n.dim >= 0 && n.dim < static_cast<int>(in[i].size())) << text;
          ASSERT_EQ(n.per_worker.size(), static_cast<size_t>(k)) << text;
          for (const Interval& v : n.per_worker)
            EXPECT_TRUE(0 <= v.lo && v.lo <= v.hi && v.hi <= in[i][n.dim]) << text;
        }
      }
    } catch (const Error&) {
    }
  }
  EXPECT_GT(results, 0);  // some mutations stay valid: the contract checks above did run
}

TEST(TdlAnalyze, ConcurrentCallsShareTheCache) {
  tdl::clear_parse_cache();
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &bad] {
      for (int i = 0; i < 300; ++i) {
        int64_t n = 2 * (1 + (i + t) % 7);
        std::string text = (i % 3 == 0) ? kConv : kFc;
        OpStrategies s = (i % 3 == 0)
                             ? analyze_tdl(text, {{n, 4, 8, 8}, {6, 4, 3, 3}}, {{n, 6, 4, 4}}, 2)
                             : analyze_tdl(text + std::string(i % 2 ? " " : ""), {{n, 6}, {8, 6}, {8}}, {{n, 8}}, 2);
        const Strategy* ns = find(s, "n");
        if (!ns || ns->inputs[0].per_worker[1].lo != n / 2) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(tdl::parse_cache_size(), 3u);
}

}  // namespace
}  // namespace autotile
