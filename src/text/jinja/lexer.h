// Tokenizer for Jinja templates with the settings Transformers uses: trim_blocks and lstrip_blocks
// on, keep_trailing_newline off, newlines normalized to "\n". Whitespace control (`{%-`, `-%}`,
// `{%+`, `+%}`) and raw blocks are resolved here, so the parser only sees data and tag tokens.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace tf::jinja {

struct Token {
  enum class Type { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };
  Type type;
  std::string text;  // Data: the text; String: the decoded value; Name/Op/Int/Float: as written
  int line = 1;
};

// Throws JinjaError("TemplateSyntaxError", ...) with the line set.
std::vector<Token> tokenize(std::string_view source);

}  // namespace tf::jinja
