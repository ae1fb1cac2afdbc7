// Draft decoding (runtime/drafts.h): the copy proposer, the acceptance rule, and whole generations
// on every committed tiny checkpoint and the demo model: plain = copy-drafted = MTP-drafted ids,
// greedy and seeded sampling, with images.
#include "runtime/drafts.h"
#include "test_pipeline.h"

#include <gtest/gtest.h>

#include "../sanitized.h"
#include "engine_test_util.h"
#include "runtime/pipeline.h"

namespace tf {
namespace {

using enginetest::read_bytes;
using enginetest::test_name;

const std::string kRoot = std::string(TF_SOURCE_DIR);

TEST(CopyDrafts, ContinuesTheMostRecentLongestMatch) {
  // context: 5 6 7 8 9 | 1 5 6 7 2 3 | 5 6 7  -> the 3-gram "5 6 7" last occurred before "2 3"
  const std::vector<int32_t> prompt{5, 6, 7, 8, 9, 1, 5, 6, 7, 2, 3}, out{5, 6, 7};
  EXPECT_EQ(propose_copy(prompt, out, 4, 3, 1), (std::vector<int32_t>{2, 3, 5, 6}));
  EXPECT_EQ(propose_copy(prompt, out, 1, 3, 1), (std::vector<int32_t>{2}));
  EXPECT_TRUE(propose_copy(prompt, out, 0, 3, 1).empty());
}

TEST(CopyDrafts, FallsBackToShorterNgramsAndStopsAtImageTokens) {
  // "4 7" never occurred before; "7" did (followed by 8 9 99 1).
  const std::vector<int32_t> prompt{3, 7, 8, 9, 99, 1}, out{4, 7};
  EXPECT_EQ(propose_copy(prompt, out, 4, 3, 1), (std::vector<int32_t>{8, 9, 99, 1}));
  EXPECT_EQ(propose_copy(prompt, out, 4, 3, 1, /*image_token_id=*/99), (std::vector<int32_t>{8, 9}));
  EXPECT_TRUE(propose_copy(prompt, out, 4, 3, 2).empty());  // min_ngram 2: no match
  EXPECT_TRUE(propose_copy({}, std::vector<int32_t>{1}, 4, 3, 1).empty());
  const std::vector<int32_t> none{1, 2, 3};
  EXPECT_TRUE(propose_copy(none, std::vector<int32_t>{4}, 4, 3, 1).empty());
}

TEST(CopyDrafts, RepetitionProposesItsOwnContinuation) {
  // A run of one token proposes more of it (the match may overlap the suffix); among occurrences
  // the most recent with a full k tokens after it wins, else the one with the most.
  const std::vector<int32_t> prompt{1, 2}, out{9, 9, 9};
  EXPECT_EQ(propose_copy(prompt, out, 4, 3, 1), (std::vector<int32_t>{9}));
  const std::vector<int32_t> out2{9, 9, 9, 9, 9, 9};
  EXPECT_EQ(propose_copy(prompt, out2, 4, 3, 1), (std::vector<int32_t>{9, 9, 9}));
  EXPECT_EQ(propose_copy(prompt, out2, 2, 3, 1), (std::vector<int32_t>{9, 9}));
  // context 1 2 5 6 3 1 2 1 2: "1 2" at 5 is followed by two tokens, at 0 by "5 6 3".
  const std::vector<int32_t> p2{1, 2, 5, 6, 3}, o2{1, 2, 1, 2};
  EXPECT_EQ(propose_copy(p2, o2, 3, 2, 2), (std::vector<int32_t>{5, 6, 3}));
  EXPECT_EQ(propose_copy(p2, o2, 2, 2, 2), (std::vector<int32_t>{1, 2}));
}

Buffer logits_rows(const std::vector<std::vector<float>>& rows) {
  Buffer b(DType::F32, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy(rows[i].begin(), rows[i].end(), b.as<float>() + i * rows[0].size());
  return b;
}

TEST(AcceptDrafts, GreedyTakesTheAgreeingPrefixPlusOne) {
  const Buffer lg = logits_rows({{0, 3, 1, 0}, {5, 0, 0, 0}, {0, 0, 0, 2}, {0, 1, 0, 0}});
  SamplingParams greedy;
  // Row argmaxes: 1, 0, 3, 1.
  EXPECT_EQ(accept_drafts(lg, std::vector<int32_t>{1, 0, 3}, greedy, 0), (std::vector<int32_t>{1, 0, 3, 1}));
  EXPECT_EQ(accept_drafts(lg, std::vector<int32_t>{1, 2, 3}, greedy, 0), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(accept_drafts(lg, std::vector<int32_t>{2, 0, 3}, greedy, 0), (std::vector<int32_t>{1}));
  EXPECT_EQ(accept_drafts(lg, std::vector<int32_t>{}, greedy, 0), (std::vector<int32_t>{1}));
}

TEST(AcceptDrafts, SamplingDrawsWhatPlainDecodingDrawsAtEachPosition) {
  std::vector<std::vector<float>> rows(6, std::vector<float>{0.1f, 0.5f, 0.2f, 0.4f, 0.3f});
  const Buffer lg = logits_rows(rows);
  SamplingParams sp{1.0f, 1.0f, 0, 99};
  const uint64_t pos = 17;
  std::vector<int32_t> plain;
  for (uint64_t i = 0; i < 6; ++i)
    plain.push_back(sample_token(std::span<const float>(rows[i]), sp, pos + i));
  // Drafts equal to the draws are all accepted, plus the bonus draw.
  std::vector<int32_t> d(plain.begin(), plain.begin() + 5);
  EXPECT_EQ(accept_drafts(lg, d, sp, pos), plain);
  // A wrong third draft: the third token is the plain draw, and nothing after it.
  d[2] = (d[2] + 1) % 5;
  EXPECT_EQ(accept_drafts(lg, d, sp, pos), (std::vector<int32_t>(plain.begin(), plain.begin() + 3)));
}

TEST(DraftMode, ParsesAndResolves) {
  EXPECT_EQ(*parse_draft_mode("copy"), DraftMode::kCopy);
  EXPECT_EQ(*parse_draft_mode("mtp"), DraftMode::kMtp);
  EXPECT_EQ(*parse_draft_mode("off"), DraftMode::kOff);
  EXPECT_EQ(*parse_draft_mode("auto"), DraftMode::kAuto);
  auto bad = parse_draft_mode("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "--drafts takes auto, copy, mtp or off, not 'fast'");
}

struct GenCase {
  std::string ckpt, image, text;
  bool expect_accepted = false;
};

class DraftsGenerate : public ::testing::TestWithParam<GenCase> {};

// Plain, copy-drafted and (where the checkpoint has MTP layers) MTP-drafted generations give the
// same ids, greedy and seeded, with eos honoured or ignored, for an image prompt and a text prompt.
TEST_P(DraftsGenerate, DraftedEqualsPlain) {
  const GenCase& c = GetParam();
  auto pipe = Pipeline::load(kRoot + "/" + c.ckpt, test_pipeline_options());
  ASSERT_TRUE(pipe.ok()) << pipe.error().message;
  Pipeline& p = **pipe;
  const bool mtp = p.model().n_mtp_layers() > 0;
  EXPECT_EQ(mtp, c.ckpt.find("qwen3_5-tiny") != std::string::npos);  // demo-qwen35 ships no mtp.*
  auto resolved = resolve_draft_mode(DraftMode::kAuto, p.model());
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(*resolved, mtp ? DraftMode::kMtp : DraftMode::kCopy);
  if (!mtp) {
    EXPECT_FALSE(resolve_draft_mode(DraftMode::kMtp, p.model()).ok());
  }

  std::vector<Prompt> prompts;
  for (bool with_image : {true, false}) {
    if (enginetest::kSanitized && !with_image) continue;  // under the sanitizers the image prompt only
    nlohmann::ordered_json content = nlohmann::ordered_json::array();
    std::vector<std::vector<uint8_t>> images;
    if (with_image) {
      content.push_back({{"type", "image"}});
      images.push_back(read_bytes(kRoot + "/" + c.image));
    }
    content.push_back({{"type", "text"}, {"text", c.text}});
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
    ChatTemplateOptions o;
    auto pr = p.build_chat_prompt(msgs, images, o);
    ASSERT_TRUE(pr.ok()) << pr.error().message;
    prompts.push_back(std::move(pr).value());
  }
  const std::vector<SamplingParams> samplings{SamplingParams{}, SamplingParams{1.0f, 1.0f, 0, 7},
                                              SamplingParams{0.8f, 0.9f, 20, 12345}};
  int64_t proposed = 0, accepted = 0;
  for (size_t pi = 0; pi < prompts.size(); ++pi)
    for (size_t si = 0; si < samplings.size(); ++si)
      for (bool ignore_eos : {true, false}) {
        // Under the sanitizers half the runs: each sampling once, with and without eos in turn.
        if (enginetest::kSanitized && (si % 2 == 0) != ignore_eos) continue;
        GenerateOptions go;
        go.sampling = samplings[si];
        go.max_tokens = 40;
        go.ignore_eos = ignore_eos;
        go.drafts.mode = DraftMode::kOff;
        auto plain = generate(p, prompts[pi], go);
        ASSERT_TRUE(plain.ok()) << plain.error().message;
        EXPECT_EQ(plain->draft_proposed, 0);
        std::vector<DraftMode> modes{DraftMode::kCopy};
        if (mtp) modes.push_back(DraftMode::kMtp);
        for (DraftMode mode : modes) {
          go.drafts.mode = mode;
          auto d = generate(p, prompts[pi], go);
          ASSERT_TRUE(d.ok()) << d.error().message;
          const std::string what = c.ckpt + " prompt " + std::to_string(pi) + " sampling " +
                                   std::to_string(si) + (ignore_eos ? " ignore_eos" : "") + " drafts " +
                                   draft_mode_name(mode);
          EXPECT_EQ(d->ids, plain->ids) << what;
          EXPECT_EQ(d->finish_reason, plain->finish_reason) << what;
          EXPECT_EQ(d->drafts, draft_mode_name(mode));
          EXPECT_LE(d->draft_accepted, d->draft_proposed);
          EXPECT_LE(d->decode_steps, plain->decode_steps);
          // Every decode step yields its accepted drafts plus one token (the last step may end
          // on an accepted draft when a stop condition cuts it).
          const int64_t extra =
              d->decode_steps + d->draft_accepted - (static_cast<int64_t>(d->ids.size()) - 1);
          EXPECT_TRUE(extra == 0 || extra == 1) << what;
          proposed += d->draft_proposed;
          accepted += d->draft_accepted;
        }
      }
  EXPECT_GT(proposed, 0) << "no drafts were proposed at all";
  if (c.expect_accepted) {
    EXPECT_GT(accepted, 0) << "no draft was accepted, so the equality above proves little";
  }
  std::printf("[%s] drafts proposed %lld, accepted %lld\n", c.ckpt.c_str(), static_cast<long long>(proposed),
              static_cast<long long>(accepted));
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, DraftsGenerate,
    ::testing::Values(
        GenCase{"tests/golden/ckpt/lighton_ocr-tiny-bf16", "tests/golden/images/page_1540x1190.png",
                "Read it"},
        GenCase{"tests/golden/ckpt/lighton_ocr-tiny-fp32", "tests/golden/images/page_1540x1190.png",
                "Read it"},
        GenCase{"tests/golden/ckpt/mistral3-tiny-bf16-untied", "tests/golden/images/page_1540x1190.png",
                "Read it"},
        GenCase{"tests/golden/ckpt/qwen3_5-tiny-bf16", "tests/golden/images/page_1540x1190.png", "Read it"},
        GenCase{"tests/golden/ckpt/qwen3_5-tiny-bf16-untied", "tests/golden/images/page_1540x1190.png",
                "Read it"},
        GenCase{"tests/golden/ckpt/qwen3_5-tiny-fp32", "tests/golden/images/page_1540x1190.png", "Read it"},
        GenCase{"models/demo-lighton", "examples/line1.png", "Transcribe", true},
        GenCase{"models/demo-qwen35", "examples/line3.png", "Transcribe", true}),
    [](const auto& info) { return test_name(info.param.ckpt.substr(info.param.ckpt.rfind('/') + 1)); });

}  // namespace
}  // namespace tf
