// Parser of the TDL text form (docs/tdl.md) into a Program.
#pragma once
#include <memory>
#include <string>

#include "tdl/tdl_ast.h"

namespace autotile {
namespace tdl {

/// \brief Parses `text`. Throws Error naming the position (line, column, offset) and the
/// offending token on malformed text, unknown tensor or variable names, non-affine
/// indices and inconsistent access arities.
std::shared_ptr<const Program> parse(const std::string& text);

/// \brief parse() through a process-wide, thread-safe cache keyed by text.
std::shared_ptr<const Program> parse_cached(const std::string& text);

/// \brief Number of programs held by the parse cache (tests, diagnostics).
size_t parse_cache_size();

/// \brief Empties the parse cache.
void clear_parse_cache();

}  // namespace tdl
}  // namespace autotile
