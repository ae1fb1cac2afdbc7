// Time to first token for a second question about the same page: fresh (prompt cache off) vs
// resumed (the page and a shared instruction were cached by an earlier question), and the page
// placed after a differing question (only the vision-encoder output is reused). Prints a table.
//   ttft_bench CHECKPOINT IMAGE [REPS] [BACKEND]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/engine.h"

using namespace tf;
using Clock = std::chrono::steady_clock;

namespace {

const char* kInstruction =
    "You are reading one scanned page from an archive of invoices, letters and forms. Read it line by line, "
    "keep "
    "the original order, copy numbers, dates, names and amounts exactly as printed, and mark anything you "
    "cannot "
    "read with a question mark.";

GenerationRequest request(const std::vector<uint8_t>& image, const std::string& question, bool image_first) {
  GenerationRequest r;
  r.id = "bench";
  nlohmann::ordered_json img = {{"type", "image_url"}, {"image_url", {{"url", "image:1"}}}};
  nlohmann::ordered_json txt = {
      {"type", "text"},
      {"text", image_first ? std::string(kInstruction) + " " + question : question + " " + kInstruction}};
  nlohmann::ordered_json content =
      image_first ? nlohmann::ordered_json::array({img, txt}) : nlohmann::ordered_json::array({txt, img});
  r.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
  r.images.push_back(image);
  r.max_tokens = 1;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.sampling_given.temperature = true;
  return r;
}

struct Timed {
  double ttft_ms = 0;
  int64_t cached = 0, prompt = 0;
};

Timed run(Engine& e, GenerationRequest r) {
  Timed t;
  auto t0 = Clock::now();
  auto ch = e.submit(std::move(r));
  for (;;) {
    auto ev = ch->pop(600000);
    if (!ev || ev->kind == EngineEvent::Kind::Error) {
      std::fprintf(stderr, "request failed: %s\n", ev ? ev->message.c_str() : "timeout");
      std::exit(1);
    }
    if (ev->kind == EngineEvent::Kind::Token && t.ttft_ms == 0)
      t.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (ev->kind == EngineEvent::Kind::Finished) {
      t.cached = ev->usage.cached_tokens;
      t.prompt = ev->usage.prompt_tokens;
      return t;
    }
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CHECKPOINT IMAGE [REPS] [BACKEND]\n", argv[0]);
    return 2;
  }
  const std::string ckpt = argv[1], image_path = argv[2];
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  std::ifstream f(image_path, std::ios::binary);
  const std::vector<uint8_t> image((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto make = [&](double cache_mb) {
    EngineOptions o;
    o.checkpoint = ckpt;
    o.backend = argc > 4 ? argv[4] : "auto";
    o.parallel = 1;
    o.cache_mb = cache_mb;
    auto e = Engine::create(o);
    if (!e.ok()) {
      std::fprintf(stderr, "%s\n", e.error().message.c_str());
      std::exit(1);
    }
    return std::move(e).value();
  };
  auto fresh = make(0), cached = make(1024);
  run(*fresh, request(image, "Warm-up.", true));                      // first-touch costs out of the way
  run(*cached, request(image, "What is the invoice number?", true));  // the first question fills the cache
  std::vector<double> t_fresh, t_resumed, t_vision, t_build;
  Timed last_fresh, last_resumed, last_vision;
  for (int i = 0; i < reps; ++i) {
    // A different second question each time, so every resumed run resumes the shared part only.
    const std::string q = "Question " + std::to_string(i + 2) + ": which dates are printed on the page?";
    last_fresh = run(*fresh, request(image, q, true));
    last_resumed = run(*cached, request(image, q, true));
    last_vision = run(*cached, request(image, q, false));
    // Decoding and preprocessing the image happen for every request, cache or not (its identity
    // is a hash of the decoded pixels): tokenize() builds the same prompt and times that part.
    auto b0 = Clock::now();
    if (!fresh->tokenize(request(image, q, true)).ok()) return 1;
    t_build.push_back(std::chrono::duration<double, std::milli>(Clock::now() - b0).count());
    t_fresh.push_back(last_fresh.ttft_ms);
    t_resumed.push_back(last_resumed.ttft_ms);
    t_vision.push_back(last_vision.ttft_ms);
  }
  std::string name = ckpt;
  while (!name.empty() && name.back() == '/') name.pop_back();
  name = name.substr(name.find_last_of('/') + 1);
  std::string img = image_path.substr(image_path.find_last_of('/') + 1);
  std::printf(
      "| checkpoint | image | case | prompt tokens | cached tokens | TTFT ms (median of %d) | vs fresh |\n",
      reps);
  std::printf("|---|---|---|---:|---:|---:|---:|\n");
  const double f0 = median(t_fresh);
  auto row = [&](const char* what, const Timed& t, double ms) {
    std::printf("| %s | %s | %s | %lld | %lld | %.1f | %.2fx |\n", name.c_str(), img.c_str(), what,
                static_cast<long long>(t.prompt), static_cast<long long>(t.cached), ms, f0 / ms);
  };
  row("fresh (cache off)", last_fresh, f0);
  row("second question, same page (resumed)", last_resumed, median(t_resumed));
  row("question before the page (vision output reused)", last_vision, median(t_vision));
  std::printf(
      "\nprompt build (image decode + preprocess + template + tokenize), every request: %.1f ms (median)\n",
      median(t_build));
  return 0;
}
