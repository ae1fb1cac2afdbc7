#include "image/encode_png.h"

#include <png.h>

#include <csetjmp>

namespace tf {
namespace {

void write_fn(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}
void flush_fn(png_structp) {}
void error_fn(png_structp png, png_const_charp) { png_longjmp(png, 1); }
void warning_fn(png_structp, png_const_charp) {}

// Everything the setjmp-protected code touches is constructed before setjmp (no destructor skipped).
struct PngWriteState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<png_bytep> rows;
  std::vector<uint8_t> out;
};

bool write_all(PngWriteState& s, const Image& im, int level) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_write_fn(s.png, &s.out, write_fn, flush_fn);
  png_set_compression_level(s.png, level);
  if (level <= 1) png_set_filter(s.png, 0, PNG_FILTER_NONE);
  png_set_IHDR(s.png, s.info, static_cast<png_uint_32>(im.width), static_cast<png_uint_32>(im.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_rows(s.png, s.info, s.rows.data());
  png_write_png(s.png, s.info, PNG_TRANSFORM_IDENTITY, nullptr);
  return true;
}

}  // namespace

Expected<std::vector<uint8_t>> encode_png(const Image& im, int level) {
  if (im.bit_depth != 8 || im.width <= 0 || im.height <= 0 ||
      im.rgb.size() != static_cast<size_t>(im.width) * im.height * 3)
    return make_error("encode_png: expects a non-empty 8-bit RGB image");
  PngWriteState s;
  s.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, error_fn, warning_fn);
  if (!s.png) return make_error("encode_png: libpng could not start");
  s.info = png_create_info_struct(s.png);
  s.rows.resize(im.height);
  for (int y = 0; y < im.height; ++y)
    s.rows[y] = const_cast<png_bytep>(im.rgb.data() + static_cast<size_t>(y) * im.width * 3);
  const bool ok = s.info && write_all(s, im, level < 0 ? 0 : level > 9 ? 9 : level);
  png_destroy_write_struct(&s.png, &s.info);
  if (!ok) return make_error("encode_png: libpng failed");
  return std::move(s.out);
}

}  // namespace tf
