// libFuzzer target: the TDL parser and analysis on arbitrary bytes (docs/tdl.md).
//
// The input is TDL text. When it parses, it is analysed for a 2- or 3-way cut at shapes made
// from the input's own bytes (rank = each tensor's access arity), so the interval analysis
// sees varied shapes too. The only acceptable failure is autotile::Error: anything else
// (another exception, a crash, a sanitizer report, a hang) is a finding.
// Built and run by .ci/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined); the seed corpus
// is tests/fuzz/tdl_corpus/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "tdl/analyze.h"
#include "tdl/tdl_parser.h"
#include "util/error.h"

namespace {

// Shapes of rank `ranks[i]` with dims in 1..12 drawn from `seed` (a cheap LCG).
std::vector<autotile::Shape> shapes_for(const std::vector<int>& ranks, uint64_t* seed) {
  std::vector<autotile::Shape> shapes;
  for (int rank : ranks) {
    autotile::Shape s;
    for (int d = 0; d < (rank < 0 ? 1 : rank); ++d) {
      *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
      s.push_back(1 + static_cast<int64_t>((*seed >> 33) % 12));
    }
    shapes.push_back(s);
  }
  return shapes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  uint64_t seed = 0;
  for (size_t i = 0; i < size && i < 64; ++i) seed = seed * 131 + data[i];
  try {
    std::shared_ptr<const autotile::tdl::Program> prog = autotile::tdl::parse(text);
    std::vector<int> out_ranks;
    for (size_t o = 0; o < prog->outputs.size(); ++o) {
      int st = prog->statement_of[o];
      out_ranks.push_back(st >= 0 ? prog->statements[st].rank : 1);
    }
    std::vector<autotile::Shape> ins = shapes_for(prog->input_arity, &seed);
    std::vector<autotile::Shape> outs = shapes_for(out_ranks, &seed);
    autotile::analyze_tdl(text, ins, outs, 2 + static_cast<int>(seed % 2));
  } catch (const autotile::Error&) {
    // A clear error is the expected answer to bad text.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tdl_fuzz: non-autotile exception: %s\n", e.what());
    std::abort();
  }
  autotile::tdl::clear_parse_cache();
  return 0;
}
