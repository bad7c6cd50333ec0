#include "search/tiling.h"

#include <cctype>

#include "util/error.h"

namespace autotile {

std::string Tiling::str() const {
  switch (kind) {
    case kReplicate: return "replicate";
    case kPartial: return "partial";
    case kSplit: return "split(" + std::to_string(dim) + ")";
  }
  return "?";
}

Tiling Tiling::parse(const std::string& text) {
  if (text == "replicate") return replicate();
  if (text == "partial") return partial();
  if (text.size() > 7 && text.compare(0, 6, "split(") == 0 && text.back() == ')') {
    std::string num = text.substr(6, text.size() - 7);
    bool digits = !num.empty() && num.size() < 4;
    for (char c : num) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (digits) return split(std::stoi(num));
  }
  fail("unknown tiling '", text, "' (expected split(d), replicate or partial)");
}

}  // namespace autotile
