// `tensorfold bench`: per-concurrency summaries of the request records (throughput, latency
// percentiles, error counts) and their two renderings, a markdown table and JSON. Pure logic.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/bench_sse.h"

namespace tf::cli::bench {

// The q-th percentile (0..100) of v, interpolating linearly between order statistics (numpy's default);
// NaN when v is empty.
double percentile(std::vector<double> v, double q);

struct Percentiles {
  double p50 = 0, p99 = 0;  // NaN when there were no samples
};
Percentiles p50_p99(const std::vector<double>& v);

// What one concurrency level sent and got back.
struct LevelResult {
  int concurrency = 1;
  int64_t requests = 0;                // asked for
  double wall_s = 0;                   // first send to last answer
  double time_limit_s = 0;             // 0: none
  std::vector<RequestRecord> records;  // one per request asked for; `started` false where never sent
};

struct LevelSummary {
  int concurrency = 1;
  int64_t requests = 0, sent = 0, done = 0, errors = 0, aborted = 0, not_sent = 0;
  double wall_s = 0;
  int64_t output_tokens = 0;  // done requests' (usage, else chunks) + what failed or cut ones streamed
  std::string tokens_from;  // "usage", "chunks" or "usage+chunks": where the done requests' counts came from
  double pages_per_s = 0;   // done / wall
  double tokens_per_s = 0;  // output_tokens / wall
  // TTFT: over done requests and those the time limit cut after their first token (a slow server's
  // TTFT is still seen when no request completes). ITL, E2E: over done requests (ITL: every gap).
  Percentiles ttft_ms, itl_ms, e2e_s;
  // Time per output token after the first, per done request: (E2E - TTFT) / (tokens - 1). Unlike ITL it
  // does not see chunks that arrive together in one read as zero gaps.
  Percentiles tpot_ms;
  std::string first_error;    // the first failed request's message (by send order), empty if none
  bool time_limited = false;  // the time limit cut or withheld requests
  double time_limit_s = 0;
};

LevelSummary summarize(const LevelResult& level);

// One markdown table, a row per level, then a line per level that had errors or hit its time limit.
std::string format_table(const std::vector<LevelSummary>& levels);

nlohmann::ordered_json summary_json(const LevelSummary& s);

}  // namespace tf::cli::bench
