// The split regexes see exactly HF's Unicode 16 classes: the generated tables equal the committed HF-derived
// JSON, and PCRE2 running the rewritten \p{L} \p{N} \p{M} \s (outside and inside brackets, plain and negated)
// matches exactly the code points the JSON lists, over all of Unicode. Plus the UTF-8 helpers.
#include <gtest/gtest.h>

#include "text/pretokenizer_regex.h"
#include "text/unicode.h"
#include "tokenizer_test_util.h"

namespace tf::text {
namespace {

std::vector<bool> membership_from_json(const nlohmann::json& ranges) {
  std::vector<bool> m(0x110000, false);
  for (const auto& r : ranges)
    for (uint32_t c = r[0].get<uint32_t>(); c <= r[1].get<uint32_t>(); ++c) m[c] = true;
  return m;
}

// Every scalar value once, in order, as UTF-8; offsets[i] is where code point cps[i] starts.
struct AllChars {
  std::string text;
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;
  AllChars() {
    for (uint32_t c = 0; c < 0x110000; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      offsets.push_back(text.size());
      cps.push_back(c);
      utf8_append(text, c);
    }
  }
};

std::vector<bool> regex_membership(const std::string& pattern, const AllChars& all) {
  auto re = SplitRegex::compile(pattern, false);
  EXPECT_TRUE(re.ok()) << pattern << ": " << (re.ok() ? "" : re.error().message);
  std::vector<bool> m(0x110000, false);
  if (!re.ok()) return m;
  std::vector<std::pair<size_t, size_t>> matches;
  EXPECT_TRUE((*re)->find_all(all.text, matches).ok());
  for (const auto& [b, e] : matches) {
    auto it = std::lower_bound(all.offsets.begin(), all.offsets.end(), b);
    for (size_t k = static_cast<size_t>(it - all.offsets.begin());
         k < all.offsets.size() && all.offsets[k] < e; ++k)
      m[all.cps[k]] = true;
  }
  return m;
}

size_t count_diff(const std::vector<bool>& a, const std::vector<bool>& b, bool negate_b) {
  size_t n = 0;
  for (uint32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    if (a[c] != (negate_b ? !b[c] : b[c])) ++n;
  }
  return n;
}

TEST(TokenizerUnicode, GeneratedTablesEqualJson) {
  std::ifstream f(testing::source_path("tests/data/hf_tokenizers_unicode_classes.json"));
  ASSERT_TRUE(f.good());
  const auto j = nlohmann::json::parse(f);
  for (char cls : {'L', 'N', 'M', 's'}) {
    const auto& want = j[std::string(1, cls)];
    const auto got = hf_class_ranges(cls);
    ASSERT_EQ(got.size(), want.size()) << cls;
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].lo, want[k][0].get<uint32_t>());
      EXPECT_EQ(got[k].hi, want[k][1].get<uint32_t>());
    }
  }
}

TEST(TokenizerUnicode, RewrittenClassesMatchHfExactly) {
  std::ifstream f(testing::source_path("tests/data/hf_tokenizers_unicode_classes.json"));
  const auto j = nlohmann::json::parse(f);
  const AllChars all;
  const auto L = membership_from_json(j["L"]), N = membership_from_json(j["N"]),
             M = membership_from_json(j["M"]), S = membership_from_json(j["s"]);
  EXPECT_EQ(count_diff(regex_membership(R"(\p{L})", all), L, false), 0u);
  EXPECT_EQ(count_diff(regex_membership(R"(\p{N})", all), N, false), 0u);
  EXPECT_EQ(count_diff(regex_membership(R"(\p{M})", all), M, false), 0u);
  EXPECT_EQ(count_diff(regex_membership(R"(\s)", all), S, false), 0u);
  EXPECT_EQ(count_diff(regex_membership(R"(\S)", all), S, true), 0u);
  EXPECT_EQ(count_diff(regex_membership(R"(\P{L})", all), L, true), 0u);
  EXPECT_EQ(count_diff(
                regex_membership(R"([^\s\p{L}])", all),
                [&] {
                  std::vector<bool> u(0x110000);
                  for (uint32_t c = 0; c < 0x110000; ++c) u[c] = S[c] || L[c];
                  return u;
                }(),
                true),
            0u);
  EXPECT_EQ(count_diff(regex_membership(R"([\S\p{N}])", all), S, true), 0u);  // N is inside \S
  // The planted control: Debian PCRE2's own (Unicode 14) \p{L} differs from HF's, which is why we rewrite.
  EXPECT_GT(count_diff(regex_membership(R"([[:^space:]\p{Lu}\p{Ll}\p{Lt}\p{Lm}\p{Lo}])", all), L, false), 0u);
}

TEST(TokenizerUnicode, RewriteKeepsOtherEscapesAndRefusesBrokenPatterns) {
  auto r = rewrite_unicode_classes(R"(\d\p{Lu}\\p{L}[\]a])");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rfind(R"(\d\p{Lu}\\p{L}[\]a])", 0), 0u);  // "\\p{L}" is a literal backslash then p{L}
  EXPECT_FALSE(rewrite_unicode_classes(R"([a\p{L})").ok());
  EXPECT_FALSE(rewrite_unicode_classes(R"(\p{L)").ok());
  EXPECT_FALSE(rewrite_unicode_classes("abc\\").ok());
  EXPECT_FALSE(rewrite_unicode_classes(R"([a[b]])").ok());
}

TEST(TokenizerUnicode, Utf8Helpers) {
  EXPECT_EQ(utf8_invalid_at("abc"), 3u);
  EXPECT_EQ(utf8_invalid_at(std::string("a\xE2\x82", 3)), 1u);
  EXPECT_EQ(utf8_invalid_at(std::string("\xF4\x90\x80\x80", 4)), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8_incomplete_tail(std::string("a\xE2\x82", 3)), 2u);
  EXPECT_EQ(utf8_incomplete_tail(std::string("a\xE2", 2)), 1u);
  EXPECT_EQ(utf8_incomplete_tail(std::string("a\xE2\x82\xAC", 4)), 0u);
  EXPECT_EQ(utf8_incomplete_tail(std::string("a\xE0\x80", 3)), 0u);  // E0 80 can never complete
  EXPECT_EQ(utf8_incomplete_tail(std::string("\x80", 1)), 0u);
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);  // 'Ġ'
  EXPECT_EQ(unicode_to_byte(0x120), ' ');
  EXPECT_EQ(unicode_to_byte('A'), 'A');
  EXPECT_EQ(unicode_to_byte(0x20), -1);
}

}  // namespace
}  // namespace tf::text
