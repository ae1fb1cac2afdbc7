// Public entry point of the Jinja engine: parse once, render many times.
//
//   TF_ASSIGN(auto tpl, tf::jinja::Template::parse(source));
//   TF_ASSIGN(std::string text, tpl.render(context));   // context: a JSON object
//
// Semantics are those of Transformers' apply_chat_template environment: Jinja2 3.1
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]),
// with tojson = json.dumps(ensure_ascii=False, ...), raise_exception and strftime_now globals.
// Errors are one line: "chat template line N: <what>"; raise_exception("msg") gives exactly "msg".
// Constructs the engine does not implement fail with an error naming them, never a wrong render.
// A parsed Template is immutable: render() may run concurrently from several threads.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "text/jinja/interpreter.h"

namespace tf::jinja {

struct RenderError {
  std::string kind;  // Python exception class name: TemplateSyntaxError, UndefinedError, TypeError, ...
  std::string message;
  int line = 0;
  bool user_raised = false;  // raised by the template's raise_exception()
};

class Template {
 public:
  static Expected<Template> parse(std::string_view source);
  // Same, but keeps the error's class and line (TemplateSyntaxError vs TemplateAssertionError).
  static bool parse_detailed(std::string_view source, Template* out, RenderError* err);

  Expected<std::string> render(const nlohmann::ordered_json& context) const;
  // Same, but keeps the error's class and line (for tests and diagnostics).
  bool render_detailed(const nlohmann::ordered_json& context, std::string* out, RenderError* err) const;

  RenderLimits limits;

 private:
  std::shared_ptr<const Body> body_;
};

std::string format_error(const RenderError& e);

}  // namespace tf::jinja
