#include "cli/ocr_run.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <filesystem>

#include "cli/ocr_output.h"
#include "cli/overlay.h"
#include "cli/repetition.h"
#include "image/decode.h"
#include "image/encode_png.h"

namespace tf::cli {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
volatile std::sig_atomic_t g_interrupted = 0;
void on_signal(int) { g_interrupted = 1; }

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Job {
  size_t doc;
  size_t page;  // index into the document's pages
};

struct Active {
  size_t job = 0;
  std::shared_ptr<RequestChannel> channel;
  std::shared_ptr<std::atomic<bool>> cancelled;
  std::shared_ptr<std::vector<uint8_t>> png;  // the bytes sent (kept for the context retry)
  Image page;                                 // kept only for --overlay
  PageResult r;
  RepetitionGuard guard{0};
  Clock::time_point t_submit;
  bool got_first = false, retried = false;
  int64_t client_limit = 0;  // > 0: the command enforces max_tokens itself (see the retry below)
};

class Runner {
 public:
  Runner(EngineApi& engine, std::vector<OcrDocument>& docs, const PageSizer* sizer, const OcrOptions& o)
      : engine_(engine), docs_(docs), sizer_(sizer), o_(o) {}
  int run();

 private:
  void submit(Active& a);
  bool start(size_t job, Active& a);             // false: the page failed before reaching the engine
  bool handle(Active& a, const EngineEvent& e);  // true: the page is finished
  void end_page(Active& a, std::string reason);  // records the result
  void document_done(size_t d);
  void print_ready();

