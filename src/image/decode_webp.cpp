// WebP through libwebp. Chat mode: torchvision's decode_webp(mode=RGB) = WebPDecodeRGB, animations
// refused. Pil mode: Pillow decodes through WebPAnimDecoder, whose first (key) frame is a plain
// WebPDecode into an RGBA canvas, so RGBA-then-drop-alpha gives Pillow's RGB values (animations are
// refused here too; Pillow would take the first frame).
#include <webp/decode.h>

#include <cstring>

#include "image/decode_internal.h"

namespace tf::image_detail {
namespace {

// The payload of the first "EXIF" chunk of an extended (VP8X) file.
std::vector<uint8_t> find_exif(std::span<const uint8_t> b) {
  size_t p = 12;
  while (p + 8 <= b.size()) {
    const uint32_t len = b[p + 4] | (b[p + 5] << 8) | (b[p + 6] << 16) | (uint32_t(b[p + 7]) << 24);
    if (len > b.size() - p - 8) return {};
    if (std::memcmp(&b[p], "EXIF", 4) == 0) return {b.begin() + p + 8, b.begin() + p + 8 + len};
    p += 8 + static_cast<size_t>(len) + (len & 1);
  }
  return {};
}

}  // namespace

DecodeResult decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits, DecodeMode mode) {
  WebPBitstreamFeatures f;
  if (WebPGetFeatures(bytes.data(), bytes.size(), &f) != VP8_STATUS_OK) return fail_corrupt();
  if (!within_limits(f.width, f.height, limits))
    return (f.width > 0 && f.height > 0) ? fail_too_large(f.width, f.height) : fail_corrupt();
  if (f.has_animation) return fail_corrupt();
  const size_t n = static_cast<size_t>(f.width) * f.height;
  DecodeResult r;
  r.image.width = f.width;
  r.image.height = f.height;
  r.image.rgb.resize(n * 3);
  if (mode == DecodeMode::chat) {
    if (WebPDecodeRGBInto(bytes.data(), bytes.size(), r.image.rgb.data(), r.image.rgb.size(), f.width * 3) ==
        nullptr)
      return fail_corrupt();
  } else {
    std::vector<uint8_t> rgba(n * 4);
    if (WebPDecodeRGBAInto(bytes.data(), bytes.size(), rgba.data(), rgba.size(), f.width * 4) == nullptr)
      return fail_corrupt();
    for (size_t i = 0; i < n; ++i) std::memcpy(&r.image.rgb[3 * i], &rgba[4 * i], 3);
  }
  r.exif = find_exif(bytes);
  r.ok = true;
  return r;
}

}  // namespace tf::image_detail
