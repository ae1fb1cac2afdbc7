// Python methods reachable from templates: str, dict, list/tuple. Mutating list/dict methods are
// refused like ImmutableSandboxedEnvironment does; real Python methods this engine does not
// implement raise an error instead of silently yielding Undefined.
#include <algorithm>
#include <set>

#include "text/jinja/interpreter.h"
#include "text/jinja/ustr.h"

namespace tf::jinja {

std::vector<std::string> str_splitlines(const std::string& s, bool keepends) {
  const std::u32string u = ustr::decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    const char32_t c = u[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                     c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t end = i + 1;
    if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') end = i + 2;
    out.push_back(ustr::encode(std::u32string_view(u).substr(start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < u.size()) out.push_back(ustr::encode(std::u32string_view(u).substr(start)));
  return out;
}

namespace {

const std::set<std::string> kStrMethods = {
    "capitalize", "casefold",     "center",       "count",   "encode",     "endswith",    "expandtabs",
    "find",       "format",       "format_map",   "index",   "isalnum",    "isalpha",     "isascii",
    "isdecimal",  "isdigit",      "isidentifier", "islower", "isnumeric",  "isprintable", "isspace",
    "istitle",    "isupper",      "join",         "ljust",   "lower",      "lstrip",      "maketrans",
    "partition",  "removeprefix", "removesuffix", "replace", "rfind",      "rindex",      "rjust",
    "rpartition", "rsplit",       "rstrip",       "split",   "splitlines", "startswith",  "strip",
    "swapcase",   "title",        "translate",    "upper",   "zfill"};
const std::set<std::string> kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};
const std::set<std::string> kListUnsafe = {"append", "clear", "pop",    "reverse",
                                           "insert", "sort",  "extend", "remove"};
const std::set<std::string> kNumAttrs = {
    "real",     "imag",       "numerator",        "denominator", "conjugate", "bit_length", "bit_count",
    "to_bytes", "from_bytes", "as_integer_ratio", "is_integer",  "hex",       "fromhex"};

size_t cp_index(const std::string& s, size_t byte_pos) {
  return ustr::length(std::string_view(s).substr(0, byte_pos));
}

std::string need_str(const Value& v, const std::string& what) {
  if (!v.is_string()) throw_error("TypeError", what + " must be str, not " + python_type_name(v));
  return v.s;
}

std::string str_title(const std::string& s) {
  std::u32string u = ustr::decode(s);
  bool prev_cased = false;
  for (auto& c : u) {
    const bool cased = ustr::is_upper(c) || ustr::is_lower(c);
    c = prev_cased ? ustr::to_lower(c) : ustr::to_upper(c);
    prev_cased = cased;
  }
  return ustr::encode(u);
}

Value split(const std::string& s, const Value& sep, int64_t maxsplit, bool right) {
  List out;
  if (sep.is_none()) {
    const std::u32string u = ustr::decode(s);
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) in code points
    if (!right) {
      size_t i = 0;
      while (i < u.size()) {
        while (i < u.size() && ustr::is_space(u[i])) ++i;
        if (i >= u.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.emplace_back(i, u.size());  // the remainder keeps its trailing whitespace
          break;
        }
        size_t j = i;
        while (j < u.size() && !ustr::is_space(u[j])) ++j;
        words.emplace_back(i, j);
        i = j;
      }
    } else {
      size_t i = u.size();
      while (i > 0) {
        while (i > 0 && ustr::is_space(u[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.emplace_back(0, i);  // the remainder keeps its leading whitespace
          break;
        }
        size_t j = i;
        while (j > 0 && !ustr::is_space(u[j - 1])) --j;
        words.emplace_back(j, i);
        i = j;
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto [b, e] : words)
      out.push_back(Value::str(ustr::encode(std::u32string_view(u).substr(b, e - b))));
    return Value::make_list(std::move(out));
  }
  const std::string d = need_str(sep, "sep");
  if (d.empty()) throw_error("ValueError", "empty separator");
  std::vector<std::string> parts;
  if (!right) {
    size_t start = 0;
    while (true) {
      const size_t p = (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) ? std::string::npos
                                                                                         : s.find(d, start);
      if (p == std::string::npos) {
        parts.push_back(s.substr(start));
        break;
      }
      parts.push_back(s.substr(start, p - start));
      start = p + d.size();
    }
  } else {
    size_t end = s.size();
    while (true) {
      const size_t p = (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) || end < d.size()
                           ? std::string::npos
                           : s.rfind(d, end - d.size());
      if (p == std::string::npos) {
        parts.push_back(s.substr(0, end));
        break;
      }
      parts.push_back(s.substr(p + d.size(), end - p - d.size()));
      end = p;
    }
    std::reverse(parts.begin(), parts.end());
  }
  for (auto& p : parts) out.push_back(Value::str(std::move(p)));
  return Value::make_list(std::move(out));
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list() && affix.tuple) {
    for (const auto& a : *affix.list) {
      if (one(need_str(a, "tuple for startswith/endswith"))) return true;
    }
    return false;
  }
  if (!affix.is_string()) {
    throw_error("TypeError", std::string(prefix ? "startswith" : "endswith") +
                                 " first arg must be str or a tuple of str, not " + python_type_name(affix));
  }
  return one(affix.s);
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, char how, const Interp& in) {
  const auto n = static_cast<int64_t>(ustr::length(s));
  if (width <= n) return s;
  in.check_size(static_cast<size_t>(width) * fill.size());
  const int64_t total = width - n;
  int64_t left = 0;
  if (how == 'c')
    left = total / 2 + (total & width & 1);  // CPython's centering rule
  else if (how == 'r')
    left = total;
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

// str.format with auto/explicit positional and keyword fields; format specs are refused.
std::string str_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw_error("ValueError", "Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw_error("ValueError", "Single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      throw_error("TemplateRuntimeError", "unsupported: str.format field '{" + field + "}'");
    }
    const Value* v = nullptr;
    if (field.empty() ||
        std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t idx = field.empty() ? auto_idx++ : std::stoul(field.substr(0, 9));
      if (idx >= a.positional.size())
        throw_error("IndexError", "Replacement index " + std::to_string(idx) + " out of range");
      v = &a.positional[idx];
    } else {
      for (const auto& [k, val] : a.keyword) {
        if (k == field) v = &val;
      }
      if (!v) throw_error("KeyError", repr_string(field));
    }
    out += to_str(*v);
    i = close;
  }
  return out;
}

Value bound(const std::string& name, std::function<Value(CallArgs&)> fn) {
  return make_builtin(name, std::move(fn));
}

Value str_method_impl(Interp& in, const Value& self, const std::string& name);

Value str_method(Interp& in, const Value& self, const std::string& name) {
  if (!kStrMethods.count(name)) return Value::undefined("'str object' has no attribute '" + name + "'");
  static const std::set<std::string> kPositionalOnly = {"replace",      "strip",       "lstrip", "rstrip",
                                                        "center",       "ljust",       "rjust",  "zfill",
                                                        "removeprefix", "removesuffix"};
  if (kPositionalOnly.count(name)) {
    // These CPython (<= 3.12) methods take no keyword arguments: check before binding.
    Value inner = str_method_impl(in, self, name);
    auto fn = inner.fn;
    return bound(name, [fn, name](CallArgs& a) {
      if (!a.keyword.empty()) throw_error("TypeError", "str." + name + "() takes no keyword arguments");
      return fn->call(a);
    });
  }
  return str_method_impl(in, self, name);
}

Value str_method_impl(Interp& in, const Value& self, const std::string& name) {
  const std::string s = self.s;
  const bool mk = self.markup;
  auto strip_m = [s, mk, name](CallArgs& a) {
    ArgReader r(a, name);
    const Value chars = r.get(0, "chars", Value::none());
    r.done(1);
    std::string c = chars.is_none() ? std::string() : need_str(chars, "strip arg");
    return Value::str(ustr::strip(s, chars.is_none() ? nullptr : &c, name != "rstrip", name != "lstrip"), mk);
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") return bound(name, strip_m);
  if (name == "split" || name == "rsplit") {
    return bound(name, [s, name](CallArgs& a) {
      ArgReader r(a, name);
      const Value sep = r.get(0, "sep", Value::none());
      const Value maxsplit = r.get(1, "maxsplit", Value::integer(-1));
      r.done(2);
      if (!maxsplit.is_int_like()) throw_error("TypeError", "maxsplit must be an integer");
      return split(s, sep, maxsplit.as_int(), name == "rsplit");
    });
  }
  if (name == "startswith" || name == "endswith") {
    return bound(name, [s, name](CallArgs& a) {
      if (a.positional.size() != 1 || !a.keyword.empty()) {
        throw_error("TemplateRuntimeError", "unsupported: " + name + " with start/end arguments");
      }
      return Value::boolean(affix_match(s, a.positional[0], name == "startswith"));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "swapcase" ||
      name == "casefold") {
    return bound(name, [s, mk, name](CallArgs& a) {
      ArgReader(a, name).done(0);
      if (name == "upper") return Value::str(ustr::upper(s), mk);
      if (name == "lower" || name == "casefold") return Value::str(ustr::lower(s), mk);
      if (name == "title") return Value::str(str_title(s), mk);
      std::u32string u = ustr::decode(s);
      for (size_t i = 0; i < u.size(); ++i) {
        if (name == "swapcase")
          u[i] = ustr::is_upper(u[i]) ? ustr::to_lower(u[i]) : ustr::to_upper(u[i]);
        else
          u[i] = i == 0 ? ustr::to_upper(u[i]) : ustr::to_lower(u[i]);
      }
      return Value::str(ustr::encode(u), mk);
    });
  }
  if (name == "replace") {
    return bound(name, [s, mk, &in](CallArgs& a) {
      ArgReader r(a, "replace");
      const std::string old_s = need_str(r.get(0, "old"), "replace() argument 1");
      const std::string new_s = need_str(r.get(1, "new"), "replace() argument 2");
      const Value count = r.get(2, "count", Value::integer(-1));
      r.done(3);
      int64_t left = count.is_int_like() ? count.as_int() : -1;
      std::string out;
      if (old_s.empty()) {
        // Python inserts `new` before every code point and at the end.
        const std::u32string u = ustr::decode(s);
        for (char32_t c : u) {
          if (left != 0) {
            out += new_s;
            --left;
          }
          ustr::append_utf8(out, c);
          in.check_size(out.size());
        }
        if (left != 0) out += new_s;
        return Value::str(std::move(out), mk);
      }
      size_t pos = 0;
      while (left != 0) {
        const size_t p = s.find(old_s, pos);
        if (p == std::string::npos) break;
        out.append(s, pos, p - pos);
        out += new_s;
        in.check_size(out.size());
        pos = p + old_s.size();
        --left;
      }
      out.append(s, pos, std::string::npos);
      return Value::str(std::move(out), mk);
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    return bound(name, [s, name](CallArgs& a) {
      if (a.positional.size() != 1 || !a.keyword.empty()) {
        throw_error("TemplateRuntimeError", "unsupported: " + name + " with start/end arguments");
      }
      const std::string sub = need_str(a.positional[0], name + "() argument");
      if (name == "count") {
        if (sub.empty()) return Value::integer(static_cast<int64_t>(ustr::length(s) + 1));
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value::integer(n);
      }
      const size_t p = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
      if (p == std::string::npos) {
        if (name == "index" || name == "rindex") throw_error("ValueError", "substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(cp_index(s, p)));
    });
  }
  if (name == "join") {
    return bound(name, [s, &in](CallArgs& a) {
      if (a.positional.size() != 1 || !a.keyword.empty())
        throw_error("TypeError", "join() takes exactly one argument");
      std::string out;
      size_t i = 0;
      for (const auto& item : iterate(a.positional[0])) {
        if (!item.is_string()) {
          throw_error("TypeError", "sequence item " + std::to_string(i) + ": expected str instance, " +
                                       python_type_name(item) + " found");
        }
        if (i++) out += s;
        out += item.s;
        in.check_size(out.size());
      }
      return Value::str(std::move(out));
    });
  }
  if (name == "format") return bound(name, [s](CallArgs& a) { return Value::str(str_format(s, a)); });
  if (name == "splitlines") {
    return bound(name, [s](CallArgs& a) {
      ArgReader r(a, "splitlines");
      const bool keep = truthy(r.get(0, "keepends", Value::boolean(false)));
      r.done(1);
      List out;
      for (auto& line : str_splitlines(s, keep)) out.push_back(Value::str(std::move(line)));
      return Value::make_list(std::move(out));
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper" || name == "isdecimal" || name == "isnumeric" || name == "isascii") {
    return bound(name, [s, name](CallArgs& a) {
      ArgReader(a, name).done(0);
      const std::u32string u = ustr::decode(s);
      if (name == "isascii") return Value::boolean(ustr::is_ascii(s));
      if (name == "islower" || name == "isupper") {
        bool cased = false;
        for (char32_t c : u) {
          const bool up = ustr::is_upper(c), lo = ustr::is_lower(c);
          if (name == "islower" ? up : lo) return Value::boolean(false);
          cased = cased || up || lo;
        }
        return Value::boolean(cased);
      }
      if (u.empty()) return Value::boolean(false);
      for (char32_t c : u) {
        bool ok;
        if (name == "isalpha")
          ok = ustr::is_alpha(c);
        else if (name == "isalnum")
          ok = ustr::is_alnum(c);
        else if (name == "isspace")
          ok = ustr::is_space(c);
        else
          ok = ustr::is_digit(c);  // isdigit/isdecimal/isnumeric agree on Nd characters
        if (!ok) return Value::boolean(false);
      }
      return Value::boolean(true);
    });
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    return bound(name, [s, name, &in](CallArgs& a) {
      ArgReader r(a, name);
      const Value width = r.get(0, "width");
      const Value fill = name == "zfill" ? Value::str(" ") : r.get(1, "fillchar", Value::str(" "));
      r.done(name == "zfill" ? 1 : 2);
      if (!width.is_int_like()) throw_error("TypeError", "width must be an integer");
      if (!fill.is_string() || ustr::length(fill.s) != 1)
        throw_error("TypeError", "The fill character must be exactly one character long");
      if (name == "zfill") {
        const auto n = static_cast<int64_t>(ustr::length(s));
        if (width.as_int() <= n) return Value::str(s);
        in.check_size(static_cast<size_t>(width.as_int()));
        std::string zeros(static_cast<size_t>(width.as_int() - n), '0');
        if (!s.empty() && (s[0] == '+' || s[0] == '-'))
          return Value::str(s.substr(0, 1) + zeros + s.substr(1));
        return Value::str(zeros + s);
      }
      return Value::str(pad(s, width.as_int(), fill.s,
                            name == "center"  ? 'c'
                            : name == "rjust" ? 'r'
                                              : 'l',
                            in));
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    return bound(name, [s, name](CallArgs& a) {
      if (a.positional.size() != 1 || !a.keyword.empty())
        throw_error("TypeError", name + "() takes exactly one argument");
      const std::string x = need_str(a.positional[0], name + "() argument");
      if (name == "removeprefix") return Value::str(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
      if (x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
        return Value::str(s.substr(0, s.size() - x.size()));
      return Value::str(s);
    });
  }
  throw_error("TemplateRuntimeError", "unsupported string method '" + name + "'");
}

Value unsafe(const std::string& attr, const std::string& type) {
  Value u = Value::undefined("access to attribute '" + attr + "' of '" + type + "' object is unsafe.");
  u.b = true;
  return u;
}

}  // namespace

Value get_method(Interp& in, const Value& obj, const std::string& name) {
  if (!name.empty() && name[0] == '_') {
    if (obj.is_string() || obj.is_list() || obj.is_dict()) return unsafe(name, python_type_name(obj));
    return Value::undefined();
  }
  switch (obj.kind) {
    case Value::Kind::String:
      return str_method(in, obj, name);
    case Value::Kind::Dict: {
      if (kDictUnsafe.count(name)) return unsafe(name, "dict");
      auto d = obj.dict;
      if (name == "items" || name == "keys" || name == "values") {
        return bound(name, [d, name](CallArgs& a) {
          ArgReader(a, name).done(0);
          List out;
          for (const auto& [k, v] : d->entries) {
            if (name == "items")
              out.push_back(Value::make_list({k, v}, true));
            else
              out.push_back(name == "keys" ? k : v);
          }
          Value l = Value::make_list(std::move(out));
          l.view = name == "items" ? 2 : name == "keys" ? 3 : 4;
          return l;
        });
      }
      if (name == "get") {
        return bound(name, [d](CallArgs& a) {
          if (a.positional.empty() || a.positional.size() > 2 || !a.keyword.empty()) {
            throw_error("TypeError", "get expected 1 or 2 arguments");
          }
          const Value& k = a.positional[0];
          if ((k.is_list() && !k.tuple) || k.is_dict())
            throw_error("TypeError", "unhashable type: '" + python_type_name(k) + "'");
          const Value* v = d->find(k);
          return v ? *v : (a.positional.size() == 2 ? a.positional[1] : Value::none());
        });
      }
      if (name == "copy")
        return bound(name, [d](CallArgs&) { return Value::make_dict(std::make_shared<Dict>(*d)); });
      if (name == "fromkeys") throw_error("TemplateRuntimeError", "unsupported dict method 'fromkeys'");
      return Value::undefined();
    }
    case Value::Kind::List: {
      if (obj.view != 0)
        return Value::undefined("'" + python_type_name(obj) + " object' has no attribute '" + name + "'");
      if (!obj.tuple && kListUnsafe.count(name)) return unsafe(name, "list");
      auto l = obj.list;
      if (name == "count" || name == "index") {
        return bound(name, [l, name](CallArgs& a) {
          if (a.positional.size() != 1 || !a.keyword.empty())
            throw_error("TypeError", name + "() takes exactly one argument");
          int64_t n = 0;
          for (size_t i = 0; i < l->size(); ++i) {
            if (equals((*l)[i], a.positional[0])) {
              if (name == "index") return Value::integer(static_cast<int64_t>(i));
              ++n;
            }
          }
          if (name == "index") throw_error("ValueError", repr(a.positional[0]) + " is not in list");
          return Value::integer(n);
        });
      }
      if (name == "copy" && !obj.tuple) return bound(name, [l](CallArgs&) { return Value::make_list(*l); });
      return Value::undefined("'" + python_type_name(obj) + " object' has no attribute '" + name + "'");
    }
    case Value::Kind::Int:
    case Value::Kind::Float:
    case Value::Kind::Bool:
      if (kNumAttrs.count(name))
        throw_error("TemplateRuntimeError", "unsupported number attribute '" + name + "'");
      return Value::undefined();
    default:
      return Value::undefined();
  }
}

}  // namespace tf::jinja
