#include "image/decode.h"

#include <cstring>
#include <string>

#include "image/decode_internal.h"

namespace tf {

std::vector<uint8_t> image_to_chw(const Image& image) {
  const size_t plane = static_cast<size_t>(image.width) * image.height;
  std::vector<uint8_t> chw(plane * 3);  // [3, H, W]
  for (size_t i = 0; i < plane; ++i) {
    chw[i] = image.rgb[3 * i];
    chw[plane + i] = image.rgb[3 * i + 1];
    chw[2 * plane + i] = image.rgb[3 * i + 2];
  }
  return chw;
}

std::vector<uint16_t> image_to_chw16(const Image& image) {
  const size_t plane = static_cast<size_t>(image.width) * image.height;
  std::vector<uint16_t> chw(plane * 3);  // [3, H, W]
  for (size_t i = 0; i < plane; ++i) {
    chw[i] = image.rgb16[3 * i];
    chw[plane + i] = image.rgb16[3 * i + 1];
    chw[2 * plane + i] = image.rgb16[3 * i + 2];
  }
  return chw;
}

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) return ImageFormat::png;
  if (b.size() >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return ImageFormat::jpeg;
  if (b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 && std::memcmp(b.data() + 8, "WEBP", 4) == 0)
    return ImageFormat::webp;
  return ImageFormat::unknown;
}

std::string_view image_format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::png:
      return "PNG";
    case ImageFormat::jpeg:
      return "JPEG";
    case ImageFormat::webp:
      return "WebP";
    case ImageFormat::unknown:
      break;
  }
  return "unknown";
}

Expected<Image> decode_image(std::span<const uint8_t> bytes, int index, ImageLimits limits, DecodeMode mode) {
  using namespace image_detail;
  const std::string who = "image " + std::to_string(index);
  const ImageFormat format = sniff_image_format(bytes);
  DecodeResult r;
  switch (format) {
    case ImageFormat::png:
      r = decode_png(bytes, limits, mode);
      break;
    case ImageFormat::jpeg:
      r = decode_jpeg(bytes, limits);
      break;
    case ImageFormat::webp:
      r = decode_webp(bytes, limits, mode);
      break;
    case ImageFormat::unknown:
      return Error{who + " is not PNG, JPEG or WebP; send one of those"};
  }
  if (!r.ok) {
    if (r.error.kind == DecodeFailure::too_large) {
      return Error{who + " is " + std::to_string(r.error.width) + "x" + std::to_string(r.error.height) +
                   " pixels, over the limit of " + std::to_string(limits.max_pixels) + " pixels (and " +
                   std::to_string(limits.max_side) + " per side); send a smaller image"};
    }
    return Error{who + " could not be decoded; send PNG, JPEG or WebP"};
  }
  // torchvision.io.decode_image defaults to apply_exif_orientation=False; PIL's load_image transposes.
  if (mode == DecodeMode::chat || r.exif.empty()) return std::move(r.image);
  return apply_orientation(std::move(r.image), exif_orientation(r.exif));
}

}  // namespace tf
