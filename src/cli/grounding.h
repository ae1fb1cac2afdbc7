// LightOnOCR-3 grounding output: `![label](x1,y1,x2,y2)` references, coordinates normalised to
// 0-1000 over the image the model saw, parsed into boxes in page pixels. The text itself is never
// changed: a reference that does not parse (unbalanced brackets, not four numbers, out of range,
// cut off by the token limit) stays as text and is counted.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace tf::cli {

struct GroundingBox {
  std::string label;
  double norm[4] = {0, 0, 0, 0};       // x1, y1, x2, y2 as written (0-1000)
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // page pixels, x2/y2 exclusive, inside [0, width] x [0, height]
  size_t offset = 0;                   // byte offset of the "![" in the text
};

struct Grounding {
  std::vector<GroundingBox> boxes;
  int n_malformed = 0;  // "![" that did not start a well-formed reference
};

// width/height: the page image's size in pixels (the normalised coordinates scale to it).
Grounding parse_grounding(std::string_view text, int width, int height);

}  // namespace tf::cli
