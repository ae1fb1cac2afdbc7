// tensorfold ocr CKPT IMAGE with one image and no document options: the model card's usage (a user
// turn holding the image, optionally followed by a text prompt) generated in-process by the pipeline,
// without the engine thread, so --json reports the stage timings (vision, prefill, decode seconds)
// the benchmarks read. Everything else goes through the engine (ocr_cmd.cpp).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "cli/args.h"
#include "cli/ocr_run.h"
#include "runtime/pipeline.h"
#include "text/detokenizer.h"

namespace tf::cli {
namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "tensorfold ocr: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int ocr_single_image(const Args& a) {
  PipelineOptions po;
  po.backend = a.get("--backend").value_or("auto");
  po.enforce_eager = a.has("--enforce-eager");
  auto pipe = Pipeline::load(a.positional[0], po);
  if (!pipe.ok()) return fail(pipe.error().message);
  Pipeline& p = **pipe;

  std::vector<std::vector<uint8_t>> images;
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  for (size_t i = 1; i < a.positional.size(); ++i) {
    auto bytes = read_file(a.positional[i]);
    if (!bytes.ok()) return fail(bytes.error().message);
    images.emplace_back(bytes->begin(), bytes->end());
    content.push_back({{"type", "image"}});
  }
  if (auto prompt = a.get("--prompt")) content.push_back({{"type", "text"}, {"text", *prompt}});
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", content}});
  ChatTemplateOptions topts;
  topts.add_generation_prompt = true;
  if (a.has("--no-thinking")) topts.kwargs["enable_thinking"] = false;
  auto prompt = p.build_chat_prompt(messages, images, topts);
  if (!prompt.ok()) return fail(prompt.error().message);

  GenerateOptions go;
  go.sampling = p.defaults().sampling;
  go.max_tokens = kDefaultMaxTokens;
  auto num = [&](const char* flag, auto apply) -> bool {
    auto v = a.get(flag);
    if (!v) return true;
    auto d = to_number(flag, *v);
    if (!d.ok()) {
      fail(d.error().message);
      return false;
    }
    return apply(*d);
  };
  bool ok = num("--max-tokens",
                [&](double d) {
                  go.max_tokens = static_cast<int64_t>(d);
                  return d >= 1;
                }) &&
            num("--temperature",
                [&](double d) {
                  go.sampling.temperature = static_cast<float>(d);
                  return d >= 0;
                }) &&
            num("--top-p",
                [&](double d) {
                  go.sampling.top_p = static_cast<float>(d);
                  return d > 0 && d <= 1;
                }) &&
            num("--top-k",
                [&](double d) {
                  go.sampling.top_k = static_cast<int>(d);
                  return d >= 0;
                }) &&
            num("--seed", [&](double d) {
              go.sampling.seed = static_cast<uint64_t>(d);
              return d >= 0;
            });
  if (!ok) return fail("a sampling flag is out of range (see --help)");
  go.ignore_eos = a.has("--ignore-eos");
  auto drafts = parse_draft_mode(a.has("--no-drafts") ? "off" : a.get("--drafts").value_or("auto"));
  if (!drafts.ok()) return fail(drafts.error().message);
  go.drafts.mode = *drafts;
  int64_t ctx = p.info().max_position_embeddings;
  int64_t n_prompt = static_cast<int64_t>(prompt->ids.size());
  if (ctx > 0 && n_prompt + go.max_tokens > ctx) go.max_tokens = std::max<int64_t>(0, ctx - n_prompt);
  if (go.max_tokens == 0)
    return fail("the prompt (" + std::to_string(n_prompt) + " tokens) fills the context");

  const bool json = a.has("--json");
  IncrementalDetokenizer detok(p.tokenizer(), /*skip_special_tokens=*/true);
  std::string text;
  auto r = generate(p, *prompt, go, [&](int32_t id) {
    std::string piece = detok.push(id);
    text += piece;
    if (!json) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    }
    return true;
  });
  if (!r.ok()) return fail(r.error().message);
  std::string tail = detok.finish();
  text += tail;
  if (!json) {
    std::fputs(tail.c_str(), stdout);
    std::fputs("\n", stdout);
    return 0;
  }
  nlohmann::ordered_json out;
  out["text"] = text;
  out["prompt_ids"] = prompt->ids;
  out["token_ids"] = r->ids;
  out["token_sha256"] = token_sha256(r->ids);
  out["finish_reason"] = r->finish_reason;
  out["usage"] = {{"prompt_tokens", n_prompt},
                  {"completion_tokens", r->ids.size()},
                  {"total_tokens", n_prompt + static_cast<int64_t>(r->ids.size())},
                  {"vision_seconds", r->vision_seconds},
                  {"prefill_seconds", r->prefill_seconds},
                  {"decode_seconds", r->decode_seconds},
                  {"decode_steps", r->decode_steps},
                  {"drafts", r->drafts},
                  {"draft_proposed", r->draft_proposed},
                  {"draft_accepted", r->draft_accepted}};
  std::puts(out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace tf::cli
