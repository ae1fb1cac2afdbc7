// UTF-8 helpers giving Python str semantics (lengths, indices and whitespace in code points).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace tf::jinja::ustr {

bool valid_utf8(std::string_view s);
std::u32string decode(std::string_view s);  // input must be valid UTF-8
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t cp);
size_t length(std::string_view s);  // code points
bool is_ascii(std::string_view s);
bool is_space(char32_t cp);      // Python str.isspace
bool is_printable(char32_t cp);  // Python str.isprintable, per code point
bool is_alpha(char32_t cp);
bool is_digit(char32_t cp);  // Python str.isdigit (decimal + other digits)
bool is_alnum(char32_t cp);
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);
std::string upper(std::string_view s);
std::string lower(std::string_view s);

// Python str.strip/lstrip/rstrip; chars == nullptr strips whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);

}  // namespace tf::jinja::ustr
