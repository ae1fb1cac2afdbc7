#include "cli/ocr_inputs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>
#include <set>

#include "cli/args.h"
#include "image/decode.h"
#include "image/pixtral_image_processor.h"
#include "image/qwen2_vl_image_processor.h"

namespace tf::cli {
namespace fs = std::filesystem;
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_document_file(const fs::path& p) {
  static const std::set<std::string> kExt = {".pdf", ".png", ".jpg", ".jpeg", ".webp"};
  return kExt.count(lower(p.extension().string())) > 0;
}

// Opens one input's bytes as a document; failures are kept on the document.
void open_document(OcrDocument& d, std::vector<uint8_t> bytes,
                   const std::vector<std::pair<int, int>>& ranges) {
  const bool pdf_ext = lower(fs::path(d.input).extension().string()) == ".pdf";
  if (looks_like_pdf(bytes) || (pdf_ext && sniff_image_format(bytes) == ImageFormat::unknown)) {
    d.is_pdf = true;
    auto pdf = PdfDocument::open(std::move(bytes));
    if (!pdf.ok()) {
      d.error = pdf.error().message;
      return;
    }
    d.pdf = std::move(pdf).value();
    const int n = d.pdf->n_pages();
    if (ranges.empty()) {
      for (int p = 1; p <= n; ++p) d.pages.push_back(p);
    } else {
      for (auto [a, b] : ranges)
        for (int p = a; p <= std::min(b, n); ++p)
          if (std::find(d.pages.begin(), d.pages.end(), p) == d.pages.end()) d.pages.push_back(p);
      if (d.pages.empty()) d.error = "--pages selects none of its " + std::to_string(n) + " pages";
    }
    return;
  }
  auto im = decode_image(bytes, 1);
  if (!im.ok()) {
    d.error =
        bytes.empty() ? "the file is empty" : "not a readable image or PDF (" + im.error().message + ")";
    return;
  }
  d.image_width = im->width;
  d.image_height = im->height;
  d.image_bytes = std::move(bytes);
  d.pages = {1};
}

std::string base_name(const std::string& rel) {
  fs::path p(rel);
  std::string s = (p.parent_path() / p.stem()).generic_string();
  std::replace(s.begin(), s.end(), '/', '_');
  if (s.empty() || s == "." || s == "..") s = "document";
  return s;
}

}  // namespace

Expected<std::vector<std::pair<int, int>>> parse_page_ranges(const std::string& spec) {
  std::vector<std::pair<int, int>> out;
  auto bad = [&](const std::string& why) {
    return make_error("--pages '" + spec + "': " + why + " (e.g. --pages 1-5,9 or 3-)");
  };
  size_t i = 0;
  while (i <= spec.size()) {
    size_t comma = spec.find(',', i);
    std::string part = spec.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
    if (part.empty()) return bad("an empty range");
    size_t dash = part.find('-');
    auto num = [&](const std::string& s, int& v) {
      if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
      v = std::stoi(s);
      return v >= 1;
    };
    int a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!num(part, a)) return bad("'" + part + "' is not a page number from 1");
      b = a;
    } else {
      if (!num(part.substr(0, dash), a))
        return bad("'" + part + "' does not start with a page number from 1");
      std::string rest = part.substr(dash + 1);
      if (rest.empty()) {
        b = 1 << 30;
      } else if (!num(rest, b) || b < a) {
        return bad("'" + part + "' is not an increasing range");
      }
    }
    out.emplace_back(a, b);
    if (comma == std::string::npos) break;
    i = comma + 1;
  }
  return out;
}

