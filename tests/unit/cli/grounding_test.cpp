// The grounding parser on hand-written model outputs (nested brackets, coordinates out of range,
// truncated references) and a small fuzz run; the repetition guard; --pages parsing; the overlay drawn
// on an image, encoded as PNG and read back.
#include <gtest/gtest.h>

#include <random>

#include "cli/grounding.h"
#include "cli/ocr_inputs.h"
#include "cli/overlay.h"
#include "cli/repetition.h"
#include "image/decode.h"
#include "image/encode_png.h"

namespace tf::cli {
namespace {

TEST(Grounding, WellFormedReferencesBecomePageBoxes) {
  const std::string text =
      "# Title\n![image](100,200,300,400) A figure\nSome text ![table](0,0,1000,1000)\n![ chart ](10, 20 "
      ",30,40)";
  Grounding g = parse_grounding(text, 2000, 1000);
  ASSERT_EQ(g.boxes.size(), 3u);
  EXPECT_EQ(g.n_malformed, 0);
  EXPECT_EQ(g.boxes[0].label, "image");
  EXPECT_EQ(g.boxes[0].offset, text.find("![image]"));
  EXPECT_EQ((std::vector<int>{g.boxes[0].x1, g.boxes[0].y1, g.boxes[0].x2, g.boxes[0].y2}),
            (std::vector<int>{200, 200, 600, 400}));
  EXPECT_EQ((std::vector<int>{g.boxes[1].x1, g.boxes[1].y1, g.boxes[1].x2, g.boxes[1].y2}),
            (std::vector<int>{0, 0, 2000, 1000}));
  EXPECT_EQ(g.boxes[2].label, " chart ");
  EXPECT_DOUBLE_EQ(g.boxes[2].norm[1], 20);
  // Fractions round outwards: the box always covers the referenced area.
  Grounding f = parse_grounding("![x](0.5,0.5,500.2,999.9)", 1000, 100);
  ASSERT_EQ(f.boxes.size(), 1u);
  EXPECT_EQ((std::vector<int>{f.boxes[0].x1, f.boxes[0].y1, f.boxes[0].x2, f.boxes[0].y2}),
            (std::vector<int>{0, 0, 501, 100}));
}

TEST(Grounding, NestedBracketsStayInTheLabel) {
  Grounding g =
      parse_grounding("![a [b] [c [d]]](1,2,3,4) and ![x ![y](5,6,7,8) z](10,20,30,40)", 1000, 1000);
  ASSERT_EQ(g.boxes.size(), 2u);
  EXPECT_EQ(g.boxes[0].label, "a [b] [c [d]]");
  EXPECT_EQ(g.boxes[1].label, "x ![y](5,6,7,8) z");  // the outer reference wins; the inner is label text
  EXPECT_EQ(g.n_malformed, 0);
}

TEST(Grounding, MalformedReferencesAreCountedAndSkipped) {
  const char* bad[] = {
      "![a](1,2,3)",                  // three numbers
      "![a](1,2,3,4,5)",              // five
      "![a](1,2,3,1001)",             // out of range
      "![a](-1,2,3,4)",               // negative
      "![a](300,2,100,4)",            // x1 > x2
      "![a](1,2,3,4e)",               // not a number
      "![a](x,y,z,w)",                //
      "![a] (1,2,3,4)",               // no '(' right after ']'
      "![a\nb](1,2,3,4)",             // label across a line
      "![a](1,2,\n3,4)",              // coordinates across a line
      "![unclosed [label](1,2,3,4)",  // unbalanced: the label never closes
  };
  for (const char* t : bad) {
    Grounding g = parse_grounding(t, 100, 100);
    EXPECT_TRUE(g.boxes.empty()) << t;
    EXPECT_EQ(g.n_malformed, 1) << t;
  }
}

TEST(Grounding, TruncatedReferencesAtTheEnd) {
  // Outputs cut off by the token limit, at every byte of a reference.
  const std::string full = "text ![figure](120,340,560,780)";
  for (size_t n = 7; n < full.size(); ++n) {
    Grounding g = parse_grounding(full.substr(0, n), 640, 480);
    EXPECT_TRUE(g.boxes.empty()) << full.substr(0, n);
    EXPECT_EQ(g.n_malformed, 1) << full.substr(0, n);
  }
  Grounding g = parse_grounding(full, 640, 480);
  ASSERT_EQ(g.boxes.size(), 1u);
  // A malformed reference before a good one does not hide it.
  Grounding two = parse_grounding("![a](1,2 ![b](1,2,3,4)", 10, 10);
  EXPECT_EQ(two.boxes.size(), 1u);
  EXPECT_EQ(two.n_malformed, 1);
}

TEST(Grounding, FuzzNeverCrashesAndBoxesStayOnThePage) {
  std::mt19937 rng(20261129);
  const std::string alphabet = "![](),.0123456789 -\nab1000";
  const char* pieces[] = {"![", "](", ")", "1000", ",", "[", "]", "label", "999.5", "\n", "0"};
  for (int iter = 0; iter < 20000; ++iter) {
    std::string s;
    const int n = static_cast<int>(rng() % 80);
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0)
        s += pieces[rng() % (sizeof pieces / sizeof pieces[0])];
      else
        s += alphabet[rng() % alphabet.size()];
    }
    const int w = 1 + static_cast<int>(rng() % 3000), h = 1 + static_cast<int>(rng() % 3000);
    Grounding g = parse_grounding(s, w, h);
    size_t starts = 0;
    for (size_t p = s.find("!["); p != std::string::npos; p = s.find("![", p + 1)) ++starts;
    ASSERT_LE(g.boxes.size() + static_cast<size_t>(g.n_malformed), starts) << s;
    for (const GroundingBox& b : g.boxes) {
      ASSERT_TRUE(0 <= b.x1 && b.x1 <= b.x2 && b.x2 <= w && 0 <= b.y1 && b.y1 <= b.y2 && b.y2 <= h) << s;
      ASSERT_EQ(s.compare(b.offset, 2, "!["), 0) << s;
    }
  }
}

