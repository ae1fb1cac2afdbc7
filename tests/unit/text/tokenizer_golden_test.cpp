// Every tokenizer in tests/golden/text/meta.json against the oracle's goldens (Transformers 5.17 /
// tokenizers 0.23.2 on the GPU machine): ids of encode(text, add_special_tokens=False), decode with and
// without skip_special_tokens, and the incremental detokenizer reproducing both decodes chunk by chunk.
#include <gtest/gtest.h>

#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tf {
namespace {

using testing::file_exists;
using testing::read_jsonl;
using testing::source_path;

struct GoldenSet {
  std::string name, dir;
};

std::vector<GoldenSet> golden_sets() {
  std::vector<GoldenSet> out;
  std::ifstream f(source_path("tests/golden/text/meta.json"));
  if (!f) return out;
  const auto meta = nlohmann::json::parse(f, nullptr, false);
  if (meta.is_discarded() || !meta.contains("tokenizers")) return out;
  for (const auto& [name, v] : meta["tokenizers"].items()) out.push_back({name, v.value("dir", "")});
  return out;
}

std::string check_set(const GoldenSet& set) {
  const std::string dir = source_path(set.dir);
  const std::string golden = source_path("tests/golden/text/" + set.name + ".jsonl.gz");
  if (!file_exists(dir + "/tokenizer.json")) return "missing " + set.dir + "/tokenizer.json";
  if (!file_exists(golden)) return "missing tests/golden/text/" + set.name + ".jsonl.gz";
  const std::string cfg = file_exists(dir + "/tokenizer_config.json") ? dir + "/tokenizer_config.json" : "";
  auto tok = Tokenizer::load(dir + "/tokenizer.json", cfg);
  EXPECT_TRUE(tok.ok()) << set.name << ": " << (tok.ok() ? "" : tok.error().message);
  if (!tok.ok()) return "";
  const auto strings = read_jsonl(source_path("tests/golden/text/strings.jsonl.gz"));
  const auto lines = read_jsonl(golden);
  EXPECT_EQ(strings.size(), lines.size());
  EXPECT_GE(lines.size(), 2000u);
  size_t n_ids = 0, n_dec = 0, n_skip = 0, n_stream = 0, n_round = 0, n_round_hf = 0;
  for (size_t k = 0; k < lines.size() && k < strings.size(); ++k) {
    const auto& g = lines[k];
    const std::string text = strings[k]["text"].get<std::string>();
    if (g["i"].get<size_t>() != strings[k]["i"].get<size_t>()) {
      ADD_FAILURE() << set.name << ": line " << k << " is out of order";
      return "";
    }
    const auto want = g["ids"].get<std::vector<int32_t>>();
    auto got = tok->encode(text, false);
    if (!got.ok()) {
      ADD_FAILURE() << set.name << " i=" << k << ": " << got.error().message;
      continue;
    }
    if (*got == want) {
      ++n_ids;
    } else {
      ADD_FAILURE() << set.name << " i=" << k << " " << strings[k]["category"] << " ids differ for "
                    << nlohmann::json(text).dump();
    }
    const std::string dec = tok->decode(want, false), dec_skip = tok->decode(want, true);
    if (dec == g["decoded"].get<std::string>())
      ++n_dec;
    else
      ADD_FAILURE() << set.name << " i=" << k << " decode differs";
    if (dec_skip == g["decoded_skip_special"].get<std::string>())
      ++n_skip;
    else
      ADD_FAILURE() << set.name << " i=" << k << " decode(skip_special_tokens) differs";
    if (g["decoded"].get<std::string>() == text) {
      ++n_round_hf;
      if (dec == text) ++n_round;
    }
    bool stream_ok = true;
    for (bool skip : {false, true}) {
      IncrementalDetokenizer d(*tok, skip);
      std::string acc;
      for (int32_t id : want) acc += d.push(id);
      acc += d.finish();
      stream_ok = stream_ok && acc == (skip ? dec_skip : dec);
    }
    if (stream_ok)
      ++n_stream;
    else
      ADD_FAILURE() << set.name << " i=" << k << " streamed decode differs from decode";
  }
  std::printf(
      "%s: ids %zu/%zu, decode %zu/%zu, decode(skip_special) %zu/%zu, streamed %zu/%zu, "
      "round trips %zu (HF: %zu)\n",
      set.name.c_str(), n_ids, lines.size(), n_dec, lines.size(), n_skip, lines.size(), n_stream,
      lines.size(), n_round, n_round_hf);
  return "";
}

TEST(TokenizerGolden, OracleGoldens) {
  const auto sets = golden_sets();
  if (sets.empty()) GTEST_SKIP() << "missing tests/golden/text/meta.json";
  std::string skipped;
  for (const auto& s : sets) {
    const std::string why = check_set(s);
    if (!why.empty()) skipped += why + "; ";
  }
  if (!skipped.empty()) GTEST_SKIP() << skipped;
}

}  // namespace
}  // namespace tf
