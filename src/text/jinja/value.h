// Runtime values of the Jinja engine, modelled on the Python objects Jinja2 manipulates when
// Transformers renders a chat template: str()/repr() output, truthiness, equality and ordering
// follow Python so that `{{ x }}` prints exactly what Python would.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tf::jinja {

// Thrown inside the engine only; Template::parse/render turn it into tf::Error. `kind` mirrors the
// Python exception class (TemplateSyntaxError, UndefinedError, TypeError, ...), useful for tests.
struct JinjaError : std::runtime_error {
  JinjaError(std::string kind_, std::string msg, int line_ = 0)
      : std::runtime_error(std::move(msg)), kind(std::move(kind_)), line(line_) {}
  std::string kind;
  int line;
  bool user_raised = false;  // raise_exception(): the message is the template's own text
};

[[noreturn]] void throw_error(const std::string& kind, const std::string& msg);

struct Value;
using List = std::vector<Value>;
// Lists and dicts nest at most this deep (a template can nest one more level per loop pass).
constexpr int kMaxNesting = 1000;
struct Dict;
struct Object;
struct Callable;
struct CallArgs;

struct Value {
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object, Callable };
  Kind kind = Kind::Undefined;
  bool b = false;
  bool markup = false;  // String: a markupsafe.Markup (from |safe / |escape)
  bool tuple = false;   // List: a Python tuple
  // List: 0 a list or tuple; otherwise a one-shot iterable Python would print differently and
  // that has no len()/indexing: 1 generator (map/select/...), 2 dict_items, 3 dict_keys, 4 dict_values.
  uint8_t view = 0;
  // List: levels of list/dict nesting, this list included (a flat list is 1); bounded by
  // kMaxNesting so that destroying, comparing or printing a value cannot exhaust the stack.
  uint16_t depth = 0;
  int64_t i = 0;
  double f = 0.0;
  std::string s;  // String; Undefined: the message of the UndefinedError it raises when used
  // Undefined only (field b): using it raises SecurityError (an attribute the sandbox forbids).
  std::shared_ptr<const List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Object> obj;
  std::shared_ptr<Callable> fn;

  static Value undefined(std::string hint = {}) {
    Value v;
    v.s = std::move(hint);
    return v;
  }
  static Value none() {
    Value v;
    v.kind = Kind::None;
    return v;
  }
  static Value boolean(bool x) {
    Value v;
    v.kind = Kind::Bool;
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v;
    v.kind = Kind::Int;
    v.i = x;
    return v;
  }
  static Value real(double x) {
    Value v;
    v.kind = Kind::Float;
    v.f = x;
    return v;
  }
  static Value str(std::string x, bool is_markup = false) {
    Value v;
    v.kind = Kind::String;
    v.s = std::move(x);
    v.markup = is_markup;
    return v;
  }
  static Value make_list(List items, bool is_tuple = false);
  static Value make_dict(std::shared_ptr<Dict> d);
  static Value make_dict();
  static Value make_object(std::shared_ptr<Object> o);
  static Value make_callable(std::shared_ptr<Callable> c);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }
  // Python int includes bool.
  bool is_int_like() const { return kind == Kind::Int || kind == Kind::Bool; }
  bool is_number() const { return is_int_like() || kind == Kind::Float; }
  int64_t as_int() const { return kind == Kind::Bool ? (b ? 1 : 0) : i; }
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(as_int()); }
  const List& items() const { return *list; }
};

// An insertion-ordered Python dict. Keys are hashable values (str, int, bool, None, float, tuple).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  uint16_t depth = 1;  // as Value::depth; kept by set(), the only way entries grow after creation
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);
};

// Non-container objects: namespace(), loop, cycler... `get` returns nullptr when absent.
struct Object {
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  virtual bool get(const std::string& name, Value& out) const = 0;
  virtual bool set(const std::string& /*name*/, Value /*value*/) { return false; }
  virtual std::string repr() const = 0;
};

struct Namespace : Object {
  std::vector<std::pair<std::string, Value>> attrs;
  mutable bool in_repr = false;  // Python's repr of a dict that holds itself: `{...}`
  std::string type_name() const override { return "Namespace"; }
  bool get(const std::string& name, Value& out) const override;
  bool set(const std::string& name, Value value) override;
  std::string repr() const override;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  int line = 0;
};

struct Callable {
  std::string name;
  std::string kind = "builtin";  // "builtin", "macro", "method"
  std::function<Value(CallArgs&)> call;
};

// Python semantics.
bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// Python `<`; throws TypeError for unorderable types.
bool less_than(const Value& a, const Value& b);
int nesting(const Value& v);                   // list/dict levels in v (0 for a scalar or object)
std::string to_str(const Value& v);            // str(v); Undefined -> ""
std::string repr(const Value& v);              // repr(v)
std::string python_type_name(const Value& v);  // "str", "list", "dict", "int", ...
std::string float_repr(double x);
std::string repr_string(const std::string& s);

Value from_json(const nlohmann::ordered_json& j);

}  // namespace tf::jinja
