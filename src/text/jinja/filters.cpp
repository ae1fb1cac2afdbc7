// Jinja2's builtin filters (plus Transformers' tojson), with Jinja2 3.1 semantics.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"
#include "text/jinja/ustr.h"

namespace tf::jinja {

std::string str_splitlines_join(const std::string& s, const std::string& indent, bool first, bool blank);
Value filter_sequence(Interp& in, const std::string& name, const Value& v, CallArgs& args, bool* handled);

namespace {

const std::set<std::string> kSupported = {
    "abs",      "attr",       "batch",  "capitalize", "center",  "count",       "d",      "default",
    "dictsort", "e",          "escape", "first",      "float",   "forceescape", "format", "indent",
    "int",      "join",       "last",   "length",     "list",    "lower",       "items",  "map",
    "min",      "max",        "reject", "rejectattr", "replace", "reverse",     "round",  "safe",
    "select",   "selectattr", "sort",   "string",     "sum",     "title",       "trim",   "unique",
    "upper",    "wordcount",  "tojson"};
const std::set<std::string> kJinjaOnly = {"filesizeformat", "groupby",   "pprint",   "random",
                                          "slice",          "striptags", "truncate", "urlencode",
                                          "urlize",         "wordwrap",  "xmlattr"};

std::string soft_str(const Value& v) { return to_str(v); }

std::string title_filter(const std::string& s) {
  // Jinja2 splits on runs of [-\s({\[<] and upper-cases the first character of each piece.
  const std::u32string u = ustr::decode(s);
  std::u32string out;
  bool at_start = true;
  for (char32_t c : u) {
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || ustr::is_space(c);
    if (sep) {
      out.push_back(c);
      at_start = true;
    } else {
      out.push_back(at_start ? ustr::to_upper(c) : ustr::to_lower(c));
      at_start = false;
    }
  }
  return ustr::encode(out);
}

bool parse_python_int(std::string s, int base, int64_t* out) {
  s = ustr::strip(s, nullptr, true, true);
  std::string digits;
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    const char k = static_cast<char>(s[i + 1] | 0x20);
    if ((k == 'x' && base == 16) || (k == 'o' && base == 8) || (k == 'b' && base == 2)) i += 2;
  }
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits.push_back(s[i]);
  }
  if (digits.empty()) return false;
  if (base == 10 && digits.size() > 1 && digits[0] == '0' &&
      digits.find_first_not_of('0') != std::string::npos)
    return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE || digits[0] == '-' || digits[0] == '+' || digits[0] == ' ')
    return false;
  *out = neg ? -v : v;
  return true;
}

