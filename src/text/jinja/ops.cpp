// Python operator semantics used by the evaluator and the filters.
#include <cmath>
#include <optional>

#include "text/jinja/interpreter.h"
#include "text/jinja/ustr.h"

namespace tf::jinja {
namespace {

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  throw_error("TypeError", "unsupported operand type(s) for " + op + ": '" + python_type_name(a) + "' and '" +
                               python_type_name(b) + "'");
}

void check_overflow(bool overflow) {
  if (overflow) throw_error("OverflowError", "integer overflow (64-bit)");
}

Value repeat(const Value& seq, int64_t n, const Interp& in) {
  if (n <= 0) return seq.is_string() ? Value::str("", seq.markup) : Value::make_list({}, seq.tuple);
  if (seq.is_string()) {
    const size_t total = seq.s.size() * static_cast<size_t>(n);
    if (!seq.s.empty() && total / seq.s.size() != static_cast<size_t>(n)) in.check_size(SIZE_MAX);
    in.check_size(total);
    std::string out;
    out.reserve(total);
    for (int64_t i = 0; i < n; ++i) out += seq.s;
    return Value::str(std::move(out), seq.markup);
  }
  const size_t total = seq.list->size() * static_cast<size_t>(n);
  if (total > in.limits().max_output_bytes / 8) in.check_size(SIZE_MAX);
  List out;
  out.reserve(total);
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::make_list(std::move(out), seq.tuple);
}

double py_float_mod(double x, double y) {
  if (y == 0.0) throw_error("ZeroDivisionError", "float modulo");
  double mod = std::fmod(x, y);
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}

double py_float_floordiv(double x, double y) {
  if (y == 0.0) throw_error("ZeroDivisionError", "float floor division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0 && ((y < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, x / y);
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1.0;
  return fl;
}

// printf-style `str % args` for the conversions chat templates use.
std::string percent_format(const std::string& fmt, const Value& rhs) {
  List args = rhs.is_list() && rhs.tuple ? *rhs.list : List{rhs};
  if (rhs.is_dict()) throw_error("TemplateRuntimeError", "unsupported: '%' formatting with a mapping");
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (i + 1 >= fmt.size()) throw_error("ValueError", "incomplete format");
    const char c = fmt[++i];
    if (c == '%') {
      out.push_back('%');
      continue;
    }
    if (next >= args.size()) throw_error("TypeError", "not enough arguments for format string");
    const Value& a = args[next++];
    if (c == 's')
      out += to_str(a);
    else if (c == 'r')
      out += repr(a);
    else if (c == 'd' || c == 'i') {
      if (a.kind == Value::Kind::Float)
        out += std::to_string(static_cast<int64_t>(std::trunc(a.f)));
      else if (a.is_int_like())
        out += std::to_string(a.as_int());
      else
        throw_error("TypeError", "%" + std::string(1, c) + " format: a real number is required, not " +
                                     python_type_name(a));
    } else {
      throw_error("TemplateRuntimeError", std::string("unsupported: '%") + c + "' format conversion");
    }
  }
  if (next < args.size()) throw_error("TypeError", "not all arguments converted during string formatting");
  return out;
}

}  // namespace

[[noreturn]] void raise_undefined(const Value& u) {
  if (u.b) throw_error("SecurityError", u.s);
  throw_error("UndefinedError", u.s.empty() ? "undefined value" : u.s);
}

Value make_builtin(std::string name, std::function<Value(CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->call = std::move(fn);
  return Value::make_callable(std::move(c));
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

List iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return *v.list;
    case Value::Kind::Dict: {
      List keys;
      keys.reserve(v.dict->entries.size());
      for (const auto& kv : v.dict->entries) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (char32_t cp : ustr::decode(v.s)) {
        std::string c;
        ustr::append_utf8(c, cp);
        chars.push_back(Value::str(std::move(c), v.markup));
      }
      return chars;
    }
    default:
      throw_error("TypeError", "'" + python_type_name(v) + "' object is not iterable");
  }
}

