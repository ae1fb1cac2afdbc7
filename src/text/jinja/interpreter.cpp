#include "text/jinja/interpreter.h"

#include <ctime>

#include "text/jinja/ustr.h"

namespace tf::jinja {
namespace {

// Jinja2's LoopContext. Attributes are computed on demand from the shared item list.
struct LoopObj : Object {
  std::shared_ptr<const List> items;
  size_t index = 0;
  std::string type_name() const override { return "LoopContext"; }
  bool get(const std::string& name, Value& out) const override {
    const auto n = static_cast<int64_t>(items->size());
    const auto i = static_cast<int64_t>(index);
    if (name == "index")
      out = Value::integer(i + 1);
    else if (name == "index0")
      out = Value::integer(i);
    else if (name == "revindex")
      out = Value::integer(n - i);
    else if (name == "revindex0")
      out = Value::integer(n - i - 1);
    else if (name == "first")
      out = Value::boolean(i == 0);
    else if (name == "last")
      out = Value::boolean(i == n - 1);
    else if (name == "length")
      out = Value::integer(n);
    else if (name == "depth")
      out = Value::integer(1);
    else if (name == "depth0")
      out = Value::integer(0);
    else if (name == "previtem")
      out = i > 0 ? (*items)[index - 1] : Value::undefined("there is no previous item");
    else if (name == "nextitem")
      out = i + 1 < n ? (*items)[index + 1] : Value::undefined("there is no next item");
    else if (name == "cycle") {
      const size_t idx = index;
      out = make_builtin("cycle", [idx](CallArgs& a) -> Value {
        if (!a.keyword.empty()) throw_error("TypeError", "cycle() takes no keyword arguments");
        if (a.positional.empty()) throw_error("TypeError", "no items for cycling given");
        return a.positional[idx % a.positional.size()];
      });
    } else if (name == "changed") {
      throw_error("TemplateRuntimeError", "unsupported: loop.changed");
    } else {
      return false;
    }
    return true;
  }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index + 1) + "/" + std::to_string(items->size()) + ">";
  }
};

struct Cycler : Object {
  List items;
  size_t pos = 0;
  std::string type_name() const override { return "Cycler"; }
  bool get(const std::string& name, Value& out) const override {
    if (name == "current") {
      out = items[pos];
      return true;
    }
    return false;
  }
  std::string repr() const override { return "<Cycler>"; }
};

}  // namespace

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    for (const auto& [k, v] : s->vars) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

