#include "tdl/tdl_parser.h"

#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "tdl/tdl_lexer.h"
#include "util/error.h"

namespace autotile {
namespace tdl {

std::vector<std::string> Statement::var_names() const {
  std::vector<std::string> names;
  names.reserve(vars.size());
  for (const auto& v : vars) names.push_back(v.name);
  return names;
}

int Statement::find_split_var(const std::string& name) const {
  for (size_t i = 0; i < vars.size(); ++i)
    if (vars[i].name == name && (vars[i].out_dim >= 0 || vars[i].top_level)) return static_cast<int>(i);
  return -1;
}

namespace {

// Deeper nesting than any real description; bounds the recursion on hostile input (each
// level is a few stack frames: the cap fits a 256 KiB thread stack under ASan; real
// descriptions nest fewer than 10 levels).
constexpr int kMaxDepth = 96;
// More index variables in one statement, or tensors in one header, than any operator has;
// keeps the per-variable bookkeeping (linear scans, split-name tables) small on hostile text.
constexpr size_t kMaxVars = 1024;
constexpr size_t kMaxTensors = 1 << 16;

bool is_reducer(const std::string& s, Reducer* r) {
  if (s == "sum") *r = Reducer::kSum;
  else if (s == "max") *r = Reducer::kMax;
  else if (s == "min") *r = Reducer::kMin;
  else if (s == "prod") *r = Reducer::kProd;
  else return false;
  return true;
}

// Shape of the arithmetic around reductions; everything else is opaque ('o').
struct ENode {
  char op = 'o';  // 'o' opaque, 'R' reduction, '+' / '-' binary additive
  Reducer reducer = Reducer::kSum;
  std::vector<int> vars;                       // 'R': its variable ids
  std::unique_ptr<ENode> a, b;                 // '+'/'-': operands; 'R': a = body

  ENode() = default;
  ENode(const ENode&) = delete;
  ENode& operator=(const ENode&) = delete;
  // A flat sum of n terms is a left-deep chain of n '+' nodes: the default destructor would
  // recurse n deep and overflow the stack, so children are released through a work list.
  ~ENode() {
    std::vector<std::unique_ptr<ENode>> work;
    if (a) work.push_back(std::move(a));
    if (b) work.push_back(std::move(b));
    while (!work.empty()) {
      std::unique_ptr<ENode> n = std::move(work.back());
      work.pop_back();
      if (n->a) work.push_back(std::move(n->a));
      if (n->b) work.push_back(std::move(n->b));
    }  // `n` dies here with no children left
  }
};
using ENodeP = std::unique_ptr<ENode>;

ENodeP opaque() { return std::make_unique<ENode>(); }

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text), toks_(lex(text)) {}

  std::shared_ptr<const Program> run() {
    auto prog = std::make_shared<Program>();
    prog_ = prog.get();
    prog_->text = text_;
    parse_header();
    prog_->statement_of.assign(prog_->outputs.size(), -1);
    prog_->input_arity.assign(prog_->inputs.size(), -1);
    prog_->input_read.assign(prog_->inputs.size(), false);
    while (true) {
      parse_statement();
      if (peek().kind == Tok::kSemi) {
        next();
        if (peek().kind == Tok::kEnd) break;  // optional trailing ';'
        continue;
      }
      if (peek().kind == Tok::kEnd) break;
      error_expected("';' or end of text");
    }
    for (size_t o = 0; o < prog_->outputs.size(); ++o) {
      if (prog_->statement_of[o] < 0)
        fail("TDL: output '", prog_->outputs[o], "' has no statement (expected '", prog_->outputs[o],
             "[...] = ...') in: ", text_);
    }
    index_split_vars();
    return prog;
  }

 private:
  void index_split_vars() {
    for (int pass = 0; pass < 2; ++pass) {
      for (const auto& st : prog_->statements) {
        for (const auto& v : st.vars) {
          bool want = pass == 0 ? v.out_dim >= 0 : v.top_level;
          if (!want) continue;
          bool seen = false;
          for (const auto& n : prog_->split_names) seen = seen || n == v.name;
          if (!seen) prog_->split_names.push_back(v.name);
        }
      }
    }
    for (const auto& n : prog_->split_names) {
      std::vector<int> ids;
      for (const auto& st : prog_->statements) ids.push_back(st.find_split_var(n));
      prog_->split_ids.push_back(std::move(ids));
    }
  }

