// The split regexes of tokenizer.json, run by PCRE2 (JIT) with HF's Unicode 16 classes substituted in.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tf::text {

// Rewrites \p{L} \p{N} \p{M} (and \P{..}, \p{^..}, \pL forms) and \s \S of an Oniguruma pattern into explicit
// code point ranges from hf_class_ranges(), inside and outside bracket expressions. HF tokenizers compiles
// these patterns with Oniguruma on Unicode 16 tables, Debian's PCRE2 has Unicode 14, and they also disagree
// on U+180E for \s; explicit ranges make the match exactly HF's. Other escapes pass through unchanged.
Expected<std::string> rewrite_unicode_classes(std::string_view pattern);

class SplitRegex {
 public:
  // `pattern` is the tokenizer.json (Oniguruma) pattern; literal=true escapes it (Split's {"String": ...}).
  static Expected<std::shared_ptr<const SplitRegex>> compile(std::string_view pattern, bool literal);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Appends the [begin, end) byte offsets of successive non-overlapping matches in `s`, which must be valid
  // UTF-8 (it is not checked again: PCRE2_NO_UTF_CHECK keeps splitting linear). Empty matches follow
  // Oniguruma's find_iter: none right after a previous match, and the search then moves one character on.
  Status find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  SplitRegex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace tf::text
