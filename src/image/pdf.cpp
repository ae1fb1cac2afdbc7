#include "image/pdf.h"

#include <poppler-document.h>
#include <poppler-global.h>
#include <poppler-image.h>
#include <poppler-page-renderer.h>
#include <poppler-page.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace tf {
namespace {

// poppler reports syntax errors and recoveries through one process-wide callback (stderr by default).
// They are kept, not printed: the first one of a failed open becomes part of its one-line refusal.
std::mutex g_poppler_mu;
std::string g_first_message;

void on_poppler_message(const std::string& msg, void*) {
  if (g_first_message.empty()) g_first_message = msg;
}

}  // namespace

struct PdfDocument::Impl {
  std::unique_ptr<poppler::document> doc;
  std::vector<std::unique_ptr<poppler::page>> pages;
};

bool looks_like_pdf(const std::vector<uint8_t>& bytes) {
  const size_t n = std::min<size_t>(bytes.size(), 1024);
  static constexpr char kMagic[] = "%PDF-";
  for (size_t i = 0; i + 5 <= n; ++i)
    if (std::memcmp(bytes.data() + i, kMagic, 5) == 0) return true;
  return false;
}

Expected<std::unique_ptr<PdfDocument>> PdfDocument::open(std::vector<uint8_t> bytes) {
  if (bytes.empty()) return make_error("damaged: the file is empty");
  std::lock_guard<std::mutex> lock(g_poppler_mu);
  poppler::set_debug_error_function(on_poppler_message, nullptr);
  g_first_message.clear();
  // load_from_data takes the bytes over (swaps them out of the vector it is given).
  poppler::byte_array data(bytes.begin(), bytes.end());
  std::unique_ptr<poppler::document> doc(poppler::document::load_from_data(&data));
  std::string why = g_first_message;
  if (!doc) {
    return make_error(!looks_like_pdf(bytes) ? "damaged: not a PDF (no %PDF- header)"
                                             : "damaged: not a readable PDF" +
                                                   (why.empty() ? std::string() : " (poppler: " + why + ")"));
  }
  if (doc->is_locked())
    return make_error("encrypted: needs a password (decrypt it first, e.g. qpdf --decrypt)");
  const int n = doc->pages();
  if (n <= 0)
    return make_error(why.empty() ? "has no pages"
                                  : "has no pages it can read (damaged? poppler: " + why + ")");
  std::unique_ptr<PdfDocument> d(new PdfDocument());
  d->impl_ = std::make_unique<Impl>();
  d->impl_->doc = std::move(doc);
  for (int i = 0; i < n; ++i) {
    std::unique_ptr<poppler::page> p(d->impl_->doc->create_page(i));
    if (!p)
      return make_error("damaged: page " + std::to_string(i + 1) + " of " + std::to_string(n) +
                        " cannot be read" + (why.empty() ? std::string() : " (poppler: " + why + ")"));
    const poppler::rectf r = p->page_rect(poppler::crop_box);
    if (!(r.width() > 0 && r.height() > 0))
      return make_error("damaged: page " + std::to_string(i + 1) + " has an empty page box");
    d->impl_->pages.push_back(std::move(p));
  }
  return d;
}

PdfDocument::~PdfDocument() = default;

int PdfDocument::n_pages() const { return static_cast<int>(impl_->pages.size()); }

PdfPageSize PdfDocument::page_size(int index) const {
  const poppler::page& p = *impl_->pages.at(index);
  const poppler::rectf r = p.page_rect(poppler::crop_box);
  PdfPageSize s;
  switch (p.orientation()) {
    case poppler::page::landscape:
      s.rotate = 90;
      break;
    case poppler::page::upside_down:
      s.rotate = 180;
      break;
    case poppler::page::seascape:
      s.rotate = 270;
      break;
    default:
      s.rotate = 0;
      break;
  }
  const bool swap = s.rotate == 90 || s.rotate == 270;
  s.width_pt = swap ? r.height() : r.width();
  s.height_pt = swap ? r.width() : r.height();
  return s;
}

Expected<Image> PdfDocument::render(int index, int width, int height) const {
  if (index < 0 || index >= n_pages())
    return make_error("page " + std::to_string(index + 1) + " does not exist");
  if (width <= 0 || height <= 0 || static_cast<int64_t>(width) * height > (int64_t{1} << 28))
    return make_error("page " + std::to_string(index + 1) + ": render size " + std::to_string(width) + "x" +
                      std::to_string(height) + " is out of range");
  const PdfPageSize s = page_size(index);
  // Splash applies the page's /Rotate itself; the x resolution always scales the shown width.
  const double xres = 72.0 * width / s.width_pt, yres = 72.0 * height / s.height_pt;
  std::lock_guard<std::mutex> lock(g_poppler_mu);
  poppler::set_debug_error_function(on_poppler_message, nullptr);
  g_first_message.clear();
  poppler::page_renderer renderer;
  renderer.set_render_hint(poppler::page_renderer::antialiasing, true);
  renderer.set_render_hint(poppler::page_renderer::text_antialiasing, true);
  renderer.set_image_format(poppler::image::format_argb32);
  poppler::image im = renderer.render_page(impl_->pages[index].get(), xres, yres, 0, 0, width, height);
  if (!im.is_valid() || im.width() != width || im.height() != height)
    return make_error("page " + std::to_string(index + 1) + " could not be rendered" +
                      (g_first_message.empty() ? std::string() : " (poppler: " + g_first_message + ")"));
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<size_t>(width) * height * 3);
  const int stride = im.bytes_per_row();
  const auto* src = reinterpret_cast<const uint8_t*>(im.const_data());
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = src + static_cast<size_t>(y) * stride;
    uint8_t* dst = out.rgb.data() + static_cast<size_t>(y) * width * 3;
    for (int x = 0; x < width; ++x) {
      // argb32 is a native-endian 0xAARRGGBB word, premultiplied; the paper is opaque white.
      uint32_t v;
      std::memcpy(&v, row + 4 * x, 4);
      dst[3 * x] = static_cast<uint8_t>(v >> 16);
      dst[3 * x + 1] = static_cast<uint8_t>(v >> 8);
      dst[3 * x + 2] = static_cast<uint8_t>(v);
    }
  }
  return out;
}

}  // namespace tf