  const Token& peek(size_t ahead = 0) const {
    size_t i = std::min(p_ + ahead, toks_.size() - 1);
    return toks_[i];
  }
  const Token& next() {
    const Token& t = toks_[p_];
    if (p_ + 1 < toks_.size()) ++p_;
    return t;
  }

  [[noreturn]] void error_at(size_t pos, const std::string& what) const {
    fail("TDL: ", what, " at ", describe_position(text_, pos));
  }
  static std::string quote(const Token& t) {
    return t.kind == Tok::kEnd ? std::string("end of text") : "'" + t.text + "'";
  }
  [[noreturn]] void error_expected(const std::string& what) const {
    error_at(peek().pos, "expected " + what + " but found " + quote(peek()));
  }
  const Token& expect(Tok kind, const std::string& what = "") {
    if (peek().kind != kind) error_expected(what.empty() ? token_name(kind) : what);
    return next();
  }

  // ------------------------------------------------------------------ header
  std::vector<std::string> parse_names(const char* what) {
    std::vector<std::string> names;
    names.push_back(expect(Tok::kIdent, what).text);
    while (peek().kind == Tok::kComma) {
      next();
      names.push_back(expect(Tok::kIdent, what).text);
    }
    return names;
  }

  // Records a header name: inputs get ids 0.., outputs -1, -2, ... (see input_index).
  void add_header_name(const Token& t, bool is_input) {
    if (prog_->inputs.size() + prog_->outputs.size() >= kMaxTensors)
      error_at(t.pos, "more than " + std::to_string(kMaxTensors) + " tensors in the header");
    int id = is_input ? static_cast<int>(prog_->inputs.size()) : -1 - static_cast<int>(prog_->outputs.size());
    if (!names_.emplace(t.text, id).second)
      error_at(t.pos, "tensor name '" + t.text + "' appears twice in the header");
    (is_input ? prog_->inputs : prog_->outputs).push_back(t.text);
  }

  void parse_header() {
    // Inputs may be empty ("-> out: ..."), outputs may not.
    if (peek().kind != Tok::kArrow) {
      while (true) {
        add_header_name(expect(Tok::kIdent, "an input name or '->'"), true);
        if (peek().kind != Tok::kComma) break;
        next();
      }
    }
    expect(Tok::kArrow, "'->' after the input names");
    while (true) {
      add_header_name(expect(Tok::kIdent, "an output name"), false);
      if (peek().kind != Tok::kComma) break;
      next();
    }
    expect(Tok::kColon, "':' after the header");
  }

  int input_index(const std::string& name) const {
    auto it = names_.find(name);
    return it != names_.end() && it->second >= 0 ? it->second : -1;
  }
  int output_index(const std::string& name) const {
    auto it = names_.find(name);
    return it != names_.end() && it->second < 0 ? -1 - it->second : -1;
  }

  // ------------------------------------------------------------------ statements
  void parse_statement() {
    const Token& name = expect(Tok::kIdent, "an output name starting a statement");
    int out = output_index(name.text);
    if (out < 0) {
      if (input_index(name.text) >= 0)
        error_at(name.pos, "'" + name.text + "' is an input; a statement must define an output");
      error_at(name.pos, "'" + name.text + "' is not an output named in the header");
    }
    if (prog_->statement_of[out] >= 0) error_at(name.pos, "output '" + name.text + "' has two statements");
    prog_->statement_of[out] = static_cast<int>(prog_->statements.size());
    prog_->statements.emplace_back();
    st_ = &prog_->statements.back();
    st_->output = out;
    st_->pos = name.pos;
    scopes_.clear();
    expect(Tok::kLBrack, "'[' after the output name");
    if (peek().kind != Tok::kRBrack) {
      while (true) {
        const Token& v = expect(Tok::kIdent, "an output index variable");
        declare_var(v, static_cast<int>(st_->vars.size()));
        st_->rank = static_cast<int>(st_->vars.size());  // visible to the next declaration
        if (peek().kind != Tok::kComma) break;
        next();
      }
    }
    st_->rank = static_cast<int>(st_->vars.size());
    expect(Tok::kRBrack, "']' or ',' in the output variables");
    expect(Tok::kAssign, "'=' after the output variables");
    depth_ = 0;
    ENodeP root = parse_expr();
    mark_top_level(*root);
    st_->elementwise_form = !st_->has_reduction && elementwise_accesses();
  }

