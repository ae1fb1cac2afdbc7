// What `tensorfold ocr` reads: INPUT arguments (image files, PDFs, directories walked for both in
// sorted order, "-" for stdin) turned into documents of pages, the --pages selection, and the pixel
// size each PDF page is rendered at (the family processor's own size by default, so its resize is
// the identity; --dpi renders at a resolution instead and leaves the resize to the processor).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "image/pdf.h"

namespace tf::cli {

struct OcrDocument {
  std::string input;  // the path as found ("-" for stdin)
  std::string name;   // output base name (<name>.md / <name>.jsonl), unique within the run
  bool is_pdf = false;
  std::vector<uint8_t> image_bytes;  // an image document's encoded bytes (one page)
  int image_width = 0, image_height = 0;
  std::unique_ptr<PdfDocument> pdf;
  std::vector<int> pages;  // page numbers (from 1) to read, in order
  std::string error;       // set: the document could not be opened; reported once and skipped
};

// "1-5,9", "3-" (to the end): inclusive ranges of page numbers from 1.
Expected<std::vector<std::pair<int, int>>> parse_page_ranges(const std::string& spec);

// Expands the inputs in order. Unreadable inputs become documents carrying an error; only an empty
// result (e.g. a directory with nothing readable) or a bad argument is an error of the whole call.
Expected<std::vector<OcrDocument>> collect_documents(const std::vector<std::string>& inputs,
                                                     const std::vector<std::pair<int, int>>& page_ranges);

// Page pixel sizes for the checkpoint's image processor (its resolved preprocessor config).
class PageSizer {
 public:
  static Expected<PageSizer> from_processor_config(const nlohmann::json& config, std::optional<double> dpi);
  // (width, height) in pixels for a page shown at width_pt x height_pt.
  std::pair<int, int> pixels(double width_pt, double height_pt) const;
  std::string describe() const;  // "longest edge 1540 px (Pixtral processor)" / "200 dpi"

 private:
  bool qwen_ = false;
  std::optional<double> dpi_;
  int64_t max_w_ = 0, max_h_ = 0, patch_ = 0;     // Pixtral
  int64_t factor_ = 0, min_px_ = 0, max_px_ = 0;  // Qwen2-VL smart_resize
  nlohmann::json config_;
};

}  // namespace tf::cli
