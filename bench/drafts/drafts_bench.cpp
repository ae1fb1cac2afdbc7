// Decode speed at batch 1 with and without drafts (runtime/drafts.h): plain decoding, copy drafts
// (prompt lookup) and MTP drafts where the checkpoint has MTP layers, on any backend. Prints a
// markdown table; every drafted run's ids are checked against the plain run's (they must be equal).
//
// usage: drafts_bench CKPT IMAGE|- NEW_TOKENS [--prompt TEXT] [--backend auto|cpu|cuda] [--k K]
//                     [--repeat R] [--temperature T] [--seed S] [--eos]
//   IMAGE "-" sends a text-only prompt. Decode tok/s = (tokens - 1) / decode seconds (the first
//   token comes from the prefill), best of R runs (default 2). Eos is ignored unless --eos.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "runtime/pipeline.h"

using namespace tf;

namespace {

int fail(const std::string& m) {
  std::fprintf(stderr, "drafts_bench: %s\n", m.c_str());
  return 1;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fputs(
        "usage: drafts_bench CKPT IMAGE|- NEW_TOKENS [--prompt TEXT] [--backend auto|cpu|cuda] [--k K] "
        "[--repeat "
        "R]\n"
        "                    [--temperature T] [--seed S] [--eos]\n",
        stderr);
    return 2;
  }
  const std::string ckpt = argv[1], image = argv[2];
  const int64_t n_new = std::atoll(argv[3]);
  std::string prompt_text, backend = "auto";
  int k = 4, repeat = 2;
  SamplingParams sp;
  bool eos = false;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--prompt")
      prompt_text = next();
    else if (a == "--backend")
      backend = next();
    else if (a == "--k")
      k = std::atoi(next().c_str());
    else if (a == "--repeat")
      repeat = std::max(1, std::atoi(next().c_str()));
    else if (a == "--temperature")
      sp.temperature = std::strtof(next().c_str(), nullptr);
    else if (a == "--seed")
      sp.seed = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--eos")
      eos = true;
    else
      return fail("unknown flag " + a);
  }
  PipelineOptions po;
  po.backend = backend;
  auto pipe = Pipeline::load(ckpt, po);
  if (!pipe.ok()) return fail(pipe.error().message);
  Pipeline& p = **pipe;
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  std::vector<std::vector<uint8_t>> images;
  if (image != "-") {
    images.push_back(read_bytes(image));
    content.push_back({{"type", "image"}});
  }
  if (!prompt_text.empty()) content.push_back({{"type", "text"}, {"text", prompt_text}});
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
  auto prompt = p.build_chat_prompt(msgs, images, ChatTemplateOptions{});
  if (!prompt.ok()) return fail(prompt.error().message);

  std::vector<DraftMode> modes{DraftMode::kOff, DraftMode::kCopy};
  if (p.model().n_mtp_layers() > 0) modes.push_back(DraftMode::kMtp);
  std::printf("checkpoint %s, %s, prompt %zu tokens, %lld new tokens, k %d, %s, backend %s, best of %d\n\n",
              ckpt.c_str(), image == "-" ? "text only" : image.c_str(), prompt->ids.size(),
              static_cast<long long>(n_new), k, sp.temperature > 0 ? "seeded sampling" : "greedy",
              std::string(p.backend().name()).c_str(), repeat);
  std::printf(
      "| drafts | tokens | decode steps | proposed | accepted | accepted/proposed | decode tok/s | vs plain "
      "| ids |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::vector<int32_t> plain_ids;
  double plain_tps = 0;
  int rc = 0;
  for (DraftMode mode : modes) {
    GenerateResult best;
    double best_tps = -1;
    for (int r = 0; r < repeat; ++r) {
      GenerateOptions go;
      go.sampling = sp;
      go.max_tokens = n_new;
      go.ignore_eos = !eos;
      go.drafts.mode = mode;
      go.drafts.k = k;
      auto res = generate(p, *prompt, go);
      if (!res.ok()) return fail(res.error().message);
      const double tps =
          res->decode_seconds > 0 ? static_cast<double>(res->ids.size() - 1) / res->decode_seconds : 0.0;
      if (tps > best_tps) {
        best_tps = tps;
        best = std::move(res).value();
      }
    }
    if (mode == DraftMode::kOff) {
      plain_ids = best.ids;
      plain_tps = best_tps;
    }
    const bool same = best.ids == plain_ids;
    if (!same) rc = 3;
    std::printf("| %s | %zu | %lld | %lld | %lld | %.2f | %.1f | %.2fx | %s %s |\n", draft_mode_name(mode),
                best.ids.size(), static_cast<long long>(best.decode_steps),
                static_cast<long long>(best.draft_proposed), static_cast<long long>(best.draft_accepted),
                best.draft_proposed
                    ? static_cast<double>(best.draft_accepted) / static_cast<double>(best.draft_proposed)
                    : 0.0,
                best_tps, plain_tps > 0 ? best_tps / plain_tps : 0.0,
                token_sha256(best.ids).substr(0, 12).c_str(), same ? "= plain" : "DIFFERS FROM PLAIN");
  }
  if (rc) std::fprintf(stderr, "drafts_bench: drafted ids differ from plain decoding\n");
  return rc;
}
