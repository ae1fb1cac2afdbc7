// PDF pages as images, rendered in-process with Debian's poppler (the C++ API, Splash rasteriser):
// each page's crop box, with its /Rotate applied, drawn on white at the pixel size the caller asks
// for, so a page can go straight to a family processor's own size (its resize is then the identity).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "image/image.h"

namespace tf {

struct PdfPageSize {
  double width_pt = 0, height_pt = 0;  // as shown: the crop box with /Rotate applied (1 pt = 1/72 in)
  int rotate = 0;                      // the page's /Rotate: 0, 90, 180 or 270
};

class PdfDocument {
 public:
  // Opens a PDF held in memory. Refusals are one line meant for the user: "encrypted (needs a
  // password)", "damaged: not a readable PDF", "has no pages".
  static Expected<std::unique_ptr<PdfDocument>> open(std::vector<uint8_t> bytes);
  ~PdfDocument();
  PdfDocument(const PdfDocument&) = delete;
  PdfDocument& operator=(const PdfDocument&) = delete;

  int n_pages() const;
  PdfPageSize page_size(int index) const;  // index from 0
  // The page at exactly width x height pixels (the x and y resolutions are chosen independently, so
  // a size that rounds differently in each direction is met exactly). 8-bit RGB, white paper.
  Expected<Image> render(int index, int width, int height) const;

 private:
  PdfDocument() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True when the bytes carry a PDF header ("%PDF-") in their first 1024 bytes, where readers look for it.
bool looks_like_pdf(const std::vector<uint8_t>& bytes);

}  // namespace tf
