#include "text/jinja/template.h"

#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"
#include "text/jinja/ustr.h"

namespace tf::jinja {

std::string format_error(const RenderError& e) {
  if (e.user_raised) return e.message;
  std::string msg = "chat template";
  if (e.line > 0) msg += " line " + std::to_string(e.line);
  msg += ": " + e.message;
  if (e.kind != "TemplateSyntaxError" && e.kind != "TemplateAssertionError" &&
      e.kind != "TemplateRuntimeError" && e.kind != "LimitError") {
    msg += " (" + e.kind + ")";
  }
  for (char& c : msg) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return msg;
}

bool Template::parse_detailed(std::string_view source, Template* out, RenderError* err) {
  if (!ustr::valid_utf8(source)) {
    *err = RenderError{"TemplateSyntaxError", "template is not valid UTF-8", 0, false};
    return false;
  }
  try {
    out->body_ = std::make_shared<const Body>(jinja::parse(tokenize(source)));
    return true;
  } catch (const JinjaError& e) {
    *err = RenderError{e.kind, e.what(), e.line, false};
    return false;
  }
}

Expected<Template> Template::parse(std::string_view source) {
  Template t;
  RenderError err;
  if (!parse_detailed(source, &t, &err)) return Error{format_error(err)};
  return t;
}

bool Template::render_detailed(const nlohmann::ordered_json& context, std::string* out,
                               RenderError* err) const {
  if (!body_) {
    *err = RenderError{"TemplateRuntimeError", "template was not parsed", 0, false};
    return false;
  }
  if (!context.is_object() && !context.is_null()) {
    *err = RenderError{"TypeError", "render context must be a JSON object", 0, false};
    return false;
  }
  Interp in(limits);
  try {
    const Value ctx = context.is_null() ? Value::make_dict() : from_json(context);
    *out = in.render(*body_, ctx);
    return true;
  } catch (const JinjaError& e) {
    *err = RenderError{e.kind, e.what(), e.line > 0 ? e.line : in.line(), e.user_raised};
    return false;
  } catch (const std::bad_alloc&) {
    *err = RenderError{"MemoryError", "out of memory while rendering", in.line(), false};
    return false;
  }
}

Expected<std::string> Template::render(const nlohmann::ordered_json& context) const {
  std::string out;
  RenderError err;
  if (!render_detailed(context, &out, &err)) return Error{format_error(err)};
  return out;
}

}  // namespace tf::jinja