  EngineApi& engine_;
  std::vector<OcrDocument>& docs_;
  const PageSizer* sizer_;
  const OcrOptions& o_;
  std::vector<Job> jobs_;
  std::vector<std::vector<std::optional<PageResult>>> results_;
  std::vector<size_t> left_;  // pages still running per document
  std::unique_ptr<Progress> progress_;
  size_t print_doc_ = 0, print_page_ = 0, total_pages_ = 0;
  bool failed_ = false;
  int64_t seq_ = 0;
};

bool Runner::start(size_t job, Active& a) {
  const OcrDocument& d = docs_[jobs_[job].doc];
  a.job = job;
  a.r.number = d.pages[jobs_[job].page];
  a.guard = RepetitionGuard(o_.max_repeat);
  const auto t0 = Clock::now();
  if (d.is_pdf) {
    const PdfPageSize s = d.pdf->page_size(a.r.number - 1);
    auto [w, h] = sizer_->pixels(s.width_pt, s.height_pt);
    auto im = d.pdf->render(a.r.number - 1, w, h);
    if (!im.ok()) {
      a.r.error = im.error().message;
      return false;
    }
    auto png = encode_png(*im, 1);
    if (!png.ok()) {
      a.r.error = png.error().message;
      return false;
    }
    a.png = std::make_shared<std::vector<uint8_t>>(std::move(png).value());
    a.r.width = w;
    a.r.height = h;
    if (!o_.overlay_dir.empty()) a.page = std::move(im).value();
  } else {
    a.png = std::make_shared<std::vector<uint8_t>>(d.image_bytes);
    a.r.width = d.image_width;
    a.r.height = d.image_height;
  }
  a.r.render_seconds = since(t0);
  submit(a);
  return true;
}

void Runner::submit(Active& a) {
  const OcrDocument& d = docs_[jobs_[a.job].doc];
  GenerationRequest req;
  req.id = "ocr-" + std::to_string(++seq_) + " " + d.name + " p" + std::to_string(a.r.number);
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  content.push_back({{"type", "image"}});
  if (o_.prompt) content.push_back({{"type", "text"}, {"text", *o_.prompt}});
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", content}});
  req.messages = messages;
  req.images = {*a.png};
  if (o_.no_thinking) req.chat_template_kwargs["enable_thinking"] = false;
  req.sampling = o_.sampling;
  req.sampling_given = o_.sampling_given;
  req.ignore_eos = o_.ignore_eos;
  // After a context refusal the engine picks the room left (max_tokens 0) and the command stops the
  // page at the asked limit itself.
  req.max_tokens = a.retried ? 0 : o_.max_tokens;
  a.client_limit = a.retried ? o_.max_tokens : 0;
  a.cancelled = req.cancelled;
  a.t_submit = Clock::now();
  a.got_first = false;
  a.r.text.clear();
  a.r.token_ids.clear();
  a.guard = RepetitionGuard(o_.max_repeat);
  a.channel = engine_.submit(std::move(req));
}

void Runner::end_page(Active& a, std::string reason) {
  a.r.finish_reason = std::move(reason);
  a.r.total_seconds = since(a.t_submit);
  if (a.r.finish_reason == "error") failed_ = true;
  const OcrDocument& d = docs_[jobs_[a.job].doc];
  if ((o_.grounding || !o_.overlay_dir.empty()) && a.r.finish_reason != "error")
    a.r.grounding = parse_grounding(a.r.text, a.r.width, a.r.height);
  if (!o_.overlay_dir.empty() && a.r.grounding) {
    if (a.page.width == 0) {  // an image document: decode it again to draw on
      if (auto im = decode_image(d.image_bytes, 1); im.ok() && im->bit_depth == 8)
        a.page = std::move(im).value();
    }
    if (a.page.width > 0) {
      draw_overlay(a.page, a.r.grounding->boxes);
      auto png = encode_png(a.page);
      const std::string path =
          (fs::path(o_.overlay_dir) / (d.name + "-p" + std::to_string(a.r.number) + ".png")).string();
      Status st = png.ok() ? write_file_atomic(path, std::string(png->begin(), png->end()))
                           : Status(make_error(png.error().message));
      if (!st.ok()) progress_->line("tensorfold ocr: overlay " + path + ": " + st.error().message);
    }
  }
  a.page = Image{};
  if (a.r.finish_reason == "error")
    progress_->line("tensorfold ocr: " + d.input + ": page " + std::to_string(a.r.number) + ": " + a.r.error);
  const size_t di = jobs_[a.job].doc;
  progress_->page_done(0);
  results_[di][jobs_[a.job].page] = std::move(a.r);
  if (--left_[di] == 0) document_done(di);
  print_ready();
}

bool Runner::handle(Active& a, const EngineEvent& e) {
  switch (e.kind) {
    case EngineEvent::Kind::Started:
      a.r.prompt_ids = e.prompt_ids;
      return false;
    case EngineEvent::Kind::Token:
      if (!a.got_first) {
        a.got_first = true;
        a.r.first_token_seconds = since(a.t_submit);
      }
      a.r.token_ids.push_back(e.token);
      a.r.text += e.text;
      progress_->tokens(1);
      progress_->redraw();
      if (a.guard.push(e.token)) {
        a.cancelled->store(true);
        end_page(a, "repetition");
        return true;
      }
      if (a.client_limit > 0 && static_cast<int64_t>(a.r.token_ids.size()) >= a.client_limit) {
        a.cancelled->store(true);
        end_page(a, "length");
        return true;
      }
      return false;
    case EngineEvent::Kind::Finished:
      a.r.cached_tokens = e.usage.cached_tokens;
      a.r.draft_proposed = e.usage.draft_proposed;
      a.r.draft_accepted = e.usage.draft_accepted;
      end_page(a, e.finish_reason);
      return true;
    case EngineEvent::Kind::Error:
      if (e.code == "context_length_exceeded" && !a.retried) {
        a.retried = true;
        submit(a);
        return false;
      }
      a.r.error = e.message;
      end_page(a, "error");
      return true;
  }
  return false;
}

void Runner::document_done(size_t di) {
  const OcrDocument& d = docs_[di];
  const auto& pages = results_[di];
  int64_t tokens = 0;
  double secs = 0;
  int n_failed = 0, n_repeat = 0, n_malformed = 0;
  for (const auto& p : pages) {
    tokens += static_cast<int64_t>(p->token_ids.size());
    secs = std::max(secs, p->total_seconds);
    n_failed += p->finish_reason == "error";
    n_repeat += p->finish_reason == "repetition";
    if (p->grounding) n_malformed += p->grounding->n_malformed;
  }
  std::string status = n_failed ? std::to_string(n_failed) + " page(s) failed" : "ok";
  if (n_repeat) status += ", " + std::to_string(n_repeat) + " stopped for repetition";
  if (n_malformed) status += ", " + std::to_string(n_malformed) + " malformed grounding reference(s)";
  if (!o_.out_dir.empty()) {
    if (n_failed) {
      status += "; not written (a rerun retries it)";
    } else {
      std::string md, jsonl;
      for (size_t i = 0; i < pages.size(); ++i) {
        if (i) md += "\n\n<!-- page " + std::to_string(pages[i]->number) + " -->\n\n";
        md += pages[i]->text;
        jsonl += page_json(d.name, *pages[i], false)
                     .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
                 "\n";
      }
      md += "\n";
      // The .jsonl first: the .md landing marks the document complete (document_complete()).
      Status st = write_file_atomic((fs::path(o_.out_dir) / (d.name + ".jsonl")).string(), jsonl);
      if (st.ok()) st = write_file_atomic((fs::path(o_.out_dir) / (d.name + ".md")).string(), md);
      if (!st.ok()) {
        failed_ = true;
        progress_->line("tensorfold ocr: " + d.input + ": " + st.error().message);
        return;
      }
    }
  }
  if (!isatty(STDERR_FILENO) || n_failed) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": %zu page(s), %lld tokens, %.1f s, ", pages.size(),
                  static_cast<long long>(tokens), secs);
    progress_->line(d.input + buf + status);
  }
}