size_t py_len(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return 0;
    case Value::Kind::List:
      if (v.view == 1) throw_error("TypeError", "object of type 'generator' has no len()");
      return v.list->size();
    case Value::Kind::Dict:
      return v.dict->entries.size();
    case Value::Kind::String:
      return ustr::length(v.s);
    default:
      throw_error("TypeError", "object of type '" + python_type_name(v) + "' has no len()");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Kind::Undefined:
      return false;
    case Value::Kind::String:
      if (item.is_undefined()) raise_undefined(item);
      if (!item.is_string()) {
        throw_error("TypeError",
                    "'in <string>' requires string as left operand, not " + python_type_name(item));
      }
      return container.s.find(item.s) != std::string::npos;
    case Value::Kind::List:
      for (const auto& x : *container.list) {
        if (equals(x, item)) return true;
      }
      return false;
    case Value::Kind::Dict:
      if ((item.is_list() && !item.tuple) || item.is_dict()) {
        throw_error("TypeError", "unhashable type: '" + python_type_name(item) + "'");
      }
      return container.dict->find(item) != nullptr;
    default:
      throw_error("TypeError", "argument of type '" + python_type_name(container) + "' is not iterable");
  }
}

Value binop(const std::string& op, const Value& a, const Value& b, const Interp& in) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool flt = nums && (a.kind == Value::Kind::Float || b.kind == Value::Kind::Float);
  int64_t r = 0;
  if (op == "+") {
    if (flt) return Value::real(a.as_double() + b.as_double());
    if (nums) {
      check_overflow(__builtin_add_overflow(a.as_int(), b.as_int(), &r));
      return Value::integer(r);
    }
    if (a.is_string() && b.is_string()) {
      const bool markup = a.markup || b.markup;
      std::string out = (markup && !a.markup) ? html_escape(a.s) : a.s;
      out += (markup && !b.markup) ? html_escape(b.s) : b.s;
      in.check_size(out.size());
      return Value::str(std::move(out), markup);
    }
    if (a.is_list() && b.is_list() && a.tuple == b.tuple && a.view == 0 && b.view == 0) {
      in.check_size((a.list->size() + b.list->size()) * 8);
      List out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(out), a.tuple);
    }
    if (a.is_string()) {
      throw_error("TypeError", "can only concatenate str (not \"" + python_type_name(b) + "\") to str");
    }
    unsupported_operands("+", a, b);
  }
  if (op == "-") {
    if (flt) return Value::real(a.as_double() - b.as_double());
    if (nums) {
      check_overflow(__builtin_sub_overflow(a.as_int(), b.as_int(), &r));
      return Value::integer(r);
    }
    unsupported_operands("-", a, b);
  }
  if (op == "*") {
    if (flt) return Value::real(a.as_double() * b.as_double());
    if (nums) {
      check_overflow(__builtin_mul_overflow(a.as_int(), b.as_int(), &r));
      return Value::integer(r);
    }
    if ((a.is_string() || (a.is_list() && a.view == 0)) && b.is_int_like()) return repeat(a, b.as_int(), in);
    if ((b.is_string() || (b.is_list() && b.view == 0)) && a.is_int_like()) return repeat(b, a.as_int(), in);
    throw_error("TypeError", "can't multiply sequence by non-int of type '" + python_type_name(b) + "'");
  }
  if (op == "/") {
    if (!nums) unsupported_operands("/", a, b);
    if (b.as_double() == 0.0) throw_error("ZeroDivisionError", "division by zero");
    return Value::real(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) unsupported_operands("//", a, b);
    if (flt) return Value::real(py_float_floordiv(a.as_double(), b.as_double()));
    const int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) throw_error("ZeroDivisionError", "integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) throw_error("OverflowError", "integer overflow (64-bit)");
    int64_t q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return Value::integer(q);
  }
  if (op == "%") {
    if (a.is_string()) return Value::str(percent_format(a.s, b), a.markup);
    if (!nums) unsupported_operands("%", a, b);
    if (flt) return Value::real(py_float_mod(a.as_double(), b.as_double()));
    const int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) throw_error("ZeroDivisionError", "integer division or modulo by zero");
    if (y == -1) return Value::integer(0);
    int64_t m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::integer(m);
  }
  if (op == "**") {
    if (!nums) unsupported_operands("** or pow()", a, b);
    if (!flt && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;
      while (e > 0) {
        if (e & 1) check_overflow(__builtin_mul_overflow(acc, base, &acc));
        e >>= 1;
        if (e > 0) check_overflow(__builtin_mul_overflow(base, base, &base));
      }
      return Value::integer(acc);
    }
    const double x = a.as_double(), y = b.as_double();
    if (x == 0.0 && y < 0) throw_error("ZeroDivisionError", "0.0 cannot be raised to a negative power");
    if (x < 0 && std::floor(y) != y)
      throw_error("TemplateRuntimeError", "unsupported: complex result of '**'");
    const double res = std::pow(x, y);
    if (std::isinf(res) && std::isfinite(x) && std::isfinite(y))
      throw_error("OverflowError", "(34, 'Numerical result out of range')");
    return Value::real(res);
  }
  throw_error("TemplateRuntimeError", "unknown operator '" + op + "'");
}

