// Comma-separated name lists in node attributes (e.g. "__no_split__", the variables an op
// vetoes), read by the search and by the execution-graph builder alike.
#pragma once
#include <string>

namespace autotile {

/// \brief True when `name` is one of the comma-separated names in `list`.
inline bool is_listed(const std::string& list, const std::string& name) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    if (list.compare(start, end - start, name) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace autotile
