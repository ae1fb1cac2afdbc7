// Processor invariants that need no oracle: config validation, size rules' properties, and the
// Qwen patch layout traced back pixel by pixel. Numbers against Transformers: processor_golden_test.
#include <gtest/gtest.h>

#include "image/pixtral_image_processor.h"
#include "image/qwen2_vl_image_processor.h"

namespace tf {
namespace {

using nlohmann::json;

Image pattern_image(int w, int h) {
  Image im;
  im.width = w;
  im.height = h;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) im.rgb.push_back(static_cast<uint8_t>((x + 3 * y + 101 * c) % 251));
  return im;
}

json lighton_config() {  // the fields of LightOnOCR's preprocessor_config.json
  return json::parse(R"({"image_processor_type": "PixtralImageProcessorFast", "do_convert_rgb": true,
    "do_resize": true, "do_rescale": true, "do_normalize": true, "size": {"longest_edge": 1540},
    "patch_size": 14, "resample": 3, "rescale_factor": 0.00392156862745098,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]})");
}

TEST(PixtralProcessor, ConfigFields) {
  auto p = PixtralImageProcessor::from_json(lighton_config());
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->config().max_height, 1540);
  EXPECT_EQ(p->config().patch_width, 14);
  auto j = lighton_config();
  j["patch_size"] = json{{"height", 14}, {"width", 14}};
  EXPECT_TRUE(PixtralImageProcessor::from_json(j).ok());
}

TEST(PixtralProcessor, BadConfigFieldsAreNamed) {
  const std::vector<std::pair<std::string, json>> bad = {
      {"size", json{{"shortest_edge", 3}}},
      {"size", "big"},
      {"patch_size", -14},
      {"patch_size", 1.5},
      {"resample", 1},
      {"image_mean", json{0.5, 0.5}},
      {"image_std", json{0.5, 0.0, 0.5}},
      {"do_resize", "yes"},
      {"rescale_factor", 0},
      {"image_processor_type", "Qwen2VLImageProcessorFast"},
      {"image_processor_type", "PixtralImageProcessorPil"}};
  for (const auto& [key, value] : bad) {
    auto j = lighton_config();
    j[key] = value;
    auto p = PixtralImageProcessor::from_json(j);
    ASSERT_FALSE(p.ok()) << key << " = " << value.dump();
    EXPECT_NE(p.error().message.find(key), std::string::npos) << p.error().message;
    EXPECT_EQ(p.error().message.find('\n'), std::string::npos);
  }
  EXPECT_FALSE(PixtralImageProcessor::from_json(json::array()).ok());
}

TEST(PixtralProcessor, TargetSizeProperties) {
  auto p = PixtralImageProcessor::from_json(lighton_config()).value();
  for (int h : {1, 13, 14, 15, 999, 1540, 1541, 2200, 4000})
    for (int w : {1, 28, 700, 1540, 1700, 3000}) {
      const auto [th, tw] = p.target_size(h, w);
      ASSERT_EQ(th % 14, 0);
      ASSERT_EQ(tw % 14, 0);
      ASSERT_LE(th, 1540);  // 1540 is a multiple of 14: rounding up never passes it
      ASSERT_LE(tw, 1540);
      if (h <= 1540 && w <= 1540) {  // no downscale: only rounding up to the patch multiple
        ASSERT_GE(th, h);
        ASSERT_LT(th - h, 14);
        ASSERT_GE(tw, w);
        ASSERT_LT(tw - w, 14);
      }
    }
}

TEST(PixtralProcessor, ImageAtTargetSizeIsNotResampled) {
  auto p = PixtralImageProcessor::from_json(lighton_config()).value();
  const Image im = pattern_image(56, 42);
  auto r = p.resize(im, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->height, 42);
  EXPECT_EQ(r->width, 56);
  EXPECT_EQ(r->u8, image_to_chw(im));
  auto out = p.preprocess(im, 0);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->pixel_values.shape(), (Shape{3, 42, 56}));
  EXPECT_EQ(p.n_image_tokens(42, 56, 2), 1 * 2);
}

TEST(PixtralProcessor, TooThinImageIsRefused) {
  auto p = PixtralImageProcessor::from_json(lighton_config()).value();
  auto r = p.preprocess(pattern_image(1, 5000), 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("image 4"), std::string::npos) << r.error().message;
}

