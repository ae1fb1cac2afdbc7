// The engine with drafts against the engine without: ids, text, finish reasons and logprobs equal
// for image requests, greedy and seeded, with max_tokens and stop strings cutting at every place,
// including inside runs of accepted drafts; usage and /metrics report proposed / accepted.
#include <gtest/gtest.h>

#include <vector>

#include "../sanitized.h"
#include "engine_test_util.h"

namespace tf {
namespace {

using enginetest::kSanitized;
using enginetest::read_bytes;
using enginetest::test_name;

const std::string kRoot = std::string(TF_SOURCE_DIR);

struct Outcome {
  std::vector<int32_t> ids;
  std::string text, finish_reason;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> tops;
  Usage usage;
  bool failed = false;
  std::string error;
  bool operator==(const Outcome& o) const {
    return ids == o.ids && text == o.text && finish_reason == o.finish_reason && logprobs == o.logprobs &&
           tops == o.tops;
  }
};

Outcome drain(RequestChannel& ch) {
  Outcome o;
  for (;;) {
    auto e = ch.pop(120000);
    if (!e) {
      o.failed = true;
      o.error = "timeout";
      return o;
    }
    if (e->kind == EngineEvent::Kind::Token) {
      if (e->token >= 0) o.ids.push_back(e->token);
      o.text += e->text;
      if (e->logprob) o.logprobs.push_back(e->logprob->logprob);
      std::vector<std::pair<int32_t, float>> t;
      for (const auto& lp : e->top_logprobs) t.emplace_back(lp.id, lp.logprob);
      if (e->token >= 0) o.tops.push_back(std::move(t));
    } else if (e->kind == EngineEvent::Kind::Finished) {
      o.finish_reason = e->finish_reason;
      o.usage = e->usage;
      return o;
    } else if (e->kind == EngineEvent::Kind::Error) {
      o.failed = true;
      o.error = e->message;
      return o;
    }
  }
}

struct Case {
  std::string ckpt, image;
  bool expect_accepted = false;  // drafts are accepted on this one (asserted, so the equality is not vacuous)
};

class DraftsEngine : public ::testing::TestWithParam<Case> {
 protected:
  std::unique_ptr<Engine> make(DraftMode mode) {
    EngineOptions o;
    o.backend = test_backend_name();
    o.checkpoint = kRoot + "/" + GetParam().ckpt;
    o.parallel = 2;
    o.prefill_chunk = 64;
    o.drafts.mode = mode;
    auto e = Engine::create(o);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    return e.ok() ? std::move(e).value() : nullptr;
  }
  GenerationRequest request(int64_t max_tokens, const SamplingParams& sp,
                            std::vector<std::string> stop = {}) {
    GenerationRequest r;
    r.id = "drafts-test";
    r.messages = nlohmann::ordered_json::parse(
        R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"image:1"}},{"type":"text","text":"Read it"}]}])");
    r.images.push_back(read_bytes(kRoot + "/" + GetParam().image));
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.sampling = sp;
    r.sampling_given = {true, true, true, true};
    r.stop = std::move(stop);
    r.logprobs = true;
    r.top_logprobs = 3;
    return r;
  }
};