Interp::Interp(const RenderLimits& limits) : limits_(limits) {
  auto add = [&](const std::string& name, std::function<Value(CallArgs&)> fn) {
    globals_.emplace_back(name, make_builtin(name, std::move(fn)));
  };
  add("range", [](CallArgs& a) -> Value {
    if (!a.keyword.empty()) throw_error("TypeError", "range() takes no keyword arguments");
    const auto& p = a.positional;
    if (p.empty() || p.size() > 3) throw_error("TypeError", "range expected 1 to 3 arguments");
    for (const auto& v : p) {
      if (!v.is_int_like())
        throw_error("TypeError", "'" + python_type_name(v) + "' object cannot be interpreted as an integer");
    }
    int64_t start = 0, stop, step = 1;
    if (p.size() == 1)
      stop = p[0].as_int();
    else {
      start = p[0].as_int();
      stop = p[1].as_int();
    }
    if (p.size() == 3) step = p[2].as_int();
    if (step == 0) throw_error("ValueError", "range() arg 3 must not be zero");
    List out;
    // The sandbox refuses ranges over MAX_RANGE (100000) items.
    for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step) {
      if (out.size() >= 100000) {
        throw_error("OverflowError",
                    "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      }
      out.push_back(Value::integer(v));
      if ((step > 0 && v > INT64_MAX - step) || (step < 0 && v < INT64_MIN - step)) break;
    }
    return Value::make_list(std::move(out));
  });
  add("dict", [](CallArgs& a) -> Value {
    auto d = std::make_shared<Dict>();
    if (a.positional.size() > 1) throw_error("TypeError", "dict expected at most 1 argument");
    if (a.positional.size() == 1) {
      const Value& src = a.positional[0];
      if (src.is_dict()) {
        *d = *src.dict;
      } else {
        for (const Value& pair : iterate(src)) {
          List kv = iterate(pair);
          if (kv.size() != 2)
            throw_error("ValueError", "dictionary update sequence element has wrong length");
          d->set(kv[0], kv[1]);
        }
      }
    }
    for (auto& [k, v] : a.keyword) d->set(Value::str(k), v);
    return Value::make_dict(std::move(d));
  });
  add("namespace", [this](CallArgs& a) -> Value {
    auto ns = std::make_shared<Namespace>();
    namespaces_.push_back(ns);
    if (a.positional.size() > 1) throw_error("TypeError", "namespace expected at most 1 positional argument");
    if (a.positional.size() == 1) {
      if (!a.positional[0].is_dict()) throw_error("TypeError", "namespace() argument must be a mapping");
      for (const auto& [k, v] : a.positional[0].dict->entries) ns->set(to_str(k), v);
    }
    for (auto& [k, v] : a.keyword) ns->set(k, v);
    return Value::make_object(std::move(ns));
  });
  add("raise_exception", [](CallArgs& a) -> Value {
    JinjaError e("TemplateError", a.positional.empty() ? std::string() : to_str(a.positional[0]));
    e.user_raised = true;
    throw e;
  });
  add("strftime_now", [](CallArgs& a) -> Value {
    if (a.positional.size() != 1 || !a.positional[0].is_string())
      throw_error("TypeError", "strftime_now(format) expects a string");
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[512];
    const size_t n = std::strftime(buf, sizeof(buf), a.positional[0].s.c_str(), &tm);
    return Value::str(std::string(buf, n));
  });
  add("cycler", [](CallArgs& a) -> Value {
    if (a.positional.empty()) throw_error("RuntimeError", "at least one item has to be provided");
    auto c = std::make_shared<Cycler>();
    c->items = a.positional;
    return Value::make_object(std::move(c));
  });
  add("joiner", [](CallArgs& a) -> Value {
    ArgReader r(a, "joiner");
    const std::string sep = to_str(r.get(0, "sep", Value::str(", ")));
    r.done(1);
    auto used = std::make_shared<bool>(false);
    return make_builtin("joiner", [sep, used](CallArgs&) -> Value {
      if (!*used) {
        *used = true;
        return Value::str("");
      }
      return Value::str(sep);
    });
  });
  add("lipsum",
      [](CallArgs&) -> Value { throw_error("TemplateRuntimeError", "unsupported global 'lipsum'"); });
}

Interp::~Interp() {
  for (auto& ns : namespaces_) ns->attrs.clear();
}

void Interp::tick(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) throw_error("LimitError", "template evaluation exceeded the step limit");
}

void Interp::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes) throw_error("LimitError", "template output exceeds the size limit");
}

std::string Interp::render(const Body& body, const Value& context) {
  scope_ = std::make_shared<Scope>();
  if (context.is_dict()) {
    for (const auto& [k, v] : context.dict->entries) scope_->set(to_str(k), v);
  }
  std::string out;
  const Flow f = exec(body, out);
  if (f != Flow::Normal) throw_error("TemplateSyntaxError", "'break'/'continue' outside of a loop");
  return out;
}

Value Interp::lookup(const std::string& name) const {
  if (const Value* v = scope_->find(name)) return *v;
  for (const auto& [k, v] : globals_) {
    if (k == name) return v;
  }
  return Value::undefined("'" + name + "' is undefined");
}

