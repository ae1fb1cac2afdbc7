// libFuzzer target: arbitrary bytes as an OpenAI request body. The first byte picks the endpoint
// and the server flags; the rest is the body. Parsing must never throw or crash; a refusal is one
// 4xx ApiError with a one-line message, and an accepted request holds what its endpoint promises.
// file:// images stay refused (allowed_dir is empty), so the fuzzer never reads the file system.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/request_parse.h"

namespace {

void check_error(const tf::ApiError& e) {
  if (e.status < 400 || e.status > 499) std::abort();
  if (e.message.empty() || e.message.find('\n') != std::string::npos) std::abort();
  if (tf::dump_json(tf::error_json(e)).empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 256 * 1024) return 0;
  const uint8_t flags = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  tf::ParseContext ctx;
  ctx.served_name = "fuzz-model";
  ctx.accepted_models = {"fuzz-model", "alias"};
  ctx.vision = flags & 0x04;
  ctx.no_thinking = flags & 0x08;
  ctx.no_drafts = flags & 0x10;
  if (flags & 0x20) ctx.default_temperature = 0.5f;
  if (flags & 0x40) ctx.default_max_tokens = 16;
  ctx.media.max_bytes = 4096;  // keeps data: URLs small

  if ((flags & 0x03) == 0x03) {
    std::vector<int32_t> ids;
    if (auto e = tf::parse_detokenize_request(body, ctx, &ids)) {
      check_error(*e);
      return 0;
    }
    for (int32_t id : ids)
      if (id < 0) std::abort();
    return 0;
  }

  const tf::Endpoint endpoint = static_cast<tf::Endpoint>(flags & 0x03);
  tf::ParsedRequest out;
  if (auto e = tf::parse_generation_request(body, endpoint, ctx, &out)) {
    check_error(*e);
    return 0;
  }
  const tf::GenerationRequest& g = out.gen;
  const int sources =
      int(g.messages.has_value()) + int(g.prompt_text.has_value()) + int(g.prompt_ids.has_value());
  if (sources != 1) std::abort();
  if (out.chat != g.messages.has_value()) std::abort();
  if (endpoint == tf::Endpoint::Chat && !out.chat) std::abort();
  if (endpoint == tf::Endpoint::Completion && out.chat) std::abort();
  if (!ctx.vision && !g.images.empty()) std::abort();
  if (g.max_tokens < 0 || g.top_logprobs < 0 || g.top_logprobs > 20) std::abort();
  if (g.prompt_ids)
    for (int32_t id : *g.prompt_ids)
      if (id < 0) std::abort();
  if (g.messages && tf::dump_json(*g.messages).empty()) std::abort();  // dump_json never throws
  return 0;
}
