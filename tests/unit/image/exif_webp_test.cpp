// EXIF orientation (as ImageOps.exif_transpose applies it) and WebP decoding.
#include <gtest/gtest.h>

#include <random>

#include "encoders.h"
#include "image/decode.h"
#include "image/decode_internal.h"

namespace tf {
namespace {

using image_detail::apply_orientation;
using image_detail::exif_orientation;

// EXIF orientation is applied by PIL's load_image only; the chat path (torchvision) ignores it.
Image must_decode(const std::vector<uint8_t>& bytes, DecodeMode mode = DecodeMode::pil) {
  auto r = decode_image(bytes, 0, {}, mode);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : Image{};
}

// A 3x2 image whose pixel (x, y) has red = 10 * x + y, green = 0.
Image corner_image() {
  Image im;
  im.width = 3;
  im.height = 2;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) im.rgb.insert(im.rgb.end(), {uint8_t(10 * x + y), 0, 0});
  return im;
}

uint8_t red_at(const Image& im, int x, int y) { return im.rgb[3 * (y * im.width + x)]; }

TEST(Exif, OrientationParsesBothByteOrders) {
  for (int o = 1; o <= 8; ++o) {
    for (bool be : {false, true}) {
      auto tiff = test::exif_orientation_tiff(o, be);
      EXPECT_EQ(exif_orientation(tiff), o);
      std::vector<uint8_t> with_prefix = {'E', 'x', 'i', 'f', 0, 0};
      with_prefix.insert(with_prefix.end(), tiff.begin(), tiff.end());
      EXPECT_EQ(exif_orientation(with_prefix), o);
    }
  }
  EXPECT_EQ(exif_orientation(std::vector<uint8_t>{'I', 'I', 42}), 1);  // truncated
  EXPECT_EQ(exif_orientation(std::vector<uint8_t>(40, 0xee)), 1);      // garbage
  auto far = test::exif_orientation_tiff(6, false);
  far[4] = 0xff;  // IFD offset past the end
  EXPECT_EQ(exif_orientation(far), 1);
}

TEST(Exif, TransposeGeometryMatchesPilOperations) {
  // Where the input's top-left corner (red 0) and top-right corner (red 20) land, by PIL's
  // definitions: FLIP_LEFT_RIGHT, ROTATE_180, FLIP_TOP_BOTTOM, TRANSPOSE (swap x and y),
  // ROTATE_270 (90 degrees clockwise), TRANSVERSE, ROTATE_90 (90 degrees counter-clockwise).
  const Image in = corner_image();
  struct Case {
    int o, w, h, tl_x, tl_y, tr_x, tr_y;
  };
  const Case cases[] = {
      {1, 3, 2, 0, 0, 2, 0}, {2, 3, 2, 2, 0, 0, 0}, {3, 3, 2, 2, 1, 0, 1}, {4, 3, 2, 0, 1, 2, 1},
      {5, 2, 3, 0, 0, 0, 2}, {6, 2, 3, 1, 0, 1, 2}, {7, 2, 3, 1, 2, 1, 0}, {8, 2, 3, 0, 2, 0, 0},
  };
  for (const Case& c : cases) {
    const Image out = apply_orientation(in, c.o);
    ASSERT_EQ(out.width, c.w) << c.o;
    ASSERT_EQ(out.height, c.h) << c.o;
    EXPECT_EQ(red_at(out, c.tl_x, c.tl_y), 0) << "orientation " << c.o;
    EXPECT_EQ(red_at(out, c.tr_x, c.tr_y), 20) << "orientation " << c.o;
  }
  // Unknown values leave the image alone.
  EXPECT_EQ(apply_orientation(in, 0).rgb, in.rgb);
  EXPECT_EQ(apply_orientation(in, 9).rgb, in.rgb);
}

TEST(Exif, JpegApp1OrientationIsApplied) {
  const int w = 24, h = 16;
  std::vector<uint8_t> rgb(w * h * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>((i * 37) & 0xff);
  const auto jpg = test::encode_jpeg(rgb, w, h, TJPF_RGB, TJSAMP_420, 90);
  const Image base = must_decode(jpg);
  for (int o = 1; o <= 8; ++o) {
    const Image got = must_decode(test::jpeg_with_exif(jpg, test::exif_orientation_tiff(o, o % 2 == 0)));
    const Image want = apply_orientation(base, o);
    EXPECT_EQ(got.width, want.width) << o;
    EXPECT_EQ(got.rgb, want.rgb) << o;
    const Image chat =
        must_decode(test::jpeg_with_exif(jpg, test::exif_orientation_tiff(o, false)), DecodeMode::chat);
    EXPECT_EQ(chat.rgb, base.rgb) << "chat path must ignore orientation " << o;
  }
}

TEST(Exif, PngExifChunkOrientationIsApplied) {
  test::PngSpec s = test::png_spec(5, 3);
  for (int i = 0; i < 45; ++i) s.rows.push_back(static_cast<uint8_t>(i * 5));
  const Image base = must_decode(test::encode_png(s));
  s.exif = test::exif_orientation_tiff(6, false);
  const Image got = must_decode(test::encode_png(s));
  EXPECT_EQ(got.width, 3);
  EXPECT_EQ(got.rgb, apply_orientation(base, 6).rgb);
}

// Wraps a simple-format WebP into the extended format with an EXIF chunk.
std::vector<uint8_t> webp_with_exif(const std::vector<uint8_t>& simple, int w, int h,
                                    const std::vector<uint8_t>& exif) {
  std::vector<uint8_t> body = {'W', 'E', 'B', 'P', 'V', 'P', '8', 'X', 10, 0, 0, 0, 0x08, 0, 0, 0};
  auto put24 = [&](int v) { body.insert(body.end(), {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16)}); };
  put24(w - 1);
  put24(h - 1);
  body.insert(body.end(), simple.begin() + 12, simple.end());
  const uint32_t n = static_cast<uint32_t>(exif.size());
  body.insert(body.end(),
              {'E', 'X', 'I', 'F', uint8_t(n), uint8_t(n >> 8), uint8_t(n >> 16), uint8_t(n >> 24)});
  body.insert(body.end(), exif.begin(), exif.end());
  if (n & 1) body.push_back(0);
  const uint32_t riff = static_cast<uint32_t>(body.size());
  std::vector<uint8_t> out = {
      'R', 'I', 'F', 'F', uint8_t(riff), uint8_t(riff >> 8), uint8_t(riff >> 16), uint8_t(riff >> 24)};
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

TEST(DecodeWebp, LosslessRoundTripDropsAlpha) {
  const int w = 17, h = 9;
  std::mt19937 rng(11);
  std::vector<uint8_t> rgba(w * h * 4);
  for (auto& v : rgba) v = static_cast<uint8_t>(rng());
  for (int i = 0; i < w * h; ++i) rgba[4 * i + 3] = 255;  // opaque: lossless keeps exact colours
  const Image im = must_decode(test::encode_webp_lossless_rgba(rgba, w, h));
  ASSERT_EQ(im.width, w);
  for (int i = 0; i < w * h; ++i)
    for (int c = 0; c < 3; ++c) ASSERT_EQ(im.rgb[3 * i + c], rgba[4 * i + c]);
}

TEST(DecodeWebp, LossyIsCloseAndExifOrientationApplies) {
  const int w = 32, h = 16;
  std::vector<uint8_t> rgb(w * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      rgb[3 * (y * w + x)] = static_cast<uint8_t>(x * 8);
      rgb[3 * (y * w + x) + 1] = static_cast<uint8_t>(y * 16);
      rgb[3 * (y * w + x) + 2] = 100;
    }
  const auto webp = test::encode_webp_lossy_rgb(rgb, w, h, 95);
  const Image base = must_decode(webp);
  for (size_t i = 0; i < rgb.size(); ++i) ASSERT_NEAR(base.rgb[i], rgb[i], 24);
  const Image rot = must_decode(webp_with_exif(webp, w, h, test::exif_orientation_tiff(8, true)));
  EXPECT_EQ(rot.width, h);
  EXPECT_EQ(rot.rgb, apply_orientation(base, 8).rgb);
}

TEST(DecodeWebp, LossyAlphaChatAndPilAgree) {
  // torchvision decodes with WebPDecodeRGB, Pillow through an RGBA canvas: the colour samples must be the
  // same (non-premultiplied), whatever the alpha.
  const int w = 24, h = 20;
  std::mt19937 rng(5);
  std::vector<uint8_t> rgba(w * h * 4);
  for (auto& v : rgba) v = static_cast<uint8_t>(rng());
  const auto webp = test::encode_webp_lossy_rgba(rgba, w, h, 80);
  const Image chat = must_decode(webp, DecodeMode::chat);
  const Image pil = must_decode(webp, DecodeMode::pil);
  EXPECT_EQ(chat.rgb, pil.rgb);
}

}  // namespace
}  // namespace tf
