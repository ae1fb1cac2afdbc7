// tensorfold bench URL --images DIR : load generator for OpenAI-compatible chat endpoints (tensorfold,
// vLLM, llama-server). One page image per request as a data: URL, streamed, N in flight per level.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/bench_client.h"
#include "cli/bench_stats.h"
#include "cli/commands.h"

namespace tf::cli {
namespace {

const char* kHelp =
    "usage: tensorfold bench URL --images DIR [options]\n"
    "  URL                  the server (http://HOST:PORT) or its OpenAI base URL (http://HOST:PORT/v1)\n"
    "  --images DIR|FILE    page images (png, jpg, jpeg, webp, gif, bmp), one per request, in turn\n"
    "  --concurrency LIST   requests in flight, one table row each (default 1,8,32,128)\n"
    "  --requests N         requests per concurrency level (default 4 x concurrency, at least 8)\n"
    "  --max-tokens N       max_tokens of each request (default 1000)\n"
    "  --ignore-eos         ask for max-tokens tokens (ignore_eos: tensorfold, vLLM, llama-server)\n"
    "  --prompt TEXT        a text part after the image (default: the image alone)\n"
    "  --model NAME         the request's model (default: the first id of GET /v1/models)\n"
    "  --temperature T      (default: the server's)\n"
    "  --token-ids          ask for return_token_ids (tensorfold, vLLM): exact token timing even for ids\n"
    "                       that complete no text (random-weight checkpoints)\n"
    "  --warmup N           requests sent one at a time before measuring (default 0)\n"
    "  --time-limit S       per level: no request starts after S seconds, streaming ones are cut there\n"
    "                       and reported as cut (default: none)\n"
    "  --timeout S          give up on a request when the server is silent this long (default 600)\n"
    "  --wait S             first wait up to S seconds for GET /health to answer 200 (default 0)\n"
    "  --api-key KEY        sent as Authorization: Bearer KEY\n"
    "  --json               print the results as JSON instead of the table\n"
    "Table: pages/s = completed requests / wall time; output tok/s = generated tokens (usage block, else\n"
    "content chunks) / wall time; TTFT = first output chunk; ITL = gaps between output chunks; E2E = whole\n"
    "request; percentiles over completed requests (TTFT also over those cut by --time-limit). --json adds\n"
    "TPOT = (E2E - TTFT) / (tokens - 1). Progress goes to stderr.\n"
    "Exit: 0 every request completed, 3 some failed (counted and shown), 1 could not run, 2 bad flags.\n";

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "tensorfold bench: %s\n", msg.c_str());
  return code;
}

Expected<std::vector<int>> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    auto v = to_int("--concurrency", item);
    if (!v.ok()) return v.error();
    if (*v < 1 || *v > 4096) return make_error("--concurrency values must be 1..4096, got " + item);
    out.push_back(static_cast<int>(*v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// The request bodies, one per image file (a directory's image files in name order).
Expected<std::vector<std::string>> load_bodies(const std::string& where, const bench::RequestOptions& ro,
                                               size_t* n_bytes) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(where, ec)) {
    for (const auto& e : fs::directory_iterator(where, ec))
      if (e.is_regular_file() && bench::image_data_url(e.path().string(), "").ok())
        files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) return make_error("no images (png, jpg, jpeg, webp, gif, bmp) in " + where);
  } else {
    files.push_back(where);
  }
  std::vector<std::string> bodies;
  *n_bytes = 0;
  for (const std::string& f : files) {
    TF_ASSIGN(std::string bytes, read_file(f));
    TF_ASSIGN(std::string url, bench::image_data_url(f, bytes));
    *n_bytes += bytes.size();
    bodies.push_back(bench::request_body(ro, url));
  }
  return bodies;
}

// The progress line: rewritten in place on a terminal, a line every 10 s otherwise.
class ProgressLine {
 public:
  ProgressLine() : tty_(isatty(fileno(stderr)) != 0) {}
  void show(int concurrency, int64_t requests, const bench::Progress& p, double t, bool final) {
    if (!final && (tty_ ? t - last_ < 0.25 : t - last_ < 10)) return;
    last_ = t;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "concurrency %d: %lld/%lld sent, %lld done, %lld errors, %lld tokens, %.1f s", concurrency,
                  static_cast<long long>(p.sent.load()), static_cast<long long>(requests),
                  static_cast<long long>(p.done.load()), static_cast<long long>(p.errors.load()),
                  static_cast<long long>(p.tokens.load()), t);
    if (tty_)
      std::fprintf(stderr, "\r%-100s%s", buf, final ? "\n" : "");
    else
      std::fprintf(stderr, "%s\n", buf);
    std::fflush(stderr);
  }
  void reset() { last_ = 0; }

 private:
  bool tty_;
  double last_ = 0;
};

}  // namespace

