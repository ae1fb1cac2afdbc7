// Bad tokenizer.json files are refused at load with one line naming what is wrong.
#include <gtest/gtest.h>

#include "text/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tf {
namespace {

using nlohmann::json;

// A minimal valid byte-level BPE tokenizer.json (vocab a, b, ab; one merge).
json minimal() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 3, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
                      "normalized": false, "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}
  })");
}

std::string refusal_text(const std::string& text) {
  auto t = Tokenizer::from_json_text(text);
  return t.ok() ? std::string("<loaded>") : t.error().message;
}

std::string refusal(const json& j) { return refusal_text(j.dump()); }

TEST(TokenizerRefusal, MinimalLoadsAndEncodes) {
  auto t = Tokenizer::from_json_text(minimal().dump());
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto ids = t->encode("ab<s>ba");
  ASSERT_TRUE(ids.ok());
  // Ids checked with HF tokenizers 0.23.2 (npm tokenizers) on the same JSON: "ab" merges, <s> is added, "ba"
  // not.
  EXPECT_EQ(*ids, (std::vector<int32_t>{2, 3, 1, 0}));
  EXPECT_EQ(t->vocab_size(), 4u);
}

TEST(TokenizerRefusal, MalformedJson) {
  EXPECT_EQ(refusal_text("{\"model\": "), "tokenizer.json: not valid JSON");
  EXPECT_EQ(refusal_text("[1, 2]"), "tokenizer.json: top level is not an object");
  EXPECT_EQ(refusal_text(""), "tokenizer.json: not valid JSON");
}

TEST(TokenizerRefusal, MissingFile) {
  auto t = Tokenizer::load("/nonexistent/tokenizer.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "cannot open /nonexistent/tokenizer.json");
}

TEST(TokenizerRefusal, UnknownModelType) {
  json j = minimal();
  j["model"]["type"] = "WordPiece";
  EXPECT_EQ(refusal(j), "tokenizer.json: model type 'WordPiece' is not supported");
  j = minimal();
  j.erase("model");
  EXPECT_EQ(refusal(j), "tokenizer.json: no \"model\" object");
}

TEST(TokenizerRefusal, UnknownComponents) {
  json j = minimal();
  j["normalizer"] = json::parse(R"({"type": "Precompiled", "precompiled_charsmap": ""})");
  EXPECT_EQ(refusal(j), "tokenizer.json: normalizer type 'Precompiled' is not supported");
  j = minimal();
  j["normalizer"] =
      json::parse(R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]})");
  EXPECT_EQ(refusal(j), "tokenizer.json: normalizer type 'Lowercase' is not supported");
  j = minimal();
  j["pre_tokenizer"] = json::parse(R"({"type": "Metaspace", "replacement": "_"})");
  EXPECT_EQ(refusal(j), "tokenizer.json: pre_tokenizer type 'Metaspace' is not supported");
  j = minimal();
  j["pre_tokenizer"] = json::parse(
      R"({"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated"}]})");
  EXPECT_EQ(refusal(j), "tokenizer.json: pre-tokenizer 'Split' after ByteLevel is not supported");
  j = minimal();
  j["pre_tokenizer"] = json::parse(R"({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"})");
  EXPECT_EQ(refusal(j), "tokenizer.json: Split behavior 'Sideways' is not supported");
  j = minimal();
  j["pre_tokenizer"] =
      json::parse(R"({"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"})");
  EXPECT_EQ(refusal(j).rfind("tokenizer.json: split regex does not compile: ", 0), 0u) << refusal(j);
  j = minimal();
  j["decoder"] = json::parse(R"({"type": "Metaspace"})");
  EXPECT_EQ(refusal(j), "tokenizer.json: decoder type 'Metaspace' is not supported");
  j = minimal();
  j["post_processor"] = json::parse(R"({"type": "Bogus"})");
  EXPECT_EQ(refusal(j), "tokenizer.json: post_processor type 'Bogus' is not supported");
}

TEST(TokenizerRefusal, BadVocabAndMerges) {
  json j = minimal();
  j["model"].erase("vocab");
  EXPECT_EQ(refusal(j), "tokenizer.json: model has no \"vocab\" object");
  j = minimal();
  j["model"]["merges"] = json::parse(R"([["a", "c"]])");
  EXPECT_EQ(refusal(j), "tokenizer.json: merge token 'c' is not in the vocab");
  j = minimal();
  j["model"]["merges"] = json::parse(R"([["b", "a"]])");
  EXPECT_EQ(refusal(j), "tokenizer.json: merged token 'ba' is not in the vocab");
  j = minimal();
  j["model"]["merges"] = json::parse(R"(["a b c"])");
  EXPECT_EQ(refusal(j), "tokenizer.json: merge 'a b c' is not two tokens separated by one space");
  j = minimal();
  j["model"]["merges"] = json::parse(R"([42])");
  EXPECT_EQ(refusal(j), "tokenizer.json: merge #0 is neither \"a b\" nor [\"a\", \"b\"]");
  j = minimal();
  j["model"]["vocab"]["x"] = -5;
  EXPECT_EQ(refusal(j), "tokenizer.json: vocab entry 'x' has an invalid id");
  j = minimal();
  j["model"]["vocab"]["x"] = 1 << 29;  // would need a 2^29-entry id table
  EXPECT_EQ(refusal(j), "tokenizer.json: vocab entry 'x' has an invalid id");
  j = minimal();
  j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(refusal(j), "tokenizer.json: unk_token '<unk>' is not in the vocab");
  j = minimal();
  j["model"]["dropout"] = 0.1;
  EXPECT_EQ(refusal(j), "tokenizer.json: BPE dropout is not supported");
}

TEST(TokenizerRefusal, BadAddedTokensAndTemplate) {
  json j = minimal();
  j["added_tokens"] = json::parse(R"([{"content": "<x>"}])");
  EXPECT_EQ(refusal(j), "tokenizer.json: added token without a valid \"id\" and \"content\"");
  j = minimal();
  j["post_processor"] = json::parse(
      R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {}})");
  EXPECT_EQ(refusal(j), "tokenizer.json: TemplateProcessing special token '<s>' has no ids");
  j["post_processor"]["special_tokens"] =
      json::parse(R"({"<s>": {"id": "<s>", "ids": [99], "tokens": ["<s>"]}})");
  EXPECT_EQ(refusal(j), "tokenizer.json: post_processor id 99 is not in the vocab");
  j["post_processor"]["special_tokens"]["<s>"]["ids"] = json::parse("[3]");
  auto t = Tokenizer::from_json_text(j.dump());
  ASSERT_TRUE(t.ok()) << t.error().message;
  // As HF tokenizers 0.23.2 gives for this JSON with add_special_tokens true / false.
  EXPECT_EQ(*t->encode("ab", true), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(*t->encode("ab", false), (std::vector<int32_t>{2}));
}

TEST(TokenizerRefusal, BadConfig) {
  auto t = Tokenizer::from_json_text(minimal().dump(), "{not json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "tokenizer_config.json: not a valid JSON object");
}

}  // namespace
}  // namespace tf
