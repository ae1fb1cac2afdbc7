// Components the published tokenizers do not use (Split behaviours and invert, string patterns, ByteLevel
// with the GPT-2 regex and prefix space, NFD/NFKC/no normalizer, added-token
// lstrip/rstrip/single_word/normalized, TemplateProcessing, "a b" merges, ignore_merges, null decoder,
// unk/fuse_unk, byte_fallback), each a patch of the tiny oracle tokenizer
// (tests/data/tokenizer_variants/variants.json) with goldens from HF tokenizers 0.23.2 (make_goldens.mjs).
#include <gtest/gtest.h>

#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tf {
namespace {

using nlohmann::json;
using testing::file_exists;
using testing::read_jsonl;
using testing::source_path;

const std::string kDir = "tests/data/tokenizer_variants/";
const std::string kBase = "tests/golden/ckpt/qwen3_5-tiny-bf16/tokenizer.json";

json apply_patch(json t, const json& patch) {
  for (const auto& [k, v] : patch.items()) {
    if (k == "extra_added_tokens") {
      for (const auto& a : v) t["added_tokens"].push_back(a);
    } else if (k == "merges_as_strings") {
      for (auto& m : t["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
    } else if (k == "extra_vocab") {
      for (const auto& [vk, vv] : v.items()) t["model"]["vocab"][vk] = vv;
    } else if (k == "model") {
      for (const auto& [mk, mv] : v.items()) t["model"][mk] = mv;
    } else {
      t[k] = v;
    }
  }
  return t;
}

TEST(TokenizerVariants, HfGoldens) {
  if (!file_exists(source_path(kBase))) GTEST_SKIP() << "missing " << kBase;
  std::ifstream bf(source_path(kBase)), vf(source_path(kDir + "variants.json"));
  const json base = json::parse(bf);
  const json variants = json::parse(vf);
  std::vector<std::string> strings;
  for (const auto& s : read_jsonl(source_path(kDir + "strings.jsonl")))
    strings.push_back(s["text"].get<std::string>());
  ASSERT_GT(strings.size(), 100u);
  size_t n_variants = 0;
  for (const auto& [name, patch] : variants.items()) {
    if (name[0] == '_') continue;
    ++n_variants;
    auto tok = Tokenizer::from_json_text(apply_patch(base, patch).dump());
    ASSERT_TRUE(tok.ok()) << name << ": " << tok.error().message;
    const auto lines = read_jsonl(source_path(kDir + name + ".jsonl"));
    ASSERT_EQ(lines.size(), strings.size()) << name;
    size_t ok = 0;
    for (size_t k = 0; k < lines.size(); ++k) {
      const auto& g = lines[k];
      const auto ids = g["ids"].get<std::vector<int32_t>>();
      const auto ids_special = g.contains("ids_special") ? g["ids_special"].get<std::vector<int32_t>>() : ids;
      const std::string decoded = g.contains("decoded") ? g["decoded"].get<std::string>() : strings[k];
      const std::string decoded_skip =
          g.contains("decoded_skip_special") ? g["decoded_skip_special"].get<std::string>() : decoded;
      auto a = tok->encode(strings[k], false);
      auto b = tok->encode(strings[k], true);
      ASSERT_TRUE(a.ok() && b.ok());
      const bool good = *a == ids && *b == ids_special && tok->decode(ids) == decoded &&
                        tok->decode(ids, true) == decoded_skip;
      EXPECT_EQ(*a, ids) << name << " #" << k << " " << json(strings[k]).dump();
      EXPECT_EQ(*b, ids_special) << name << " #" << k;
      EXPECT_EQ(tok->decode(ids), decoded) << name << " #" << k;
      EXPECT_EQ(tok->decode(ids, true), decoded_skip) << name << " #" << k;
      IncrementalDetokenizer d(*tok, true);
      std::string acc;
      for (int32_t id : ids) acc += d.push(id);
      EXPECT_EQ(acc + d.finish(), decoded_skip) << name << " #" << k;
      ok += good;
    }
    std::printf("variant %-26s %zu/%zu\n", name.c_str(), ok, lines.size());
  }
  EXPECT_GE(n_variants, 21u);
}

}  // namespace
}  // namespace tf
