// One clear message per kind of bad image, and limits checked before allocation.
#include <gtest/gtest.h>

#include <random>

#include "encoders.h"
#include "image/decode.h"

namespace tf {
namespace {

std::vector<uint8_t> sample_rgb(int w, int h) {
  std::vector<uint8_t> v(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 7);
  return v;
}

std::vector<uint8_t> sample_png(int w, int h) {
  test::PngSpec s = test::png_spec(w, h, PNG_COLOR_TYPE_RGB, 8);
  s.rows = sample_rgb(w, h);
  return test::encode_png(s);
}

const std::string kNotDecoded = "image 3 could not be decoded; send PNG, JPEG or WebP";

TEST(DecodeErrors, UnknownFormat) {
  for (std::string s : {"", "x", "GIF89a......", "BM6\x00\x00\x00", "RIFF\x10\x00\x00\x00WAVE"}) {
    std::vector<uint8_t> b(s.begin(), s.end());
    auto r = decode_image(b, 3);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "image 3 is not PNG, JPEG or WebP; send one of those");
  }
}

TEST(DecodeErrors, TruncatedFilesOfEachFormat) {
  const int w = 40, h = 30;
  const std::vector<std::vector<uint8_t>> files = {
      sample_png(w, h),
      test::encode_jpeg(sample_rgb(w, h), w, h, TJPF_RGB, TJSAMP_420, 90),
      test::encode_webp_lossy_rgb(sample_rgb(w, h), w, h, 80),
  };
  for (const auto& f : files) {
    ASSERT_GT(f.size(), 64u);
    ASSERT_TRUE(decode_image(f, 3).ok());
    for (size_t keep : {f.size() / 2, f.size() - 20, size_t{12}}) {
      std::vector<uint8_t> cut(f.begin(), f.begin() + keep);
      auto r = decode_image(cut, 3);
      ASSERT_FALSE(r.ok()) << "kept " << keep << " of " << f.size();
      EXPECT_EQ(r.error().message, kNotDecoded);
    }
  }
}

TEST(DecodeErrors, CorruptedImageData) {
  auto png = sample_png(20, 20);
  // Flip bytes inside IDAT: zlib's checksum or the chunk CRC catches it.
  for (size_t i = png.size() / 2; i < png.size() / 2 + 8; ++i) png[i] ^= 0x5a;
  auto r = decode_image(png, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, kNotDecoded);
}

TEST(DecodeErrors, ZeroSizeHeader) {
  auto png = sample_png(4, 4);
  // IHDR width at bytes 16..19; zero it (the CRC then fails too: either way, not decodable).
  png[16] = png[17] = png[18] = png[19] = 0;
  auto r = decode_image(png, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, kNotDecoded);
}

TEST(DecodeErrors, OverPixelLimitIsRefusedWithSizes) {
  const auto png = sample_png(100, 50);
  const auto jpg = test::encode_jpeg(sample_rgb(100, 50), 100, 50, TJPF_RGB, TJSAMP_444, 90);
  const auto webp = test::encode_webp_lossy_rgb(sample_rgb(100, 50), 100, 50, 80);
  ImageLimits lim;
  lim.max_pixels = 4999;
  for (const auto& f : {png, jpg, webp}) {
    auto r = decode_image(f, 1, lim);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("100x50"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("4999"), std::string::npos) << r.error().message;
  }
  lim.max_pixels = 5000;
  for (const auto& f : {png, jpg, webp}) EXPECT_TRUE(decode_image(f, 1, lim).ok());
}

TEST(DecodeErrors, HugeDeclaredDimensionsAreRefusedBeforeAllocation) {
  // A JPEG whose SOF claims 60000 x 60000: refused from the header, nothing allocated for pixels.
  auto jpg = test::encode_jpeg(sample_rgb(8, 8), 8, 8, TJPF_RGB, TJSAMP_444, 90);
  for (size_t i = 2; i + 8 < jpg.size(); ++i) {
    if (jpg[i] == 0xff && jpg[i + 1] == 0xc0) {
      jpg[i + 5] = 0xea;
      jpg[i + 6] = 0x60;  // height 60000
      jpg[i + 7] = 0xea;
      jpg[i + 8] = 0x60;  // width 60000
      break;
    }
  }
  auto r = decode_image(jpg, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("60000x60000"), std::string::npos) << r.error().message;
}

TEST(DecodeErrors, RandomGarbageAfterMagic) {
  std::mt19937 rng(7);
  for (const std::vector<uint8_t>& magic :
       std::vector<std::vector<uint8_t>>{{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a},
                                         {0xff, 0xd8, 0xff},
                                         {'R', 'I', 'F', 'F', 9, 9, 9, 9, 'W', 'E', 'B', 'P'}}) {
    for (int t = 0; t < 20; ++t) {
      std::vector<uint8_t> b = magic;
      for (int i = 0; i < 200; ++i) b.push_back(static_cast<uint8_t>(rng()));
      auto r = decode_image(b, 3);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().message, kNotDecoded);
    }
  }
}

}  // namespace
}  // namespace tf
