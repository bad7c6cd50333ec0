// Tokens of the TDL text form (docs/tdl.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace autotile {
namespace tdl {

/// \brief Kind of one TDL token.
enum class Tok : uint8_t {
  kIdent,
  kInt,     ///< integer literal (digits only)
  kFloat,   ///< number with a fraction or exponent
  kLBrack, kRBrack, kLParen, kRParen, kLBrace, kRBrace,
  kComma, kSemi, kColon, kArrow, kAssign,
  kPlus, kMinus, kStar, kSlash, kPercent,
  kCompare,  ///< < <= > >= == != (opaque arithmetic)
  kEnd,
};

/// \brief One token and where it starts in the text (0-based byte offset).
struct Token {
  Tok kind = Tok::kEnd;
  std::string text;
  size_t pos = 0;
};

/// \brief Splits TDL text into tokens; throws Error at the first character that starts no
/// token. `#` starts a comment up to the end of the line.
std::vector<Token> lex(const std::string& text);

/// \brief Human-readable "line L, column C" of byte offset `pos` in `text`, with a short
/// excerpt of the text around it, for error messages.
std::string describe_position(const std::string& text, size_t pos);

/// \brief Short name of a token kind for messages ("']'", "identifier", ...).
const char* token_name(Tok kind);

}  // namespace tdl
}  // namespace autotile