Interp::Flow Interp::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec_stmt(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interp::Flow Interp::exec_stmt(const Stmt& s, std::string& out) {
  tick();
  line_ = s.line;
  auto append = [&](const std::string& text) {
    out_bytes_ += text.size();
    check_size(out_bytes_);
    check_size(out.size() + text.size());
    out += text;
  };
  switch (s.kind) {
    case Stmt::Kind::Text:
      append(s.text);
      break;
    case Stmt::Kind::Print:
      append(to_str(eval(*s.expr)));
      break;
    case Stmt::Kind::If: {
      for (const auto& [test, body] : s.branches) {
        line_ = test->line;
        if (truthy(eval(*test))) return exec(body, out);
      }
      return exec(s.else_body, out);
    }
    case Stmt::Kind::For: {
      Flow f = Flow::Normal;
      exec_for(s, out, f);
      return f;
    }
    case Stmt::Kind::Set:
      assign(s.target, eval(*s.expr));
      break;
    case Stmt::Kind::SetBlock: {
      std::string captured;
      if (exec(s.body, captured) != Flow::Normal)
        throw_error("TemplateSyntaxError", "'break'/'continue' outside of a loop");
      Value v = Value::str(std::move(captured));
      if (s.expr) v = eval_filter_chain(*s.expr, v);
      assign(s.target, v);
      break;
    }
    case Stmt::Kind::Macro:
      scope_->set(s.name, make_macro(s));
      break;
    case Stmt::Kind::CallBlock: {
      const Value caller = make_macro(s);
      append(to_str(eval_call(*s.expr, &caller)));
      break;
    }
    case Stmt::Kind::FilterBlock: {
      std::string captured;
      const Flow f = exec(s.body, captured);
      append(to_str(eval_filter_chain(*s.expr, Value::str(std::move(captured)))));
      return f;
    }
    case Stmt::Kind::Break:
      return Flow::Break;
    case Stmt::Kind::Continue:
      return Flow::Continue;
    case Stmt::Kind::With: {
      std::vector<Value> values;
      for (const auto& a : s.assigns) values.push_back(eval(*a.second));
      auto saved = scope_;
      scope_ = std::make_shared<Scope>();
      scope_->parent = saved;
      for (size_t i = 0; i < values.size(); ++i) assign(s.assigns[i].first, values[i]);
      const Flow f = exec(s.body, out);
      scope_ = saved;
      return f;
    }
    case Stmt::Kind::Block:
      return exec(s.body, out);
  }
  return Flow::Normal;
}

void Interp::exec_for(const Stmt& s, std::string& out, Flow& flow) {
  List all = iterate(eval(*s.expr));
  auto saved = scope_;
  if (s.cond) {
    List kept;
    for (auto& item : all) {
      tick();
      scope_ = std::make_shared<Scope>();
      scope_->parent = saved;
      assign(s.target, item);
      if (truthy(eval(*s.cond))) kept.push_back(std::move(item));
    }
    all = std::move(kept);
  }
  auto items = std::make_shared<const List>(std::move(all));
  for (size_t i = 0; i < items->size(); ++i) {
    tick();
    scope_ = std::make_shared<Scope>();
    scope_->parent = saved;
    auto loop = std::make_shared<LoopObj>();
    loop->items = items;
    loop->index = i;
    scope_->set("loop", Value::make_object(std::move(loop)));
    assign(s.target, (*items)[i]);
    const Flow f = exec(s.body, out);
    if (f == Flow::Break) break;
  }
  scope_ = saved;
  if (items->empty()) flow = exec(s.else_body, out);
}

void Interp::assign(const Target& t, const Value& v) {
  switch (t.kind) {
    case Target::Kind::Name:
      scope_->set(t.name, v);
      return;
    case Target::Kind::NsAttr: {
      const Value ns = lookup(t.name);
      if (ns.kind != Value::Kind::Object || !ns.obj->set(t.attr, v)) {
        throw_error("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
      }
      return;
    }
    case Target::Kind::Tuple: {
      if (v.kind == Value::Kind::Undefined) raise_undefined(v);
      List items = iterate(v);
      if (items.size() != t.items.size()) {
        throw_error("ValueError",
                    items.size() > t.items.size()
                        ? "too many values to unpack (expected " + std::to_string(t.items.size()) + ")"
                        : "not enough values to unpack (expected " + std::to_string(t.items.size()) +
                              ", got " + std::to_string(items.size()) + ")");
      }
      for (size_t i = 0; i < items.size(); ++i) assign(t.items[i], items[i]);
      return;
    }
  }
}

Value Interp::make_macro(const Stmt& s) {
  macro_scopes_.push_back(scope_);
  Scope* def_scope = scope_.get();
  const Stmt* stmt = &s;
  auto c = std::make_shared<Callable>();
  c->name = s.name;
  c->kind = "macro";
  c->call = [this, stmt, def_scope](CallArgs& a) { return call_macro(*stmt, def_scope, a); };
  return Value::make_callable(std::move(c));
}

Value Interp::call_macro(const Stmt& s, Scope* def_scope, CallArgs& a) {
  if (++depth_ > limits_.max_call_depth) {
    --depth_;
    throw_error("RecursionError", "maximum macro call depth exceeded");
  }
  auto saved = scope_;
  auto frame = std::make_shared<Scope>();
  // macro_scopes_ owns the defining scope; the frame refers to it through a non-owning alias.
  frame->parent = std::shared_ptr<Scope>(std::shared_ptr<Scope>(), def_scope);
  scope_ = frame;
  const size_t n_params = s.params.size();
  const std::string mname = s.kind == Stmt::Kind::CallBlock ? "caller" : s.name;
  if (a.positional.size() > n_params && !s.uses_varargs) {
    throw_error("TypeError",
                "macro '" + mname + "' takes not more than " + std::to_string(n_params) + " argument(s)");
  }
  std::vector<bool> given(n_params, false);
  for (size_t i = 0; i < n_params && i < a.positional.size(); ++i) {
    frame->set(s.params[i], a.positional[i]);
    given[i] = true;
  }
  auto extra = std::make_shared<Dict>();
  bool caller_given = false;
  for (auto& [k, v] : a.keyword) {
    bool matched = false;
    for (size_t i = 0; i < n_params; ++i) {
      if (s.params[i] == k) {
        if (given[i])
          throw_error("TypeError", "macro '" + mname + "' got multiple values for argument '" + k + "'");
        frame->set(k, v);
        given[i] = true;
        matched = true;
      }
    }
    if (matched) continue;
    if (k == "caller" && s.uses_caller) {
      frame->set("caller", v);
      caller_given = true;
    } else if (s.uses_kwargs) {
      extra->set(Value::str(k), v);
    } else {
      throw_error("TypeError", "macro '" + mname + "' takes no keyword argument '" + k + "'");
    }
  }
  const size_t first_default = n_params - s.defaults.size();
  for (size_t i = 0; i < n_params; ++i) {
    if (given[i]) continue;
    if (i >= first_default)
      frame->set(s.params[i], eval(*s.defaults[i - first_default]));
    else
      frame->set(s.params[i], Value::undefined("parameter '" + s.params[i] + "' was not provided"));
  }
  if (s.uses_varargs) {
    List rest;
    for (size_t i = n_params; i < a.positional.size(); ++i) rest.push_back(a.positional[i]);
    frame->set("varargs", Value::make_list(std::move(rest), true));
  }
  if (s.uses_kwargs) frame->set("kwargs", Value::make_dict(extra));
  if (s.uses_caller && !caller_given) frame->set("caller", Value::undefined("No caller defined"));
  std::string out;
  const Flow f = exec(s.body, out);
  scope_ = saved;
  --depth_;
  if (f != Flow::Normal) throw_error("TemplateSyntaxError", "'break'/'continue' outside of a loop");
  return Value::str(std::move(out));
}

void Interp::collect_args(const Expr& e, size_t first, CallArgs& out) {
  for (size_t i = first; i < e.args.size(); ++i) out.positional.push_back(eval(*e.args[i]));
  for (const auto& [k, v] : e.kwargs) {
    if (k == "*") {
      const Value seq = eval(*v);
      if (seq.is_undefined()) raise_undefined(seq);
      for (auto& x : iterate(seq)) out.positional.push_back(std::move(x));
    } else if (k == "**") {
      const Value d = eval(*v);
      if (d.is_undefined()) raise_undefined(d);
      if (!d.is_dict())
        throw_error("TypeError", "argument after ** must be a mapping, not " + python_type_name(d));
      for (const auto& [dk, dv] : d.dict->entries) {
        if (!dk.is_string()) throw_error("TypeError", "keywords must be strings");
        out.keyword.emplace_back(dk.s, dv);
      }
    } else {
      out.keyword.emplace_back(k, eval(*v));
    }
  }
  out.line = e.line;
}

Value Interp::eval_call(const Expr& e, const Value* caller) {
  const Value fn = eval(*e.args[0]);
  CallArgs args;
  collect_args(e, 1, args);
  if (caller) args.keyword.emplace_back("caller", *caller);
  line_ = e.line;
  return call(fn, args);
}

Value Interp::call(const Value& fn, CallArgs& args) {
  if (fn.kind == Value::Kind::Undefined) raise_undefined(fn);
  if (fn.kind != Value::Kind::Callable)
    throw_error("TypeError", "'" + python_type_name(fn) + "' object is not callable");
  return fn.fn->call(args);
}

Value Interp::eval_filter_chain(const Expr& e, const Value& hole) {
  const Value operand = e.args[0] ? eval_filter_chain(*e.args[0], hole) : hole;
  CallArgs args;
  collect_args(e, 1, args);
  line_ = e.line;
  return filter(e.name, operand, args);
}

Value Interp::filter(const std::string& name, const Value& operand, CallArgs& args) {
  tick();
  return apply_filter(*this, name, operand, args);
}

bool Interp::test(const std::string& name, const Value& operand, CallArgs& args) {
  tick();
  return apply_test(*this, name, operand, args);
}

Value Interp::get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Value::Kind::Undefined:
      raise_undefined(obj);
    case Value::Kind::Dict: {
      Value m = get_method(*this, obj, name);
      if (!m.is_undefined() || m.b) return m;
      if (const Value* v = obj.dict->find(name)) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Kind::Object: {
      if (auto* c = dynamic_cast<Cycler*>(obj.obj.get())) {
        if (name == "next" || name == "reset") {
          auto keep = obj.obj;
          return make_builtin(name, [c, keep, name](CallArgs&) -> Value {
            if (name == "reset") {
              c->pos = 0;
              return Value::none();
            }
            Value v = c->items[c->pos];
            c->pos = (c->pos + 1) % c->items.size();
            return v;
          });
        }
      }
      Value v;
      if (obj.obj->get(name, v)) return v;
      return Value::undefined("'" + obj.obj->type_name() + " object' has no attribute '" + name + "'");
    }
    default: {
      Value m = get_method(*this, obj, name);
      if (!m.is_undefined() || m.b) return m;
      const std::string owner = obj.is_none() ? "None" : "'" + python_type_name(obj) + " object'";
      return Value::undefined(owner + " has no attribute '" + name + "'");
    }
  }
}

Value Interp::get_item(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Value::Kind::Undefined:
      raise_undefined(obj);
    case Value::Kind::Dict: {
      if (key.is_list() && !key.tuple) break;  // unhashable: falls back like Python's TypeError
      if (const Value* v = obj.dict->find(key)) return *v;
      break;
    }
    case Value::Kind::List:
    case Value::Kind::String: {
      if (key.is_int_like()) {
        bool ok = false;
        Value v = index_value(obj, key.as_int(), &ok);
        if (ok) return v;
        return Value::undefined("'" + python_type_name(obj) + " object' has no element " + to_str(key));
      }
      break;
    }
    default:
      break;
  }
  if (key.is_string()) return get_attr(obj, key.s);
  const std::string owner = obj.is_none() ? "None" : "'" + python_type_name(obj) + " object'";
  return Value::undefined(owner + " has no element " + repr(key));
}

}  // namespace tf::jinja
