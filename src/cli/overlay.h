// `tensorfold ocr --overlay DIR`: the page image with its grounding boxes drawn, each in its own
// colour with its label above it (a built-in 3x5 pixel font: letters, digits and a little
// punctuation, upper-cased; other characters are drawn as '?').
#pragma once
#include <vector>

#include "cli/grounding.h"
#include "image/image.h"

namespace tf::cli {

// The colour box k is drawn in (RGB), so tests can find it in the written PNG.
void overlay_color(size_t k, uint8_t rgb[3]);

// Draws every box (outline `thickness` pixels, inside its rectangle) and its label onto `page`.
void draw_overlay(Image& page, const std::vector<GroundingBox>& boxes);

}  // namespace tf::cli
