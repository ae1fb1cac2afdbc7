// libFuzzer: tokenizer.json loading. Any input must either load or be refused with an error; whatever loads
// must then encode and decode without crashing, and the streaming decoder must agree with decode().
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "text/detokenizer.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto tok = tf::Tokenizer::from_json_text(text, text);
  if (!tok.ok()) {
    if (tok.error().message.empty()) std::abort();
    return 0;
  }
  for (const char* s : {"Hello world", "ab<s>ba  \n\n x", "caf\xC3\xA9 e\xCC\x81 \xE4\xB8\xAD 12345", ""}) {
    auto ids = tok->encode(s, true);
    if (!ids.ok()) continue;
    const std::string dec = tok->decode(*ids, false);
    tf::IncrementalDetokenizer d(*tok, false);
    std::string acc;
    for (int32_t id : *ids) acc += d.push(id);
    acc += d.finish();
    if (acc != dec) std::abort();
  }
  std::vector<int32_t> some;
  for (int32_t id = -2; id < 40; ++id) some.push_back(id);
  (void)tok->decode(some, true);
  (void)tok->vocab_size();
  return 0;
}
