// libFuzzer: encoding arbitrary bytes with the tiny oracle tokenizer (Qwen3.5 pattern, NFC, 26 added tokens)
// and a GPT-2-style ByteLevel variant with lstrip/rstrip/single_word/normalized added tokens. Invalid UTF-8
// must be an error; valid input must encode, every id must be in range, and streaming decode must equal
// decode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace {

std::unique_ptr<tf::Tokenizer> load(bool variant) {
  std::ifstream f(std::string(TF_SOURCE_DIR) + "/tests/golden/ckpt/qwen3_5-tiny-bf16/tokenizer.json");
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) std::abort();
  if (variant) {
    j["pre_tokenizer"] =
        nlohmann::json::parse(R"({"type": "ByteLevel", "add_prefix_space": true, "use_regex": true})");
    j["normalizer"] = nlohmann::json::parse(R"({"type": "Sequence", "normalizers": [{"type": "NFKC"}]})");
    int id = 1438;
    for (const char* spec : {R"({"content": "<mask>", "lstrip": true, "special": true, "normalized": false})",
                             R"({"content": "[R]", "rstrip": true, "normalized": false})",
                             R"({"content": "the", "single_word": true, "normalized": true})",
                             R"({"content": "Å", "normalized": true})"}) {
      auto a = nlohmann::json::parse(spec);
      a["id"] = id++;
      j["added_tokens"].push_back(a);
    }
  }
  auto tok = tf::Tokenizer::from_json_text(j.dump());
  if (!tok.ok()) std::abort();
  return std::make_unique<tf::Tokenizer>(std::move(tok).value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto plain = load(false);
  static const auto variant = load(true);
  if (size == 0) return 0;
  const tf::Tokenizer& tok = (data[0] & 1) ? *variant : *plain;
  const bool special = data[0] & 2;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto ids = tok.encode(text, special);
  if (ids.ok() != tf::text::utf8_valid(text)) std::abort();
  if (!ids.ok()) return 0;
  for (int32_t id : *ids)
    if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size()) std::abort();
  for (bool skip : {false, true}) {
    const std::string dec = tok.decode(*ids, skip);
    if (!tf::text::utf8_valid(dec)) std::abort();
    tf::IncrementalDetokenizer d(tok, skip);
    std::string acc;
    for (int32_t id : *ids) acc += d.push(id);
    acc += d.finish();
    if (acc != dec) std::abort();
  }
  return 0;
}
