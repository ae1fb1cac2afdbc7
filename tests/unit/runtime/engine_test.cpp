// The engine on a tiny oracle checkpoint: a request's ids do not depend on what runs beside it,
// seeds decide sampled ids, and bad requests get a 400 and change nothing else.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "engine_test_util.h"

using namespace tf;
using tf::enginetest::ckpt_param_name;
using tf::enginetest::kGolden;
using tf::enginetest::read_bytes;

namespace {

struct Outcome {
  std::vector<int32_t> ids;
  std::string text, finish_reason;
  EngineEvent error;
  bool failed = false;
};

Outcome drain(RequestChannel& ch, int timeout_ms = 60000) {
  Outcome o;
  for (;;) {
    auto e = ch.pop(timeout_ms);
    if (!e) {
      o.failed = true;
      o.error.message = "timeout";
      return o;
    }
    if (e->kind == EngineEvent::Kind::Token) {
      if (e->token >= 0) o.ids.push_back(e->token);
      o.text += e->text;
    } else if (e->kind == EngineEvent::Kind::Finished) {
      o.finish_reason = e->finish_reason;
      return o;
    } else if (e->kind == EngineEvent::Kind::Error) {
      o.failed = true;
      o.error = *e;
      return o;
    }
  }
}

GenerationRequest image_request(const std::string& image_file, int64_t max_tokens) {
  GenerationRequest r;
  r.id = "test";
  r.messages = ordered_json::parse(
      R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"image:1"}}]}])");
  r.images.push_back(read_bytes(kGolden + "/images/" + image_file));
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.sampling_given.temperature = true;
  return r;
}

GenerationRequest text_request(const std::string& text, int64_t max_tokens) {
  GenerationRequest r;
  r.id = "test";
  r.messages = ordered_json::array({{{"role", "user"}, {"content", text}}});
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.sampling_given.temperature = true;
  return r;
}

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EngineOptions o;
    o.backend = test_backend_name();
    o.checkpoint = kGolden + "/ckpt/lighton_ocr-tiny-bf16";
    o.parallel = 4;
    o.prefill_chunk = 64;  // several chunks per image prompt, so chunking and batching interleave
    auto e = Engine::create(o);
    ASSERT_TRUE(e.ok()) << e.error().message;
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() { delete engine_; }
  static Engine* engine_;
};
Engine* EngineTest::engine_ = nullptr;

TEST_F(EngineTest, ConcurrentEqualsSolo) {
  Outcome solo_img = drain(*engine_->submit(image_request("page_1583x2048.png", 24)));
  Outcome solo_txt = drain(*engine_->submit(text_request("Total: 1,234.56 EUR", 24)));
  ASSERT_FALSE(solo_img.failed) << solo_img.error.message;
  ASSERT_FALSE(solo_txt.failed) << solo_txt.error.message;
  ASSERT_EQ(solo_img.ids.size(), 24u);
  EXPECT_EQ(solo_img.finish_reason, "length");
  std::vector<std::shared_ptr<RequestChannel>> chans;
  for (int i = 0; i < 3; ++i) {
    chans.push_back(engine_->submit(text_request("Total: 1,234.56 EUR", 24)));
    chans.push_back(engine_->submit(image_request("page_1583x2048.png", 24)));
  }
  for (size_t i = 0; i < chans.size(); ++i) {
    Outcome o = drain(*chans[i]);
    ASSERT_FALSE(o.failed) << o.error.message;
    EXPECT_EQ(o.ids, i % 2 ? solo_img.ids : solo_txt.ids) << "request " << i << " changed next to others";
  }
}

TEST_F(EngineTest, SeedDecidesSampledIds) {
  auto sampled = [&](uint64_t seed) {
    GenerationRequest r = text_request("Invoice No. 4711", 32);
    r.sampling = SamplingParams{1.0f, 1.0f, 0, seed};
    r.sampling_given = {true, true, true, true};
    return drain(*engine_->submit(std::move(r)));
  };
  Outcome a = sampled(7), b = sampled(7), c = sampled(8);
  ASSERT_FALSE(a.failed);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_NE(a.ids, c.ids);
}

TEST_F(EngineTest, ContextLimitIsExactlyInclusive) {
  // The prompt plus max_tokens may equal the context but not exceed it.
  auto ids = engine_->tokenize(text_request("hello", 1));
  ASSERT_TRUE(ids.ok());
  int64_t ctx = engine_->info().context_length;
  int64_t room = ctx - static_cast<int64_t>(ids->size());
  Outcome over = drain(*engine_->submit(text_request("hello", room + 1)));
  ASSERT_TRUE(over.failed);
  EXPECT_EQ(over.error.http_status, 400);
  EXPECT_EQ(over.error.code, "context_length_exceeded");
  GenerationRequest exact = text_request("hello", room);
  exact.ignore_eos = false;
  exact.cancelled->store(false);
  auto ch = engine_->submit(std::move(exact));
  auto first = ch->pop(60000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->kind, EngineEvent::Kind::Started);
}

