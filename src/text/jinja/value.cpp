#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "text/jinja/ustr.h"

namespace tf::jinja {

void throw_error(const std::string& kind, const std::string& msg) { throw JinjaError(kind, msg); }

namespace {

uint16_t nest_one_more(int inner) {
  if (inner >= kMaxNesting)
    throw_error("TemplateRuntimeError", "unsupported: lists and dicts nested more than " +
                                            std::to_string(kMaxNesting) + " levels deep");
  return static_cast<uint16_t>(inner + 1);
}

// Python raises RecursionError where repr() recurses too deep; a chain of namespaces can be
// longer than kMaxNesting, so printing counts its own levels.
thread_local int repr_levels = 0;

struct ReprLevel {
  ReprLevel() {
    if (++repr_levels > kMaxNesting) {
      --repr_levels;
      throw_error("RecursionError", "maximum recursion depth exceeded");
    }
  }
  ~ReprLevel() { --repr_levels; }
  ReprLevel(const ReprLevel&) = delete;
  ReprLevel& operator=(const ReprLevel&) = delete;
};

}  // namespace

int nesting(const Value& v) {
  if (v.kind == Value::Kind::List) return v.depth;
  if (v.kind == Value::Kind::Dict) return v.dict->depth;
  return 0;
}

Value Value::make_list(List items, bool is_tuple) {
  Value v;
  v.kind = Kind::List;
  v.tuple = is_tuple;
  int inner = 0;
  for (const Value& item : items) inner = std::max(inner, nesting(item));
  v.depth = nest_one_more(inner);
  v.list = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::make_dict(std::shared_ptr<Dict> d) {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::move(d);
  return v;
}

Value Value::make_dict() { return make_dict(std::make_shared<Dict>()); }

Value Value::make_object(std::shared_ptr<Object> o) {
  Value v;
  v.kind = Kind::Object;
  v.obj = std::move(o);
  return v;
}

Value Value::make_callable(std::shared_ptr<Callable> c) {
  Value v;
  v.kind = Kind::Callable;
  v.fn = std::move(c);
  return v;
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : entries) {
    if (k.kind == Value::Kind::String && k.s == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  depth = std::max(depth, nest_one_more(std::max(nesting(key), nesting(value))));
  for (auto& [k, v] : entries) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

bool Namespace::get(const std::string& name, Value& out) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) {
      out = v;
      return true;
    }
  }
  return false;
}

bool Namespace::set(const std::string& name, Value value) {
  for (auto& [k, v] : attrs) {
    if (k == name) {
      v = std::move(value);
      return true;
    }
  }
  attrs.emplace_back(name, std::move(value));
  return true;
}

std::string Namespace::repr() const {
  if (in_repr) return "<Namespace {...}>";
  in_repr = true;
  struct Reset {
    const Namespace* ns;
    ~Reset() { ns->in_repr = false; }
  } reset{this};
  std::string out = "<Namespace {";
  bool first = true;
  for (const auto& [k, v] : attrs) {
    if (!first) out += ", ";
    first = false;
    out += repr_string(k) + ": " + jinja::repr(v);
  }
  return out + "}>";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return false;
    case Value::Kind::Bool:
      return v.b;
    case Value::Kind::Int:
      return v.i != 0;
    case Value::Kind::Float:
      return v.f != 0.0;
    case Value::Kind::String:
      return !v.s.empty();
    case Value::Kind::List:
      return v.view == 1 || !v.list->empty();  // a generator is always true
    case Value::Kind::Dict:
      return !v.dict->entries.empty();
    default:
      return true;
  }
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind == K::Float || b.kind == K::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::Undefined:
    case K::None:
      return true;
    case K::String:
      return a.s == b.s;
    case K::List: {
      if (a.tuple != b.tuple || a.view != b.view || a.list->size() != b.list->size()) return false;
      if (a.view == 1 || a.view == 4) return a.list == b.list;  // generators/values views: identity
      for (size_t i = 0; i < a.list->size(); ++i) {
        if (!equals((*a.list)[i], (*b.list)[i])) return false;
      }
      return true;
    }
    case K::Dict: {
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [k, v] : a.dict->entries) {
        const Value* o = b.dict->find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    case K::Object:
      return a.obj == b.obj;
    case K::Callable:
      return a.fn == b.fn;
    default:
      return false;
  }
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::Float || b.kind == Value::Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.s < b.s;  // UTF-8 byte order == code point order
  if (a.is_list() && b.is_list() && a.tuple == b.tuple && a.view == 0 && b.view == 0) {
    const auto& x = *a.list;
    const auto& y = *b.list;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    throw_error(u.b ? "SecurityError" : "UndefinedError", u.s.empty() ? "undefined value" : u.s);
  }
  throw_error("TypeError", "'<' not supported between instances of '" + python_type_name(a) + "' and '" +
                               python_type_name(b) + "'");
}

