// Per-format decoders behind decode_image(). Each returns the RGB image before EXIF orientation
// and, through *exif, the raw EXIF payload it found (TIFF header first, "Exif\0\0" stripped).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "image/decode.h"
#include "image/image.h"

namespace tf::image_detail {

// What a decoder reports up; decode_image turns it into the user-facing one-line message.
enum class DecodeFailure { corrupt, too_large };

struct DecodeError {
  DecodeFailure kind = DecodeFailure::corrupt;
  int64_t width = 0, height = 0;  // for too_large
};

struct DecodeResult {
  Image image;
  std::vector<uint8_t> exif;
  bool ok = false;
  DecodeError error;
};

DecodeResult decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits, DecodeMode mode);
DecodeResult decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits);
DecodeResult decode_webp(std::span<const uint8_t> bytes, const ImageLimits& limits, DecodeMode mode);

// True when (w, h) fits the limits; used by every decoder before allocating pixels.
inline bool within_limits(int64_t w, int64_t h, const ImageLimits& limits) {
  return w > 0 && h > 0 && w <= limits.max_side && h <= limits.max_side && w * h <= limits.max_pixels;
}

inline DecodeResult fail_corrupt() { return DecodeResult{}; }
inline DecodeResult fail_too_large(int64_t w, int64_t h) {
  DecodeResult r;
  r.error = {DecodeFailure::too_large, w, h};
  return r;
}

// EXIF orientation tag (0x0112) of IFD0, or 1 when absent or unreadable. Accepts the payload with
// or without the "Exif\0\0" prefix, as Pillow's Exif.load does.
int exif_orientation(std::span<const uint8_t> exif);

// ImageOps.exif_transpose's geometric part for orientation 1..8 (others: unchanged); 8- or 16-bit.
Image apply_orientation(Image image, int orientation);

}  // namespace tf::image_detail
