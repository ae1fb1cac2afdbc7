// Encode throughput of tf::Tokenizer on a corpus of documents separated by U+001E (bench/tokenizer/
// make_corpus.py), one document at a time on one thread, add_special_tokens=false, best of N runs.
// Prints: name, MB/s by CPU time, MB/s by wall time, CPU s, wall s, n_tokens, ids checksum (FNV-1a, as
// peers.mjs), tab-separated. CPU time is the process's (all threads); on a shared machine it is the fairer
// number, wall time is printed too.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "text/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tokenizer_bench TOKENIZER_JSON CORPUS [repeats]\n");
    return 2;
  }
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 1;
  const auto t_load0 = std::chrono::steady_clock::now();
  auto tok = tf::Tokenizer::load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.error().message.c_str());
    return 1;
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load0).count();
  std::ifstream f(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string corpus = ss.str();
  std::vector<std::string_view> docs;
  size_t start = 0, bytes = 0;
  for (size_t i = 0; i <= corpus.size(); ++i) {
    if (i == corpus.size() || corpus[i] == '\x1e') {
      docs.emplace_back(corpus.data() + start, i - start);
      bytes += i - start;
      start = i + 1;
    }
  }
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  };
  double best = 1e30, best_wall = 1e30;
  size_t n_tok = 0;
  uint32_t sum = 0;
  for (int r = 0; r < repeats; ++r) {
    n_tok = 0;
    sum = 2166136261u;
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    for (std::string_view d : docs) {
      auto ids = tok->encode(d, false);
      if (!ids.ok()) {
        std::fprintf(stderr, "%s\n", ids.error().message.c_str());
        return 1;
      }
      n_tok += ids->size();
      for (int32_t id : *ids) {
        const auto u = static_cast<uint32_t>(id);
        for (int k = 0; k < 4; ++k) sum = (sum ^ ((u >> (8 * k)) & 0xFF)) * 16777619u;
      }
    }
    best = std::min(best, cpu_now() - c0);
    best_wall =
        std::min(best_wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("tensorfold tf::Tokenizer (C++)\t%.2f\t%.2f\t%.3f\t%.3f\t%zu\t%08x\n", bytes / 1e6 / best,
              bytes / 1e6 / best_wall, best, best_wall, n_tok, sum);
  std::fprintf(stderr, "tensorfold: tokenizer.json load %.2f s\n", load_s);
  return 0;
}
