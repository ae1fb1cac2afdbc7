// EXIF orientation: the IFD0 tag 0x0112 as Pillow's Exif reads it, and the eight transposes of
// ImageOps.exif_transpose (2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE,
// 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90; PIL's rotations are counter-clockwise).
#include <cstring>
#include <vector>

#include "image/decode_internal.h"

namespace tf::image_detail {
namespace {

struct Reader {
  std::span<const uint8_t> d;
  bool little = true;
  bool has(size_t off, size_t n) const { return off <= d.size() && n <= d.size() - off; }
  uint32_t u16(size_t off) const { return little ? d[off] | (d[off + 1] << 8) : (d[off] << 8) | d[off + 1]; }
  uint32_t u32(size_t off) const {
    return little ? d[off] | (d[off + 1] << 8) | (d[off + 2] << 16) | (uint32_t(d[off + 3]) << 24)
                  : (uint32_t(d[off]) << 24) | (d[off + 1] << 16) | (d[off + 2] << 8) | d[off + 3];
  }
};

}  // namespace

int exif_orientation(std::span<const uint8_t> exif) {
  if (exif.size() >= 6 && std::memcmp(exif.data(), "Exif\0\0", 6) == 0) exif = exif.subspan(6);
  Reader r{exif};
  if (!r.has(0, 8)) return 1;
  if (exif[0] == 'I' && exif[1] == 'I') {
    r.little = true;
  } else if (exif[0] == 'M' && exif[1] == 'M') {
    r.little = false;
  } else {
    return 1;
  }
  const size_t ifd = r.u32(4);
  if (!r.has(ifd, 2)) return 1;
  const uint32_t n = r.u16(ifd);
  for (uint32_t i = 0; i < n; ++i) {
    const size_t e = ifd + 2 + 12 * static_cast<size_t>(i);
    if (!r.has(e, 12)) return 1;
    if (r.u16(e) != 0x0112) continue;
    const uint32_t type = r.u16(e + 2), count = r.u32(e + 4);
    if (count != 1) return 1;  // Pillow yields a tuple, which matches no orientation
    switch (type) {
      case 1:
      case 6:
        return exif[e + 8];  // BYTE, SBYTE
      case 3:
      case 8:
        return static_cast<int>(r.u16(e + 8));  // SHORT, SSHORT
      case 4:
      case 9:
        return static_cast<int>(r.u32(e + 8));  // LONG, SLONG
      default:
        return 1;
    }
  }
  return 1;
}

namespace {

template <class T>
std::vector<T> transpose_samples(const std::vector<T>& in, int w, int h, int out_w, int out_h,
                                 int orientation) {
  std::vector<T> out(in.size());
  for (int y = 0; y < out_h; ++y) {
    for (int x = 0; x < out_w; ++x) {
      int sx = x, sy = y;  // source column and row in the input
      switch (orientation) {
        case 2:
          sx = w - 1 - x;
          break;
        case 3:
          sx = w - 1 - x;
          sy = h - 1 - y;
          break;
        case 4:
          sy = h - 1 - y;
          break;
        case 5:
          sx = y;
          sy = x;
          break;
        case 6:
          sx = y;
          sy = h - 1 - x;
          break;
        case 7:
          sx = w - 1 - y;
          sy = h - 1 - x;
          break;
        case 8:
          sx = w - 1 - y;
          sy = x;
          break;
        default:
          break;
      }
      const size_t s = (static_cast<size_t>(sy) * w + sx) * 3;
      const size_t d = (static_cast<size_t>(y) * out_w + x) * 3;
      out[d] = in[s];
      out[d + 1] = in[s + 1];
      out[d + 2] = in[s + 2];
    }
  }
  return out;
}

}  // namespace

Image apply_orientation(Image in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const bool swap = orientation >= 5;
  Image out;
  out.width = swap ? in.height : in.width;
  out.height = swap ? in.width : in.height;
  out.bit_depth = in.bit_depth;
  if (in.bit_depth == 16) {
    out.rgb16 = transpose_samples(in.rgb16, in.width, in.height, out.width, out.height, orientation);
  } else {
    out.rgb = transpose_samples(in.rgb, in.width, in.height, out.width, out.height, orientation);
  }
  return out;
}

}  // namespace tf::image_detail
