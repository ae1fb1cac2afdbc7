#include "cli/grounding.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace tf::cli {
namespace {

constexpr size_t kMaxLabel = 512;  // a label runs to its closing bracket on the same line
constexpr size_t kMaxCoords = 96;  // "(x1,y1,x2,y2)" with generous spacing and decimals

bool parse_number(std::string_view s, double& out) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.empty() || s.size() > 32) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+')) return false;
  std::string buf(s);
  char* end = nullptr;
  errno = 0;
  out = std::strtod(buf.c_str(), &end);
  return end == buf.c_str() + buf.size() && errno == 0 && std::isfinite(out);
}

// Parses "x1,y1,x2,y2" (0-1000, x1 <= x2, y1 <= y2) into b.norm.
bool parse_coords(std::string_view s, GroundingBox& b) {
  for (int k = 0; k < 4; ++k) {
    size_t comma = k < 3 ? s.find(',') : s.size();
    if (comma == std::string_view::npos) return false;
    if (!parse_number(s.substr(0, comma), b.norm[k])) return false;
    if (b.norm[k] < 0 || b.norm[k] > 1000) return false;
    s.remove_prefix(k < 3 ? comma + 1 : s.size());
  }
  return b.norm[0] <= b.norm[2] && b.norm[1] <= b.norm[3];
}

int to_pixel(double v, int size, bool upper) {
  const double p = v / 1000.0 * size;
  const double r = upper ? std::ceil(p) : std::floor(p);
  return static_cast<int>(std::clamp(r, 0.0, static_cast<double>(size)));
}

// Tries a reference starting at text[i] == '!' followed by '['; on success fills b and returns the
// offset just past its ')', else 0.
size_t parse_reference(std::string_view text, size_t i, GroundingBox& b) {
  size_t j = i + 2;
  int depth = 1;
  for (; j < text.size() && j - i - 2 <= kMaxLabel; ++j) {
    char c = text[j];
    if (c == '\n') return 0;
    if (c == '[') ++depth;
    if (c == ']' && --depth == 0) break;
  }
  if (depth != 0 || j >= text.size()) return 0;  // unbalanced, too long, or cut off
  const size_t label_end = j;
  if (j + 1 >= text.size() || text[j + 1] != '(') return 0;
  const size_t open = j + 1;
  const size_t close = text.find(')', open + 1);
  if (close == std::string_view::npos || close - open - 1 > kMaxCoords) return 0;
  std::string_view inner = text.substr(open + 1, close - open - 1);
  if (inner.find('\n') != std::string_view::npos || !parse_coords(inner, b)) return 0;
  b.label = std::string(text.substr(i + 2, label_end - i - 2));
  b.offset = i;
  return close + 1;
}

}  // namespace

Grounding parse_grounding(std::string_view text, int width, int height) {
  Grounding g;
  size_t i = 0;
  while ((i = text.find("![", i)) != std::string_view::npos) {
    GroundingBox b;
    if (size_t next = parse_reference(text, i, b)) {
      b.x1 = to_pixel(b.norm[0], width, false);
      b.y1 = to_pixel(b.norm[1], height, false);
      b.x2 = to_pixel(b.norm[2], width, true);
      b.y2 = to_pixel(b.norm[3], height, true);
      g.boxes.push_back(std::move(b));
      i = next;
    } else {
      ++g.n_malformed;
      i += 2;
    }
  }
  return g;
}

}  // namespace tf::cli