  // No shadowing: a variable may not reuse a name visible where it is declared (sibling
  // reductions may reuse names; they are distinct variables).
  int declare_var(const Token& t, int out_dim) {
    if (lookup_var(t.text) >= 0) error_at(t.pos, "index variable '" + t.text + "' is already defined here");
    if (st_->vars.size() >= kMaxVars)
      error_at(t.pos, "more than " + std::to_string(kMaxVars) + " index variables in one statement");
    Var v;
    v.name = t.text;
    v.out_dim = out_dim;
    v.pos = t.pos;
    st_->vars.push_back(v);
    return static_cast<int>(st_->vars.size()) - 1;
  }

  // Id of a variable visible here (output vars and enclosing reductions' vars), else -1.
  int lookup_var(const std::string& name) const {
    for (int i = 0; i < st_->rank; ++i)
      if (st_->vars[i].name == name) return i;
    for (const auto& scope : scopes_)
      for (int id : scope)
        if (st_->vars[id].name == name) return id;
    return -1;
  }

  // ------------------------------------------------------------------ arithmetic
  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* parser, size_t pos) : p(parser) {
      if (++p->depth_ > kMaxDepth) p->error_at(pos, "expression nested too deeply");
    }
    ~DepthGuard() { --p->depth_; }
  };

  ENodeP parse_expr() {
    DepthGuard g(this, peek().pos);
    ENodeP a = parse_additive();
    while (peek().kind == Tok::kCompare) {
      next();
      parse_additive();
      a = opaque();
    }
    return a;
  }

  ENodeP parse_additive() {
    ENodeP a = parse_mul();
    while (peek().kind == Tok::kPlus || peek().kind == Tok::kMinus) {
      char op = next().kind == Tok::kPlus ? '+' : '-';
      ENodeP b = parse_mul();
      auto n = std::make_unique<ENode>();
      n->op = op;
      n->a = std::move(a);
      n->b = std::move(b);
      a = std::move(n);
    }
    return a;
  }

  ENodeP parse_mul() {
    ENodeP a = parse_unary();
    while (peek().kind == Tok::kStar || peek().kind == Tok::kSlash || peek().kind == Tok::kPercent) {
      next();
      parse_unary();
      a = opaque();
    }
    return a;
  }

  ENodeP parse_unary() {
    DepthGuard g(this, peek().pos);
    if (peek().kind == Tok::kMinus || peek().kind == Tok::kPlus) {
      bool plus = next().kind == Tok::kPlus;
      ENodeP inner = parse_unary();
      return plus ? std::move(inner) : opaque();
    }
    return parse_primary();
  }

  ENodeP parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::kInt:
      case Tok::kFloat:
        next();
        return opaque();
      case Tok::kLParen: {
        next();
        ENodeP e = parse_expr();
        expect(Tok::kRParen, "')'");
        return e;
      }
      case Tok::kIdent:
        break;
      default:
        error_expected("an expression");
    }
    const Token& name = next();
    if (peek().kind == Tok::kLBrack) {
      parse_access(name);
      return opaque();
    }
    if (peek().kind == Tok::kLParen) {
      Reducer r;
      if (is_reducer(name.text, &r) && looks_like_reduction()) return parse_reduction(r);
      next();  // '('
      if (peek().kind != Tok::kRParen) {
        while (true) {
          parse_expr();
          if (peek().kind != Tok::kComma) break;
          next();
        }
      }
      expect(Tok::kRParen, "')' or ',' in the call arguments");
      return opaque();
    }
    // A bare name: an index variable used as a value, a whole input, or an opaque constant.
    if (lookup_var(name.text) < 0) {
      int in = input_index(name.text);
      if (in >= 0) {
        Access a;
        a.input = in;
        a.whole = true;
        a.pos = name.pos;
        st_->accesses.push_back(std::move(a));
        prog_->input_read[in] = true;
      } else if (output_index(name.text) >= 0) {
        error_at(name.pos, "output '" + name.text + "' cannot be read in a statement");
      }
    }
    return opaque();
  }

  // After a reducer name: '(' IDENT (',' IDENT)* ')' '{' starts a reduction; anything else
  // (e.g. max(a[i], b[i])) is an ordinary call.
  bool looks_like_reduction() const {
    size_t i = 1;  // peek(0) is '('
    if (peek(i).kind == Tok::kRParen) return peek(i + 1).kind == Tok::kLBrace;  // sum() { e } = e
    if (peek(i).kind != Tok::kIdent) return false;
    ++i;
    while (peek(i).kind == Tok::kComma) {
      if (peek(i + 1).kind != Tok::kIdent) return false;
      i += 2;
    }
    return peek(i).kind == Tok::kRParen && peek(i + 1).kind == Tok::kLBrace;
  }

  ENodeP parse_reduction(Reducer r) {
    expect(Tok::kLParen);
    auto n = std::make_unique<ENode>();
    n->op = 'R';
    n->reducer = r;
    scopes_.emplace_back();
    // An empty variable list reduces over nothing: the body itself (generated descriptions
    // of a reduction over zero axes stay valid).
    while (peek().kind != Tok::kRParen) {
      const Token& v = expect(Tok::kIdent, "a reduction variable");
      int id = declare_var(v, -1);
      scopes_.back().push_back(id);
      if (peek().kind != Tok::kComma) break;
      next();
    }
    expect(Tok::kRParen, "')' after the reduction variables");
    expect(Tok::kLBrace, "'{' starting the reduction body");
    if (!scopes_.back().empty()) st_->has_reduction = true;
    n->vars = scopes_.back();
    n->a = parse_expr();
    scopes_.pop_back();
    expect(Tok::kRBrace, "'}' closing the reduction body");
    return n;
  }

  // ------------------------------------------------------------------ accesses
  void parse_access(const Token& name) {
    int in = input_index(name.text);
    if (in < 0) {
      if (output_index(name.text) >= 0)
        error_at(name.pos, "output '" + name.text + "' cannot be read in a statement");
      std::string known;
      for (const auto& s : prog_->inputs) known += (known.empty() ? "" : ", ") + s;
      error_at(name.pos, "unknown tensor '" + name.text + "' (inputs: " + (known.empty() ? "none" : known) + ")");
    }
    expect(Tok::kLBrack);
    Access a;
    a.input = in;
    a.pos = name.pos;
    if (peek().kind != Tok::kRBrack) {
      while (true) {
        Index ix;
        if (peek().kind == Tok::kColon) {
          next();
          ix.full = true;
        } else {
          ix.form = parse_index();
        }
        a.indices.push_back(std::move(ix));
        if (peek().kind != Tok::kComma) break;
        next();
      }
    }
    expect(Tok::kRBrack, "']' or ',' in the access of '" + name.text + "'");
    int arity = static_cast<int>(a.indices.size());
    int& known = prog_->input_arity[in];
    if (known >= 0 && known != arity)
      error_at(name.pos, "input '" + name.text + "' is accessed with " + std::to_string(arity) +
                             " indices here but with " + std::to_string(known) + " elsewhere");
    known = arity;
    prog_->input_read[in] = true;
    st_->accesses.push_back(std::move(a));
  }

  // index := affine, folded into normal form as it is parsed.
  LinearForm parse_index() {
    DepthGuard g(this, peek().pos);
    LinearForm a = parse_iterm();
    while (peek().kind == Tok::kPlus || peek().kind == Tok::kMinus) {
      const Token& op = next();
      LinearForm b = parse_iterm();
      a = guarded(op.pos, [&] { return add(a, op.kind == Tok::kPlus ? b : scale(b, -1)); });
    }
    return a;
  }

  LinearForm parse_iterm() {
    LinearForm a = parse_ifactor();
    while (true) {
      const Token& op = peek();
      if (op.kind == Tok::kStar) {
        next();
        LinearForm b = parse_ifactor();
        if (a.is_constant()) a = guarded(op.pos, [&] { return scale(b, a.constant); });
        else if (b.is_constant()) a = guarded(op.pos, [&] { return scale(a, b.constant); });
        else error_at(op.pos, "index is not affine: product of two index variables");
      } else if (op.kind == Tok::kSlash) {
        next();
        size_t at = peek().pos;
        LinearForm b = parse_ifactor();
        if (!b.is_constant() || b.constant <= 0)
          error_at(at, "index divisor must be a positive integer constant");
        a = guarded(op.pos, [&] { return floor_div(a, b.constant); });
      } else if (op.kind == Tok::kPercent) {
        error_at(op.pos, "'%' is not allowed in an index (indices are affine; use ':' for the whole dim)");
      } else {
        return a;
      }
    }
  }

  LinearForm parse_ifactor() {
    DepthGuard g(this, peek().pos);
    const Token& t = peek();
    switch (t.kind) {
      case Tok::kMinus: {
        next();
        LinearForm f = parse_ifactor();
        return guarded(t.pos, [&] { return scale(f, -1); });
      }
      case Tok::kPlus:
        next();
        return parse_ifactor();
      case Tok::kInt: {
        next();
        try {
          size_t used = 0;
          long long v = std::stoll(t.text, &used);
          if (used != t.text.size()) throw std::out_of_range("");
          return LinearForm::number(v);
        } catch (const std::exception&) {
          error_at(t.pos, "integer '" + t.text + "' in an index does not fit in 64 bits");
        }
      }
      case Tok::kFloat:
        error_at(t.pos, "index must be an integer expression, found the number '" + t.text + "'");
      case Tok::kLParen: {
        next();
        LinearForm f = parse_index();
        expect(Tok::kRParen, "')' in an index");
        return f;
      }
      case Tok::kIdent: {
        next();
        if (peek().kind == Tok::kLBrack || peek().kind == Tok::kLParen)
          error_at(t.pos, "index is not affine: '" + t.text + "' reads a tensor or calls a function (data-dependent index)");
        int id = lookup_var(t.text);
        if (id < 0) error_at(t.pos, "unknown index variable '" + t.text + "'");
        return LinearForm::variable(id);
      }
      default:
        error_expected("an index (':' or an affine expression)");
    }
  }

  template <typename F>
  LinearForm guarded(size_t pos, F&& f) {
    try {
      return f();
    } catch (const std::overflow_error&) {
      error_at(pos, "index constant overflows 64 bits");
    }
  }

  // ------------------------------------------------------------------ structure
  // The statement's expression is a reduction R, or for max/min also R plus or minus terms
  // outside it. Directly nested reductions with the same reducer merge.
  void mark_top_level(const ENode& root) {
    std::vector<std::pair<int, const ENode*>> terms;  // (sign, term)
    collect_terms(root, 1, &terms);
    const ENode* red = nullptr;
    int count = 0, sign = 0;
    for (const auto& [s, n] : terms) {
      if (n->op == 'R') {
        red = n;
        sign = s;
        ++count;
      }
    }
    if (count != 1 || sign < 0) return;
    // Each worker runs the op's (opaque) kernel, which also evaluates the terms outside the
    // reduction: max/min absorb a term every worker adds (max(a+t, b+t) = max(a, b) + t);
    // sum and prod would count it k times, so there the reduction must stand alone.
    if (terms.size() > 1 && (red->reducer == Reducer::kSum || red->reducer == Reducer::kProd)) return;
    st_->has_top = true;
    st_->top_reducer = red->reducer;
    for (const ENode* n = red; n && n->op == 'R' && n->reducer == red->reducer; n = n->a.get())
      for (int id : n->vars) st_->vars[id].top_level = true;
  }

  // The additive terms of `root` with their signs, left to right. Iterative: a sum's length
  // is unbounded (a million-term description must not overflow a worker thread's stack).
  static void collect_terms(const ENode& root, int sign, std::vector<std::pair<int, const ENode*>>* out) {
    std::vector<std::pair<int, const ENode*>> work{{sign, &root}};
    while (!work.empty()) {
      auto [s, n] = work.back();
      work.pop_back();
      if (n->op == '+' || n->op == '-') {
        work.push_back({n->op == '+' ? s : -s, n->b.get()});  // popped after n->a's terms
        work.push_back({s, n->a.get()});
      } else {
        out->push_back({s, n});
      }
    }
  }

  bool elementwise_accesses() const {
    for (const auto& a : st_->accesses) {
      if (a.whole) return false;
      int arity = static_cast<int>(a.indices.size());
      if (arity > st_->rank) return false;
      int off = st_->rank - arity;
      for (int d = 0; d < arity; ++d) {
        const Index& ix = a.indices[d];
        if (ix.full) return false;
        if (!ix.form.is_exactly(off + d) && !(ix.form.is_constant() && ix.form.constant == 0)) return false;
      }
    }
    return true;
  }

  const std::string& text_;
  std::vector<Token> toks_;
  size_t p_ = 0;
  Program* prog_ = nullptr;
  Statement* st_ = nullptr;
  std::vector<std::vector<int>> scopes_;
  std::unordered_map<std::string, int> names_;  // header tensor names, see add_header_name
  int depth_ = 0;
};

}  // namespace

std::shared_ptr<const Program> parse(const std::string& text) { return Parser(text).run(); }

}  // namespace tdl
}  // namespace autotile
