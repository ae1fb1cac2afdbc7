// Jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...).
#include <set>

#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"
#include "text/jinja/ustr.h"

namespace tf::jinja {
namespace {

const std::set<std::string> kTests = {
    "boolean",     "callable", "defined", "divisibleby", "eq",   "equalto",   "==",     "escaped",
    "even",        "false",    "filter",  "float",       "ge",   ">=",        "gt",     ">",
    "greaterthan", "in",       "integer", "iterable",    "le",   "<=",        "lower",  "lt",
    "<",           "lessthan", "mapping", "ne",          "!=",   "none",      "number", "odd",
    "sameas",      "sequence", "string",  "test",        "true", "undefined", "upper"};

bool py_mod_zero(const Value& v, const Value& by, const Interp& in) {
  return equals(binop("%", v, by, in), Value::integer(0));
}

}  // namespace

bool is_supported_test(const std::string& name) { return kTests.count(name) > 0; }

bool apply_test(Interp& in, const std::string& name, const Value& v, CallArgs& args) {
  ArgReader r(args, name);
  auto one = [&](const char* pname) {
    const Value x = r.get(0, pname);
    r.done(1);
    return x;
  };
  using K = Value::Kind;
  if (name == "defined" || name == "undefined") {
    r.done(0);
    return v.is_undefined() == (name == "undefined");
  }
  if (name == "none") {
    r.done(0);
    return v.is_none();
  }
  if (name == "boolean") {
    r.done(0);
    return v.kind == K::Bool;
  }
  if (name == "true") {
    r.done(0);
    return v.kind == K::Bool && v.b;
  }
  if (name == "false") {
    r.done(0);
    return v.kind == K::Bool && !v.b;
  }
  if (name == "string") {
    r.done(0);
    return v.is_string();
  }
  if (name == "number") {
    r.done(0);
    return v.is_number();
  }
  if (name == "integer") {
    r.done(0);
    return v.kind == K::Int;
  }
  if (name == "float") {
    r.done(0);
    return v.kind == K::Float;
  }
  if (name == "mapping") {
    r.done(0);
    return v.is_dict();
  }
  if (name == "iterable") {
    r.done(0);
    return v.kind == K::List || v.kind == K::Dict || v.kind == K::String || v.kind == K::Undefined;
  }
  if (name == "sequence") {
    r.done(0);
    return (v.kind == K::List && v.view == 0) || v.kind == K::Dict || v.kind == K::String ||
           v.kind == K::Undefined;
  }
  if (name == "callable") {
    r.done(0);
    return v.kind == K::Callable || v.kind == K::Undefined;
  }
  if (name == "escaped") {
    r.done(0);
    return v.is_string() && v.markup;
  }
  if (name == "lower" || name == "upper") {
    r.done(0);
    // str.islower(): at least one cased character and no cased character of the other case.
    bool cased = false;
    for (char32_t c : ustr::decode(to_str(v))) {
      const bool up = ustr::is_upper(c), lo = ustr::is_lower(c);
      if (name == "lower" ? up : lo) return false;
      cased = cased || up || lo;
    }
    return cased;
  }
  if (name == "even" || name == "odd") {
    r.done(0);
    const bool even = py_mod_zero(v, Value::integer(2), in);
    return name == "even" ? even : !even;
  }
  if (name == "divisibleby") return py_mod_zero(v, one("num"), in);
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, one("other"));
  if (name == "ne" || name == "!=") return !equals(v, one("other"));
  if (name == "lt" || name == "lessthan" || name == "<" || name == "le" || name == "<=" || name == "gt" ||
      name == "greaterthan" || name == ">" || name == "ge" || name == ">=") {
    const Value o = one("other");
    if (v.is_undefined()) raise_undefined(v);
    if (o.is_undefined()) raise_undefined(o);
    if (name == "lt" || name == "lessthan" || name == "<") return less_than(v, o);
    if (name == "le" || name == "<=") return less_than(v, o) || equals(v, o);
    if (name == "gt" || name == "greaterthan" || name == ">") return less_than(o, v);
    return less_than(o, v) || equals(v, o);
  }
  if (name == "in") return contains(one("seq"), v);
  if (name == "sameas") {
    const Value o = one("other");
    if (v.kind != o.kind) return false;
    switch (v.kind) {
      case K::None:
        return true;
      case K::Bool:
        return v.b == o.b;
      case K::Int:
        return v.i == o.i && v.i >= -5 && v.i <= 256;  // CPython's small-int cache
      case K::List:
        return v.list == o.list;
      case K::Dict:
        return v.dict == o.dict;
      case K::Object:
        return v.obj == o.obj;
      case K::Callable:
        return v.fn == o.fn;
      default:
        return false;
    }
  }
  if (name == "filter") {
    r.done(0);
    return v.is_string() && is_supported_filter(v.s);
  }
  if (name == "test") {
    r.done(0);
    return v.is_string() && is_supported_test(v.s);
  }
  throw_error("TemplateRuntimeError", "No test named '" + name + "'.");
}

}  // namespace tf::jinja
