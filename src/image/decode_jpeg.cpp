// JPEG through the TurboJPEG API. Flags 0 keep libjpeg's defaults, which are PIL's: the accurate
// integer IDCT (JDCT_ISLOW) and fancy (triangular) chroma upsampling.
#include <turbojpeg.h>

#include <cstring>
#include <string_view>

#include "image/decode_internal.h"

namespace tf::image_detail {
namespace {

// The first APP1 "Exif\0\0" segment before the first scan (Pillow keeps the first one it sees).
std::vector<uint8_t> find_exif(std::span<const uint8_t> b) {
  size_t p = 2;
  while (p + 4 <= b.size()) {
    if (b[p] != 0xff) return {};
    const uint8_t marker = b[p + 1];
    if (marker == 0xff) {  // fill byte
      ++p;
      continue;
    }
    if (marker == 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker == 0x01) {
      p += 2;
      continue;
    }
    if (marker == 0xda || marker == 0xd9) return {};  // start of scan / end of image
    const size_t len = (b[p + 2] << 8) | b[p + 3];
    if (len < 2 || p + 2 + len > b.size()) return {};
    if (marker == 0xe1 && len >= 8 && std::memcmp(&b[p + 4], "Exif\0\0", 6) == 0)
      return {b.begin() + p + 4, b.begin() + p + 2 + len};
    p += 2 + len;
  }
  return {};
}

struct TjHandle {
  tjhandle h = tjInitDecompress();
  ~TjHandle() {
    if (h != nullptr) tjDestroy(h);
  }
};

// libjpeg warnings do not stop PIL, except running out of data: PIL then raises "image file is
// truncated". TurboJPEG reports both as a -1 with TJERR_WARNING.
bool acceptable(tjhandle h, int rc) {
  if (rc == 0) return true;
  if (tjGetErrorCode(h) != TJERR_WARNING) return false;
  const std::string_view msg = tjGetErrorStr2(h);
  return msg.find("Premature end") == std::string_view::npos;
}

}  // namespace

DecodeResult decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  TjHandle tj;
  if (tj.h == nullptr) return fail_corrupt();
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  auto* src = const_cast<unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  if (tjDecompressHeader3(tj.h, src, size, &w, &h, &subsamp, &colorspace) != 0) return fail_corrupt();
  if (!within_limits(w, h, limits)) return (w > 0 && h > 0) ? fail_too_large(w, h) : fail_corrupt();

  DecodeResult r;
  r.image.width = w;
  r.image.height = h;
  const size_t n = static_cast<size_t>(w) * h;
  r.image.rgb.resize(n * 3);
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    std::vector<uint8_t> cmyk(n * 4);
    if (!acceptable(tj.h, tjDecompress2(tj.h, src, size, cmyk.data(), w, 0, h, TJPF_CMYK, 0)))
      return fail_corrupt();
    // PIL reads CMYK JPEGs as "CMYK;I" (Adobe's inverted samples), then cmyk2rgb:
    // out = clip(nk - muldiv255(c, nk)) with nk = 255 - k and muldiv255(a, b) = ((t >> 8) + t) >> 8,
    // t = a * b + 128.
    for (size_t i = 0; i < n; ++i) {
      const int nk = cmyk[4 * i + 3];  // 255 - (255 - k_raw)
      for (int c = 0; c < 3; ++c) {
        const int inv = 255 - cmyk[4 * i + c];
        const int t = inv * nk + 128;
        const int v = nk - (((t >> 8) + t) >> 8);
        r.image.rgb[3 * i + c] = static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
      }
    }
  } else if (colorspace == TJCS_GRAY) {
    std::vector<uint8_t> gray(n);
    if (!acceptable(tj.h, tjDecompress2(tj.h, src, size, gray.data(), w, 0, h, TJPF_GRAY, 0)))
      return fail_corrupt();
    for (size_t i = 0; i < n; ++i)
      r.image.rgb[3 * i] = r.image.rgb[3 * i + 1] = r.image.rgb[3 * i + 2] = gray[i];
  } else {
    if (!acceptable(tj.h, tjDecompress2(tj.h, src, size, r.image.rgb.data(), w, 0, h, TJPF_RGB, 0)))
      return fail_corrupt();
  }
  r.exif = find_exif(bytes);
  r.ok = true;
  return r;
}

}  // namespace tf::image_detail