bool parse_python_float(const std::string& raw, double* out) {
  std::string s = ustr::strip(raw, nullptr, true, true);
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !isdigit(static_cast<unsigned char>(s[i + 1])))
        return false;
      continue;
    }
    t.push_back(s[i]);
  }
  if (t.empty()) return false;
  std::string low = ustr::lower(t);
  const std::string body = (low[0] == '+' || low[0] == '-') ? low.substr(1) : low;
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double v = body == "nan" ? NAN : INFINITY;
    *out = low[0] == '-' ? -v : v;
    return true;
  }
  for (char c : body) {
    if (!(isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-'))
      return false;
  }
  char* end = nullptr;
  *out = std::strtod(t.c_str(), &end);
  return *end == '\0';
}

Value round_value(const Value& v, int64_t precision, const std::string& method) {
  if (!v.is_number())
    throw_error("TypeError", "type " + python_type_name(v) + " doesn't define __round__ method");
  if (method != "common" && method != "ceil" && method != "floor") {
    throw_error("FilterArgumentError", "method must be common, ceil or floor");
  }
  if (method == "common") {
    if (v.is_int_like()) return Value::integer(v.as_int());  // round(int, n>=0) is the int
    if (!std::isfinite(v.f)) return v;
    // printf rounds the exact binary value half-to-even, like Python's round(x, n).
    char buf[512];
    const int p = static_cast<int>(std::clamp<int64_t>(precision, -300, 300));
    if (p >= 0) {
      std::snprintf(buf, sizeof(buf), "%.*f", p, v.f);
      return Value::real(std::strtod(buf, nullptr));
    }
    const double scale = std::pow(10.0, -p);
    std::snprintf(buf, sizeof(buf), "%.0f", v.f / scale);
    return Value::real(std::strtod(buf, nullptr) * scale);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  return Value::real((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

}  // namespace

bool is_supported_filter(const std::string& name) { return kSupported.count(name) > 0; }
bool is_jinja_builtin_filter(const std::string& name) { return kJinjaOnly.count(name) > 0; }

Value apply_filter(Interp& in, const std::string& name, const Value& v, CallArgs& args) {
  bool handled = false;
  Value seq = filter_sequence(in, name, v, args, &handled);
  if (handled) return seq;
  ArgReader r(args, name);
  if (name == "default" || name == "d") {
    const Value def = r.get(0, "default_value", Value::str(""));
    const bool boolean = truthy(r.get(1, "boolean", Value::boolean(false)));
    r.done(2);
    if (v.is_undefined() || (boolean && !truthy(v))) return def;
    return v;
  }
  if (name == "length" || name == "count") {
    r.done(0);
    return Value::integer(static_cast<int64_t>(py_len(v)));
  }
  if (name == "string") {
    r.done(0);
    return Value::str(soft_str(v), v.is_string() && v.markup);
  }
  if (name == "safe") {
    r.done(0);
    return Value::str(soft_str(v), true);
  }
  if (name == "escape" || name == "e" || name == "forceescape") {
    r.done(0);
    if (v.is_string() && v.markup && name != "forceescape") return v;
    return Value::str(html_escape(soft_str(v)), true);
  }
  if (name == "trim") {
    const Value chars = r.get(0, "chars", Value::none());
    r.done(1);
    std::string c = chars.is_none() ? std::string() : soft_str(chars);
    return Value::str(ustr::strip(soft_str(v), chars.is_none() ? nullptr : &c, true, true), v.markup);
  }
  if (name == "upper" || name == "lower") {
    r.done(0);
    return Value::str(name == "upper" ? ustr::upper(soft_str(v)) : ustr::lower(soft_str(v)), v.markup);
  }
  if (name == "capitalize") {
    r.done(0);
    std::u32string u = ustr::decode(soft_str(v));
    for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? ustr::to_upper(u[i]) : ustr::to_lower(u[i]);
    return Value::str(ustr::encode(u), v.markup);
  }
  if (name == "title") {
    r.done(0);
    return Value::str(title_filter(soft_str(v)), v.markup);
  }
  if (name == "replace") {
    const Value old_v = r.get(0, "old"), new_v = r.get(1, "new"), count = r.get(2, "count", Value::none());
    r.done(3);
    CallArgs margs;
    margs.positional = {Value::str(soft_str(old_v)), Value::str(soft_str(new_v))};
    if (!count.is_none()) margs.positional.push_back(count);
    const Value fn = get_method(in, Value::str(soft_str(v)), "replace");
    return in.call(fn, margs);
  }
  if (name == "center") {
    const Value width = r.get(0, "width", Value::integer(80));
    r.done(1);
    CallArgs margs;
    margs.positional = {width};
    return in.call(get_method(in, Value::str(soft_str(v)), "center"), margs);
  }
  if (name == "indent") {
    const Value width = r.get(0, "width", Value::integer(4));
    const bool first = truthy(r.get(1, "first", Value::boolean(false)));
    const bool blank = truthy(r.get(2, "blank", Value::boolean(false)));
    r.done(3);
    std::string ind;
    if (width.is_string()) {
      ind = width.s;
    } else if (width.is_int_like()) {
      in.check_size(static_cast<size_t>(std::max<int64_t>(0, width.as_int())));
      ind = std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
    } else {
      throw_error("TypeError",
                  "can't multiply sequence by non-int of type '" + python_type_name(width) + "'");
    }
    std::string res = str_splitlines_join(soft_str(v), ind, first, blank);
    in.check_size(res.size());
    return Value::str(std::move(res), v.markup);
  }
  if (name == "wordcount") {
    r.done(0);
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : ustr::decode(soft_str(v))) {
      const bool w = ustr::is_alnum(c) || c == '_';
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::integer(n);
  }
  if (name == "format") {
    if (!args.keyword.empty() && !args.positional.empty()) {
      throw_error("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
    }
    if (!args.keyword.empty())
      throw_error("TemplateRuntimeError", "unsupported: format filter with keyword arguments");
    return binop("%", Value::str(soft_str(v)), Value::make_list(args.positional, true), in);
  }
  if (name == "int") {
    const Value def = r.get(0, "default", Value::integer(0));
    const Value base = r.get(1, "base", Value::integer(10));
    r.done(2);
    if (v.is_int_like()) return Value::integer(v.as_int());
    if (v.kind == Value::Kind::Float) {
      if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) return def;
      return Value::integer(static_cast<int64_t>(std::trunc(v.f)));
    }
    if (v.is_string()) {
      int64_t out = 0;
      if (base.is_int_like() && parse_python_int(v.s, static_cast<int>(base.as_int()), &out))
        return Value::integer(out);
      double d = 0;
      if (parse_python_float(v.s, &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
        return Value::integer(static_cast<int64_t>(std::trunc(d)));
      }
    }
    return def;
  }
  if (name == "float") {
    const Value def = r.get(0, "default", Value::real(0.0));
    r.done(1);
    if (v.is_number()) return Value::real(v.as_double());
    double d = 0;
    if (v.is_string() && parse_python_float(v.s, &d)) return Value::real(d);
    return def;
  }
  if (name == "abs") {
    r.done(0);
    if (v.kind == Value::Kind::Float) return Value::real(std::fabs(v.f));
    if (v.is_int_like()) {
      if (v.as_int() == INT64_MIN) throw_error("OverflowError", "integer overflow (64-bit)");
      return Value::integer(std::llabs(v.as_int()));
    }
    throw_error("TypeError", "bad operand type for abs(): '" + python_type_name(v) + "'");
  }
  if (name == "round") {
    const Value precision = r.get(0, "precision", Value::integer(0));
    const Value method = r.get(1, "method", Value::str("common"));
    r.done(2);
    if (!precision.is_int_like()) throw_error("TypeError", "precision must be an integer");
    return round_value(v, precision.as_int(), to_str(method));
  }
  if (name == "attr") {
    const std::string attr = to_str(r.get(0, "name"));
    r.done(1);
    // Python getattr only: unlike `x.name`, no fallback to x["name"].
    if (v.kind == Value::Kind::Object) {
      Value out;
      if (v.obj->get(attr, out)) return out;
      return Value::undefined("'" + v.obj->type_name() + " object' has no attribute '" + attr + "'");
    }
    if (v.is_undefined()) return Value::undefined("'" + attr + "' is undefined");
    return get_method(in, v, attr);
  }
  if (name == "tojson") {
    const bool ensure_ascii = truthy(r.get(0, "ensure_ascii", Value::boolean(false)));
    const Value indent = r.get(1, "indent", Value::none());
    const Value separators = r.get(2, "separators", Value::none());
    const bool sort_keys = truthy(r.get(3, "sort_keys", Value::boolean(false)));
    r.done(4);
    std::string item_sep = indent.is_none() ? ", " : ",";
    std::string key_sep = ": ";
    if (!separators.is_none()) {
      List seps = iterate(separators);
      if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
        throw_error("ValueError", "separators must be a (item_separator, key_separator) pair");
      }
      item_sep = seps[0].s;
      key_sep = seps[1].s;
    }
    std::string out = to_json(v, ensure_ascii, indent, item_sep, key_sep, sort_keys);
    in.check_size(out.size());
    return Value::str(std::move(out));
  }
  throw_error("TemplateRuntimeError", "unsupported filter '" + name + "'");
}

}  // namespace tf::jinja
