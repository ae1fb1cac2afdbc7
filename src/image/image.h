// Decoded images: 8-bit RGB, row-major, interleaved (what PIL's convert("RGB") holds), plus the
// limits a decoder enforces before it allocates.
#pragma once
#include <cstdint>
#include <vector>

namespace tf {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]
};

struct ImageLimits {
  // PIL raises DecompressionBombError above 2 * Image.MAX_IMAGE_PIXELS (2 * 89478485); a server wants
  // a smaller default so one request cannot take gigabytes.
  int64_t max_pixels = 64LL * 1024 * 1024;
  int max_side = 65535;
};

// [3, H, W] uint8 planes from the interleaved image (torchvision's pil_to_tensor layout).
std::vector<uint8_t> image_to_chw(const Image& image);

}  // namespace tf
