#include "text/unicode.h"

#include <algorithm>
#include <array>

namespace tf::text {

bool in_ranges(std::span<const CodeRange> ranges, uint32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t v, const CodeRange& r) { return v < r.lo; });
  return it != ranges.begin() && cp <= (it - 1)->hi;
}

namespace {
// Length of the well-formed sequence starting at s[i] (1..4), or 0 if s[i..] starts with an ill-formed
// sequence; *consumed is then the length of its maximal subpart (>= 1) per Unicode ch. 3 / WHATWG.
size_t seq_len(std::string_view s, size_t i, size_t* consumed) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *consumed = 1;
    return 0;
  }
  size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= s.size()) break;
    const auto b = static_cast<uint8_t>(s[i + k]);
    const uint8_t l = (k == 1) ? lo : 0x80, h = (k == 1) ? hi : 0xBF;
    if (b < l || b > h) break;
  }
  if (k == need + 1) return need + 1;
  *consumed = k;
  return 0;
}
}  // namespace

size_t utf8_invalid_at(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= s.size()) break;
    size_t consumed = 0;
    const size_t n = seq_len(s, i, &consumed);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  if (b0 < 0xE0) {
    const uint32_t cp = ((b0 & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu);
    i += 2;
    return cp;
  }
  if (b0 < 0xF0) {
    const uint32_t cp = ((b0 & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
                        (static_cast<uint8_t>(s[i + 2]) & 0x3Fu);
    i += 3;
    return cp;
  }
  const uint32_t cp = ((b0 & 0x07u) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 12) |
                      ((static_cast<uint8_t>(s[i + 2]) & 0x3Fu) << 6) |
                      (static_cast<uint8_t>(s[i + 3]) & 0x3Fu);
  i += 4;
  return cp;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

void utf8_lossy_append(std::string& out, std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t consumed = 0;
    const size_t n = seq_len(s, i, &consumed);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += consumed;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  utf8_lossy_append(out, bytes);
  return out;
}

size_t utf8_incomplete_tail(std::string_view bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const auto b = static_cast<uint8_t>(bytes[start]);
    if (b >= 0x80 && b < 0xC0) continue;  // continuation byte: keep looking for the lead
    if (b < 0xC2 || b > 0xF4) return 0;
    size_t consumed = 0;
    // A well-formed prefix that ran out of input reports consumed == number of bytes present.
    if (seq_len(bytes, start, &consumed) == 0 && consumed == back) return back;
    return 0;
  }
  return 0;
}

namespace {
struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // the alphabet lies in [0x21, 0x143]
  ByteTables() {
    to_byte.fill(-1);
    std::array<bool, 256> direct{};
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    uint32_t n = 0;
    for (int b = 0; b < 256; ++b) to_cp[b] = direct[b] ? static_cast<uint32_t>(b) : 256 + n++;
    for (int b = 0; b < 256; ++b) to_byte[to_cp[b]] = static_cast<int16_t>(b);
  }
};
const ByteTables& byte_tables() {
  static const ByteTables t;
  return t;
}
}  // namespace

uint32_t byte_to_unicode(uint8_t b) { return byte_tables().to_cp[b]; }

int unicode_to_byte(uint32_t cp) {
  const auto& t = byte_tables();
  return cp < t.to_byte.size() ? t.to_byte[cp] : -1;
}

std::string byte_level_encode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) utf8_append(out, byte_to_unicode(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace tf::text
