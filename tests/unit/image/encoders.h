// Test-only encoders (libpng, TurboJPEG, libwebp) to build inputs for decode round trips.
#pragma once
#include <png.h>
#include <turbojpeg.h>
#include <webp/encode.h>

#include <csetjmp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tf::test {

struct PngSpec {
  int width = 0, height = 0;
  int color_type = PNG_COLOR_TYPE_RGB;
  int bit_depth = 8;
  bool interlace = false;
  std::vector<uint8_t> rows;       // packed rows exactly as PNG stores them (big-endian 16-bit)
  std::vector<png_color> palette;  // PLTE entries
  std::vector<uint8_t> trns;       // palette alpha entries
  std::vector<uint8_t> exif;       // eXIf payload
};

inline PngSpec png_spec(int w, int h, int color_type = PNG_COLOR_TYPE_RGB, int bit_depth = 8) {
  PngSpec s;
  s.width = w;
  s.height = h;
  s.color_type = color_type;
  s.bit_depth = bit_depth;
  return s;
}

inline void png_write_to_vector(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}

inline size_t png_rowbytes(const PngSpec& s) {
  int ch = 1;
  if (s.color_type == PNG_COLOR_TYPE_RGB) ch = 3;
  if (s.color_type == PNG_COLOR_TYPE_RGBA) ch = 4;
  if (s.color_type == PNG_COLOR_TYPE_GRAY_ALPHA) ch = 2;
  return (static_cast<size_t>(s.width) * ch * s.bit_depth + 7) / 8;
}

inline bool encode_png_into(const PngSpec& s, std::vector<uint8_t>* out) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep> rows(s.height);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, out, png_write_to_vector, nullptr);
  png_set_IHDR(png, info, s.width, s.height, s.bit_depth, s.color_type,
               s.interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!s.palette.empty()) png_set_PLTE(png, info, s.palette.data(), static_cast<int>(s.palette.size()));
  if (!s.trns.empty()) png_set_tRNS(png, info, s.trns.data(), static_cast<int>(s.trns.size()), nullptr);
  if (!s.exif.empty())
    png_set_eXIf_1(png, info, static_cast<png_uint_32>(s.exif.size()), const_cast<png_bytep>(s.exif.data()));
  png_write_info(png, info);
  const size_t rb = png_rowbytes(s);
  for (int y = 0; y < s.height; ++y) rows[y] = const_cast<png_bytep>(s.rows.data() + y * rb);
  png_write_image(png, rows.data());
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return true;
}

inline std::vector<uint8_t> encode_png(const PngSpec& s) {
  std::vector<uint8_t> out;
  if (!encode_png_into(s, &out)) out.clear();
  return out;
}

// pixel_format: TJPF_RGB, TJPF_GRAY or TJPF_CMYK; subsamp: TJSAMP_*.
inline std::vector<uint8_t> encode_jpeg(const std::vector<uint8_t>& pixels, int w, int h, int pixel_format,
                                        int subsamp, int quality) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  std::vector<uint8_t> out;
  if (tjCompress2(tj, pixels.data(), w, 0, h, pixel_format, &buf, &size, subsamp, quality, 0) == 0)
    out.assign(buf, buf + size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

// Inserts an APP1 "Exif\0\0" segment right after SOI.
inline std::vector<uint8_t> jpeg_with_exif(const std::vector<uint8_t>& jpeg,
                                           const std::vector<uint8_t>& tiff) {
  std::vector<uint8_t> out(jpeg.begin(), jpeg.begin() + 2);
  const size_t len = 2 + 6 + tiff.size();
  out.insert(out.end(), {0xff, 0xe1, uint8_t(len >> 8), uint8_t(len & 0xff), 'E', 'x', 'i', 'f', 0, 0});
  out.insert(out.end(), tiff.begin(), tiff.end());
  out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
  return out;
}

// A minimal TIFF/EXIF block with one IFD0 entry: Orientation (0x0112), SHORT, count 1.
inline std::vector<uint8_t> exif_orientation_tiff(int orientation, bool big_endian) {
  if (big_endian)
    return {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, uint8_t(orientation),
            0,   0,   0, 0,  0, 0};
  return {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, uint8_t(orientation),
          0,   0,   0,  0, 0, 0, 0};
}

inline std::vector<uint8_t> encode_webp_lossless_rgba(const std::vector<uint8_t>& rgba, int w, int h) {
  uint8_t* buf = nullptr;
  const size_t n = WebPEncodeLosslessRGBA(rgba.data(), w, h, w * 4, &buf);
  std::vector<uint8_t> out(buf, buf + n);
  WebPFree(buf);
  return out;
}

inline std::vector<uint8_t> encode_webp_lossy_rgba(const std::vector<uint8_t>& rgba, int w, int h, float q) {
  uint8_t* buf = nullptr;
  const size_t n = WebPEncodeRGBA(rgba.data(), w, h, w * 4, q, &buf);
  std::vector<uint8_t> out(buf, buf + n);
  WebPFree(buf);
  return out;
}

inline std::vector<uint8_t> encode_webp_lossy_rgb(const std::vector<uint8_t>& rgb, int w, int h, float q) {
  uint8_t* buf = nullptr;
  const size_t n = WebPEncodeRGB(rgb.data(), w, h, w * 3, q, &buf);
  std::vector<uint8_t> out(buf, buf + n);
  WebPFree(buf);
  return out;
}

}  // namespace tf::test