std::string python_type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return "Undefined";
    case Value::Kind::None:
      return "NoneType";
    case Value::Kind::Bool:
      return "bool";
    case Value::Kind::Int:
      return "int";
    case Value::Kind::Float:
      return "float";
    case Value::Kind::String:
      return v.markup ? "Markup" : "str";
    case Value::Kind::List:
      return v.tuple ? "tuple" : "list";
    case Value::Kind::Dict:
      return "dict";
    case Value::Kind::Object:
      return v.obj->type_name();
    case Value::Kind::Callable:
      return v.fn->kind == "macro" ? "Macro" : "function";
  }
  return "object";
}

// Python's repr(float): shortest round-trip digits; scientific when the decimal exponent is
// < -4 or >= 16, with at least two exponent digits.
std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0.0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  const int exp10 = std::stoi(sci.substr(epos + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int decpt = exp10 + 1;  // position of the decimal point relative to the digits
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int e = decpt - 1;
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    out += ebuf;
  }
  return sign + out;
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : ustr::decode(s)) {
    if (cp == '\\')
      out += "\\\\";
    else if (cp == static_cast<char32_t>(quote)) {
      out += '\\';
      out += quote;
    } else if (cp == '\n')
      out += "\\n";
    else if (cp == '\r')
      out += "\\r";
    else if (cp == '\t')
      out += "\\t";
    else if (ustr::is_printable(cp))
      ustr::append_utf8(out, cp);
    else {
      char buf[16];
      if (cp < 0x100)
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      else if (cp < 0x10000)
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      else
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    }
  }
  out += quote;
  return out;
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return "Undefined";
    case Value::Kind::String:
      return v.markup ? "Markup(" + repr_string(v.s) + ")" : repr_string(v.s);
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return "";
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return v.b ? "True" : "False";
    case Value::Kind::Int:
      return std::to_string(v.i);
    case Value::Kind::Float:
      return float_repr(v.f);
    case Value::Kind::String:
      return v.s;
    case Value::Kind::List: {
      const ReprLevel level;
      if (v.view == 1)
        throw_error("TemplateRuntimeError",
                    "unsupported: printing a generator object (Python prints its address)");
      if (v.view >= 2) {
        static const char* const kNames[] = {"", "", "dict_items(", "dict_keys(", "dict_values("};
        Value plain = v;
        plain.view = 0;
        return kNames[v.view] + to_str(plain) + ")";
      }
      std::string out = v.tuple ? "(" : "[";
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i) out += ", ";
        out += repr((*v.list)[i]);
      }
      if (v.tuple && v.list->size() == 1) out += ",";
      return out + (v.tuple ? ")" : "]");
    }
    case Value::Kind::Dict: {
      const ReprLevel level;
      std::string out = "{";
      bool first = true;
      for (const auto& [k, val] : v.dict->entries) {
        if (!first) out += ", ";
        first = false;
        out += repr(k) + ": " + repr(val);
      }
      return out + "}";
    }
    case Value::Kind::Object: {
      const ReprLevel level;
      return v.obj->repr();
    }
    case Value::Kind::Callable:
      return v.fn->kind == "macro" ? "<Macro '" + v.fn->name + "'>" : "<function " + v.fn->name + ">";
  }
  return "";
}

namespace {

// `levels`: the lists and dicts around j, so that a context nested past kMaxNesting is refused
// before the recursion goes that deep.
Value from_json_at(const nlohmann::ordered_json& j, int levels) {
  using J = nlohmann::ordered_json::value_t;
  if ((j.is_array() || j.is_object()) && levels >= kMaxNesting) nest_one_more(levels);
  switch (j.type()) {
    case J::null:
      return Value::none();
    case J::boolean:
      return Value::boolean(j.get<bool>());
    case J::number_integer:
      return Value::integer(j.get<int64_t>());
    case J::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        throw_error("ValueError", "integer in context exceeds 64 bits");
      return Value::integer(static_cast<int64_t>(u));
    }
    case J::number_float:
      return Value::real(j.get<double>());
    case J::string: {
      auto s = j.get<std::string>();
      if (!ustr::valid_utf8(s)) throw_error("ValueError", "string in context is not valid UTF-8");
      return Value::str(std::move(s));
    }
    case J::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, levels + 1));
      return Value::make_list(std::move(items));
    }
    case J::object: {
      auto d = std::make_shared<Dict>();
      d->entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        d->entries.emplace_back(Value::str(it.key()), from_json_at(it.value(), levels + 1));
        d->depth = std::max(d->depth, nest_one_more(nesting(d->entries.back().second)));
      }
      return Value::make_dict(std::move(d));
    }
    default:
      throw_error("TypeError", "unsupported JSON value in context");
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

}  // namespace tf::jinja
