#include "search/strategy_provider.h"

#include <memory>
#include <mutex>
#include <unordered_map>

#include "tdl/analyze.h"
#include "util/error.h"

namespace autotile {

bool tdl_analysis_available() { return true; }

namespace {
std::string cache_key(const std::string& tdl, const std::vector<Shape>& in, const std::vector<Shape>& out, int k) {
  // The TDL text, then k and every shape as raw integers, each list led by its length.
  std::string key;
  size_t dims = 0;
  for (const auto* shapes : {&in, &out})
    for (const Shape& s : *shapes) dims += s.size() + 1;
  key.reserve(tdl.size() + 8 * (dims + 3));
  key = tdl;
  auto put = [&key](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(k);
  for (const auto* shapes : {&in, &out}) {
    put(static_cast<int64_t>(shapes->size()));
    for (const Shape& s : *shapes) {
      put(static_cast<int64_t>(s.size()));
      for (int64_t d : s) put(d);
    }
  }
  return key;
}
}  // namespace

StrategyProvider tdl_strategy_provider() {
  auto cache = std::make_shared<std::unordered_map<std::string, OpStrategies>>();
  return [cache](const Graph& g, NodeId n, const std::vector<Shape>& in, const std::vector<Shape>& out, int k) {
    const Node& node = g.node(n);
    std::string key = cache_key(node.tdl, in, out, k);
    auto it = cache->find(key);
    if (it != cache->end()) return it->second;
    try {
      OpStrategies s = analyze_tdl(node.tdl, in, out, k);
      cache->emplace(key, s);
      return s;
    } catch (const Error& e) {
      fail("node '", node.name, "' (op ", node.op, "): ", e.what());
    }
  };
}

StrategyProvider callback_strategy_provider(ProviderCallback fn, void* ctx) {
  return [fn, ctx](const Graph& g, NodeId n, const std::vector<Shape>& in, const std::vector<Shape>& out, int k) {
    OpStrategies s;
    if (!fn(ctx, n, in, out, k, &s))
      fail("strategy provider failed for node '", g.node(n).name, "' (op ", g.node(n).op, ")");
    return s;
  };
}

}  // namespace autotile
