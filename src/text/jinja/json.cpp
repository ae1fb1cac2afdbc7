// Python's json.dumps(x, ensure_ascii, indent, separators, sort_keys) — what Transformers' tojson
// filter calls — including its float repr, key coercion and escaping rules.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "text/jinja/interpreter.h"
#include "text/jinja/ustr.h"

namespace tf::jinja {
namespace {

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t cp : ustr::decode(s)) {
    char buf[16];
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp > 0x7F)) {
      if (cp >= 0x10000) {
        const char32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 | (v >> 10)),
                      static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      }
      out += buf;
    } else {
      ustr::append_utf8(out, cp);
    }
  }
  out += '"';
}

std::string float_json(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return float_repr(f);
}

struct Dumper {
  bool ensure_ascii;
  std::string indent;  // empty + !has_indent: compact
  bool has_indent;
  std::string item_sep, key_sep;
  bool sort_keys;
  std::string out;
  int depth = 0;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += indent;
  }

  std::string key_string(const Value& k) {
    switch (k.kind) {
      case Value::Kind::String:
        return k.s;
      case Value::Kind::Float:
        return float_json(k.f);
      case Value::Kind::Bool:
        return k.b ? "true" : "false";
      case Value::Kind::Int:
        return std::to_string(k.i);
      case Value::Kind::None:
        return "null";
      default:
        throw_error("TypeError", "keys must be str, int, float, bool or None, not " + python_type_name(k));
    }
  }

  void dump(const Value& v) {
    if (++depth > 500)
      throw_error("RecursionError", "maximum recursion depth exceeded while encoding a JSON object");
    if (out.size() > (size_t{256} << 20)) throw_error("LimitError", "template output exceeds the size limit");
    switch (v.kind) {
      case Value::Kind::None:
        out += "null";
        break;
      case Value::Kind::Bool:
        out += v.b ? "true" : "false";
        break;
      case Value::Kind::Int:
        out += std::to_string(v.i);
        break;
      case Value::Kind::Float:
        out += float_json(v.f);
        break;
      case Value::Kind::String:
        dump_string(out, v.s, ensure_ascii);
        break;
      case Value::Kind::List: {
        if (v.view != 0) {
          static const char* const kNames[] = {"list", "generator", "dict_items", "dict_keys", "dict_values"};
          throw_error("TypeError",
                      std::string("Object of type ") + kNames[v.view] + " is not JSON serializable");
        }
        if (v.list->empty()) {
          out += "[]";
          break;
        }
        out += '[';
        for (size_t i = 0; i < v.list->size(); ++i) {
          if (i) out += item_sep;
          if (has_indent) newline(depth);
          dump((*v.list)[i]);
        }
        if (has_indent) newline(depth - 1);
        out += ']';
        break;
      }
      case Value::Kind::Dict: {
        if (v.dict->entries.empty()) {
          out += "{}";
          break;
        }
        std::vector<const std::pair<Value, Value>*> entries;
        for (const auto& e : v.dict->entries) entries.push_back(&e);
        if (sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto* a, const auto* b) { return less_than(a->first, b->first); });
        }
        out += '{';
        bool first = true;
        for (const auto* e : entries) {
          if (!first) out += item_sep;
          first = false;
          if (has_indent) newline(depth);
          dump_string(out, key_string(e->first), ensure_ascii);
          out += key_sep;
          dump(e->second);
        }
        if (has_indent) newline(depth - 1);
        out += '}';
        break;
      }
      default:
        throw_error("TypeError", "Object of type " + python_type_name(v) + " is not JSON serializable");
    }
    --depth;
  }
};

}  // namespace

std::string to_json(const Value& v, bool ensure_ascii, const Value& indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys) {
  Dumper d{ensure_ascii, "", !indent.is_none(), item_sep, key_sep, sort_keys, "", 0};
  if (indent.is_string()) {
    d.indent = indent.s;
  } else if (indent.is_int_like()) {
    if (indent.as_int() > 1024) throw_error("LimitError", "tojson indent over 1024 is not supported");
    d.indent = std::string(static_cast<size_t>(std::max<int64_t>(indent.as_int(), 0)), ' ');
  } else if (!indent.is_none()) {
    throw_error("TypeError", "indent must be an int or a str");
  }
  d.dump(v);
  return d.out;
}

}  // namespace tf::jinja
