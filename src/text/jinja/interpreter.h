// Tree-walking evaluator with Jinja2's ImmutableSandboxedEnvironment semantics (default Undefined,
// sandboxed attribute lookup, no mutation of lists/dicts), plus the limits an untrusted template
// needs in a server: output size, evaluation steps and call depth.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace tf::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // also bounds every intermediate string/list
  uint64_t max_steps = 5'000'000;              // statements + expressions evaluated (~1-3 s)
  int max_call_depth = 64;                     // nested macro calls
};

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value v);
};

class Interp {
 public:
  explicit Interp(const RenderLimits& limits);
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;
  std::string render(const Body& body, const Value& context);

  Value eval(const Expr& e);
  Value get_attr(const Value& obj, const std::string& name);  // Jinja `obj.name`
  Value get_item(const Value& obj, const Value& key);         // Jinja `obj[key]`
  Value call(const Value& fn, CallArgs& args);
  Value filter(const std::string& name, const Value& operand, CallArgs& args);
  bool test(const std::string& name, const Value& operand, CallArgs& args);
  void tick(uint64_t n = 1);
  void check_size(size_t bytes) const;
  const RenderLimits& limits() const { return limits_; }
  int line() const { return line_; }

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out, Flow& flow);
  void assign(const Target& t, const Value& v);
  Value lookup(const std::string& name) const;
  Value make_macro(const Stmt& s);
  Value call_macro(const Stmt& s, Scope* def_scope, CallArgs& args);
  Value eval_filter_chain(const Expr& e, const Value& hole);
  Value eval_call(const Expr& e, const Value* caller);
  void collect_args(const Expr& e, size_t first, CallArgs& out);

  RenderLimits limits_;
  std::shared_ptr<Scope> scope_;
  std::vector<std::pair<std::string, Value>> globals_;
  uint64_t steps_ = 0;
  int depth_ = 0;
  int line_ = 0;
  size_t out_bytes_ = 0;
  // Reference cycles (a macro stored in the scope it closes over, a namespace holding itself) are
  // broken by owning these here for the render's lifetime: macros keep a raw Scope*, and
  // namespaces are emptied when the render ends.
  std::vector<std::shared_ptr<Scope>> macro_scopes_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

// ---- helpers shared by filters, tests and methods ----------------------------------------------

// Python iteration: list/tuple items, dict keys, str code points, Undefined -> empty.
List iterate(const Value& v);
size_t py_len(const Value& v);  // len(); TypeError for unsized values
Value binop(const std::string& op, const Value& a, const Value& b, const Interp& in);
bool contains(const Value& container, const Value& item);
std::string html_escape(const std::string& s);
Value make_builtin(std::string name, std::function<Value(CallArgs&)> fn);
[[noreturn]] void raise_undefined(const Value& u);
Value slice_value(const Value& v, const Value& start, const Value& stop, const Value& step);
Value index_value(const Value& v, int64_t index, bool* ok);  // list/str element, Python negatives

// Binds Python-style parameters: positional index or keyword name, then rejects leftovers.
class ArgReader {
 public:
  ArgReader(CallArgs& a, std::string fname) : a_(a), fname_(std::move(fname)) {}
  bool has(size_t pos, const char* name) const;
  Value get(size_t pos, const char* name, Value def = Value::undefined());
  void done(size_t n_positional);  // TypeError for extra positional or unknown keyword args

 private:
  CallArgs& a_;
  std::string fname_;
  std::vector<std::string> used_;
};

// Implemented in filters.cpp, tests.cpp and methods.cpp.
Value apply_filter(Interp& in, const std::string& name, const Value& operand, CallArgs& args);
bool apply_test(Interp& in, const std::string& name, const Value& operand, CallArgs& args);
// A bound str/dict/list method, or Undefined when the type has no such attribute.
Value get_method(Interp& in, const Value& obj, const std::string& name);
std::string to_json(const Value& v, bool ensure_ascii, const Value& indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys);

}  // namespace tf::jinja
