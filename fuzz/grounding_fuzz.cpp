// libFuzzer target: the grounding parser of `tensorfold ocr --grounding` on arbitrary model output, and
// the overlay drawn from what it finds. Model output is untrusted text: parsing never crashes, every box
// lies on the page, and drawing stays inside the image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cli/grounding.h"
#include "cli/overlay.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int w = 1 + data[0] % 97, h = 1 + data[1] % 89;  // small pages keep the overlay cheap
  std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  tf::cli::Grounding g = tf::cli::parse_grounding(text, w, h);
  for (const auto& b : g.boxes)
    if (!(0 <= b.x1 && b.x1 <= b.x2 && b.x2 <= w && 0 <= b.y1 && b.y1 <= b.y2 && b.y2 <= h) ||
        text.substr(b.offset, 2) != "![")
      std::abort();
  tf::Image page;
  page.width = w;
  page.height = h;
  page.rgb.assign(static_cast<size_t>(w) * h * 3, 255);
  tf::cli::draw_overlay(page, g.boxes);
  if (page.rgb.size() != static_cast<size_t>(w) * h * 3) std::abort();
  return 0;
}