Value index_value(const Value& v, int64_t index, bool* ok) {
  *ok = false;
  if (v.is_list() && v.view == 0) {
    const auto n = static_cast<int64_t>(v.list->size());
    if (index < 0) index += n;
    if (index < 0 || index >= n) return Value::undefined();
    *ok = true;
    return (*v.list)[static_cast<size_t>(index)];
  }
  if (v.is_string()) {
    if (ustr::is_ascii(v.s)) {
      const auto n = static_cast<int64_t>(v.s.size());
      if (index < 0) index += n;
      if (index < 0 || index >= n) return Value::undefined();
      *ok = true;
      return Value::str(std::string(1, v.s[static_cast<size_t>(index)]), v.markup);
    }
    const std::u32string u = ustr::decode(v.s);
    const auto n = static_cast<int64_t>(u.size());
    if (index < 0) index += n;
    if (index < 0 || index >= n) return Value::undefined();
    *ok = true;
    std::string c;
    ustr::append_utf8(c, u[static_cast<size_t>(index)]);
    return Value::str(std::move(c), v.markup);
  }
  return Value::undefined();
}

Value slice_value(const Value& v, const Value& start, const Value& stop, const Value& step) {
  auto idx = [](const Value& x, const char* what) -> std::optional<int64_t> {
    if (x.is_none()) return std::nullopt;
    if (!x.is_int_like())
      throw_error(
          "TypeError",
          std::string("slice indices must be integers or None or have an __index__ method (") + what + ")");
    return x.as_int();
  };
  const auto o_start = idx(start, "start"), o_stop = idx(stop, "stop"), o_step = idx(step, "step");
  const int64_t st = o_step.value_or(1);
  if (st == 0) throw_error("ValueError", "slice step cannot be zero");
  std::u32string u;
  const bool is_str = v.is_string();
  const bool ascii = is_str && ustr::is_ascii(v.s);
  if (is_str && !ascii) u = ustr::decode(v.s);
  const int64_t n =
      is_str ? static_cast<int64_t>(ascii ? v.s.size() : u.size()) : static_cast<int64_t>(v.list->size());
  const int64_t lower = st > 0 ? 0 : -1, upper = st > 0 ? n : n - 1;
  auto clamp = [&](std::optional<int64_t> x, int64_t def) {
    if (!x) return def;
    int64_t s = *x;
    if (s < 0) {
      s += n;
      if (s < lower) s = lower;
    } else if (s > upper) {
      s = upper;
    }
    return s;
  };
  const int64_t b = clamp(o_start, st > 0 ? lower : upper);
  const int64_t e = clamp(o_stop, st > 0 ? upper : lower);
  if (is_str) {
    std::string out;
    for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
      if (ascii)
        out.push_back(v.s[static_cast<size_t>(i)]);
      else
        ustr::append_utf8(out, u[static_cast<size_t>(i)]);
      if ((st > 0 && i > INT64_MAX - st) || (st < 0 && i < INT64_MIN - st)) break;
    }
    return Value::str(std::move(out), v.markup);
  }
  List out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    out.push_back((*v.list)[static_cast<size_t>(i)]);
    if ((st > 0 && i > INT64_MAX - st) || (st < 0 && i < INT64_MIN - st)) break;
  }
  return Value::make_list(std::move(out), v.tuple);
}

bool ArgReader::has(size_t pos, const char* name) const {
  if (pos < a_.positional.size()) return true;
  for (const auto& kv : a_.keyword) {
    if (kv.first == name) return true;
  }
  return false;
}

Value ArgReader::get(size_t pos, const char* name, Value def) {
  used_.emplace_back(name);
  bool positional = pos < a_.positional.size();
  for (const auto& kv : a_.keyword) {
    if (kv.first == name) {
      if (positional) throw_error("TypeError", fname_ + "() got multiple values for argument '" + name + "'");
      return kv.second;
    }
  }
  return positional ? a_.positional[pos] : def;
}

void ArgReader::done(size_t n_positional) {
  if (a_.positional.size() > n_positional) {
    throw_error("TypeError",
                fname_ + "() takes at most " + std::to_string(n_positional) + " positional argument(s)");
  }
  for (const auto& kv : a_.keyword) {
    bool known = false;
    for (const auto& u : used_) known = known || u == kv.first;
    if (!known) throw_error("TypeError", fname_ + "() got an unexpected keyword argument '" + kv.first + "'");
  }
}

}  // namespace tf::jinja
