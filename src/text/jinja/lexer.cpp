#include "text/jinja/lexer.h"

#include <cstdint>

#include "text/jinja/ustr.h"
#include "text/jinja/value.h"

namespace tf::jinja {
namespace {

[[noreturn]] void syntax_error(const std::string& msg, int line) {
  throw JinjaError("TemplateSyntaxError", msg, line);
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Python's str.rstrip() (Unicode whitespace) on UTF-8 text.
std::string_view rstrip_ws(std::string_view s) {
  const std::u32string u = ustr::decode(s);
  size_t e = u.size();
  while (e > 0 && ustr::is_space(u[e - 1])) --e;
  size_t bytes = 0;
  for (size_t k = 0; k < e; ++k) {
    const char32_t c = u[k];
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  }
  return s.substr(0, bytes);
}

// Length in bytes of the Unicode whitespace run starting at pos (regex \s*).
size_t ws_run(std::string_view s, size_t pos) {
  size_t p = pos;
  while (p < s.size()) {
    const auto c = static_cast<unsigned char>(s[p]);
    if (c < 0x80) {
      if (!ustr::is_space(c)) break;
      ++p;
      continue;
    }
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    const std::u32string u = ustr::decode(s.substr(p, len));
    if (u.empty() || !ustr::is_space(u[0])) break;
    p += len;
  }
  return p - pos;
}

bool all_ws(std::string_view s) { return !s.empty() && ws_run(s, 0) == s.size(); }

bool starts(std::string_view s, size_t pos, std::string_view what) {
  return s.substr(pos, what.size()) == what;
}

void append_escape_char(std::string& out, char32_t cp, int line) {
  if (cp >= 0xD800 && cp <= 0xDFFF) syntax_error("surrogate escape in string literal is not supported", line);
  if (cp > 0x10FFFF) syntax_error("illegal Unicode character", line);
  ustr::append_utf8(out, cp);
}

// Python's "unicode-escape" decoding of a string literal body.
std::string unescape(std::string_view body, int line) {
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    const char e = body[++i];
    auto hex = [&](size_t n) -> char32_t {
      char32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        if (i + k >= body.size()) syntax_error("truncated escape in string literal", line);
        const char h = body[i + k];
        int d;
        if (h >= '0' && h <= '9')
          d = h - '0';
        else if (h >= 'a' && h <= 'f')
          d = h - 'a' + 10;
        else if (h >= 'A' && h <= 'F')
          d = h - 'A' + 10;
        else
          syntax_error("truncated escape in string literal", line);
        v = v * 16 + static_cast<char32_t>(d);
      }
      i += n;
      return v;
    };
    switch (e) {
      case '\n':
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
        append_escape_char(out, hex(2), line);
        break;
      case 'u':
        append_escape_char(out, hex(4), line);
        break;
      case 'U':
        append_escape_char(out, hex(8), line);
        break;
      case 'N':
        syntax_error("\\N{...} escapes are not supported", line);
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = static_cast<char32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
            v = v * 8 + static_cast<char32_t>(body[++i] - '0');
          }
          append_escape_char(out, v, line);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// (\d+_)*\d+ : digits with single underscores between them.
size_t match_digits(std::string_view s, size_t p) {
  size_t q = p;
  if (q >= s.size() || !is_digit(s[q])) return 0;
  while (q < s.size()) {
    if (is_digit(s[q])) {
      ++q;
      continue;
    }
    if (s[q] == '_' && q + 1 < s.size() && is_digit(s[q + 1])) {
      ++q;
      continue;
    }
    break;
  }
  return q - p;
}

size_t match_float(std::string_view s, size_t p) {
  if (p > 0 && s[p - 1] == '.') return 0;
  const size_t d = match_digits(s, p);
  if (!d) return 0;
  size_t q = p + d;
  size_t frac = 0;
  if (q < s.size() && s[q] == '.') frac = match_digits(s, q + 1);
  auto exp_at = [&](size_t r) -> size_t {
    if (r >= s.size() || (s[r] != 'e' && s[r] != 'E')) return 0;
    size_t t = r + 1;
    if (t < s.size() && (s[t] == '+' || s[t] == '-')) ++t;
    const size_t ed = match_digits(s, t);
    return ed ? t + ed - r : 0;
  };
  if (frac) {
    const size_t after = q + 1 + frac;
    const size_t e = exp_at(after);
    return after + e - p;
  }
  const size_t e = exp_at(q);
  return e ? q + e - p : 0;
}

size_t match_int(std::string_view s, size_t p) {
  if (p >= s.size() || !is_digit(s[p])) return 0;
  if (s[p] == '0' && p + 1 < s.size() &&
      std::string_view("bBoOxX").find(s[p + 1]) != std::string_view::npos) {
    const char k = static_cast<char>(s[p + 1] | 0x20);
    auto ok = [&](char c) {
      if (k == 'b') return c == '0' || c == '1';
      if (k == 'o') return c >= '0' && c <= '7';
      return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
    };
    size_t q = p + 2;
    size_t n = 0;
    while (q < s.size()) {
      if (s[q] == '_' && q + 1 < s.size() && ok(s[q + 1])) {
        q += 2;
        ++n;
        continue;
      }
      if (ok(s[q])) {
        ++q;
        ++n;
        continue;
      }
      break;
    }
    if (n) return q - p;
  }
  if (s[p] == '0') {
    size_t q = p + 1;
    while (q < s.size()) {
      if (s[q] == '0') {
        ++q;
        continue;
      }
      if (s[q] == '_' && q + 1 < s.size() && s[q + 1] == '0') {
        q += 2;
        continue;
      }
      break;
    }
    return q - p;
  }
  return match_digits(s, p);
}

}  // namespace

std::vector<Token> tokenize(std::string_view raw) {
  // Newlines are normalized and one trailing newline dropped, as Jinja2 does before lexing.
  std::string src;
  src.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      src.push_back('\n');
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      src.push_back(raw[i]);
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  const std::string_view s = src;

  std::vector<Token> out;
  size_t pos = 0;
  int line = 1;
  bool line_starting = true;
  auto emit = [&](Token::Type t, std::string text, int ln) { out.push_back(Token{t, std::move(text), ln}); };

  while (pos < s.size()) {
    size_t start = std::string_view::npos;
    for (size_t p = s.find('{', pos); p != std::string_view::npos; p = s.find('{', p + 1)) {
      if (p + 1 < s.size() && (s[p + 1] == '%' || s[p + 1] == '{' || s[p + 1] == '#')) {
        start = p;
        break;
      }
    }
    if (start == std::string_view::npos) {
      emit(Token::Type::Data, std::string(s.substr(pos)), line);
      break;
    }
    const char kind = s[start + 1];
    const char sign = start + 2 < s.size() && (s[start + 2] == '-' || s[start + 2] == '+') ? s[start + 2] : 0;
    std::string_view text = s.substr(pos, start - pos);
    const int text_newlines = count_newlines(text);
    if (sign == '-') {
      text = rstrip_ws(text);
    } else if (sign != '+' && kind != '{') {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && all_ws(text.substr(l_pos))) text = text.substr(0, l_pos);
    }
    if (!text.empty()) emit(Token::Type::Data, std::string(text), line);
    line += text_newlines;
    pos = start + 2 + (sign ? 1 : 0);

    if (kind == '#') {
      // The earliest "+#}", "-#}" or "#}" closes the comment.
      const size_t end = s.find("#}", pos);
      if (end == std::string_view::npos) syntax_error("Missing end of comment tag", line);
      size_t close = end;
      char esign = 0;
      if (end > pos && (s[end - 1] == '-' || s[end - 1] == '+')) {
        close = end - 1;
        esign = s[end - 1];
      }
      line += count_newlines(s.substr(pos, close - pos));
      size_t after = end + 2;
      if (esign == '-')
        after += ws_run(s, after);
      else if (esign == 0 && after < s.size() && s[after] == '\n')
        ++after;
      line += count_newlines(s.substr(end + 2, after - end - 2));
      line_starting = after > 0 && s[after - 1] == '\n';
      pos = after;
      continue;
    }

    if (kind == '%') {
      // {% raw %} ... {% endraw %}
      size_t q = pos + ws_run(s, pos);
      if (starts(s, q, "raw")) {
        size_t r = q + 3;
        r += ws_run(s, r);
        bool is_raw = false;
        if (starts(s, r, "-%}")) {
          r += 3;
          r += ws_run(s, r);
          is_raw = true;
        } else if (starts(s, r, "%}")) {
          r += 2;
          is_raw = true;
        }
        if (is_raw) {
          line += count_newlines(s.substr(pos, r - pos));
          size_t search = r;
          while (true) {
            const size_t b = s.find("{%", search);
            if (b == std::string_view::npos) syntax_error("Missing end of raw directive", line);
            size_t t = b + 2;
            const char rsign = t < s.size() && (s[t] == '-' || s[t] == '+') ? s[t] : 0;
            if (rsign) ++t;
            t += ws_run(s, t);
            if (!starts(s, t, "endraw")) {
              search = b + 2;
              continue;
            }
            t += 6;
            t += ws_run(s, t);
            size_t end;
            if (starts(s, t, "+%}"))
              end = t + 3;
            else if (starts(s, t, "-%}"))
              end = t + 3 + ws_run(s, t + 3);
            else if (starts(s, t, "%}"))
              end = t + 2 + (t + 2 < s.size() && s[t + 2] == '\n' ? 1 : 0);
            else {
              search = b + 2;
              continue;
            }
            std::string_view body = s.substr(r, b - r);
            const int body_newlines = count_newlines(body);
            if (rsign == '-') {
              body = rstrip_ws(body);
            } else if (rsign != '+') {
              const size_t nl = body.rfind('\n');
              const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
              if ((l_pos > 0 || line_starting) && all_ws(body.substr(l_pos))) body = body.substr(0, l_pos);
            }
            if (!body.empty()) emit(Token::Type::Data, std::string(body), line);
            line += body_newlines + count_newlines(s.substr(b, end - b));
            line_starting = s[end - 1] == '\n';
            pos = end;
            break;
          }
          continue;
        }
      }
    }

    const bool is_block = kind == '%';
    emit(is_block ? Token::Type::BlockBegin : Token::Type::VarBegin, "", line);
    line_starting = false;
    std::vector<char> balance;
    bool closed = false;
    while (pos < s.size()) {
      const size_t w = ws_run(s, pos);
      if (w) {
        line += count_newlines(s.substr(pos, w));
        line_starting = s[pos + w - 1] == '\n';
        pos += w;
        continue;
      }
      if (balance.empty()) {
        if (is_block) {
          size_t end = 0;
          if (starts(s, pos, "+%}"))
            end = pos + 3;
          else if (starts(s, pos, "-%}"))
            end = pos + 3 + ws_run(s, pos + 3);
          else if (starts(s, pos, "%}"))
            end = pos + 2 + (pos + 2 < s.size() && s[pos + 2] == '\n' ? 1 : 0);
          if (end) {
            emit(Token::Type::BlockEnd, "", line);
            line += count_newlines(s.substr(pos, end - pos));
            line_starting = s[end - 1] == '\n';
            pos = end;
            closed = true;
            break;
          }
        } else {
          size_t end = 0;
          if (starts(s, pos, "-}}"))
            end = pos + 3 + ws_run(s, pos + 3);
          else if (starts(s, pos, "}}"))
            end = pos + 2;
          if (end) {
            emit(Token::Type::VarEnd, "", line);
            line += count_newlines(s.substr(pos, end - pos));
            line_starting = s[end - 1] == '\n';
            pos = end;
            closed = true;
            break;
          }
        }
      }
      line_starting = false;
      if (size_t n = match_float(s, pos)) {
        emit(Token::Type::Float, std::string(s.substr(pos, n)), line);
        pos += n;
        continue;
      }
      if (size_t n = match_int(s, pos)) {
        emit(Token::Type::Int, std::string(s.substr(pos, n)), line);
        pos += n;
        continue;
      }
      if (is_name_start(s[pos])) {
        size_t q = pos;
        while (q < s.size() && is_name_char(s[q])) ++q;
        if (q < s.size() && static_cast<unsigned char>(s[q]) >= 0x80) {
          syntax_error("non-ASCII identifiers are not supported", line);
        }
        emit(Token::Type::Name, std::string(s.substr(pos, q - pos)), line);
        pos = q;
        continue;
      }
      if (s[pos] == '\'' || s[pos] == '"') {
        const char quote = s[pos];
        size_t q = pos + 1;
        while (q < s.size() && s[q] != quote) q += s[q] == '\\' ? 2 : 1;
        if (q >= s.size())
          syntax_error("unexpected char " + repr_string(std::string(1, quote)) + " at " + std::to_string(pos),
                       line);
        emit(Token::Type::String, unescape(s.substr(pos + 1, q - pos - 1), line), line);
        line += count_newlines(s.substr(pos, q + 1 - pos));
        pos = q + 1;
        continue;
      }
      static const char* const kOps2[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (const char* o : kOps2) {
        if (starts(s, pos, o)) op = o;
      }
      if (op.empty() && std::string_view("+-/*%~[](){}><=.:|,;").find(s[pos]) != std::string_view::npos) {
        op = std::string(1, s[pos]);
      }
      if (op.empty()) {
        const size_t len = static_cast<unsigned char>(s[pos]) >= 0x80 ? 0 : 1;
        syntax_error("unexpected char " +
                         (len ? repr_string(std::string(1, s[pos])) : std::string("(non-ASCII)")) + " at " +
                         std::to_string(pos),
                     line);
      }
      if (op == "{" || op == "(" || op == "[") {
        balance.push_back(op == "{" ? '}' : op == "(" ? ')' : ']');
      } else if (op == "}" || op == ")" || op == "]") {
        if (balance.empty()) syntax_error("unexpected '" + op + "'", line);
        const char expected = balance.back();
        balance.pop_back();
        if (expected != op[0])
          syntax_error("unexpected '" + op + "', expected '" + std::string(1, expected) + "'", line);
      }
      emit(Token::Type::Op, op, line);
      pos += op.size();
    }
    if (!closed) break;
  }
  emit(Token::Type::Eof, "", line);
  return out;
}

}  // namespace tf::jinja
