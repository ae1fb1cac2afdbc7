// Decoding: round trips through real encoders, PIL's conversion rules as invariants, EXIF geometry,
// and one clear error per kind of bad input.
#include <gtest/gtest.h>

#include <random>

#include "encoders.h"
#include "image/decode.h"
#include "image/decode_internal.h"

namespace tf {
namespace {

using test::PngSpec;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng() & 0xff);
  return v;
}

Image must_decode(const std::vector<uint8_t>& bytes, DecodeMode mode = DecodeMode::chat) {
  auto r = decode_image(bytes, 0, {}, mode);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : Image{};
}

TEST(DecodePng, Rgb8RoundTrip) {
  PngSpec s = test::png_spec(13, 7, PNG_COLOR_TYPE_RGB, 8);
  s.rows = random_bytes(13 * 7 * 3, 1);
  const Image im = must_decode(test::encode_png(s));
  ASSERT_EQ(im.width, 13);
  ASSERT_EQ(im.height, 7);
  EXPECT_EQ(im.rgb, s.rows);
}

TEST(DecodePng, InterlacedEqualsProgressive) {
  PngSpec s = test::png_spec(21, 11, PNG_COLOR_TYPE_RGB, 8);
  s.rows = random_bytes(21 * 11 * 3, 2);
  const Image a = must_decode(test::encode_png(s));
  s.interlace = true;
  const Image b = must_decode(test::encode_png(s));
  EXPECT_EQ(a.rgb, b.rgb);
  EXPECT_EQ(a.rgb, s.rows);
}

TEST(DecodePng, RgbaDropsAlphaWithoutCompositing) {
  PngSpec s = test::png_spec(9, 5, PNG_COLOR_TYPE_RGBA, 8);
  s.rows = random_bytes(9 * 5 * 4, 3);
  for (size_t i = 0; i < 9; ++i) s.rows[4 * i + 3] = 0;  // fully transparent first row keeps its colour
  const Image im = must_decode(test::encode_png(s));
  for (size_t i = 0; i < 45; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(im.rgb[3 * i + c], s.rows[4 * i + c]) << i;
}

TEST(DecodePng, GrayAndGrayAlphaReplicate) {
  for (int ct : {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA}) {
    const int ch = ct == PNG_COLOR_TYPE_GRAY ? 1 : 2;
    PngSpec s = test::png_spec(8, 6, ct, 8);
    s.rows = random_bytes(8 * 6 * ch, 4);
    const Image im = must_decode(test::encode_png(s));
    for (size_t i = 0; i < 48; ++i)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(im.rgb[3 * i + c], s.rows[ch * i]);
  }
}

TEST(DecodePng, LowBitDepthGrayScalesByBitReplication) {
  // PIL's "1", "L;2", "L;4" unpackers map the maximum code to 255 by replicating bits.
  for (int depth : {1, 2, 4}) {
    const int w = 16, h = 2, maxv = (1 << depth) - 1;
    PngSpec s = test::png_spec(w, h, PNG_COLOR_TYPE_GRAY, depth);
    const size_t rb = test::png_rowbytes(s);
    s.rows.assign(rb * h, 0);
    std::vector<int> codes;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const int v = (x + y) % (maxv + 1);
        codes.push_back(v);
        const int bit = x * depth;
        s.rows[y * rb + bit / 8] |= static_cast<uint8_t>(v << (8 - depth - bit % 8));
      }
    const Image im = must_decode(test::encode_png(s));
    for (size_t i = 0; i < codes.size(); ++i) {
      int expect = 0;
      for (int b = 0; b < 8; b += depth) expect = (expect << depth) | codes[i];  // bit replication
      ASSERT_EQ(im.rgb[3 * i], expect) << "depth " << depth << " code " << codes[i];
    }
  }
}

TEST(DecodePng, SixteenBitColourPilKeepsHighByteChatKeepsAll) {
  PngSpec s = test::png_spec(5, 3, PNG_COLOR_TYPE_RGB, 16);
  s.rows = random_bytes(5 * 3 * 6, 5);
  const auto png = test::encode_png(s);
  const Image pil = must_decode(png, DecodeMode::pil);
  ASSERT_EQ(pil.bit_depth, 8);
  for (size_t i = 0; i < 15 * 3; ++i) ASSERT_EQ(pil.rgb[i], s.rows[2 * i]);
  const Image chat = must_decode(png);
  ASSERT_EQ(chat.bit_depth, 16);
  ASSERT_TRUE(chat.rgb.empty());
  for (size_t i = 0; i < 15 * 3; ++i) ASSERT_EQ(chat.rgb16[i], (s.rows[2 * i] << 8) | s.rows[2 * i + 1]);
}