int bench_main(int argc, char** argv) {
  auto parsed = parse_args(argc, argv, 2,
                           {"--images", "--concurrency", "--requests", "--max-tokens", "--prompt", "--model",
                            "--temperature", "--warmup", "--time-limit", "--timeout", "--wait", "--api-key"},
                           {"--ignore-eos", "--token-ids", "--json", "--help"});
  if (!parsed.ok()) return fail(parsed.error().message, 2);
  const Args& a = *parsed;
  if (a.has("--help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  if (a.positional.size() != 1 || !a.get("--images")) {
    std::fputs(kHelp, stderr);
    return 2;
  }
  auto ep = bench::parse_endpoint(a.positional[0]);
  if (!ep.ok()) return fail(ep.error().message, 2);
  auto levels = parse_list(a.get("--concurrency").value_or("1,8,32,128"));
  if (!levels.ok()) return fail(levels.error().message, 2);

  // Numeric flags: value, or the default when absent; out of range is a flag error.
  auto number = [&](const char* flag, double dflt, double lo, double hi) -> Expected<double> {
    auto v = a.get(flag);
    if (!v) return dflt;
    TF_ASSIGN(double d, to_number(flag, *v));
    if (d < lo || d > hi) return make_error(std::string(flag) + " is out of range: " + *v);
    return d;
  };
  auto requests = number("--requests", 0, 1, 1e7);
  auto max_tokens = number("--max-tokens", 1000, 1, 1e7);
  auto temperature = number("--temperature", -1, 0, 100);
  auto warmup = number("--warmup", 0, 0, 1e4);
  auto time_limit = number("--time-limit", 0, 0, 1e7);
  auto timeout = number("--timeout", 600, 0.1, 1e6);
  auto wait = number("--wait", 0, 0, 1e6);
  for (const auto* e : {&requests, &max_tokens, &temperature, &warmup, &time_limit, &timeout, &wait})
    if (!e->ok()) return fail(e->error().message, 2);

  if (*wait > 0)
    if (auto st = bench::wait_healthy(*ep, *wait); !st.ok()) return fail(st.error().message);
  auto served = bench::probe_server(*ep, a.get("--api-key").value_or(""));
  if (!served.ok()) return fail(served.error().message);

  bench::RequestOptions ro;
  ro.model = a.get("--model").value_or(*served);
  ro.prompt = a.get("--prompt").value_or("");
  ro.max_tokens = static_cast<int64_t>(*max_tokens);
  ro.ignore_eos = a.has("--ignore-eos");
  ro.token_ids = a.has("--token-ids");
  ro.temperature = *temperature;
  size_t n_bytes = 0;
  auto bodies = load_bodies(*a.get("--images"), ro, &n_bytes);
  if (!bodies.ok()) return fail(bodies.error().message);

  bench::LevelOptions lo;
  lo.request_timeout_s = *timeout;
  lo.api_key = a.get("--api-key").value_or("");
  ProgressLine line;
  if (*warmup > 0) {
    bench::Progress p;
    lo.concurrency = 1;
    lo.requests = static_cast<int64_t>(*warmup);
    lo.time_limit_s = *time_limit;
    std::fprintf(stderr, "warm-up: %lld requests\n", static_cast<long long>(lo.requests));
    auto w = bench::summarize(bench::run_level(*ep, *bodies, lo, p, nullptr));
    if (w.errors > 0)
      std::fprintf(stderr, "warm-up: %lld failed: %s\n", static_cast<long long>(w.errors),
                   w.first_error.c_str());
  }
  std::vector<bench::LevelSummary> summaries;
  for (int c : *levels) {
    bench::Progress p;
    lo.concurrency = c;
    lo.requests = *requests > 0 ? static_cast<int64_t>(*requests) : std::max<int64_t>(8, 4 * int64_t{c});
    lo.time_limit_s = *time_limit;
    if (lo.requests < c)
      std::fprintf(stderr, "concurrency %d with %lld requests: at most %lld in flight\n", c,
                   static_cast<long long>(lo.requests), static_cast<long long>(lo.requests));
    line.reset();
    auto level =
        bench::run_level(*ep, *bodies, lo, p, [&](double t) { line.show(c, lo.requests, p, t, false); });
    line.show(c, lo.requests, p, level.wall_s, true);
    summaries.push_back(bench::summarize(level));
  }

  bool all_done = true;
  for (const auto& s : summaries) all_done = all_done && s.errors == 0;
  if (a.has("--json")) {
    nlohmann::ordered_json j;
    j["url"] = a.positional[0];
    j["chat_path"] = ep->chat_path;
    j["model"] = ro.model;
    j["images"] = bodies->size();
    j["image_bytes"] = n_bytes;
    j["max_tokens"] = ro.max_tokens;
    j["ignore_eos"] = ro.ignore_eos;
    j["levels"] = nlohmann::ordered_json::array();
    for (const auto& s : summaries) j["levels"].push_back(bench::summary_json(s));
    std::puts(j.dump(2).c_str());
  } else {
    std::printf("tensorfold bench %s (%s), model '%s', %zu images, max_tokens %lld%s\n\n", ep->origin.c_str(),
                ep->chat_path.c_str(), ro.model.c_str(), bodies->size(),
                static_cast<long long>(ro.max_tokens), ro.ignore_eos ? ", eos ignored" : "");
    std::fputs(bench::format_table(summaries).c_str(), stdout);
  }
  return all_done ? 0 : 3;
}

}  // namespace tf::cli
