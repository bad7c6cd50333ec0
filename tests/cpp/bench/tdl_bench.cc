// Times analyze_tdl on typical descriptions (parse cached; the search calls it per node and
// per shape). Prints microseconds per call. Usage: autotile_tdl_bench [calls]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tdl/analyze.h"
#include "tdl/tdl_parser.h"

using namespace autotile;

int main(int argc, char** argv) {
  int calls = argc > 1 ? std::atoi(argv[1]) : 200000;
  struct Case {
    const char* name;
    std::string text;
    std::vector<Shape> in, out;
  };
  std::vector<Case> cases = {
      {"elementwise", "a, b -> out: out[i0, i1, i2, i3] = f(a[i0, i1, i2, i3], b[i0, i1, i2, i3])",
       {{32, 64, 56, 56}, {32, 64, 56, 56}}, {{32, 64, 56, 56}}},
      {"fc", "data, weight, bias -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] } + bias[o]",
       {{256, 4096}, {4096, 4096}, {4096}}, {{256, 4096}}},
      {"conv3x3", "data, weight, bias -> out: out[n, co, y, x] = sum(ci, ky, kx) { data[n, ci, y + ky - 1, x + kx - 1] "
                  "* weight[co, ci, ky, kx] } + bias[co]",
       {{256, 64, 56, 56}, {128, 64, 3, 3}, {128}}, {{256, 128, 56, 56}}},
  };
  for (int k : {2, 8}) {
    for (const auto& c : cases) {
      analyze_tdl(c.text, c.in, c.out, k);  // warm the parse cache
      auto t0 = std::chrono::steady_clock::now();
      size_t sink = 0;
      for (int i = 0; i < calls; ++i) sink += analyze_tdl(c.text, c.in, c.out, k).strategies.size();
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
      std::printf("k=%d %-12s %8.3f us/call (cached parse)  [%zu]\n", k, c.name, us, sink / calls);
    }
  }
  for (const auto& c : cases) {
    int n = calls / 20;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      tdl::clear_parse_cache();
      analyze_tdl(c.text, c.in, c.out, 2);
    }
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    std::printf("k=2 %-12s %8.3f us/call (parse every call)\n", c.name, us);
  }
  return 0;
}
