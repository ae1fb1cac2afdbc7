#include "text/jinja/parser.h"

#include "text/jinja/parser_base.h"

namespace tf::jinja {
namespace {

class Parser : public detail::ParserBase {
 public:
  explicit Parser(const std::vector<Token>& toks) : ParserBase(toks) {}

  Body parse_template() {
    Body body = subparse({});
    if (cur().type != T::Eof) fail("unexpected '" + describe(cur()) + "'");
    return body;
  }

 private:
  // ---- statements ----------------------------------------------------------------------------

  // Parses until a block tag whose name is in `end` (left as the current token) or EOF.
  Body subparse(const std::vector<std::string>& end) {
    DepthGuard g(*this);
    Body body;
    while (cur().type != T::Eof) {
      const Token& tk = cur();
      if (tk.type == T::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = tk.line;
        s->text = tk.text;
        body.push_back(std::move(s));
        advance();
      } else if (tk.type == T::VarBegin) {
        advance();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Print;
        s->line = tk.line;
        s->expr = parse_tuple(true, {}, false);
        if (cur().type != T::VarEnd) {
          if (cur().type == T::Eof) fail("unexpected end of template, expected 'end of print statement'.");
          fail("expected token 'end of print statement', got '" + describe(cur()) + "'");
        }
        advance();
        body.push_back(std::move(s));
      } else if (tk.type == T::BlockBegin) {
        advance();
        if (cur().type == T::Name) {
          for (const auto& e : end) {
            if (cur().text == e) return body;
          }
        }
        body.push_back(parse_statement());
        expect_block_end();
      } else {
        fail("unexpected '" + describe(tk) + "'");
      }
    }
    return body;
  }

  Body parse_statements(const std::vector<std::string>& end, bool drop_needle) {
    skip_op(":");
    expect_block_end();
    Body body = subparse(end);
    if (cur().type == T::Eof) {
      std::string names;
      for (const auto& e : end) names += (names.empty() ? "'" : " or '") + e + "'";
      fail("Unexpected end of template. Jinja was looking for the following tags: " + names + ".");
    }
    if (drop_needle) advance();
    return body;
  }

  StmtPtr make_stmt(Stmt::Kind k, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = line;
    return s;
  }

  StmtPtr parse_statement() {
    if (cur().type != T::Name) fail("tag name expected");
    const std::string tag = cur().text;
    const int line = cur().line;
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "generation") {  // Transformers' AssistantTracker tag: renders its body unchanged
      advance();
      auto s = make_stmt(Stmt::Kind::Block, line);
      s->body = parse_statements({"endgeneration"}, true);
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside loop");
      advance();
      return make_stmt(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, line);
    }
    static const std::set<std::string> kUnsupported = {"block", "extends",    "include", "import",
                                                       "from",  "autoescape", "print",   "do",
                                                       "trans", "pluralize",  "debug",   "raw"};
    if (kUnsupported.count(tag)) fail("unsupported tag '" + tag + "'");
    static const std::set<std::string> kEnd = {"endif",     "endfor",  "endset",        "endmacro", "endcall",
                                               "endfilter", "endwith", "endgeneration", "else",     "elif"};
    if (kEnd.count(tag)) fail("Encountered unknown tag '" + tag + "'.");
    fail("Encountered unknown tag '" + tag + "'.");
  }

