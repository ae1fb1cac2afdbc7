// Recursive-descent parser following Jinja2 3.1's grammar and operator precedence.
#pragma once
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace tf::jinja {

// Throws JinjaError (TemplateSyntaxError / TemplateAssertionError) with the line set. Unknown or
// unsupported filters and tests are rejected here, as Jinja2 does when compiling.
Body parse(const std::vector<Token>& tokens);

// Implemented in filters.cpp / tests.cpp.
bool is_supported_filter(const std::string& name);
bool is_jinja_builtin_filter(const std::string& name);
bool is_supported_test(const std::string& name);

}  // namespace tf::jinja
