// TDL lexer and parser: structure of parsed programs and error messages.
#include <gtest/gtest.h>

#include <string>

#include "tdl/tdl_lexer.h"
#include "tdl/tdl_parser.h"
#include "util/error.h"

namespace autotile {
namespace tdl {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TdlLexer, TokensAndPositions) {
  auto toks = lex("a, b -> c: c[i] = 1.5e3 * a[2*i + 1] # comment\n >= .5");
  std::vector<Tok> kinds;
  for (const auto& t : toks) kinds.push_back(t.kind);
  std::vector<Tok> want{Tok::kIdent, Tok::kComma, Tok::kIdent, Tok::kArrow, Tok::kIdent, Tok::kColon,
                        Tok::kIdent, Tok::kLBrack, Tok::kIdent, Tok::kRBrack, Tok::kAssign, Tok::kFloat,
                        Tok::kStar, Tok::kIdent, Tok::kLBrack, Tok::kInt, Tok::kStar, Tok::kIdent,
                        Tok::kPlus, Tok::kInt, Tok::kRBrack, Tok::kCompare, Tok::kFloat, Tok::kEnd};
  EXPECT_EQ(kinds, want);
  EXPECT_EQ(toks[3].pos, 5u);
  EXPECT_EQ(toks[11].text, "1.5e3");
}

TEST(TdlLexer, DescribesLineAndColumn) {
  std::string d = describe_position("ab\ncd", 4);
  EXPECT_NE(d.find("line 2, column 2 (offset 4)"), std::string::npos) << d;
}

TEST(TdlParser, FullyConnected) {
  auto p = parse("data, weight, bias -> out: out[n, o] = sum(k) { data[n, k] * weight[o, k] } + bias[o]");
  ASSERT_EQ(p->statements.size(), 1u);
  const Statement& st = p->statements[0];
  EXPECT_EQ(st.rank, 2);
  ASSERT_EQ(st.vars.size(), 3u);
  EXPECT_EQ(st.vars[2].name, "k");
  EXPECT_TRUE(st.has_reduction);
  EXPECT_FALSE(st.has_top);  // sum plus a bias term: not a top-level reduction
  EXPECT_FALSE(st.vars[2].top_level);
  ASSERT_EQ(st.accesses.size(), 3u);
  EXPECT_TRUE(st.accesses[0].indices[1].form.is_exactly(2));
  EXPECT_EQ(p->input_arity, (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(p->split_names, (std::vector<std::string>{"n", "o"}));
  EXPECT_FALSE(st.elementwise_form);
}

TEST(TdlParser, TopLevelReductions) {
  auto top = [](const std::string& body) {
    auto p = parse("x, b -> y: y[i] = " + body);
    return p->statements[0].has_top;
  };
  EXPECT_TRUE(top("sum(k) { x[i, k] }"));
  EXPECT_TRUE(top("((sum(k) { x[i, k] }))"));
  EXPECT_TRUE(top("max(k) { x[i, k] } + b[i]"));
  EXPECT_TRUE(top("b[i] + min(k) { x[i, k] } - 1"));
  EXPECT_FALSE(top("sum(k) { x[i, k] } + b[i]"));
  EXPECT_FALSE(top("prod(k) { x[i, k] } + b[i]"));
  EXPECT_FALSE(top("b[i] - max(k) { x[i, k] }"));
  EXPECT_FALSE(top("exp(x[i, 0]) / sum(k) { x[i, k] }"));
  auto p = parse("x -> y: y[] = sum(a) { sum(b) { max(c) { x[a, b, c] } } }");
  EXPECT_EQ(p->split_names, (std::vector<std::string>{"a", "b"}));
}

TEST(TdlParser, IndexNormalForm) {
  auto p = parse("x -> y: y[a, b] = x[-(2 * (a - 3)) + b / 2 * 4, :]");
  const Index& ix = p->statements[0].accesses[0].indices[0];
  EXPECT_EQ(ix.form.str(p->statements[0].var_names()), "-2*a + 4*(b)/2 + 6");
  EXPECT_TRUE(p->statements[0].accesses[0].indices[1].full);
}

TEST(TdlParser, ReducerNameAsCall) {
  auto p = parse("a, b -> y: y[i] = max(a[i], b[i])");
  EXPECT_FALSE(p->statements[0].has_reduction);
  EXPECT_TRUE(p->statements[0].elementwise_form);
}

TEST(TdlParser, ErrorsNamePositionAndToken) {
  EXPECT_NE(error_of("a -> b: b[i] = a[i").find("found end of text at line 1, column 19"), std::string::npos);
  EXPECT_NE(error_of("a -> b: b[i] = q[i]").find("unknown tensor 'q' (inputs: a)"), std::string::npos);
  EXPECT_NE(error_of("a -> b: b[i] = a[i*i]").find("product of two index variables"), std::string::npos);
  EXPECT_NE(error_of("a -> b: b[i] = a[i/0]").find("positive integer constant"), std::string::npos);
  EXPECT_NE(error_of(std::string(100000, '(')).find("expected an input name"), std::string::npos);
  EXPECT_NE(error_of("a -> b: b[i] = " + std::string(100000, '(')).find("nested too deeply"), std::string::npos);
  EXPECT_NE(error_of("a -> b: b[i] = a[" + std::string(100000, '-') + "i]").find("nested too deeply"),
            std::string::npos);
}

TEST(TdlParser, GarbageNeverCrashes) {
  const std::string alphabet = "abik01 ,;:[](){}+-*/%=<>#.\n->sum";
  uint32_t state = 12345;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text;
    int len = static_cast<int>(state % 40);
    for (int i = 0; i < len; ++i) {
      state = state * 1103515245u + 12345u;
      text += alphabet[(state >> 16) % alphabet.size()];
    }
    try {
      parse(text);
    } catch (const Error&) {
    }
  }
}

TEST(TdlParser, CacheReturnsOneProgramPerText) {
  clear_parse_cache();
  auto a = parse_cached("x -> y: y[i] = x[i]");
  auto b = parse_cached("x -> y: y[i] = x[i]");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(parse_cache_size(), 1u);
  EXPECT_THROW(parse_cached("x -> y: y[i] = "), Error);
  EXPECT_EQ(parse_cache_size(), 1u);
}

}  // namespace
}  // namespace tdl
}  // namespace autotile
