// tensorfold inspect CKPT: loads the checkpoint the way serve does (every check, no generation) and
// prints the admission report.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "runtime/pipeline.h"

namespace tf::cli {

int inspect_main(int argc, char** argv) {
  auto parsed = parse_args(argc, argv, 2, {"--backend"}, {"--json", "--help"});
  if (!parsed.ok() || parsed->positional.size() != 1 || parsed->has("--help")) {
    std::fputs("usage: tensorfold inspect CKPT [--json] [--backend auto|cpu|cuda]\n",
               parsed.ok() && parsed->has("--help") ? stdout : stderr);
    return parsed.ok() && parsed->has("--help") ? 0 : 2;
  }
  PipelineOptions po;
  po.backend = parsed->get("--backend").value_or("auto");
  auto pipe = Pipeline::load(parsed->positional[0], po);
  if (!pipe.ok()) {
    std::fprintf(stderr, "tensorfold inspect: refused: %s\n", pipe.error().message.c_str());
    return 1;
  }
  Pipeline& p = **pipe;
  const ModelInfo& i = p.info();
  const Tokenizer& tok = p.tokenizer();
  nlohmann::ordered_json r;
  r["checkpoint"] = p.checkpoint().dir;
  r["family"] = i.family;
  r["model_type"] = i.model_type;
  r["dtype"] = std::string(dtype_name(i.dtype));
  r["dims"] = {{"hidden_size", i.hidden_size}, {"layers", i.n_layers},
               {"kv_heads", i.n_kv_heads},     {"head_dim", i.head_dim},
               {"vocab_size", i.vocab_size},   {"context", i.max_position_embeddings}};
  r["parameters"] = i.n_params;
  r["weight_bytes"] = i.weight_bytes;
  // K and V per layer per position in the activation dtype.
  int64_t kv_per_token =
      2 * i.n_layers * i.n_kv_heads * i.head_dim * static_cast<int64_t>(dtype_size(i.dtype));
  r["kv_bytes_per_token"] = kv_per_token;
  r["bytes_needed_full_context"] =
      static_cast<int64_t>(i.weight_bytes) + kv_per_token * i.max_position_embeddings;
  r["vision"] = p.image_processor() ? p.image_processor()->describe() : "none (text only)";
  r["image_token_id"] = i.image_token_id;
  r["chat_template"] = p.chat_template_source();
  nlohmann::ordered_json special = nlohmann::ordered_json::array();
  for (const auto& t : tok.added_tokens())
    if (t.special) special.push_back({{"id", t.id}, {"content", t.content}});
  r["special_tokens"] = special;
  r["tokenizer_vocab"] = tok.vocab_size();
  const auto& d = p.defaults();
  r["generation_defaults"] = {
      {"source", d.source},        {"do_sample", d.do_sample},  {"temperature", d.sampling.temperature},
      {"top_p", d.sampling.top_p}, {"top_k", d.sampling.top_k}, {"eos_token_ids", d.eos_token_ids}};
  if (parsed->has("--json")) {
    std::puts(r.dump(2).c_str());
    return 0;
  }
  std::printf("admitted: %s\n", r["checkpoint"].get<std::string>().c_str());
  for (auto it = r.begin(); it != r.end(); ++it) {
    if (it.key() == "checkpoint") continue;
    std::printf("  %-26s %s\n", it.key().c_str(),
                it->is_string() ? it->get<std::string>().c_str() : it->dump().c_str());
  }
  return 0;
}

}  // namespace tf::cli