TEST(RepetitionGuard, FindsCyclesOfAnyLength) {
  RepetitionGuard one(4);
  std::vector<int32_t> ids = {1, 2, 3, 7, 7, 7};
  for (int32_t t : ids) EXPECT_FALSE(one.push(t));
  EXPECT_TRUE(one.push(7));  // 7 four times
  EXPECT_EQ(one.cycle(), 1);

  RepetitionGuard three(3);
  ids = {9, 1, 2, 3, 1, 2, 3, 1, 2};
  for (int32_t t : ids) EXPECT_FALSE(three.push(t));
  EXPECT_TRUE(three.push(3));  // "1 2 3" three times
  EXPECT_EQ(three.cycle(), 3);

  RepetitionGuard off(0);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(off.push(5));
  // Ordinary text: no cycle repeated 3 times.
  RepetitionGuard text(3);
  std::mt19937 rng(1);
  for (int i = 0; i < 5000; ++i) EXPECT_FALSE(text.push(static_cast<int32_t>(rng() % 1000)));
  // A long cycle (200 tokens) repeated twice is found.
  RepetitionGuard longc(2);
  bool hit = false;
  for (int rep = 0; rep < 2 && !hit; ++rep)
    for (int i = 0; i < 200 && !hit; ++i) hit = longc.push(10000 + i);
  EXPECT_TRUE(hit);
  EXPECT_EQ(longc.cycle(), 200);
}

TEST(OcrInputs, PageRanges) {
  auto r = parse_page_ranges("1-5,9,12-");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], std::make_pair(1, 5));
  EXPECT_EQ((*r)[1], std::make_pair(9, 9));
  EXPECT_EQ((*r)[2].first, 12);
  EXPECT_GT((*r)[2].second, 1000000);
  for (const char* bad : {"", "0", "5-3", "a", "1,,2", "-3", "1-2-3", "2,"})
    EXPECT_FALSE(parse_page_ranges(bad).ok()) << bad;
}