  StmtPtr parse_if() {
    auto s = make_stmt(Stmt::Kind::If, cur().line);
    advance();
    while (true) {
      ExprPtr test = parse_tuple(false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      s->branches.emplace_back(std::move(test), std::move(body));
      const std::string tag = cur().text;
      advance();
      if (tag == "elif") continue;
      if (tag == "else") s->else_body = parse_statements({"endif"}, true);
      break;
    }
    return s;
  }

  StmtPtr parse_for() {
    auto s = make_stmt(Stmt::Kind::For, cur().line);
    advance();
    s->target = parse_assign_target({"in"}, false);
    if (!skip_name("in")) fail("expected token 'in', got '" + describe(cur()) + "'");
    s->expr = parse_tuple(false, {"recursive"}, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail("unsupported: recursive for loops");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    const std::string tag = cur().text;
    advance();
    if (tag == "else") s->else_body = parse_statements({"endfor"}, true);
    return s;
  }

  StmtPtr parse_set() {
    const int line = cur().line;
    advance();
    Target target = parse_assign_target({}, true);
    if (skip_op("=")) {
      auto s = make_stmt(Stmt::Kind::Set, line);
      s->target = std::move(target);
      s->expr = parse_tuple(true, {}, false);
      return s;
    }
    auto s = make_stmt(Stmt::Kind::SetBlock, line);
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      s.params.push_back(expect_name());
      if (skip_op("=")) {
        s.defaults.push_back(parse_expression(true));
      } else if (!s.defaults.empty()) {
        fail("non-default argument follows default argument");
      }
    }
    expect_op(")");
  }

  void parse_macro_body(Stmt& s, const std::string& end) {
    std::set<std::string> names;
    macro_names_.push_back(&names);
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    s.body = parse_statements({end}, true);
    loop_depth_ = saved_loop_depth;
    macro_names_.pop_back();
    s.uses_varargs = names.count("varargs") > 0;
    s.uses_kwargs = names.count("kwargs") > 0;
    s.uses_caller = names.count("caller") > 0;
  }

  StmtPtr parse_macro() {
    auto s = make_stmt(Stmt::Kind::Macro, cur().line);
    advance();
    s->name = expect_name();
    parse_signature(*s);
    parse_macro_body(*s, "endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = make_stmt(Stmt::Kind::CallBlock, cur().line);
    advance();
    if (is_op("(")) parse_signature(*s);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::Call) fail("expected call", s->line);
    s->name = "caller";
    parse_macro_body(*s, "endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = make_stmt(Stmt::Kind::FilterBlock, cur().line);
    advance();
    s->expr = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  StmtPtr parse_with() {
    auto s = make_stmt(Stmt::Kind::With, cur().line);
    advance();
    while (cur().type != T::BlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      Target t = parse_assign_target({}, false);
      expect_op("=");
      s->assigns.emplace_back(std::move(t), parse_expression(true));
    }
    s->body = parse_statements({"endwith"}, true);
    return s;
  }

  // Targets: name, ns.attr (set only), or a tuple of targets; parenthesized tuples nest.
  Target parse_target_primary(bool with_namespace) {
    DepthGuard g(*this);
    if (is_op("(")) {
      advance();
      Target t;
      t.kind = Target::Kind::Tuple;
      while (!is_op(")")) {
        if (!t.items.empty()) {
          expect_op(",");
          if (is_op(")")) break;
        }
        t.items.push_back(parse_target_primary(false));
        if (!is_op(",") && t.items.size() == 1) {
          expect_op(")");
          return std::move(t.items[0]);
        }
      }
      expect_op(")");
      return t;
    }
    if (cur().type != T::Name) fail("can't assign to '" + describe(cur()) + "'");
    Target t;
    t.name = cur().text;
    static const std::set<std::string> kConst = {"true", "false", "True", "False", "none", "None"};
    if (kConst.count(t.name)) fail("can't assign to 'const'");
    advance();
    if (with_namespace && is_op(".")) {
      advance();
      t.kind = Target::Kind::NsAttr;
      t.attr = expect_name();
    }
    return t;
  }

  Target parse_assign_target(const std::vector<std::string>& extra_end, bool with_namespace) {
    Target first = parse_target_primary(with_namespace);
    if (!is_op(",")) return first;
    Target t;
    t.kind = Target::Kind::Tuple;
    t.items.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type == T::BlockEnd || cur().type == T::VarEnd || is_op(")") || is_op("=")) break;
      bool end = false;
      for (const auto& e : extra_end) end = end || is_name(e);
      if (end) break;
      t.items.push_back(parse_target_primary(with_namespace));
    }
    return t;
  }
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace tf::jinja
