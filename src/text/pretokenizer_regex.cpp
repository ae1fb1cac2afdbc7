#include "text/pretokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <cstdio>

#include "text/unicode.h"

namespace tf::text {

namespace {

std::vector<CodeRange> complement(std::span<const CodeRange> r) {
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const auto& x : r) {
    if (x.lo > next) out.push_back({next, x.lo - 1});
    next = x.hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

void append_ranges(std::string& out, std::span<const CodeRange> ranges) {
  char buf[48];
  for (const auto& r : ranges) {
    // Surrogates cannot occur in valid UTF-8 and PCRE2 refuses them in UTF mode; clip them out.
    uint32_t lo = r.lo, hi = r.hi;
    if (lo >= 0xD800 && hi <= 0xDFFF) continue;
    if (lo <= 0xDFFF && hi >= 0xD800) {
      if (lo < 0xD800) {
        std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", lo, 0xD7FFu);
        out += buf;
      }
      if (hi > 0xDFFF) {
        std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", 0xE000u, hi);
        out += buf;
      }
      continue;
    }
    if (lo == hi)
      std::snprintf(buf, sizeof buf, "\\x{%X}", lo);
    else
      std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", lo, hi);
    out += buf;
  }
}

}  // namespace

Expected<std::string> rewrite_unicode_classes(std::string_view p) {
  std::string out;
  out.reserve(p.size() * 8);
  bool in_class = false;
  size_t i = 0;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) return make_error("tokenizer.json: split regex ends with a backslash");
      const char e = p[i + 1];
      char cls = 0;
      bool negate = false;
      size_t len = 2;
      if (e == 's' || e == 'S') {
        cls = 's';
        negate = (e == 'S');
      } else if (e == 'p' || e == 'P') {
        negate = (e == 'P');
        std::string name;
        if (i + 2 < p.size() && p[i + 2] == '{') {
          const size_t close = p.find('}', i + 3);
          if (close == std::string_view::npos)
            return make_error("tokenizer.json: split regex has an unterminated \\p{");
          name = std::string(p.substr(i + 3, close - (i + 3)));
          len = close + 1 - i;
        } else if (i + 2 < p.size()) {
          name = std::string(1, p[i + 2]);
          len = 3;
        }
        if (!name.empty() && name[0] == '^') {
          negate = !negate;
          name.erase(0, 1);
        }
        if (name == "L" || name == "Letter") cls = 'L';
        if (name == "N" || name == "Number") cls = 'N';
        if (name == "M" || name == "Mark") cls = 'M';
      }
      if (cls == 0) {
        out.append(p.substr(i, len));
        i += len;
        continue;
      }
      auto ranges = hf_class_ranges(cls);
      if (in_class) {
        if (negate) {
          append_ranges(out, complement(ranges));
        } else {
          append_ranges(out, ranges);
        }
      } else {
        out += negate ? "[^" : "[";
        append_ranges(out, ranges);
        out += ']';
      }
      i += len;
      continue;
    }
    if (in_class) {
      if (c == '[') {
        if (i + 1 < p.size() && p[i + 1] == ':') {
          const size_t close = p.find(":]", i + 2);
          if (close == std::string_view::npos)
            return make_error("tokenizer.json: split regex has an unterminated POSIX class");
          out.append(p.substr(i, close + 2 - i));
          i = close + 2;
          continue;
        }
        return make_error(
            "tokenizer.json: split regex uses a nested character class, which is not supported");
      }
      if (c == ']') in_class = false;
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += p[i++];  // a leading ']' is literal
      continue;
    }
    out += c;
    ++i;
  }
  if (in_class) return make_error("tokenizer.json: split regex has an unterminated character class");
  return out;
}

namespace {

// PCRE2 JIT needs a per-thread stack; the default 32 KB overflows on long whitespace runs with (?!\S).
struct ThreadMatchState {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_match_data* md = nullptr;
  ThreadMatchState() {
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(mctx, nullptr, stack);
    md = pcre2_match_data_create(1, nullptr);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(md);
    pcre2_match_context_free(mctx);
    pcre2_jit_stack_free(stack);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState s;
  return s;
}

std::string escape_literal(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

Expected<std::shared_ptr<const SplitRegex>> SplitRegex::compile(std::string_view pattern, bool literal) {
  std::string pat;
  if (literal) {
    pat = escape_literal(pattern);
  } else {
    TF_ASSIGN(pat, rewrite_unicode_classes(pattern));
  }
  int err = 0;
  PCRE2_SIZE erroff = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &erroff, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return make_error("tokenizer.json: split regex does not compile: " +
                      std::string(reinterpret_cast<const char*>(msg)));
  }
  // JIT is an optimisation only; the interpreter gives the same matches if it is unavailable.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::shared_ptr<SplitRegex> re(new SplitRegex());
  re->code_ = code;
  return std::shared_ptr<const SplitRegex>(std::move(re));
}

SplitRegex::~SplitRegex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Status SplitRegex::find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const {
  auto& ts = thread_state();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0;
  bool have_prev = false;
  size_t prev_end = 0;
  while (pos <= s.size()) {
    const int rc = pcre2_match(code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK, ts.md, ts.mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return make_error("tokenizer: split regex failed: " + std::string(reinterpret_cast<const char*>(msg)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.md);
    const size_t b = ov[0], e = ov[1];
    if (b == e) {
      if (!(have_prev && prev_end == b)) out.emplace_back(b, e);
      if (b >= s.size()) break;
      // Step over one UTF-8 character.
      size_t n = b + 1;
      while (n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) ++n;
      pos = n;
    } else {
      out.emplace_back(b, e);
      pos = e;
    }
    have_prev = true;
    prev_end = e;
  }
  return {};
}

}  // namespace tf::text
