// Process-wide cache of parsed TDL programs, keyed by text. The search analyses every node
// of large graphs, many of which share one description, so parsing happens once per text.
#include <mutex>
#include <unordered_map>

#include "tdl/tdl_parser.h"

namespace autotile {
namespace tdl {

namespace {

// Texts embed concrete constants, so a long-lived process may see many; past this many
// entries (or this many bytes of text: one hostile description can be megabytes) the cache
// starts over rather than grow without bound.
constexpr size_t kMaxEntries = 1 << 16;
constexpr size_t kMaxTextBytes = size_t{64} << 20;

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const Program>> map;
  size_t text_bytes = 0;  // sum of the keys' sizes
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: safe to use during static teardown
  return *c;
}

}  // namespace

std::shared_ptr<const Program> parse_cached(const std::string& text) {
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.map.find(text);
    if (it != c.map.end()) return it->second;
  }
  // Parse outside the lock; a concurrent parse of the same text is harmless (same result).
  std::shared_ptr<const Program> prog = parse(text);
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.map.size() >= kMaxEntries || c.text_bytes + text.size() > kMaxTextBytes) {
    c.map.clear();
    c.text_bytes = 0;
  }
  auto [it, inserted] = c.map.emplace(text, std::move(prog));
  if (inserted) c.text_bytes += text.size();
  return it->second;
}

size_t parse_cache_size() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().map.size();
}

void clear_parse_cache() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().map.clear();
  cache().text_bytes = 0;
}

}  // namespace tdl
}  // namespace autotile
