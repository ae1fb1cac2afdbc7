// libFuzzer target: parse and render arbitrary chat templates against a fixed, realistic context.
// A chat template is untrusted input in a server (it comes with the checkpoint or the request), so
// parse and render must never crash, hang or grow without bound: every failure is an error value.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/chat_template.h"
#include "text/jinja/template.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Read this page. 日本語 😀"}]},
      {"role": "assistant", "content": "<think>\nr\n</think>\n\nok", "reasoning_content": "r",
       "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5, null, true], "b": "x"}}}]},
      {"role": "tool", "content": "{\"t\": 20}"},
      {"role": "user", "content": "again"}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"a": {"type": "array"}}, "required": ["a"]}}}],
    "documents": null,
    "add_generation_prompt": true,
    "eos_token": "<|im_end|>",
    "pad_token": "<|endoftext|>",
    "enable_thinking": false,
    "n": 7, "f": 0.1, "big": 9223372036854775807
  })");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string_view src(reinterpret_cast<const char*>(data), size);
  auto tpl = tf::jinja::Template::parse(src);
  if (!tpl.ok()) return 0;
  // Tighter limits than a server's defaults keep each input fast; the checks are the same code.
  tpl->limits.max_steps = 200'000;
  tpl->limits.max_output_bytes = size_t{1} << 20;
  tpl->limits.max_call_depth = 32;
  auto out = tpl->render(context());
  (void)out;
  return 0;
}
