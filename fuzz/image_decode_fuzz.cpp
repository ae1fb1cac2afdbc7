// libFuzzer target: decode_image must never crash, leak or read out of bounds, whatever the bytes;
// a success must describe a consistent image within the limits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "image/decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tf::ImageLimits limits;
  limits.max_pixels = 256 * 1024;  // keep each run fast; bigger headers must be refused cleanly
  for (tf::DecodeMode mode : {tf::DecodeMode::chat, tf::DecodeMode::pil}) {
    auto r = tf::decode_image(std::span<const uint8_t>(data, size), 0, limits, mode);
    if (r.ok()) {
      const tf::Image& im = r.value();
      const int64_t n = static_cast<int64_t>(im.width) * im.height;
      const size_t samples = im.bit_depth == 16 ? im.rgb16.size() : im.rgb.size();
      if (im.width <= 0 || im.height <= 0 || n > limits.max_pixels || samples != static_cast<size_t>(n) * 3 ||
          (mode == tf::DecodeMode::pil && im.bit_depth != 8))
        std::abort();
    } else if (r.error().message.empty()) {
      std::abort();
    }
  }
  return 0;
}
