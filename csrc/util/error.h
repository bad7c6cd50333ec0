// Error type of the core. Every failure a user can cause is reported by throwing
// autotile::Error with a message naming the node, op, tensor or shape at fault; the
// bindings (Cython, C API) turn it into a Python exception or an error code.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace autotile {

/// \brief The one exception type the core throws for bad input.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

/// \brief Throws Error whose message is the concatenation of the arguments.
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  throw Error(os.str());
}

}  // namespace autotile