Expected<std::vector<OcrDocument>> collect_documents(const std::vector<std::string>& inputs,
                                                     const std::vector<std::pair<int, int>>& ranges) {
  std::vector<OcrDocument> docs;
  std::vector<std::string> rel;  // path the output name comes from
  bool stdin_used = false;
  for (const std::string& in : inputs) {
    if (in == "-") {
      if (stdin_used) return make_error("'-' (stdin) is given twice");
      stdin_used = true;
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(std::cin)),
                                 std::istreambuf_iterator<char>());
      OcrDocument d;
      d.input = "-";
      open_document(d, std::move(bytes), ranges);
      docs.push_back(std::move(d));
      rel.push_back("stdin");
      continue;
    }
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<fs::path> files;
      for (auto it = fs::recursive_directory_iterator(in, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec) && is_document_file(it->path())) files.push_back(it->path());
      }
      if (ec) return make_error("cannot walk directory " + in + ": " + ec.message());
      std::sort(files.begin(), files.end());
      if (files.empty()) return make_error("directory " + in + " holds no PDF, PNG, JPEG or WebP files");
      for (const fs::path& f : files) {
        OcrDocument d;
        d.input = f.string();
        auto bytes = read_file(d.input);
        if (!bytes.ok()) {
          d.error = bytes.error().message;
        } else {
          open_document(d, std::vector<uint8_t>(bytes->begin(), bytes->end()), ranges);
        }
        docs.push_back(std::move(d));
        rel.push_back(fs::relative(f, in, ec).generic_string());
      }
      continue;
    }
    OcrDocument d;
    d.input = in;
    if (!fs::exists(in, ec)) {
      d.error = "no such file or directory";
    } else if (auto bytes = read_file(in); !bytes.ok()) {
      d.error = "cannot read it";
    } else {
      open_document(d, std::vector<uint8_t>(bytes->begin(), bytes->end()), ranges);
    }
    docs.push_back(std::move(d));
    rel.push_back(fs::path(in).filename().string());
  }
  // Unique output names: the file name without its extension (sub-directories joined by '_'), then
  // "-2", "-3"... in input order for repeats.
  std::map<std::string, int> seen;
  for (size_t i = 0; i < docs.size(); ++i) {
    std::string n = base_name(rel[i]);
    std::string name = n;
    for (int k = 2; seen.count(name); ++k) name = n + "-" + std::to_string(k);
    seen[name] = 1;
    docs[i].name = name;
  }
  return docs;
}

Expected<PageSizer> PageSizer::from_processor_config(const nlohmann::json& config,
                                                     std::optional<double> dpi) {
  PageSizer s;
  s.dpi_ = dpi;
  s.config_ = config;
  const std::string type = config.value("image_processor_type", std::string());
  s.qwen_ =
      type.rfind("Qwen", 0) == 0 || config.contains("temporal_patch_size") || config.contains("merge_size");
  if (s.qwen_) {
    TF_ASSIGN(Qwen2VLImageProcessorConfig c, Qwen2VLImageProcessorConfig::from_json(config));
    s.factor_ = c.patch_size * c.merge_size;
    s.min_px_ = c.min_pixels;
    s.max_px_ = c.max_pixels;
  } else {
    TF_ASSIGN(PixtralImageProcessorConfig c, PixtralImageProcessorConfig::from_json(config));
    s.max_w_ = c.max_width;
    s.max_h_ = c.max_height;
    s.patch_ = c.patch_width;
  }
  return s;
}

std::pair<int, int> PageSizer::pixels(double w_pt, double h_pt) const {
  if (dpi_) {
    return {std::max(1, static_cast<int>(std::lround(w_pt * *dpi_ / 72.0))),
            std::max(1, static_cast<int>(std::lround(h_pt * *dpi_ / 72.0)))};
  }
  if (qwen_) {
    // The area the processor allows, at the page's aspect; smart_resize then lands on its grid.
    const double k = std::sqrt(static_cast<double>(max_px_) / (w_pt * h_pt));
    auto hw = qwen_smart_resize(std::max<int64_t>(1, std::llround(h_pt * k)),
                                std::max<int64_t>(1, std::llround(w_pt * k)), factor_, min_px_, max_px_);
    if (hw.ok()) return {static_cast<int>(hw->second), static_cast<int>(hw->first)};
    return {std::max(1, static_cast<int>(std::lround(w_pt * k))),
            std::max(1, static_cast<int>(std::lround(h_pt * k)))};
  }
  // Pixtral: the longest edge the processor allows, then its own rounding to whole patches (a size
  // it maps to itself, so it does not resample the page).
  const double k = std::min(static_cast<double>(max_w_) / w_pt, static_cast<double>(max_h_) / h_pt);
  const int w0 = std::clamp(static_cast<int>(std::floor(w_pt * k + 0.5)), 1, static_cast<int>(max_w_));
  const int h0 = std::clamp(static_cast<int>(std::floor(h_pt * k + 0.5)), 1, static_cast<int>(max_h_));
  auto proc = PixtralImageProcessor::from_json(config_);
  if (!proc.ok()) return {w0, h0};
  auto [h1, w1] = proc->target_size(h0, w0);
  if (proc->target_size(h1, w1) == std::make_pair(h1, w1)) return {w1, h1};
  return {w0, h0};
}

std::string PageSizer::describe() const {
  if (dpi_) return std::to_string(*dpi_) + " dpi";
  if (qwen_) return "the Qwen2-VL processor's size (<= " + std::to_string(max_px_) + " pixels)";
  return "the Pixtral processor's longest edge (" + std::to_string(std::max(max_w_, max_h_)) + " px)";
}

}  // namespace tf::cli