TEST_P(DraftsEngine, DraftedEqualsPlainWhereverItIsCut) {
  auto plain = make(DraftMode::kOff);
  auto drafted = make(DraftMode::kAuto);
  ASSERT_TRUE(plain && drafted);
  std::vector<std::unique_ptr<Engine>> others;
  if (GetParam().ckpt.find("qwen3_5") != std::string::npos) others.push_back(make(DraftMode::kCopy));
  int64_t proposed = 0, accepted = 0, proposed_auto = 0, accepted_auto = 0;
  auto both = [&](const GenerationRequest& r, const std::string& what) {
    Outcome a = drain(*plain->submit(r));
    ASSERT_FALSE(a.failed) << a.error;
    EXPECT_EQ(a.usage.draft_proposed, 0);
    EXPECT_EQ(a.usage.draft_accepted, 0);
    std::vector<Engine*> engines{drafted.get()};
    for (auto& e : others) engines.push_back(e.get());
    for (Engine* e : engines) {
      Outcome b = drain(*e->submit(r));
      ASSERT_FALSE(b.failed) << b.error;
      EXPECT_TRUE(a == b) << GetParam().ckpt << " " << what << ": plain " << a.ids.size() << " tokens '"
                          << a.text << "' (" << a.finish_reason << "), drafted " << b.ids.size()
                          << " tokens '" << b.text << "' (" << b.finish_reason << ")";
      EXPECT_LE(b.usage.draft_accepted, b.usage.draft_proposed);
      EXPECT_LE(b.usage.draft_accepted, static_cast<int64_t>(b.ids.size()));
      proposed += b.usage.draft_proposed;
      accepted += b.usage.draft_accepted;
      if (e == drafted.get()) {
        proposed_auto += b.usage.draft_proposed;
        accepted_auto += b.usage.draft_accepted;
      }
    }
  };
  for (const SamplingParams& sp : {SamplingParams{}, SamplingParams{1.0f, 1.0f, 0, 42}}) {
    const std::string kind = sp.temperature > 0 ? "seeded" : "greedy";
    // Under the sanitizers greedy only (seeded drafts run there in DraftsGenerate; here in the test gate).
    if (kSanitized && sp.temperature > 0) continue;
    Outcome full = drain(*plain->submit(request(48, sp)));
    ASSERT_FALSE(full.failed) << full.error;
    both(request(48, sp), kind);
    // Under the sanitizers fewer cut points: the same code paths, a third of the requests.
    const std::vector<int64_t> cuts =
        kSanitized ? std::vector<int64_t>{1, 4, 17} : std::vector<int64_t>{1, 2, 3, 4, 5, 7, 9, 12, 17, 31};
    for (int64_t m : cuts) both(request(m, sp), kind + " max_tokens " + std::to_string(m));
    // Stop strings that first occur at many places of the uncut text (inside accepted runs too).
    const size_t n_stops = kSanitized ? 3 : 10;
    for (size_t off = 1; off + 2 < full.text.size(); off += std::max<size_t>(1, full.text.size() / n_stops)) {
      const std::string stop = full.text.substr(off, 2);
      both(request(48, sp, {stop}), kind + " stop '" + stop + "'");
    }
  }
  EXPECT_GT(proposed, 0);
  if (GetParam().expect_accepted) {
    EXPECT_GT(accepted_auto, 0);
  }
  std::printf("[%s] drafts proposed %lld, accepted %lld (auto: %lld / %lld)\n", GetParam().ckpt.c_str(),
              static_cast<long long>(proposed), static_cast<long long>(accepted),
              static_cast<long long>(accepted_auto), static_cast<long long>(proposed_auto));
  // /metrics counts what the requests' usage reported.
  const std::string metrics = drafted->metrics_text(), none = plain->metrics_text();
  EXPECT_NE(metrics.find("tensorfold_draft_tokens_proposed_total " + std::to_string(proposed_auto) + "\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tensorfold_draft_tokens_accepted_total " + std::to_string(accepted_auto) + "\n"),
            std::string::npos);
  EXPECT_NE(none.find("tensorfold_draft_tokens_proposed_total 0\n"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, DraftsEngine,
    ::testing::Values(Case{"tests/golden/ckpt/lighton_ocr-tiny-bf16",
                           "tests/golden/images/page_1583x2048.png"},
                      Case{"tests/golden/ckpt/qwen3_5-tiny-bf16", "tests/golden/images/page_1583x2048.png"},
                      Case{"models/demo-lighton", "examples/line2.png", true},
                      Case{"models/demo-qwen35", "examples/line2.png", true}),
    [](const auto& info) { return test_name(info.param.ckpt.substr(info.param.ckpt.rfind('/') + 1)); });

}  // namespace
}  // namespace tf
