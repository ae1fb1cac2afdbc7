// Token cursor, error helpers and the expression grammar shared by the statement parser.
// Internal to parser.cpp; follows Jinja2 3.1's grammar and operator precedence.
#pragma once
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/parser.h"

namespace tf::jinja::detail {

constexpr int kMaxNesting = 200;  // untrusted templates: bound recursion depth

class ParserBase {
 public:
  explicit ParserBase(const std::vector<Token>& toks) : t_(toks) {}

 protected:
  using T = Token::Type;

  const std::vector<Token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // break/continue are only valid directly inside a for body
  std::vector<std::set<std::string>*> macro_names_;

  struct DepthGuard {
    explicit DepthGuard(ParserBase& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.fail("template nesting too deep");
    }
    ~DepthGuard() { --p_.depth_; }
    ParserBase& p_;
  };

  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  void advance() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  [[noreturn]] void fail(const std::string& msg, int line = -1) const {
    throw JinjaError("TemplateSyntaxError", msg, line < 0 ? cur().line : line);
  }
  static std::string describe(const Token& tk) {
    switch (tk.type) {
      case T::Eof:
        return "end of template";
      case T::BlockEnd:
        return "end of statement block";
      case T::VarEnd:
        return "end of print statement";
      case T::BlockBegin:
        return "begin of statement block";
      case T::VarBegin:
        return "begin of print statement";
      case T::Data:
        return "template data";
      case T::String:
        return "string";
      default:
        return tk.text;
    }
  }
  bool is_op(std::string_view op) const { return cur().type == T::Op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == T::Name && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) {
      if (cur().type == T::Eof) fail("unexpected end of template, expected '" + std::string(op) + "'.");
      fail("expected token '" + std::string(op) + "', got '" + describe(cur()) + "'");
    }
  }
  std::string expect_name() {
    if (cur().type != T::Name) {
      if (cur().type == T::Eof) fail("unexpected end of template, expected 'name'.");
      fail("expected token 'name', got '" + describe(cur()) + "'");
    }
    std::string n = cur().text;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().type != T::BlockEnd) {
      if (cur().type == T::Eof) fail("unexpected end of template, expected 'end of statement block'.");
      fail("expected token 'end of statement block', got '" + describe(cur()) + "'");
    }
    advance();
  }

  ExprPtr node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- expressions ---------------------------------------------------------------------------

  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    if (cur().type == T::VarEnd || cur().type == T::BlockEnd || is_op(")")) return true;
    for (const auto& e : extra_end) {
      if (is_name(e)) return true;
    }
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, const std::vector<std::string>& extra_end, bool explicit_parens) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto e = node(Expr::Kind::Tuple, line);
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    if (!with_condexpr) return parse_or();
    const int line = cur().line;
    ExprPtr e = parse_or();
    while (skip_name("if")) {
      auto c = node(Expr::Kind::CondExpr, line);
      ExprPtr test = parse_or();
      ExprPtr other = skip_name("else") ? parse_expression(true) : nullptr;
      c->args.push_back(std::move(test));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(Expr::Kind k, ExprPtr l, ExprPtr r, int line, std::string op = {}) {
    auto e = node(k, line);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      const int line = cur().line;
      advance();
      l = binary(Expr::Kind::Or, std::move(l), parse_and(), line);
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      const int line = cur().line;
      advance();
      l = binary(Expr::Kind::And, std::move(l), parse_not(), line);
    }
    return l;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this);
      auto e = node(Expr::Kind::Not, cur().line);
      advance();
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      if (cur().type == T::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        ops.push_back(cur().text);
        advance();
      } else if (is_name("in")) {
        ops.push_back("in");
        advance();
      } else if (is_name("not") && peek().type == T::Name && peek().text == "in") {
        ops.push_back("notin");
        advance();
        advance();
      } else {
        break;
      }
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = node(Expr::Kind::Compare, line);
    e->args.push_back(std::move(first));
    for (auto& o : operands) e->args.push_back(std::move(o));
    e->ops = std::move(ops);
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().text;
      const int line = cur().line;
      advance();
      l = binary(Expr::Kind::Binary, std::move(l), parse_concat(), line, op);
    }
    return l;
  }

  ExprPtr parse_concat() {
    const int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = node(Expr::Kind::Concat, line);
    e->args.push_back(std::move(first));
    while (skip_op("~")) e->args.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().text;
      const int line = cur().line;
      advance();
      l = binary(Expr::Kind::Binary, std::move(l), parse_pow(), line, op);
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      advance();
      l = binary(Expr::Kind::Binary, std::move(l), parse_unary(true), line, "**");
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = node(is_op("-") ? Expr::Kind::Neg : Expr::Kind::Pos, cur().line);
      advance();
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  void note_name(const std::string& n) {
    for (auto* s : macro_names_) s->insert(n);
  }

  ExprPtr parse_primary() {
    DepthGuard g(*this);
    const Token& tk = cur();
    if (tk.type == T::Name) {
      advance();
      auto e = node(Expr::Kind::Const, tk.line);
      if (tk.text == "true" || tk.text == "True")
        e->value = Value::boolean(true);
      else if (tk.text == "false" || tk.text == "False")
        e->value = Value::boolean(false);
      else if (tk.text == "none" || tk.text == "None")
        e->value = Value::none();
      else {
        e->kind = Expr::Kind::Name;
        e->name = tk.text;
        note_name(tk.text);
      }
      return e;
    }
    if (tk.type == T::String) {
      auto e = node(Expr::Kind::Const, tk.line);
      std::string s;
      while (cur().type == T::String) {
        s += cur().text;
        advance();
      }
      e->value = Value::str(std::move(s));
      return e;
    }
    if (tk.type == T::Int || tk.type == T::Float) {
      auto e = node(Expr::Kind::Const, tk.line);
      e->value = parse_number(tk);
      advance();
      return e;
    }
    if (is_op("(")) {
      advance();
      ExprPtr e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      auto e = node(Expr::Kind::List, tk.line);
      advance();
      while (!is_op("]")) {
        if (!e->args.empty()) {
          expect_op(",");
          if (is_op("]")) break;
        }
        e->args.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      auto e = node(Expr::Kind::Dict, tk.line);
      advance();
      while (!is_op("}")) {
        if (!e->args.empty()) {
          expect_op(",");
          if (is_op("}")) break;
        }
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    if (tk.type == T::Eof) fail("unexpected end of template");
    fail("unexpected '" + describe(tk) + "'");
  }

  Value parse_number(const Token& tk) {
    std::string s;
    for (char c : tk.text) {
      if (c != '_') s.push_back(c);
    }
    if (tk.type == T::Float) return Value::real(std::strtod(s.c_str(), nullptr));
    int base = 10;
    size_t off = 0;
    if (s.size() > 1 && s[0] == '0' && (s[1] | 0x20) != '0' && !(s[1] >= '0' && s[1] <= '9')) {
      const char k = static_cast<char>(s[1] | 0x20);
      base = k == 'x' ? 16 : k == 'o' ? 8 : 2;
      off = 2;
    }
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str() + off, &end, base);
    if (errno == ERANGE) fail("integer literal exceeds 64 bits");
    return Value::integer(v);
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".") || is_op("["))
        e = parse_subscript(std::move(e));
      else if (is_op("("))
        e = parse_call(std::move(e));
      else
        break;
    }
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|"))
        e = parse_filter(std::move(e), false);
      else if (is_name("is"))
        e = parse_test(std::move(e));
      else if (is_op("("))
        e = parse_call(std::move(e));
      else
        break;
    }
    return e;
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    DepthGuard g(*this);
    const int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == T::Name) {
        auto e = node(Expr::Kind::GetAttr, line);
        e->name = cur().text;
        advance();
        e->args.push_back(std::move(obj));
        return e;
      }
      if (cur().type != T::Int) fail("expected name or number");
      auto e = node(Expr::Kind::GetItem, line);
      auto k = node(Expr::Kind::Const, cur().line);
      k->value = parse_number(cur());
      advance();
      e->args.push_back(std::move(obj));
      e->args.push_back(std::move(k));
      return e;
    }
    expect_op("[");
    std::vector<ExprPtr> keys;
    while (!is_op("]")) {
      if (!keys.empty()) expect_op(",");
      keys.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = node(Expr::Kind::GetItem, line);
    e->args.push_back(std::move(obj));
    if (keys.size() == 1) {
      e->args.push_back(std::move(keys[0]));
    } else {
      auto t = node(Expr::Kind::Tuple, line);
      t->args = std::move(keys);
      e->args.push_back(std::move(t));
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    const int line = cur().line;
    std::vector<ExprPtr> parts;
    if (is_op(":")) {
      advance();
      parts.push_back(nullptr);
    } else {
      ExprPtr x = parse_expression(true);
      if (!is_op(":")) return x;
      advance();
      parts.push_back(std::move(x));
    }
    if (is_op(":") || is_op("]") || is_op(","))
      parts.push_back(nullptr);
    else
      parts.push_back(parse_expression(true));
    if (skip_op(":")) {
      if (is_op("]") || is_op(","))
        parts.push_back(nullptr);
      else
        parts.push_back(parse_expression(true));
    } else {
      parts.push_back(nullptr);
    }
    auto e = node(Expr::Kind::Slice, line);
    e->args = std::move(parts);
    return e;
  }

  void parse_call_args(Expr& e) {
    const int line = cur().line;
    expect_op("(");
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) {
        // Stored as keyword entries named "*" / "**" and expanded when the call is evaluated.
        std::string star = cur().text;
        bool seen = false;
        for (const auto& kw : e.kwargs) seen = seen || kw.first == star || kw.first == "**";
        if (seen) fail("invalid syntax for function call expression", line);
        advance();
        e.kwargs.emplace_back(std::move(star), parse_expression(true));
        require_comma = true;
        continue;
      }
      if (cur().type == T::Name && peek().type == T::Op && peek().text == "=") {
        for (const auto& kw : e.kwargs) {
          if (kw.first == "**") fail("invalid syntax for function call expression", line);
        }
        std::string key = cur().text;
        advance();
        advance();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("invalid syntax for function call expression", line);
        e.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    DepthGuard g(*this);
    auto e = node(Expr::Kind::Call, cur().line);
    e->args.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter(ExprPtr operand, bool start_inline) {
    while (is_op("|") || start_inline) {
      DepthGuard g(*this);
      if (!start_inline) advance();
      start_inline = false;
      const int line = cur().line;
      std::string name = expect_name();
      while (skip_op(".")) name += "." + expect_name();
      if (!is_supported_filter(name)) {
        if (is_jinja_builtin_filter(name)) fail("unsupported filter '" + name + "'", line);
        throw JinjaError("TemplateAssertionError", "No filter named '" + name + "'.", line);
      }
      auto e = node(Expr::Kind::Filter, line);
      e->name = std::move(name);
      e->args.push_back(std::move(operand));
      if (is_op("(")) parse_call_args(*e);
      operand = std::move(e);
    }
    return operand;
  }

  ExprPtr parse_test(ExprPtr operand) {
    const int line = cur().line;
    advance();  // "is"
    const bool negated = skip_name("not");
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    if (!is_supported_test(name))
      throw JinjaError("TemplateAssertionError", "No test named '" + name + "'.", line);
    auto e = node(Expr::Kind::Test, line);
    e->name = std::move(name);
    e->args.push_back(std::move(operand));
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == T::Name || cur().type == T::String || cur().type == T::Int ||
                cur().type == T::Float || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto n = node(Expr::Kind::Not, line);
    n->args.push_back(std::move(e));
    return n;
  }
};

}  // namespace tf::jinja::detail
