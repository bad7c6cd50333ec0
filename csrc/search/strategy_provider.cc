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
  std::string key = tdl;
  key += '|';
  key += std::to_string(k);
  for (const auto* shapes : {&in, &out}) {
    key += '|';
    for (const Shape& s : *shapes) {
      for (int64_t d : s) key += std::to_string(d) + ",";
      key += ';';
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
