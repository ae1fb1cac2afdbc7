#include "cli/overlay.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace tf::cli {
namespace {

// 3x5 glyphs, rows top to bottom, '#' = ink.
struct Glyph {
  char c;
  const char* rows;  // 15 characters
};
constexpr Glyph kFont[] = {
    {'A', ".#.#.#####.##.#"}, {'B', "##.#.###.#.###."}, {'C', ".###..#..#...##"}, {'D', "##.#.##.##.###."},
    {'E', "####..####..###"}, {'F', "####..####..#.."}, {'G', ".###..#.##.#.##"}, {'H', "#.##.####.##.##"},
    {'I', "###.#..#..#.###"}, {'J', "..#..#..##.#.#."}, {'K', "#.##.###.#.##.#"}, {'L', "#..#..#..#..###"},
    {'M', "#.#####.##.##.#"}, {'N', "##.#.##.##.##.#"}, {'O', ".#.#.##.##.#.#."}, {'P', "##.#.###.#..#.."},
    {'Q', ".#.#.##.##.#.##"}, {'R', "##.#.###.#.##.#"}, {'S', ".###...#...###."}, {'T', "###.#..#..#..#."},
    {'U', "#.##.##.##.####"}, {'V', "#.##.##.##.#.#."}, {'W', "#.##.##.#####.#"}, {'X', "#.##.#.#.#.##.#"},
    {'Y', "#.##.#.#..#..#."}, {'Z', "###..#.#.#..###"}, {'0', "####.##.##.####"}, {'1', ".#.##..#..#.###"},
    {'2', "##...#.#.#..###"}, {'3', "###..#.##..####"}, {'4', "#.##.####..#..#"}, {'5', "####..##...###."},
    {'6', "#..#..####.####"}, {'7', "###..#..#..#..#"}, {'8', "####.#####.####"}, {'9', "####.####..#..#"},
    {'-', "......###......"}, {'_', "............###"}, {'.', ".............#."}, {':', "....#.....#...."},
    {'/', "..#..#.#..#..#."}, {'(', ".#.#..#..#...#."}, {')', ".#...#..#..#.#."}, {' ', "..............."},
    {'?', "##...#.#.....#."},
};

const char* glyph_rows(char c) {
  c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const Glyph& g : kFont)
    if (g.c == c) return g.rows;
  return glyph_rows('?');
}

void fill(Image& im, int x0, int y0, int x1, int y1, const uint8_t rgb[3]) {
  x0 = std::max(x0, 0), y0 = std::max(y0, 0);
  x1 = std::min(x1, im.width), y1 = std::min(y1, im.height);
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x)
      std::copy(rgb, rgb + 3, im.rgb.begin() + (static_cast<size_t>(y) * im.width + x) * 3);
}

void draw_text(Image& im, int x, int y, std::string_view s, int scale, const uint8_t rgb[3]) {
  for (char c : s) {
    const char* rows = glyph_rows(c);
    for (int r = 0; r < 5; ++r)
      for (int col = 0; col < 3; ++col)
        if (rows[r * 3 + col] == '#')
          fill(im, x + col * scale, y + r * scale, x + (col + 1) * scale, y + (r + 1) * scale, rgb);
    x += 4 * scale;
  }
}

}  // namespace

void overlay_color(size_t k, uint8_t rgb[3]) {
  static constexpr uint8_t kPalette[][3] = {{230, 25, 75},  {60, 180, 75},  {0, 130, 200},  {245, 130, 48},
                                            {145, 30, 180}, {70, 240, 240}, {240, 50, 230}, {128, 128, 0}};
  const auto& c = kPalette[k % (sizeof kPalette / sizeof kPalette[0])];
  std::copy(c, c + 3, rgb);
}

void draw_overlay(Image& page, const std::vector<GroundingBox>& boxes) {
  if (page.bit_depth != 8 || page.width <= 0 || page.height <= 0) return;
  const int t = std::max(2, std::max(page.width, page.height) / 500);  // outline thickness
  const int scale = std::max(2, std::max(page.width, page.height) / 400);
  static constexpr uint8_t kWhite[3] = {255, 255, 255};
  for (size_t k = 0; k < boxes.size(); ++k) {
    const GroundingBox& b = boxes[k];
    uint8_t c[3];
    overlay_color(k, c);
    fill(page, b.x1, b.y1, b.x2, std::min(b.y1 + t, b.y2), c);
    fill(page, b.x1, std::max(b.y2 - t, b.y1), b.x2, b.y2, c);
    fill(page, b.x1, b.y1, std::min(b.x1 + t, b.x2), b.y2, c);
    fill(page, std::max(b.x2 - t, b.x1), b.y1, b.x2, b.y2, c);
    // The label sits on a tab above the box (inside it when the box touches the page's top edge).
    std::string_view label = std::string_view(b.label).substr(0, 40);
    const int tw = static_cast<int>(label.size()) * 4 * scale + scale, th = 7 * scale;
    const int ty = b.y1 - th >= 0 ? b.y1 - th : b.y1;
    fill(page, b.x1, ty, b.x1 + tw, ty + th, c);
    draw_text(page, b.x1 + scale, ty + scale, label, scale, kWhite);
  }
}

}  // namespace tf::cli