TEST(DecodePng, SixteenBitGrayPilSaturatesChatReplicates) {
  PngSpec s = test::png_spec(6, 1, PNG_COLOR_TYPE_GRAY, 16);
  const std::vector<unsigned> values = {0, 1, 200, 255, 256, 65535};
  for (unsigned v : values) s.rows.insert(s.rows.end(), {uint8_t(v >> 8), uint8_t(v & 0xff)});
  const auto png = test::encode_png(s);
  const Image pil = must_decode(png, DecodeMode::pil);
  const Image chat = must_decode(png);
  ASSERT_EQ(chat.bit_depth, 16);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(pil.rgb[3 * i], values[i] > 255 ? 255 : values[i]) << values[i];  // Pillow's I16_RGB
    for (int c = 0; c < 3; ++c) ASSERT_EQ(chat.rgb16[3 * i + c], values[i]);
  }
}

TEST(DecodePng, SixteenBitGrayAlphaChatDropsAlpha) {
  PngSpec s = test::png_spec(4, 2, PNG_COLOR_TYPE_GRAY_ALPHA, 16);
  s.rows = random_bytes(4 * 2 * 4, 9);
  const Image chat = must_decode(test::encode_png(s));
  ASSERT_EQ(chat.bit_depth, 16);
  for (size_t i = 0; i < 8; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(chat.rgb16[3 * i + c], (s.rows[4 * i] << 8) | s.rows[4 * i + 1]);
}

TEST(DecodePng, PaletteIgnoresTransparency) {
  PngSpec s = test::png_spec(4, 4, PNG_COLOR_TYPE_PALETTE, 8);
  for (int i = 0; i < 5; ++i) s.palette.push_back({uint8_t(10 * i), uint8_t(200 - i), uint8_t(7 * i + 1)});
  s.trns = {0, 128, 255};
  for (int i = 0; i < 16; ++i) s.rows.push_back(static_cast<uint8_t>(i % 5));
  for (DecodeMode mode : {DecodeMode::chat, DecodeMode::pil}) {
    const Image im = must_decode(test::encode_png(s), mode);
    for (int i = 0; i < 16; ++i) {
      const png_color& c = s.palette[i % 5];
      ASSERT_EQ(im.rgb[3 * i], c.red);
      ASSERT_EQ(im.rgb[3 * i + 1], c.green);
      ASSERT_EQ(im.rgb[3 * i + 2], c.blue);
    }
  }
}

TEST(DecodeJpeg, GrayIsReplicatedAndRgbIsClose) {
  const int w = 32, h = 24;
  std::vector<uint8_t> gray(w * h), rgb(w * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      gray[y * w + x] = static_cast<uint8_t>(x * 8);
      rgb[3 * (y * w + x)] = static_cast<uint8_t>(x * 8);
      rgb[3 * (y * w + x) + 1] = static_cast<uint8_t>(y * 10);
      rgb[3 * (y * w + x) + 2] = 128;
    }
  const Image g = must_decode(test::encode_jpeg(gray, w, h, TJPF_GRAY, TJSAMP_GRAY, 95));
  ASSERT_EQ(g.width, w);
  for (int i = 0; i < w * h; ++i) {
    ASSERT_EQ(g.rgb[3 * i], g.rgb[3 * i + 1]);
    ASSERT_EQ(g.rgb[3 * i], g.rgb[3 * i + 2]);
    ASSERT_NEAR(g.rgb[3 * i], gray[i], 4);
  }
  for (int samp : {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440}) {
    const Image c = must_decode(test::encode_jpeg(rgb, w, h, TJPF_RGB, samp, 100));
    ASSERT_EQ(c.height, h);
    for (int i = 0; i < w * h * 3; ++i) ASSERT_NEAR(c.rgb[i], rgb[i], 12) << "subsamp " << samp;
  }
}

TEST(DecodeJpeg, CmykFollowsPilInvertedConvention) {
  // A flat CMYK JPEG: PIL reads it as "CMYK;I" and converts with cmyk2rgb, so stored (c, m, y, k)
  // ends up as about (k * (255 - c') ...) with c' = 255 - c; check against that formula within JPEG
  // rounding.
  const int w = 16, h = 16;
  std::vector<uint8_t> cmyk;
  for (int i = 0; i < w * h; ++i) cmyk.insert(cmyk.end(), {200, 100, 30, 180});
  const Image im = must_decode(test::encode_jpeg(cmyk, w, h, TJPF_CMYK, TJSAMP_444, 100));
  for (int c = 0; c < 3; ++c) {
    const int inv = 255 - cmyk[c], nk = cmyk[3];
    const double expect = nk - inv * nk / 255.0;
    EXPECT_NEAR(im.rgb[3 * 100 + c], expect, 3) << c;
  }
}

}  // namespace
}  // namespace tf
