// tensorfold ocr CKPT INPUT... : documents in, markdown out. Every page of every input (images, PDFs
// rendered with poppler, directories, stdin) is one request to the batched engine; see ocr_run.h.
// One plain image with none of the document options runs in-process instead (ocr_single.cpp).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>

#include "base/log.h"
#include "cli/commands.h"
#include "cli/engine_factory.h"
#include "cli/ocr_output.h"
#include "cli/ocr_run.h"
#include "image/pdf.h"
#include "io/checkpoint.h"

namespace tf::cli {
namespace {

const char* kHelp =
    "usage: tensorfold ocr CKPT INPUT... [options]\n"
    "  INPUT is an image (PNG/JPEG/WebP), a PDF, a directory (walked for both, sorted) or - (stdin).\n"
    "  Every page is one request; pages run together through the batched engine and print in input order\n"
    "  (markdown on stdout, a '<!-- NAME page N -->' line before each page when there is more than one).\n"
    "  --out DIR            write DIR/<name>.md and DIR/<name>.jsonl per document (atomically); a rerun\n"
    "                       skips documents already complete there\n"
    "  --pages 1-5,9        PDF pages to read (default: all; '3-' = to the end)\n"
    "  --dpi N              render PDF pages at N dpi (default: straight to the processor's own size,\n"
    "                       e.g. a longest edge of 1540 px for LightOnOCR-1B, so it does not resample)\n"
    "  --concurrency N      pages in flight (default 8)\n"
    "  --grounding          ask for grounding (LightOnOCR-3: the text 'grounding' after the image); the\n"
    "                       ![label](x1,y1,x2,y2) references (0-1000) become page-pixel boxes in the JSON\n"
    "  --overlay DIR        write DIR/<name>-p<N>.png: each page with its boxes and labels drawn\n"
    "  --max-repeat N       stop a page whose output repeats one token cycle N times (finish reason\n"
    "                       'repetition'; default off)\n"
    "  --json               one JSON line per page on stdout: document, page, text, finish_reason, size,\n"
    "                       usage, timings, boxes (with --grounding), prompt_ids, token_ids, token_sha256\n"
    "  --prompt TEXT        text after the image in the user turn (default: none, the image alone)\n"
    "  --max-tokens N       most tokens per page (default 4096, capped by the context)\n"
    "  --temperature T      0 = greedy (default: generation_config.json; greedy if do_sample is false)\n"
    "  --top-p P            nucleus sampling (default: generation_config.json, else 1.0)\n"
    "  --top-k K            0 = off (default: generation_config.json, else 50)\n"
    "  --seed S             seed of the counter-based sampler (default 0)\n"
    "  --ignore-eos         keep generating past end-of-sequence tokens\n"
    "  --no-thinking        chat_template_kwargs {\"enable_thinking\": false}\n"
    "  --backend auto|cpu|cuda  (default auto: cuda when built and a GPU is usable, else cpu)\n"
    "  --drafts auto|copy|mtp|off  draft decoding source; output is the same (default auto)\n"
    "  --no-drafts          same as --drafts off\n"
    "  --enforce-eager      run every step op by op, no recorded decode steps (CUDA graphs); same output\n"
    "Exit status: 0 all pages read, 1 some input or page failed (each says why on stderr), 2 usage,\n"
    "130 interrupted. A single image without document options runs in-process (its --json also has the\n"
    "vision/prefill/decode seconds).\n";

int fail(const std::string& msg, int status = 1) {
  std::fprintf(stderr, "tensorfold ocr: %s\n", msg.c_str());
  return status;
}

bool is_plain_image(const std::string& path) {
  std::error_code ec;
  if (path == "-" || !std::filesystem::is_regular_file(path, ec)) return false;
  auto bytes = read_file(path);
  return bytes.ok() && !looks_like_pdf(std::vector<uint8_t>(
                           bytes->begin(), bytes->begin() + std::min<size_t>(bytes->size(), 1024)));
}

}  // namespace

int ocr_main(int argc, char** argv) {
  auto parsed = parse_args(
      argc, argv, 2,
      {"--prompt", "--max-tokens", "--temperature", "--top-p", "--top-k", "--seed", "--backend", "--drafts",
       "--out", "--pages", "--dpi", "--concurrency", "--overlay", "--max-repeat"},
      {"--ignore-eos", "--json", "--help", "--no-thinking", "--no-drafts", "--grounding", "--enforce-eager"});
  if (!parsed.ok()) return fail(parsed.error().message, 2);
  const Args& a = *parsed;
  if (a.has("--help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (a.positional.size() < 2) {
    std::fputs(kHelp, stderr);
    return 2;
  }
  const bool document_options = a.has("--out") || a.has("--pages") || a.has("--dpi") ||
                                a.has("--concurrency") || a.has("--grounding") || a.has("--overlay") ||
                                a.has("--max-repeat");
  if (a.positional.size() == 2 && !document_options && is_plain_image(a.positional[1]))
    return ocr_single_image(a);

  OcrOptions o;
  o.prompt = a.get("--prompt");
  o.grounding = a.has("--grounding");
  if (o.grounding && !o.prompt) o.prompt = "grounding";
  o.json = a.has("--json");
  o.no_thinking = a.has("--no-thinking");
  o.ignore_eos = a.has("--ignore-eos");
  o.out_dir = a.get("--out").value_or("");
  o.overlay_dir = a.get("--overlay").value_or("");
  o.sampling.seed = 0;
  o.sampling_given.seed = true;
  struct IntFlag {
    const char* name;
    int64_t lo, hi;
    std::function<void(int64_t)> set;
  };
  std::optional<double> dpi;
  const IntFlag ints[] = {
      {"--concurrency", 1, 4096, [&](int64_t v) { o.concurrency = static_cast<int>(v); }},
      {"--max-repeat", 2, 1 << 20, [&](int64_t v) { o.max_repeat = static_cast<int>(v); }},
      {"--max-tokens", 1, int64_t{1} << 40, [&](int64_t v) { o.max_tokens = v; }},
      {"--top-k", 0, 1 << 30,
       [&](int64_t v) { o.sampling.top_k = static_cast<int>(v), o.sampling_given.top_k = true; }},
      {"--seed", 0, INT64_MAX, [&](int64_t v) { o.sampling.seed = static_cast<uint64_t>(v); }},
  };
  for (const IntFlag& f : ints) {
    auto v = a.get(f.name);
    if (!v) continue;
    auto n = to_int(f.name, *v);
    if (!n.ok()) return fail(n.error().message, 2);
    if (*n < f.lo || *n > f.hi)
      return fail(std::string(f.name) + " must be at least " + std::to_string(f.lo), 2);
    f.set(*n);
  }
  for (const char* f : {"--temperature", "--top-p", "--dpi"}) {
    auto v = a.get(f);
    if (!v) continue;
    auto d = to_number(f, *v);
    if (!d.ok()) return fail(d.error().message, 2);
    const std::string name = f;
    if (name == "--temperature") {
      if (*d < 0) return fail("--temperature must be >= 0", 2);
      o.sampling.temperature = static_cast<float>(*d), o.sampling_given.temperature = true;
    } else if (name == "--top-p") {
      if (!(*d > 0 && *d <= 1)) return fail("--top-p must be in (0, 1]", 2);
      o.sampling.top_p = static_cast<float>(*d), o.sampling_given.top_p = true;
    } else {
      if (!(*d >= 1 && *d <= 2400)) return fail("--dpi must be between 1 and 2400", 2);
      dpi = *d;
    }
  }
  std::vector<std::pair<int, int>> ranges;
  if (auto p = a.get("--pages")) {
    auto r = parse_page_ranges(*p);
    if (!r.ok()) return fail(r.error().message, 2);
    ranges = *r;
  }
  for (const std::string& dir : {o.out_dir, o.overlay_dir}) {
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::create_directories(dir, ec) && ec)
      return fail("cannot create directory " + dir + ": " + ec.message());
  }

  auto docs =
      collect_documents(std::vector<std::string>(a.positional.begin() + 1, a.positional.end()), ranges);
  if (!docs.ok()) return fail(docs.error().message);
  bool any_pdf = false;
  size_t n_pages = 0;
  for (OcrDocument& d : *docs) {
    if (!o.out_dir.empty() && d.error.empty() && document_complete(o.out_dir, d.name)) {
      std::fprintf(stderr, "%s: already complete in %s, skipped\n", d.input.c_str(), o.out_dir.c_str());
      d.pages.clear();
    }
    any_pdf |= d.is_pdf && d.error.empty() && !d.pages.empty();
    if (d.error.empty()) n_pages += d.pages.size();
  }
  if (n_pages == 0) {  // nothing left to read: report the inputs that failed, load nothing
    bool failed = false;
    for (const OcrDocument& d : *docs)
      if (!d.error.empty())
        failed = true, std::fprintf(stderr, "tensorfold ocr: %s: %s\n", d.input.c_str(), d.error.c_str());
    return failed ? 1 : 0;
  }
  std::optional<PageSizer> sizer;
  if (any_pdf) {
    auto ck = open_checkpoint(a.positional[0]);
    if (!ck.ok()) return fail(ck.error().message);
    auto s = PageSizer::from_processor_config(
        ck->image_processor_config ? ck->image_processor_config->json() : nlohmann::json::object(), dpi);
    if (!s.ok()) return fail(s.error().message);
    sizer = std::move(s).value();
    log_info("PDF pages rendered at " + sizer->describe());
  }

  ServeOptions so;
  so.checkpoint = a.positional[0];
  so.backend = a.get("--backend").value_or("auto");
  so.vision = true;
  so.parallel = o.concurrency;
  so.no_thinking = o.no_thinking;
  so.no_drafts = a.has("--no-drafts");
  so.enforce_eager = a.has("--enforce-eager");
  so.drafts = a.get("--drafts").value_or("auto");
  auto engine = engine_factory()(so);
  if (!engine.ok()) return fail(engine.error().message);
  // The engine logs a line per finished request; the command reports per document instead.
  if (log_level() < LogLevel::Warn) set_log_level(LogLevel::Warn);
  return run_documents(**engine, *docs, sizer ? &*sizer : nullptr, o);
}

}  // namespace tf::cli