json qwen_config() {
  return json::parse(R"({"image_processor_type": "Qwen2VLImageProcessorFast", "do_convert_rgb": true,
    "size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16, "temporal_patch_size": 2,
    "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 3,
    "rescale_factor": 0.00392156862745098})");
}

TEST(QwenProcessor, SmartResizeProperties) {
  for (int h : {1, 10, 31, 32, 33, 48, 80, 480, 1080, 4000, 9000})
    for (int w : {1, 7, 33, 77, 640, 1920, 5000}) {
      auto r = qwen_smart_resize(h, w, 32, 65536, 16777216);
      const double aspect = double(std::max(h, w)) / std::min(h, w);
      if (aspect > 200) {
        ASSERT_FALSE(r.ok());
        EXPECT_NE(r.error().message.find("200"), std::string::npos);
        continue;
      }
      ASSERT_TRUE(r.ok()) << h << "x" << w;
      const auto [th, tw] = r.value();
      ASSERT_EQ(th % 32, 0);
      ASSERT_EQ(tw % 32, 0);
      ASSERT_GT(th, 0);
      ASSERT_GT(tw, 0);
      ASSERT_LE(th * tw, 16777216) << h << "x" << w;
      ASSERT_GE(th * tw, 65536 - 32 * 32 * 4) << h << "x" << w;  // ceil keeps it at or just under
    }
}

TEST(QwenProcessor, ConfigOverridesAndErrors) {
  auto j = qwen_config();
  j["min_pixels"] = 1024;
  j["max_pixels"] = 4096;
  auto p = Qwen2VLImageProcessor::from_json(j);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->config().min_pixels, 1024);
  EXPECT_EQ(p->config().max_pixels, 4096);
  j["min_pixels"] = 99999;
  EXPECT_FALSE(Qwen2VLImageProcessor::from_json(j).ok());
  j = qwen_config();
  j["merge_size"] = 0;
  auto bad = Qwen2VLImageProcessor::from_json(j);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("merge_size"), std::string::npos);
  j = qwen_config();
  j["image_processor_type"] = "Qwen2VLImageProcessor";  // the 5.x name of the torchvision class
  EXPECT_TRUE(Qwen2VLImageProcessor::from_json(j).ok());
  j["image_processor_type"] = "PixtralImageProcessorFast";
  EXPECT_FALSE(Qwen2VLImageProcessor::from_json(j).ok());
}

TEST(QwenProcessor, PatchLayoutTracesBackToPixels) {
  // With rescale and normalize off, pixel_values hold the raw pixel values, so each element can be
  // traced to (channel, y, x): rows in (block_row, block_col, in_row, in_col) order, each row
  // [c][t][y][x] with both temporal frames equal.
  auto j = qwen_config();
  j["do_rescale"] = false;
  j["do_normalize"] = false;
  j["size"] = json{{"shortest_edge", 1024}, {"longest_edge", 1 << 20}};
  auto p = Qwen2VLImageProcessor::from_json(j).value();
  const int W = 96, H = 64, P = 16, M = 2, T = 2;
  const Image im = pattern_image(W, H);
  auto r = p.preprocess(im, 0);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& out = r.value();
  ASSERT_EQ(out.height, H);
  ASSERT_EQ(out.width, W);
  const int gh = H / P, gw = W / P;
  EXPECT_EQ(out.grid_thw, (std::array<int64_t, 3>{1, gh, gw}));
  EXPECT_EQ(out.n_image_tokens, gh * gw / 4);
  ASSERT_EQ(out.pixel_values.shape(), (Shape{gh * gw, 3 * T * P * P}));
  const float* pv = out.pixel_values.as<float>();
  int64_t row = 0;
  for (int br = 0; br < gh / M; ++br)
    for (int bc = 0; bc < gw / M; ++bc)
      for (int ir = 0; ir < M; ++ir)
        for (int ic = 0; ic < M; ++ic, ++row) {
          int64_t k = 0;
          for (int c = 0; c < 3; ++c)
            for (int t = 0; t < T; ++t)
              for (int y = 0; y < P; ++y)
                for (int x = 0; x < P; ++x, ++k) {
                  const int py = (br * M + ir) * P + y, px = (bc * M + ic) * P + x;
                  ASSERT_EQ(pv[row * 3 * T * P * P + k], im.rgb[3 * (py * W + px) + c])
                      << "row " << row << " c " << c << " t " << t;
                }
        }
}

}  // namespace
}  // namespace tf
