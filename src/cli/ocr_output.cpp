#include "cli/ocr_output.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/sha256.h"

namespace tf::cli {
namespace fs = std::filesystem;

nlohmann::ordered_json page_json(const std::string& document, const PageResult& r, bool ids) {
  nlohmann::ordered_json j;
  j["document"] = document;
  j["page"] = r.number;
  j["text"] = r.text;
  j["finish_reason"] = r.finish_reason;
  if (!r.error.empty()) j["error"] = r.error;
  j["width"] = r.width;
  j["height"] = r.height;
  const int64_t n_prompt = static_cast<int64_t>(r.prompt_ids.size());
  const int64_t n_out = static_cast<int64_t>(r.token_ids.size());
  j["usage"] = {{"prompt_tokens", n_prompt},          {"completion_tokens", n_out},
                {"total_tokens", n_prompt + n_out},   {"cached_tokens", r.cached_tokens},
                {"draft_proposed", r.draft_proposed}, {"draft_accepted", r.draft_accepted}};
  j["timings"] = {{"render_seconds", r.render_seconds},
                  {"first_token_seconds", r.first_token_seconds},
                  {"total_seconds", r.total_seconds}};
  if (r.grounding) {
    nlohmann::ordered_json boxes = nlohmann::ordered_json::array();
    for (const GroundingBox& b : r.grounding->boxes)
      boxes.push_back({{"label", b.label},
                       {"box", {b.x1, b.y1, b.x2, b.y2}},
                       {"norm", {b.norm[0], b.norm[1], b.norm[2], b.norm[3]}},
                       {"offset", b.offset}});
    j["boxes"] = boxes;
    j["malformed_refs"] = r.grounding->n_malformed;
  }
  if (ids) {
    j["prompt_ids"] = r.prompt_ids;
    j["token_ids"] = r.token_ids;
    j["token_sha256"] = token_sha256(r.token_ids);
  }
  return j;
}

Status write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return make_error("cannot write " + tmp);
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return make_error("cannot write " + tmp + " (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return make_error("cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  return {};
}

bool document_complete(const std::string& dir, const std::string& name) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / (name + ".md"), ec) &&
         fs::is_regular_file(fs::path(dir) / (name + ".jsonl"), ec);
}

Progress::Progress(int64_t total_pages, bool tty)
    : total_(total_pages), tty_(tty), t0_(std::chrono::steady_clock::now()), last_draw_(t0_) {}

void Progress::page_done(int64_t tokens) {
  ++done_;
  tokens_ += tokens;
  redraw(done_ == total_);
}

void Progress::line(const std::string& s) {
  if (tty_ && drawn_) std::fputs("\r\033[K", stderr);
  std::fprintf(stderr, "%s\n", s.c_str());
  drawn_ = false;
  redraw(true);
}

void Progress::redraw(bool force) {
  if (!tty_ || total_ <= 0) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  const double secs = std::chrono::duration<double>(now - t0_).count();
  const double pps = secs > 0 ? done_ / secs : 0, tps = secs > 0 ? tokens_ / secs : 0;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * done_ / total_);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  char eta[32] = "--:--";
  if (pps > 0 && done_ < total_) {
    const int64_t left = static_cast<int64_t>((total_ - done_) / pps);
    std::snprintf(eta, sizeof eta, "%lld:%02lld", static_cast<long long>(left / 60),
                  static_cast<long long>(left % 60));
  } else if (done_ == total_) {
    std::snprintf(eta, sizeof eta, "0:00");
  }
  std::fprintf(stderr, "\r\033[K[%s] %lld/%lld pages  %.2f pages/s  %.1f tok/s  ETA %s", bar.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_), pps, tps, eta);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (tty_ && drawn_) std::fputs("\n", stderr);
  drawn_ = false;
}

}  // namespace tf::cli
