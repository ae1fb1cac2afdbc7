// The real Qwen3 tokenizer against ids made by HF tokenizers (Rust, npm tokenizers@0.23.2):
// tests/data/qwen3/golden_encodings.jsonl (315 strings, committed; the tokenizer itself comes from
// scripts/fetch_test_data.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tf {
namespace {

using testing::read_jsonl;
using testing::source_path;

const Tokenizer* qwen3() {
  static std::unique_ptr<Tokenizer> tok = [] {
    const std::string path = source_path("tests/data/qwen3/tokenizer.json");
    if (!testing::file_exists(path)) return std::unique_ptr<Tokenizer>();
    auto t = Tokenizer::load(path, source_path("tests/data/qwen3/tokenizer_config.json"));
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
    if (!t.ok()) return std::unique_ptr<Tokenizer>();
    return std::make_unique<Tokenizer>(std::move(t).value());
  }();
  return tok.get();
}

#define REQUIRE_QWEN3()   \
  if (qwen3() == nullptr) \
  GTEST_SKIP() << "missing tests/data/qwen3/tokenizer.json (run scripts/fetch_test_data.sh)"

TEST(TokenizerQwen3, Metadata) {
  REQUIRE_QWEN3();
  const Tokenizer& t = *qwen3();
  EXPECT_EQ(t.vocab_size(), 151669u);
  EXPECT_EQ(t.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.id_to_token(151655), "<|image_pad|>");
  EXPECT_TRUE(t.is_special(151645));
  EXPECT_FALSE(t.is_special(151667));  // <think> is added but not special
  EXPECT_FALSE(t.is_special(9707));
  EXPECT_EQ(t.eos_token_id(), 151645);
  EXPECT_EQ(t.pad_token_id(), 151643);
  EXPECT_FALSE(t.bos_token_id().has_value());
  EXPECT_EQ(t.added_tokens().size(), 26u);
}

TEST(TokenizerQwen3, GoldenEncodings) {
  REQUIRE_QWEN3();
  const Tokenizer& t = *qwen3();
  const auto lines = read_jsonl(source_path("tests/data/qwen3/golden_encodings.jsonl"));
  ASSERT_EQ(lines.size(), 315u);
  size_t pass = 0, decode_pass = 0;
  for (const auto& g : lines) {
    const std::string text = g["text"].get<std::string>();
    const auto want = g["ids"].get<std::vector<int32_t>>();
    auto got = t.encode(text, /*add_special_tokens=*/false);
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, want) << "text: " << g["text"].dump();
    if (*got == want) ++pass;
    const std::string decoded = t.decode(want);
    EXPECT_EQ(decoded, g["decoded"].get<std::string>()) << "text: " << g["text"].dump();
    if (decoded == g["decoded"].get<std::string>()) ++decode_pass;
    if (g["roundtrip"].get<bool>()) {
      EXPECT_EQ(decoded, text);
    }
  }
  std::printf("qwen3 golden_encodings: encode %zu/%zu, decode %zu/%zu\n", pass, lines.size(), decode_pass,
              lines.size());
}

TEST(TokenizerQwen3, AddSpecialTokensIsNoOpForByteLevelPostProcessor) {
  REQUIRE_QWEN3();
  auto a = qwen3()->encode("Hello world", true);
  auto b = qwen3()->encode("Hello world", false);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(TokenizerQwen3, InvalidUtf8IsAnError) {
  REQUIRE_QWEN3();
  auto r = qwen3()->encode(std::string("ab\xC3(", 4));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not valid UTF-8 (byte offset 2)"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(qwen3()->encode(std::string("\xED\xA0\x80", 3)).ok());  // a surrogate
  EXPECT_FALSE(qwen3()->encode(std::string("\xC0\xAF", 2)).ok());      // overlong
}

TEST(TokenizerQwen3, EmptyInput) {
  REQUIRE_QWEN3();
  auto r = qwen3()->encode("");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(qwen3()->decode(std::vector<int32_t>{}), "");
}

TEST(TokenizerQwen3, DecodeSkipsSpecialAndUnknownIds) {
  REQUIRE_QWEN3();
  const Tokenizer& t = *qwen3();
  // Ids taken from the first golden line: <|im_start|> system \n ... <|im_end|>
  const std::vector<int32_t> ids = {151644, 8948, 198, 151645, 151667, 999999, -1};
  EXPECT_EQ(t.decode(ids, false), "<|im_start|>system\n<|im_end|><think>");
  EXPECT_EQ(t.decode(ids, true), "system\n<think>");
}

TEST(TokenizerQwen3, IncrementalDetokenizerMatchesDecodeOnGoldens) {
  REQUIRE_QWEN3();
  const Tokenizer& t = *qwen3();
  const auto lines = read_jsonl(source_path("tests/data/qwen3/golden_encodings.jsonl"));
  size_t split_chars = 0;
  for (const auto& g : lines) {
    const auto ids = g["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      IncrementalDetokenizer d(t, skip);
      std::string acc;
      for (int32_t id : ids) {
        std::string chunk = d.push(id);
        // Every chunk is complete UTF-8 on its own.
        for (size_t i = 0; i < chunk.size();) {
          const auto c = static_cast<unsigned char>(chunk[i]);
          const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
          ASSERT_LE(i + n, chunk.size()) << "chunk ends inside a character";
          i += n;
        }
        acc += chunk;
      }
      acc += d.finish();
      EXPECT_EQ(acc, t.decode(ids, skip)) << g["text"].dump();
    }
    // Count goldens where some token ends inside a multi-byte character (the case the holding is for).
    for (int32_t id : ids) {
      std::string bytes;
      t.append_token_bytes(id, false, true, bytes);
      if (!bytes.empty() && static_cast<unsigned char>(bytes.back()) >= 0x80 &&
          (static_cast<unsigned char>(bytes.back()) & 0xC0) != 0x80) {
        ++split_chars;
        break;
      }
    }
  }
  EXPECT_GT(split_chars, 10u) << "the goldens should include characters split across tokens";
}

TEST(TokenizerQwen3, ConcurrentEncodeGivesTheGoldenIds) {
  REQUIRE_QWEN3();
  const Tokenizer& t = *qwen3();
  const auto lines = read_jsonl(source_path("tests/data/qwen3/golden_encodings.jsonl"));
  std::atomic<size_t> wrong{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (size_t k = static_cast<size_t>(w); k < lines.size() * 2; k += 3) {
        const auto& g = lines[k % lines.size()];
        auto got = t.encode(g["text"].get<std::string>(), false);
        if (!got.ok() || *got != g["ids"].get<std::vector<int32_t>>()) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0u);
}

}  // namespace
}  // namespace tf
