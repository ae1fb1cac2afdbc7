// UTF-8 helpers and the byte-level alphabet shared by the tokenizer, its decoder and the detokenizer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tf::text {

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};

// Exact HF tokenizers membership (Unicode 16) of the regex classes 'L', 'N', 'M' (\p{..}) and 's' (\s),
// sorted, disjoint. Generated into unicode_tables.cpp.
std::span<const CodeRange> hf_class_ranges(char cls);
bool in_ranges(std::span<const CodeRange> ranges, uint32_t cp);
// Code points that utf8proc (Unicode 15) normalizes (combining class, decomposition or composition) but
// that were assigned after Unicode 9.0, the version of HF's normalization tables: HF leaves them alone.
std::span<const CodeRange> post_unicode9_normalization_ranges();

// Index of the first byte that is not part of well-formed UTF-8, or s.size() when all of it is valid.
size_t utf8_invalid_at(std::string_view s);
inline bool utf8_valid(std::string_view s) { return utf8_invalid_at(s) == s.size(); }

// Decodes one code point of already validated UTF-8 at s[i]; advances i.
uint32_t utf8_next(std::string_view s, size_t& i);
void utf8_append(std::string& out, uint32_t cp);

// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);
void utf8_lossy_append(std::string& out, std::string_view bytes);

// Length of the tail of `bytes` that is a proper prefix of a well-formed multi-byte sequence (0..3). Such a
// tail may still become a valid character when more bytes arrive, so a streaming decoder holds it back.
size_t utf8_incomplete_tail(std::string_view bytes);

// GPT-2 byte-level alphabet: every byte maps to one printable code point.
uint32_t byte_to_unicode(uint8_t b);
// Inverse mapping; returns -1 for code points outside the alphabet.
int unicode_to_byte(uint32_t cp);
// Byte-level string of raw bytes (each byte -> its UTF-8 encoded alphabet char).
std::string byte_level_encode(std::string_view raw);

}  // namespace tf::text