TEST(OcrInputs, PageSizesMatchTheProcessor) {
  // Pixtral, longest edge 560, patch 14: a 560 x 224 pt page is 560 x 224 px; a portrait page keeps its
  // aspect and lands on whole patches; --dpi renders at the resolution.
  nlohmann::json pix = {{"image_processor_type", "PixtralImageProcessor"},
                        {"patch_size", 14},
                        {"size", {{"longest_edge", 560}}}};
  auto s = PageSizer::from_processor_config(pix, std::nullopt);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->pixels(560, 224), std::make_pair(560, 224));
  EXPECT_EQ(s->pixels(1120, 448), std::make_pair(560, 224));
  EXPECT_EQ(s->pixels(280, 700), std::make_pair(224, 560));
  EXPECT_EQ(s->pixels(612, 792), std::make_pair(434, 560));  // US letter: 432.7 -> 434 (31 patches)
  auto d = PageSizer::from_processor_config(pix, 144.0);
  EXPECT_EQ(d->pixels(612, 792), std::make_pair(1224, 1584));
  nlohmann::json qwen = {{"image_processor_type", "Qwen2VLImageProcessor"},
                         {"patch_size", 16},
                         {"merge_size", 2},
                         {"temporal_patch_size", 2},
                         {"size", {{"longest_edge", 147456}, {"shortest_edge", 8192}}}};
  auto q = PageSizer::from_processor_config(qwen, std::nullopt);
  ASSERT_TRUE(q.ok()) << q.error().message;
  auto [w, h] = q->pixels(612, 792);
  EXPECT_EQ(w % 32, 0);
  EXPECT_EQ(h % 32, 0);
  EXPECT_LE(static_cast<int64_t>(w) * h, 147456);
  EXPECT_GT(static_cast<int64_t>(w) * h, 147456 * 8 / 10);
}

TEST(Overlay, BoxesAreDrawnAndSurviveAPngRoundTrip) {
  Image page;
  page.width = 400;
  page.height = 300;
  page.rgb.assign(static_cast<size_t>(page.width) * page.height * 3, 255);
  Grounding g =
      parse_grounding("![image](100,200,500,600) ![table](600,100,900,900)", page.width, page.height);
  ASSERT_EQ(g.boxes.size(), 2u);
  draw_overlay(page, g.boxes);
  auto png = encode_png(page);
  ASSERT_TRUE(png.ok()) << png.error().message;
  auto back = decode_image(*png, 1);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->width, 400);
  ASSERT_EQ(back->height, 300);
  ASSERT_EQ(back->rgb, page.rgb);
  auto px = [&](int x, int y) {
    const uint8_t* p = back->rgb.data() + (static_cast<size_t>(y) * back->width + x) * 3;
    return std::vector<int>{p[0], p[1], p[2]};
  };
  for (size_t k = 0; k < 2; ++k) {
    uint8_t c[3];
    overlay_color(k, c);
    const std::vector<int> want = {c[0], c[1], c[2]};
    const GroundingBox& b = g.boxes[k];
    // Every edge carries the box's colour; the middle is untouched paper.
    EXPECT_EQ(px(b.x1, (b.y1 + b.y2) / 2), want);
    EXPECT_EQ(px(b.x2 - 1, (b.y1 + b.y2) / 2), want);
    EXPECT_EQ(px((b.x1 + b.x2) / 2, b.y2 - 1), want);
    EXPECT_EQ(px((b.x1 + b.x2) / 2, (b.y1 + b.y2) / 2), (std::vector<int>{255, 255, 255}));
  }
  // The labels' tabs hold white glyph pixels on the box colour, above box 0 (it has room).
  uint8_t c0[3];
  overlay_color(0, c0);
  int white = 0, colour = 0;
  for (int y = g.boxes[0].y1 - 14; y < g.boxes[0].y1; ++y)
    for (int x = g.boxes[0].x1; x < g.boxes[0].x1 + 40; ++x) {
      auto p = px(x, y);
      white += p == std::vector<int>{255, 255, 255};
      colour += p == std::vector<int>{c0[0], c0[1], c0[2]};
    }
  EXPECT_GT(white, 10);
  EXPECT_GT(colour, 100);
}

}  // namespace
}  // namespace tf::cli