TEST_F(EngineTest, BadImageGetsA400AndOthersAreUntouched) {
  Outcome before = drain(*engine_->submit(text_request("abc", 8)));
  GenerationRequest bad = image_request("page_1583x2048.png", 8);
  bad.images[0] = {'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'};
  Outcome o = drain(*engine_->submit(std::move(bad)));
  ASSERT_TRUE(o.failed);
  EXPECT_EQ(o.error.http_status, 400);
  EXPECT_EQ(o.error.message, "image 1 is not PNG, JPEG or WebP; send one of those");
  GenerationRequest truncated = image_request("page_1583x2048.png", 8);
  truncated.images[0].resize(truncated.images[0].size() / 2);
  o = drain(*engine_->submit(std::move(truncated)));
  ASSERT_TRUE(o.failed);
  EXPECT_EQ(o.error.message, "image 1 could not be decoded; send PNG, JPEG or WebP");
  Outcome after = drain(*engine_->submit(text_request("abc", 8)));
  EXPECT_EQ(before.ids, after.ids);
}

// Raw text is tokenized as Transformers' tokenizer does: special tokens recognised, placeholders
// kept as single ids (tokenize --text, /v1/tokenize with a prompt). Only chat messages with image
// parts expand them; generating from such a text prompt is refused (no images to fill them).
TEST_F(EngineTest, RawTextTokenizeKeepsPlaceholders) {
  GenerationRequest r;
  r.id = "tok";
  r.prompt_text = "<|image_pad|><|image_pad|><|vision_end|>";
  auto ids = engine_->tokenize(r);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_EQ(*ids, (std::vector<int32_t>{1413, 1413, 1411}));  // tests/golden/README.md: tiny ids
  r.prompt_text = "a<|image_pad|>b";
  ids = engine_->tokenize(r);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 1413), 1);
  r.max_tokens = 2;
  Outcome gen = drain(*engine_->submit(r));
  EXPECT_TRUE(gen.failed);
  EXPECT_EQ(gen.error.message, "the prompt has 1 image placeholders but 0 images were given");
}

TEST_F(EngineTest, CancelledRequestIsDroppedWithinAStep) {
  GenerationRequest r = text_request("a long answer please", 2000);
  auto cancel = r.cancelled;
  auto ch = engine_->submit(std::move(r));
  int tokens = 0;
  while (tokens < 2) {
    auto e = ch->pop(60000);
    ASSERT_TRUE(e.has_value());
    tokens += e->kind == EngineEvent::Kind::Token;
  }
  cancel->store(true);
  // The engine stops sending tokens within one step and records the reason.
  for (int i = 0; i < 200; ++i) {
    if (engine_->metrics_text().find("reason=\"client-left\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(engine_->metrics_text().find("reason=\"client-left\"} 1"), std::string::npos)
      << engine_->metrics_text();
  // Later requests still run.
  EXPECT_FALSE(drain(*engine_->submit(text_request("abc", 4))).failed);
}

// 8 concurrent requests (greedy and seeded, with and without images) on both families return the
// ids each gets alone: a request's numbers never depend on what runs beside it.
class EngineFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineFamilies, EightConcurrentEqualSolo) {
  EngineOptions o;
  o.backend = test_backend_name();
  o.checkpoint = kGolden + "/ckpt/" + GetParam();
  o.parallel = 8;
  o.prefill_chunk = 64;
  auto e = Engine::create(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  Engine& engine = **e;
  auto make = [&](int i) {
    GenerationRequest r = i % 2 ? image_request(i % 4 == 1 ? "page_1583x2048.png" : "photo_noise.png", 20)
                                : text_request(i % 4 == 0 ? "Invoice No. 4711" : "Total: 1,234.56 EUR", 20);
    if (i >= 4) {
      r.sampling = SamplingParams{0.8f, 0.95f, 20, static_cast<uint64_t>(100 + i)};
      r.sampling_given = {true, true, true, true};
    }
    return r;
  };
  std::vector<Outcome> solo;
  for (int i = 0; i < 8; ++i) {
    solo.push_back(drain(*engine.submit(make(i))));
    ASSERT_FALSE(solo.back().failed) << solo.back().error.message;
    ASSERT_EQ(solo.back().ids.size(), 20u);
  }
  std::vector<std::shared_ptr<RequestChannel>> chans;
  for (int i = 7; i >= 0; --i) chans.push_back(engine.submit(make(i)));  // other order, all at once
  for (int k = 0; k < 8; ++k) {
    int i = 7 - k;
    Outcome o2 = drain(*chans[k]);
    ASSERT_FALSE(o2.failed) << o2.error.message;
    EXPECT_EQ(o2.ids, solo[i].ids) << GetParam() << " request " << i << " changed next to others";
  }
}

INSTANTIATE_TEST_SUITE_P(Oracle, EngineFamilies,
                         ::testing::Values("lighton_ocr-tiny-bf16", "qwen3_5-tiny-bf16"), ckpt_param_name);

}  // namespace
