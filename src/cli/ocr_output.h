// Where `tensorfold ocr` puts what it read: per-page results, their JSON line, whole-file writes
// that are atomic (a temporary file renamed into place, so an interrupted run leaves the previous
// file or none, never half of one), the --out resume check, and the progress display on stderr.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "cli/grounding.h"

namespace tf::cli {

struct PageResult {
  int number = 0;             // page number in its document, from 1
  int width = 0, height = 0;  // the page image sent to the model, in pixels
  std::string text;
  std::vector<int32_t> prompt_ids, token_ids;
  std::string finish_reason;  // stop | length | repetition | error
  std::string error;          // set when finish_reason is "error"
  int64_t cached_tokens = 0, draft_proposed = 0, draft_accepted = 0;
  double render_seconds = 0;                          // PDF rasterisation + PNG encoding
  double first_token_seconds = 0, total_seconds = 0;  // from submission
  std::optional<Grounding> grounding;
};

// One JSON object per page: document, page, text, finish_reason, usage, timings, size, and (with
// --grounding) boxes in page pixels and the count of malformed references; with ids the prompt and
// output token ids and their SHA-256 (what `ocr --json` always printed).
nlohmann::ordered_json page_json(const std::string& document, const PageResult& r, bool ids);

// Writes `content` to path.tmp-<pid>, then renames it onto path.
Status write_file_atomic(const std::string& path, const std::string& content);

// A document is complete in DIR when both <name>.md and <name>.jsonl are there (the .md is renamed
// in last, so its presence marks the document as done).
bool document_complete(const std::string& dir, const std::string& name);

// Progress on stderr: a bar redrawn in place on a terminal (pages done / total, pages/s, tokens/s,
// ETA), or, when stderr is not a terminal, nothing but the per-document lines.
class Progress {
 public:
  Progress(int64_t total_pages, bool tty);
  void page_done(int64_t tokens);
  void tokens(int64_t n) { tokens_ += n; }
  // Prints one line (clearing the bar first on a terminal, redrawing it after).
  void line(const std::string& s);
  void redraw(bool force = false);
  void finish();  // ends the bar's line

 private:
  int64_t total_, done_ = 0, tokens_ = 0;
  bool tty_;
  std::chrono::steady_clock::time_point t0_, last_draw_;
  bool drawn_ = false;
};

}  // namespace tf::cli
