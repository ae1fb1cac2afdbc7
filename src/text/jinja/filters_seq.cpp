// Sequence filters: map/select/sort/... Generators (map, select, reject, batch) come back as
// lists flagged view=1 so that printing, len() and truthiness still behave as in Python.
#include <algorithm>

#include "text/jinja/interpreter.h"
#include "text/jinja/parser.h"
#include "text/jinja/ustr.h"

namespace tf::jinja {

std::vector<std::string> str_splitlines(const std::string& s, bool keepends);

// Jinja2's indent filter body (s + "\n", splitlines, re-join with the indentation).
std::string str_splitlines_join(const std::string& s, const std::string& indent, bool first, bool blank) {
  const std::vector<std::string> lines = str_splitlines(s + "\n", false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + indent : "") + lines[i];
  } else if (!lines.empty()) {
    rv = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : indent + lines[i]);
  }
  if (first) rv = indent + rv;
  return rv;
}

namespace {

Value generator(List items) {
  Value v = Value::make_list(std::move(items));
  v.view = 1;
  return v;
}

// make_attrgetter: dotted path, digit parts become integer indices.
Value get_path(Interp& in, Value item, const Value& attribute, const Value& def) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    size_t start = 0;
    while (true) {
      const size_t dot = attribute.s.find('.', start);
      const std::string part =
          attribute.s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool digits =
          !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      parts.push_back(digits && part.size() < 18 ? Value::integer(std::stoll(part)) : Value::str(part));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  } else if (!attribute.is_none()) {
    parts.push_back(attribute);
  }
  for (const auto& p : parts) {
    item = in.get_item(item, p);
    if (!def.is_none() && item.is_undefined()) item = def;
  }
  return item;
}

Value sort_key(Interp& in, const Value& item, const Value& attribute, bool case_sensitive) {
  Value k = attribute.is_none() ? item : get_path(in, item, attribute, Value::none());
  if (!case_sensitive && k.is_string()) return Value::str(ustr::lower(k.s));
  return k;
}

// The sort filter's key is a list (make_multi_attrgetter: "a,b" sorts by a then b), so equal keys
// compare by == and never reach `<` (sorting [None, None] works in Jinja2).
Value multi_key(Interp& in, const Value& item, const Value& attribute, bool case_sensitive) {
  List parts;
  if (attribute.is_string()) {
    size_t start = 0;
    while (true) {
      const size_t comma = attribute.s.find(',', start);
      const Value one = Value::str(
          attribute.s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      parts.push_back(sort_key(in, item, one, case_sensitive));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    parts.push_back(sort_key(in, item, attribute, case_sensitive));
  }
  return Value::make_list(std::move(parts));
}

List sorted(Interp& in, const List& items, const Value& attribute, bool case_sensitive, bool reverse,
            bool multi) {
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) {
    keyed.emplace_back(multi ? multi_key(in, items[i], attribute, case_sensitive)
                             : sort_key(in, items[i], attribute, case_sensitive),
                       i);
  }
  in.tick(items.size());
  // Python's sort is stable and reverse=True keeps equal items in their original order.
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? less_than(b.first, a.first) : less_than(a.first, b.first);
  });
  List out;
  for (const auto& [k, i] : keyed) out.push_back(items[i]);
  return out;
}

bool select_pass(Interp& in, const Value& item, const CallArgs& args, size_t off, bool lookup_attr) {
  Value x = item;
  if (lookup_attr) {
    if (args.positional.empty()) throw_error("FilterArgumentError", "Missing parameter for attribute name");
    x = get_path(in, item, args.positional[0], Value::none());
  }
  if (args.positional.size() <= off) return truthy(x);
  CallArgs targs;
  targs.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off) + 1,
                          args.positional.end());
  targs.keyword = args.keyword;
  return in.test(to_str(args.positional[off]), x, targs);
}

}  // namespace

