// PNG through libpng: torchvision's decode_png(mode=RGB) transforms (chat mode), or the unpacking
// Pillow's PngImagePlugin chooses for each (colour type, bit depth) (pil mode); see decode.h.
#include <png.h>

#include <csetjmp>
#include <cstring>

#include "image/decode_internal.h"

namespace tf::image_detail {
namespace {

struct MemReader {
  const uint8_t* data;
  size_t size;
  size_t pos;
};

void read_fn(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<MemReader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "truncated");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

void error_fn(png_structp png, png_const_charp) { png_longjmp(png, 1); }
void warning_fn(png_structp, png_const_charp) {}

// Everything the setjmp-protected code touches lives here, constructed before setjmp, so a
// longjmp never skips a destructor.
struct PngState {
  MemReader reader{};
  png_structp png = nullptr;
  png_infop info = nullptr;
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, channels = 0;
  int out_depth = 0;  // sample depth after the libpng transforms
  DecodeMode mode = DecodeMode::chat;
  size_t rowbytes = 0;
  std::vector<uint8_t> raw;  // decoded rows after libpng transforms
  std::vector<png_bytep> rows;
  std::vector<uint8_t> palette;  // 256 * 3
  std::vector<uint8_t> exif;
  bool too_large = false;
};

void grab_exif(PngState& s) {
#ifdef PNG_eXIf_SUPPORTED
  png_uint_32 n = 0;
  png_bytep data = nullptr;
  if (s.exif.empty() && png_get_eXIf_1(s.png, s.info, &n, &data) != 0 && data != nullptr && n > 0)
    s.exif.assign(data, data + n);
#endif
}

bool read_header_and_rows(PngState& s, const ImageLimits& limits) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_read_fn(s.png, &s.reader, read_fn);
  png_set_crc_action(s.png, PNG_CRC_DEFAULT, PNG_CRC_WARN_DISCARD);
  png_read_info(s.png, s.info);
  int interlace = 0;
  png_get_IHDR(s.png, s.info, &s.width, &s.height, &s.bit_depth, &s.color_type, &interlace, nullptr, nullptr);
  if (!within_limits(s.width, s.height, limits)) {
    s.too_large = s.width > 0 && s.height > 0;
    return false;
  }
  grab_exif(s);
  switch (s.color_type) {
    case PNG_COLOR_TYPE_PALETTE: {
      if (s.mode == DecodeMode::chat) {  // torchvision: png_set_palette_to_rgb, then strip the alpha
        png_set_palette_to_rgb(s.png);
        break;
      }
      png_set_packing(s.png);  // one index per byte; the palette lookup is ours (Pillow's ramp default)
      s.palette.resize(256 * 3);
      for (int i = 0; i < 256; ++i)
        s.palette[3 * i] = s.palette[3 * i + 1] = s.palette[3 * i + 2] = uint8_t(i);
      png_colorp pal = nullptr;
      int n = 0;
      if (png_get_PLTE(s.png, s.info, &pal, &n) != 0 && pal != nullptr) {
        for (int i = 0; i < n && i < 256; ++i) {
          s.palette[3 * i] = pal[i].red;
          s.palette[3 * i + 1] = pal[i].green;
          s.palette[3 * i + 2] = pal[i].blue;
        }
      }
      break;
    }
    case PNG_COLOR_TYPE_GRAY:
      if (s.bit_depth < 8) png_set_expand_gray_1_2_4_to_8(s.png);  // bit replication = PIL's 1/L;2/L;4
      break;                                                       // 16-bit stays 16 (PIL "I;16")
    default:
      // pil: the high byte, like PIL's ;16B unpackers; chat: torchvision keeps 16-bit samples
      if (s.bit_depth == 16 && s.mode == DecodeMode::pil) png_set_strip_16(s.png);
      break;
  }
  png_set_interlace_handling(s.png);
  png_read_update_info(s.png, s.info);
  s.rowbytes = png_get_rowbytes(s.png, s.info);
  s.channels = png_get_channels(s.png, s.info);
  s.out_depth = png_get_bit_depth(s.png, s.info);
  s.raw.resize(s.rowbytes * s.height);
  s.rows.resize(s.height);
  for (png_uint_32 y = 0; y < s.height; ++y) s.rows[y] = s.raw.data() + y * s.rowbytes;
  png_read_image(s.png, s.rows.data());
  return true;
}

// Chunks after the image data (a late eXIf); Pillow stops quietly at a broken tail, so do we.
void read_tail(PngState& s) {
  if (setjmp(png_jmpbuf(s.png))) return;
  png_read_end(s.png, s.info);
  grab_exif(s);
}

}  // namespace

DecodeResult decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits, DecodeMode mode) {
  PngState s;
  s.mode = mode;
  s.reader = {bytes.data(), bytes.size(), 0};
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, error_fn, warning_fn);
  if (s.png == nullptr) return fail_corrupt();
  s.info = png_create_info_struct(s.png);
  if (s.info == nullptr) {
    png_destroy_read_struct(&s.png, nullptr, nullptr);
    return fail_corrupt();
  }
  const bool ok = read_header_and_rows(s, limits);
  if (ok) read_tail(s);
  png_destroy_read_struct(&s.png, &s.info, nullptr);
  if (!ok) return s.too_large ? fail_too_large(s.width, s.height) : fail_corrupt();

  DecodeResult r;
  r.image.width = static_cast<int>(s.width);
  r.image.height = static_cast<int>(s.height);
  const size_t n = static_cast<size_t>(s.width) * s.height;
  const int ch = s.channels;
  const bool manual_palette = s.color_type == PNG_COLOR_TYPE_PALETTE && mode == DecodeMode::pil;
  if (s.out_depth == 16 && mode == DecodeMode::chat) {
    r.image.bit_depth = 16;
    r.image.rgb16.resize(n * 3);
    uint16_t* out = r.image.rgb16.data();
    for (png_uint_32 y = 0; y < s.height; ++y) {
      const uint8_t* row = s.rows[y];
      for (png_uint_32 x = 0; x < s.width; ++x, out += 3) {
        for (int c = 0; c < 3; ++c) {
          const int k = ch <= 2 ? 0 : c;  // gray (+alpha) replicated; alpha dropped
          const uint8_t* p = row + 2 * (static_cast<size_t>(ch) * x + k);
          out[c] = static_cast<uint16_t>((p[0] << 8) | p[1]);  // big-endian sample
        }
      }
    }
  } else {
    r.image.rgb.resize(n * 3);
    uint8_t* out = r.image.rgb.data();
    for (png_uint_32 y = 0; y < s.height; ++y) {
      const uint8_t* row = s.rows[y];
      for (png_uint_32 x = 0; x < s.width; ++x, out += 3) {
        if (manual_palette) {
          std::memcpy(out, &s.palette[3 * row[x]], 3);
        } else if (s.out_depth == 16) {  // pil, 16-bit gray ("I;16")
          const unsigned v = (row[2 * x] << 8) | row[2 * x + 1];
          out[0] = out[1] = out[2] = v > 255 ? 255 : uint8_t(v);  // Pillow's I16_RGB saturates
        } else if (ch <= 2) {
          out[0] = out[1] = out[2] = row[ch * x];  // L or LA: gray replicated, alpha dropped
        } else {
          std::memcpy(out, row + ch * x, 3);  // RGB or RGBA: alpha dropped
        }
      }
    }
  }
  r.exif = std::move(s.exif);
  r.ok = true;
  return r;
}

}  // namespace tf::image_detail
