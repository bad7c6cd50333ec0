#include "tdl/tdl_lexer.h"

#include <cctype>

#include "util/error.h"

namespace autotile {
namespace tdl {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

std::string printable(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  static const char* hex = "0123456789abcdef";
  return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
}

}  // namespace

const char* token_name(Tok kind) {
  switch (kind) {
    case Tok::kIdent: return "identifier";
    case Tok::kInt: return "integer";
    case Tok::kFloat: return "number";
    case Tok::kLBrack: return "'['";
    case Tok::kRBrack: return "']'";
    case Tok::kLParen: return "'('";
    case Tok::kRParen: return "')'";
    case Tok::kLBrace: return "'{'";
    case Tok::kRBrace: return "'}'";
    case Tok::kComma: return "','";
    case Tok::kSemi: return "';'";
    case Tok::kColon: return "':'";
    case Tok::kArrow: return "'->'";
    case Tok::kAssign: return "'='";
    case Tok::kPlus: return "'+'";
    case Tok::kMinus: return "'-'";
    case Tok::kStar: return "'*'";
    case Tok::kSlash: return "'/'";
    case Tok::kPercent: return "'%'";
    case Tok::kCompare: return "comparison";
    case Tok::kEnd: return "end of text";
  }
  return "token";
}

std::string describe_position(const std::string& text, size_t pos) {
  if (pos > text.size()) pos = text.size();
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  // Excerpt: up to 30 characters either side on one line, with a caret marker.
  size_t from = pos > 30 ? pos - 30 : 0, to = std::min(text.size(), pos + 30);
  std::string before, after;
  for (size_t i = from; i < pos; ++i) before += (text[i] == '\n' || text[i] == '\t') ? ' ' : text[i];
  for (size_t i = pos; i < to; ++i) after += (text[i] == '\n' || text[i] == '\t') ? ' ' : text[i];
  for (auto* s : {&before, &after})
    for (char& c : *s)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return "line " + std::to_string(line) + ", column " + std::to_string(col) + " (offset " +
         std::to_string(pos) + "): " + (from > 0 ? "..." : "") + before + " <HERE> " + after +
         (to < text.size() ? "..." : "");
}

std::vector<Token> lex(const std::string& text) {
  std::vector<Token> out;
  size_t i = 0, n = text.size();
  auto push = [&](Tok k, size_t start, size_t len) { out.push_back(Token{k, text.substr(start, len), start}); };
  while (i < n) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    size_t start = i;
    if (ident_start(c)) {
      while (i < n && ident_char(text[i])) ++i;
      push(Tok::kIdent, start, i - start);
      continue;
    }
    if (digit(c) || (c == '.' && i + 1 < n && digit(text[i + 1]))) {
      bool is_float = false;
      while (i < n && digit(text[i])) ++i;
      if (i < n && text[i] == '.') {
        is_float = true;
        ++i;
        while (i < n && digit(text[i])) ++i;
      }
      if (i < n && (text[i] == 'e' || text[i] == 'E')) {
        size_t j = i + 1;
        if (j < n && (text[j] == '+' || text[j] == '-')) ++j;
        if (j < n && digit(text[j])) {
          is_float = true;
          i = j;
          while (i < n && digit(text[i])) ++i;
        }
      }
      if (i < n && ident_char(text[i]))
        fail("TDL: malformed number '", text.substr(start, i + 1 - start), "' at ", describe_position(text, start));
      push(is_float ? Tok::kFloat : Tok::kInt, start, i - start);
      continue;
    }
    auto two = [&](char a, char b) { return c == a && i + 1 < n && text[i + 1] == b; };
    if (two('-', '>')) { push(Tok::kArrow, start, 2); i += 2; continue; }
    if (two('<', '=') || two('>', '=') || two('=', '=') || two('!', '=')) {
      push(Tok::kCompare, start, 2);
      i += 2;
      continue;
    }
    Tok k;
    switch (c) {
      case '[': k = Tok::kLBrack; break;
      case ']': k = Tok::kRBrack; break;
      case '(': k = Tok::kLParen; break;
      case ')': k = Tok::kRParen; break;
      case '{': k = Tok::kLBrace; break;
      case '}': k = Tok::kRBrace; break;
      case ',': k = Tok::kComma; break;
      case ';': k = Tok::kSemi; break;
      case ':': k = Tok::kColon; break;
      case '=': k = Tok::kAssign; break;
      case '+': k = Tok::kPlus; break;
      case '-': k = Tok::kMinus; break;
      case '*': k = Tok::kStar; break;
      case '/': k = Tok::kSlash; break;
      case '%': k = Tok::kPercent; break;
      case '<': case '>': k = Tok::kCompare; break;
      default:
        fail("TDL: unexpected character ", printable(c), " at ", describe_position(text, start));
    }
    push(k, start, 1);
    ++i;
  }
  out.push_back(Token{Tok::kEnd, "", n});
  return out;
}

}  // namespace tdl
}  // namespace autotile
