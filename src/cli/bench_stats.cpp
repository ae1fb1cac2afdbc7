#include "cli/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tf::cli::bench {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

Percentiles p50_p99(const std::vector<double>& v) { return {percentile(v, 50), percentile(v, 99)}; }

LevelSummary summarize(const LevelResult& level) {
  LevelSummary s;
  s.concurrency = level.concurrency;
  s.requests = level.requests;
  s.wall_s = level.wall_s;
  s.time_limit_s = level.time_limit_s;
  std::vector<double> ttft, itl, e2e, tpot;
  bool any_usage = false, any_chunks = false;
  for (const RequestRecord& r : level.records) {
    if (!r.started) {
      ++s.not_sent;
      continue;
    }
    ++s.sent;
    if ((r.ok || r.aborted) && r.ttft_s >= 0) ttft.push_back(r.ttft_s * 1e3);
    if (r.ok) {
      ++s.done;
      s.output_tokens += r.output_tokens();
      (r.usage_tokens >= 0 ? any_usage : any_chunks) = true;
      for (double g : r.itl_s) itl.push_back(g * 1e3);
      e2e.push_back(r.e2e_s);
      if (r.ttft_s >= 0 && r.output_tokens() > 1)
        tpot.push_back((r.e2e_s - r.ttft_s) * 1e3 / static_cast<double>(r.output_tokens() - 1));
      continue;
    }
    s.output_tokens += r.chunk_tokens;  // what it streamed before it failed or was cut
    if (r.aborted) {
      ++s.aborted;
    } else {
      ++s.errors;
      if (s.first_error.empty()) s.first_error = r.error.empty() ? "unknown error" : r.error;
    }
  }
  s.tokens_from = any_usage && any_chunks ? "usage+chunks" : any_usage ? "usage" : any_chunks ? "chunks" : "";
  s.time_limited = s.aborted > 0 || s.not_sent > 0;
  if (s.wall_s > 0) {
    s.pages_per_s = static_cast<double>(s.done) / s.wall_s;
    s.tokens_per_s = static_cast<double>(s.output_tokens) / s.wall_s;
  }
  s.ttft_ms = p50_p99(ttft);
  s.itl_ms = p50_p99(itl);
  s.e2e_s = p50_p99(e2e);
  s.tpot_ms = p50_p99(tpot);
  return s;
}

namespace {

std::string num(double v, int decimals) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::string format_table(const std::vector<LevelSummary>& levels) {
  std::vector<std::vector<std::string>> rows = {{"concurrency", "requests", "done", "errors", "pages/s",
                                                 "output tok/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
                                                 "ITL p99 ms", "E2E p50 s", "E2E p99 s"}};
  for (const LevelSummary& s : levels) {
    rows.push_back({std::to_string(s.concurrency), std::to_string(s.requests), std::to_string(s.done),
                    std::to_string(s.errors), num(s.pages_per_s, 3), num(s.tokens_per_s, 1),
                    num(s.ttft_ms.p50, 1), num(s.ttft_ms.p99, 1), num(s.itl_ms.p50, 2), num(s.itl_ms.p99, 2),
                    num(s.e2e_s.p50, 2), num(s.e2e_s.p99, 2)});
  }
  std::vector<size_t> width(rows[0].size(), 3);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    out += '|';
    for (size_t i = 0; i < row.size(); ++i) {
      std::string pad(width[i] - row[i].size(), ' ');
      out += ' ' + pad + row[i] + " |";  // every column is a number: right-aligned
    }
    out += '\n';
  };
  emit(rows[0]);
  out += '|';
  for (size_t w : width) out += std::string(w + 1, '-') + ":|";
  out += '\n';
  for (size_t r = 1; r < rows.size(); ++r) emit(rows[r]);
  for (const LevelSummary& s : levels) {
    std::string c = "concurrency " + std::to_string(s.concurrency) + ": ";
    if (s.errors > 0)
      out += c + std::to_string(s.errors) + " of " + std::to_string(s.sent) +
             " requests failed; first: " + s.first_error + "\n";
    if (s.time_limited)
      out += c + "time limit of " + num(s.time_limit_s, 0) + " s reached: " + std::to_string(s.aborted) +
             " requests cut while streaming, " + std::to_string(s.not_sent) + " never sent\n";
    if (s.done > 0 && s.tokens_from == "chunks")
      out += c + "no usage block in the stream: output tokens counted from content chunks\n";
  }
  return out;
}

nlohmann::ordered_json summary_json(const LevelSummary& s) {
  auto pct = [](const Percentiles& p) {
    auto v = [](double x) {
      return std::isnan(x) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(x);
    };
    return nlohmann::ordered_json{{"p50", v(p.p50)}, {"p99", v(p.p99)}};
  };
  nlohmann::ordered_json j;
  j["concurrency"] = s.concurrency;
  j["requests"] = s.requests;
  j["sent"] = s.sent;
  j["done"] = s.done;
  j["errors"] = s.errors;
  j["aborted"] = s.aborted;
  j["not_sent"] = s.not_sent;
  j["wall_s"] = s.wall_s;
  j["pages_per_s"] = s.pages_per_s;
  j["output_tokens"] = s.output_tokens;
  j["output_tokens_per_s"] = s.tokens_per_s;
  j["tokens_from"] = s.tokens_from;
  j["ttft_ms"] = pct(s.ttft_ms);
  j["itl_ms"] = pct(s.itl_ms);
  j["e2e_s"] = pct(s.e2e_s);
  j["tpot_ms"] = pct(s.tpot_ms);
  j["first_error"] =
      s.first_error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.first_error);
  j["time_limited"] = s.time_limited;
  j["time_limit_s"] = s.time_limit_s;
  return j;
}

}  // namespace tf::cli::bench
