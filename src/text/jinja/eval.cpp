// Expression evaluation (Interp::eval).
#include "text/jinja/interpreter.h"

namespace tf::jinja {
namespace {

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (a.is_number() && b.is_number()) {
    // Direct comparisons keep Python's NaN behaviour (every ordering is false).
    if (a.kind == Value::Kind::Float || b.kind == Value::Kind::Float) {
      const double x = a.as_double(), y = b.as_double();
      if (op == "<") return x < y;
      if (op == "<=") return x <= y;
      if (op == ">") return x > y;
      return x >= y;
    }
    const int64_t x = a.as_int(), y = b.as_int();
    if (op == "<") return x < y;
    if (op == "<=") return x <= y;
    if (op == ">") return x > y;
    return x >= y;
  }
  if (op == "<") return less_than(a, b);
  if (op == ">") return less_than(b, a);
  if (op == "<=") return less_than(a, b) || equals(a, b);
  return less_than(b, a) || equals(a, b);
}

}  // namespace

Value Interp::eval(const Expr& e) {
  tick();
  switch (e.kind) {
    case Expr::Kind::Const:
      return e.value;
    case Expr::Kind::Name:
      return lookup(e.name);
    case Expr::Kind::Tuple:
    case Expr::Kind::List: {
      List items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::make_list(std::move(items), e.kind == Expr::Kind::Tuple);
    }
    case Expr::Kind::Dict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i]);
        if ((k.is_list() && !k.tuple) || k.is_dict() || k.is_undefined()) {
          line_ = e.line;
          throw_error("TypeError", "unhashable type: '" + python_type_name(k) + "'");
        }
        d->set(std::move(k), eval(*e.args[i + 1]));
      }
      return Value::make_dict(std::move(d));
    }
    case Expr::Kind::GetAttr: {
      const Value obj = eval(*e.args[0]);
      line_ = e.line;
      return get_attr(obj, e.name);
    }
    case Expr::Kind::GetItem: {
      const Value obj = eval(*e.args[0]);
      const Expr& k = *e.args[1];
      if (k.kind == Expr::Kind::Slice) {
        Value parts[3];
        for (int i = 0; i < 3; ++i) parts[i] = k.args[i] ? eval(*k.args[i]) : Value::none();
        line_ = e.line;
        if (obj.is_undefined()) raise_undefined(obj);
        if ((obj.is_list() && obj.view == 0) || obj.is_string())
          return slice_value(obj, parts[0], parts[1], parts[2]);
        if (obj.is_none()) return Value::undefined("None has no element slice");
        throw_error("TypeError", "'" + python_type_name(obj) + "' object is not subscriptable");
      }
      const Value key = eval(k);
      line_ = e.line;
      return get_item(obj, key);
    }
    case Expr::Kind::Slice:
      throw_error("TemplateSyntaxError", "slice outside of a subscript");
    case Expr::Kind::Call: {
      if (++depth_ > limits_.max_call_depth * 4) {
        --depth_;
        throw_error("RecursionError", "maximum call depth exceeded");
      }
      Value v = eval_call(e, nullptr);
      --depth_;
      return v;
    }
    case Expr::Kind::Filter: {
      const Value operand = eval(*e.args[0]);
      CallArgs args;
      collect_args(e, 1, args);
      line_ = e.line;
      return filter(e.name, operand, args);
    }
    case Expr::Kind::Test: {
      const Value operand = eval(*e.args[0]);
      CallArgs args;
      collect_args(e, 1, args);
      line_ = e.line;
      return Value::boolean(test(e.name, operand, args));
    }
    case Expr::Kind::Neg:
    case Expr::Kind::Pos: {
      const Value x = eval(*e.args[0]);
      line_ = e.line;
      if (x.is_undefined()) raise_undefined(x);
      if (x.kind == Value::Kind::Float) return Value::real(e.kind == Expr::Kind::Neg ? -x.f : x.f);
      if (x.is_int_like()) {
        const int64_t v = x.as_int();
        if (e.kind == Expr::Kind::Pos) return Value::integer(v);
        if (v == INT64_MIN) throw_error("OverflowError", "integer overflow (64-bit)");
        return Value::integer(-v);
      }
      throw_error("TypeError", std::string("bad operand type for unary ") +
                                   (e.kind == Expr::Kind::Neg ? "-" : "+") + ": '" + python_type_name(x) +
                                   "'");
    }
    case Expr::Kind::Not:
      return Value::boolean(!truthy(eval(*e.args[0])));
    case Expr::Kind::And: {
      Value l = eval(*e.args[0]);
      if (!truthy(l)) return l;
      return eval(*e.args[1]);
    }
    case Expr::Kind::Or: {
      Value l = eval(*e.args[0]);
      if (truthy(l)) return l;
      return eval(*e.args[1]);
    }
    case Expr::Kind::Binary: {
      const Value l = eval(*e.args[0]);
      const Value r = eval(*e.args[1]);
      line_ = e.line;
      return binop(e.name, l, r, *this);
    }
    case Expr::Kind::Compare: {
      Value left = eval(*e.args[0]);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.args[i + 1]);
        line_ = e.line;
        if (!compare(e.ops[i], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::Concat: {
      std::string out;
      for (const auto& a : e.args) {
        out += to_str(eval(*a));
        check_size(out.size());
      }
      return Value::str(std::move(out));
    }
    case Expr::Kind::CondExpr: {
      if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value::undefined();
}

}  // namespace tf::jinja