Value filter_sequence(Interp& in, const std::string& name, const Value& v, CallArgs& args, bool* handled) {
  *handled = true;
  if (name == "first" || name == "last") {
    if (!args.positional.empty() || !args.keyword.empty())
      throw_error("TypeError", name + "() takes no arguments");
    if (name == "last" && v.is_list() && v.view == 1)
      throw_error("TypeError", "'generator' object is not reversible");
    const List items = iterate(v);
    if (items.empty())
      return Value::undefined(name == "first" ? "No first item, sequence was empty."
                                              : "No last item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") {
    if (!args.positional.empty() || !args.keyword.empty())
      throw_error("TypeError", "list() takes no arguments");
    return Value::make_list(iterate(v));
  }
  if (name == "join") {
    ArgReader r(args, "join");
    const Value d = r.get(0, "d", Value::str(""));
    const Value attribute = r.get(1, "attribute", Value::none());
    r.done(2);
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
      if (!first) out += to_str(d);
      first = false;
      out += to_str(attribute.is_none() ? item : get_path(in, item, attribute, Value::none()));
      in.check_size(out.size());
    }
    return Value::str(std::move(out));
  }
  if (name == "items") {
    if (!args.positional.empty() || !args.keyword.empty())
      throw_error("TypeError", "items() takes no arguments");
    if (v.is_undefined()) return generator({});
    if (!v.is_dict()) throw_error("TypeError", "Can only get item pairs from a mapping.");
    List out;
    for (const auto& [k, val] : v.dict->entries) out.push_back(Value::make_list({k, val}, true));
    return generator(std::move(out));
  }
  if (name == "map") {
    List out;
    if (!truthy(v)) return generator({});
    const List items = iterate(v);
    if (args.positional.empty()) {
      Value attribute = Value::undefined(), def = Value::none();
      for (const auto& [k, val] : args.keyword) {
        if (k == "attribute")
          attribute = val;
        else if (k == "default")
          def = val;
        else
          throw_error("FilterArgumentError", "Unexpected keyword argument '" + k + "'");
      }
      if (attribute.is_undefined()) throw_error("FilterArgumentError", "map requires a filter argument");
      for (const auto& item : items) out.push_back(get_path(in, item, attribute, def));
    } else {
      const std::string fname = to_str(args.positional[0]);
      if (!is_supported_filter(fname))
        throw_error("TemplateRuntimeError", "No filter named '" + fname + "'.");
      for (const auto& item : items) {
        CallArgs fargs;
        fargs.positional.assign(args.positional.begin() + 1, args.positional.end());
        fargs.keyword = args.keyword;
        out.push_back(in.filter(fname, item, fargs));
      }
    }
    return generator(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    if (!truthy(v)) return generator({});
    const bool attr = name == "selectattr" || name == "rejectattr";
    const bool want = name == "select" || name == "selectattr";
    List out;
    for (const auto& item : iterate(v)) {
      if (select_pass(in, item, args, attr ? 1 : 0, attr) == want) out.push_back(item);
    }
    return generator(std::move(out));
  }
  if (name == "unique") {
    ArgReader r(args, "unique");
    const bool cs = truthy(r.get(0, "case_sensitive", Value::boolean(false)));
    const Value attribute = r.get(1, "attribute", Value::none());
    r.done(2);
    List out, seen;
    for (const auto& item : iterate(v)) {
      const Value k = sort_key(in, item, attribute, cs);
      if ((k.is_list() && !k.tuple) || k.is_dict())
        throw_error("TypeError", "unhashable type: '" + python_type_name(k) + "'");
      bool dup = false;
      for (const auto& s : seen) dup = dup || equals(s, k);
      in.tick(seen.size());
      if (!dup) {
        seen.push_back(k);
        out.push_back(item);
      }
    }
    return generator(std::move(out));
  }
  if (name == "sort") {
    ArgReader r(args, "sort");
    const bool reverse = truthy(r.get(0, "reverse", Value::boolean(false)));
    const bool cs = truthy(r.get(1, "case_sensitive", Value::boolean(false)));
    const Value attribute = r.get(2, "attribute", Value::none());
    r.done(3);
    return Value::make_list(sorted(in, iterate(v), attribute, cs, reverse, true));
  }
  if (name == "dictsort") {
    ArgReader r(args, "dictsort");
    const bool cs = truthy(r.get(0, "case_sensitive", Value::boolean(false)));
    const std::string by = to_str(r.get(1, "by", Value::str("key")));
    const bool reverse = truthy(r.get(2, "reverse", Value::boolean(false)));
    r.done(3);
    if (by != "key" && by != "value")
      throw_error("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
    if (!v.is_dict()) throw_error("TypeError", "dictsort expects a mapping");
    List pairs;
    for (const auto& [k, val] : v.dict->entries) pairs.push_back(Value::make_list({k, val}, true));
    return Value::make_list(sorted(in, pairs, Value::integer(by == "key" ? 0 : 1), cs, reverse, false));
  }
  if (name == "reverse") {
    if (!args.positional.empty() || !args.keyword.empty())
      throw_error("TypeError", "reverse() takes no arguments");
    if (v.is_string()) return slice_value(v, Value::none(), Value::none(), Value::integer(-1));
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return generator(std::move(items));
  }
  if (name == "min" || name == "max") {
    ArgReader r(args, name);
    const bool cs = truthy(r.get(0, "case_sensitive", Value::boolean(false)));
    const Value attribute = r.get(1, "attribute", Value::none());
    r.done(2);
    const List items = iterate(v);
    if (items.empty()) {
      return Value::undefined(std::string("No ") + (name == "min" ? "smallest" : "largest") +
                              " item, sequence was empty.");
    }
    size_t best = 0;
    Value best_key = sort_key(in, items[0], attribute, cs);
    for (size_t i = 1; i < items.size(); ++i) {
      Value k = sort_key(in, items[i], attribute, cs);
      if (name == "min" ? less_than(k, best_key) : less_than(best_key, k)) {
        best = i;
        best_key = std::move(k);
      }
    }
    return items[best];
  }
  if (name == "sum") {
    ArgReader r(args, "sum");
    const Value attribute = r.get(0, "attribute", Value::none());
    Value total = r.get(1, "start", Value::integer(0));
    r.done(2);
    for (const auto& item : iterate(v)) {
      total =
          binop("+", total, attribute.is_none() ? item : get_path(in, item, attribute, Value::none()), in);
    }
    return total;
  }
  if (name == "batch") {
    ArgReader r(args, "batch");
    const Value count = r.get(0, "linecount");
    const Value fill = r.get(1, "fill_with", Value::none());
    r.done(2);
    if (!count.is_int_like() || count.as_int() <= 0)
      throw_error("ValueError", "batch size must be a positive integer");
    const auto n = static_cast<size_t>(count.as_int());
    List out, cur;
    for (const auto& item : iterate(v)) {
      cur.push_back(item);
      if (cur.size() == n) {
        out.push_back(Value::make_list(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (!fill.is_none()) {
        in.check_size((n - cur.size()) * 8);
        while (cur.size() < n) cur.push_back(fill);
      }
      out.push_back(Value::make_list(std::move(cur)));
    }
    return generator(std::move(out));
  }
  *handled = false;
  return Value::undefined();
}

}  // namespace tf::jinja