void Runner::print_ready() {
  if (!o_.out_dir.empty()) return;
  while (print_doc_ < docs_.size()) {
    const OcrDocument& d = docs_[print_doc_];
    if (print_page_ >= results_[print_doc_].size()) {
      ++print_doc_;
      print_page_ = 0;
      continue;
    }
    const auto& r = results_[print_doc_][print_page_];
    if (!r) return;
    if (o_.json) {
      std::puts(page_json(d.name, *r, true)
                    .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                    .c_str());
    } else if (r->finish_reason != "error") {
      if (total_pages_ > 1) std::printf("<!-- %s page %d -->\n\n", d.name.c_str(), r->number);
      std::printf("%s\n%s", r->text.c_str(), total_pages_ > 1 ? "\n" : "");
    }
    std::fflush(stdout);
    ++print_page_;
  }
}

int Runner::run() {
  results_.resize(docs_.size());
  left_.assign(docs_.size(), 0);
  for (size_t d = 0; d < docs_.size(); ++d) {
    if (!docs_[d].error.empty()) {
      std::fprintf(stderr, "tensorfold ocr: %s: %s\n", docs_[d].input.c_str(), docs_[d].error.c_str());
      failed_ = true;
      continue;
    }
    results_[d].resize(docs_[d].pages.size());
    left_[d] = docs_[d].pages.size();
    for (size_t p = 0; p < docs_[d].pages.size(); ++p) jobs_.push_back({d, p});
  }
  total_pages_ = jobs_.size();
  progress_ = std::make_unique<Progress>(static_cast<int64_t>(jobs_.size()), isatty(STDERR_FILENO) != 0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::deque<Active> active;
  size_t next = 0, n_done = 0;
  while (next < jobs_.size() || !active.empty()) {
    if (g_interrupted) {
      for (Active& a : active) a.cancelled->store(true);
      progress_->finish();
      std::fprintf(
          stderr, "tensorfold ocr: interrupted after %zu of %zu pages%s\n", n_done, jobs_.size(),
          o_.out_dir.empty() ? "" : "; complete documents are in the output directory, a rerun resumes");
      return 130;
    }
    while (active.size() < static_cast<size_t>(o_.concurrency) && next < jobs_.size()) {
      active.emplace_back();
      if (!start(next++, active.back())) {
        end_page(active.back(), "error");
        active.pop_back();
        ++n_done;
      }
    }
    bool any = false;
    for (auto it = active.begin(); it != active.end();) {
      bool done = false;
      while (!done) {
        auto e = it->channel->pop(0);
        if (!e) break;
        any = true;
        done = handle(*it, *e);
      }
      if (done) {
        it = active.erase(it);
        ++n_done;
      } else {
        ++it;
      }
    }
    if (!any && !active.empty()) {
      if (auto e = active.front().channel->pop(20); e && handle(active.front(), *e)) {
        active.pop_front();
        ++n_done;
      }
    }
  }
  progress_->finish();
  return failed_ ? 1 : 0;
}

}  // namespace

int run_documents(EngineApi& engine, std::vector<OcrDocument>& docs, const PageSizer* sizer,
                  const OcrOptions& o) {
  Runner r(engine, docs, sizer, o);
  return r.run();
}

}  // namespace tf::cli
