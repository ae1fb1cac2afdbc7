// The prompt cache through the engine, on the tiny oracle checkpoints of both families: a second
// question about the same page resumes from cached blocks and still returns, bit for bit, the ids
// and log-probabilities a cache-less engine returns (greedy and seeded sampling); a different image
// of the same size shares no image rows; the same pixels as PNG and as lossless WebP share them;
// eviction under a tiny budget and concurrent requests change nothing either.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../image/encoders.h"
#include "../sanitized.h"
#include "engine_test_util.h"
#include "image/decode.h"

using namespace tf;
using namespace tf::enginetest;

namespace {

// A message part: text, or an image (encoded bytes).
struct Part {
  std::string text;
  std::vector<uint8_t> image;
};

const std::string kPreamble =
    "You are reading one scanned page from an archive of invoices, letters and forms. Read it line by "
    "line, keep the original order, copy numbers, dates, names and amounts exactly as printed, and mark "
    "anything you cannot read with a question mark.";

GenerationRequest request(const std::vector<Part>& parts, uint64_t seed) {
  GenerationRequest r;
  r.id = "cache-test";
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  for (const Part& p : parts) {
    if (p.image.empty()) {
      content.push_back({{"type", "text"}, {"text", p.text}});
    } else {
      content.push_back({{"type", "image_url"}, {"image_url", {{"url", "image:1"}}}});
      r.images.push_back(p.image);
    }
  }
  r.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
  r.max_tokens = 12;
  r.ignore_eos = true;
  r.logprobs = true;
  r.top_logprobs = 5;
  set_sampling(r, SamplingParams{0.8f, 0.95f, 20, seed});
  return r;
}

// checkpoint: a directory under tests/golden/ckpt, or a path.
std::unique_ptr<Engine> make_engine(const std::string& checkpoint, double cache_mb, int parallel = 4,
                                    double kv_cache_mb = 0) {
  EngineOptions o = engine_options(ckpt(checkpoint), parallel);
  o.kv_cache_mb = kv_cache_mb;
  o.cache_mb = cache_mb;
  return create_engine(o);
}

// [first image token position, last + 1) in a prompt.
std::pair<int64_t, int64_t> image_span(const std::vector<int32_t>& ids, int32_t image_token) {
  int64_t first = -1, last = -1;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == image_token) {
      if (first < 0) first = static_cast<int64_t>(i);
      last = static_cast<int64_t>(i);
    }
  return {first, last + 1};
}

// Decoded RGB of a committed image, re-encoded as PNG and lossless WebP (same pixels), and as a PNG
// with one pixel changed (same size, different identity).
struct Encoded {
  std::vector<uint8_t> png, webp, png_other;
};

Encoded encode_variants(const std::string& file) {
  Encoded e;
  auto img = decode_image(read_bytes(kGolden + "/images/" + file), 1);
  EXPECT_TRUE(img.ok());
  const Image& im = *img;
  auto png_of = [&](const std::vector<uint8_t>& rgb) {
    test::PngSpec s = test::png_spec(im.width, im.height);
    s.rows = rgb;
    return test::encode_png(s);
  };
  e.png = png_of(im.rgb);
  std::vector<uint8_t> rgba;
  for (size_t i = 0; i < im.rgb.size(); i += 3)
    rgba.insert(rgba.end(), {im.rgb[i], im.rgb[i + 1], im.rgb[i + 2], 255});
  e.webp = test::encode_webp_lossless_rgba(rgba, im.width, im.height);
  std::vector<uint8_t> other = im.rgb;
  other[0] ^= 0x40;
  e.png_other = png_of(other);
  return e;
}

int32_t image_token_of(const std::string& checkpoint) {
  std::ifstream f(ckpt(checkpoint) + "/config.json");
  return nlohmann::json::parse(f).at("image_token_id").get<int32_t>();
}

class PromptCacheEngine : public ::testing::TestWithParam<std::string> {
 protected:
  int32_t image_token() const { return image_token_of(GetParam()); }
};

// Two questions about one image (greedy, then seeded): the second resumes past the image and the
// shared instruction; ids and log-probabilities equal a cache-less engine's.
// inside_image: the image alone makes a prompt of more than a block whose resume point falls inside
// the image (a large page on the tiny checkpoints), which is checked too.
void second_question_resumes(const std::string& ckpt, const std::string& image_path, bool inside_image) {
  auto cached = make_engine(ckpt, 1024), fresh = make_engine(ckpt, 0);
  ASSERT_TRUE(cached && fresh);
  const int32_t image_token = image_token_of(ckpt);
  const auto page = read_bytes(image_path);
  auto ask = [&](const std::string& q, uint64_t seed) {
    return request({{"", page}, {kPreamble + " " + q, {}}}, seed);
  };
  const std::string q1 = "What is the invoice number?", q2 = "Who signed the letter at the bottom?";
  for (uint64_t seed : {uint64_t{0}, uint64_t{4242}}) {
    SCOPED_TRACE(seed ? "seeded sampling" : "greedy");
    Outcome first = drain(*cached->submit(ask(q1, seed)));
    ASSERT_TRUE(first.error.empty()) << first.error;
    if (seed == 0) {
      EXPECT_EQ(first.cached, 0);
    }
    Outcome second = drain(*cached->submit(ask(q2, seed)));
    Outcome reference = drain(*fresh->submit(ask(q2, seed)));
    ASSERT_TRUE(second.error.empty() && reference.error.empty()) << second.error << reference.error;
    auto ids = cached->tokenize(ask(q2, seed));
    ASSERT_TRUE(ids.ok());
    const int64_t n = static_cast<int64_t>(ids->size());
    const auto [img0, img1] = image_span(*ids, image_token);
    EXPECT_GE(second.cached, 64) << "the second question resumed nothing (prompt of " << n << ")";
    EXPECT_EQ(second.cached % 64, 0);
    EXPECT_GT(second.cached, img1) << "the shared page and preamble should be resumed past the image";
    EXPECT_EQ(reference.cached, 0);
    ASSERT_EQ(second.ids.size(), 12u);
    EXPECT_EQ(second.ids, reference.ids);
    EXPECT_EQ(second.logprobs, reference.logprobs) << "log-probabilities differ after resume";
    // The very same request again resumes its whole prompt but the last partial block.
    Outcome again = drain(*cached->submit(ask(q2, seed)));
    EXPECT_EQ(again.cached, (n - 1) / 64 * 64);
    EXPECT_EQ(again.ids, reference.ids);
    EXPECT_EQ(again.logprobs, reference.logprobs);
  }
  // The page alone: a repeat resumes at a block boundary inside the image, so prefill starts in the
  // middle of the image's rows.
  if (inside_image) {
    GenerationRequest only = request({{"", page}}, 0);
    auto ids = cached->tokenize(request({{"", page}}, 0));
    ASSERT_TRUE(ids.ok());
    const int64_t resume = (static_cast<int64_t>(ids->size()) - 1) / 64 * 64;
    const auto [i0, i1] = image_span(*ids, image_token);
    drain(*cached->submit(request({{"", page}}, 0)));
    Outcome o = drain(*cached->submit(std::move(only)));
    Outcome ref = drain(*fresh->submit(request({{"", page}}, 0)));
    EXPECT_EQ(o.cached, resume);
    if (i0 < resume && resume < i1) {
      SUCCEED() << "resumed inside the image";
    } else {
      ADD_FAILURE() << "expected the resume point " << resume << " inside the image [" << i0 << ", " << i1
                    << ")";
    }
    EXPECT_EQ(o.ids, ref.ids);
    EXPECT_EQ(o.logprobs, ref.logprobs);
  }
  // Text before the page: no prompt block matches, but the page's encoder output is reused.
  const int64_t hits_before = metric(*cached, "tensorfold_vision_cache_hits_total");
  Outcome swapped = drain(*cached->submit(request({{q1, {}}, {"", page}}, 0)));
  Outcome swapped_ref = drain(*fresh->submit(request({{q1, {}}, {"", page}}, 0)));
  EXPECT_EQ(swapped.cached, 0);
  EXPECT_EQ(metric(*cached, "tensorfold_vision_cache_hits_total"), hits_before + 1);
  EXPECT_EQ(swapped.ids, swapped_ref.ids);
  EXPECT_EQ(swapped.logprobs, swapped_ref.logprobs);
  EXPECT_GT(metric(*cached, "tensorfold_prompt_cache_hits_total"), 0);
  EXPECT_GT(metric(*cached, "tensorfold_cached_tokens_total"), 0);
  EXPECT_EQ(metric(*fresh, "tensorfold_cached_tokens_total"), 0);
}

TEST_P(PromptCacheEngine, SecondQuestionAboutThePageResumesAndEqualsFresh) {
  second_question_resumes(GetParam(), kGolden + "/images/page_1583x2048.png", true);
}

// The trained demo checkpoint (models/demo-lighton) on one of its text lines.
TEST(PromptCacheDemo, SecondQuestionAboutTheLineResumesAndEqualsFresh) {
  if (enginetest::kSanitized)
    GTEST_SKIP() << "the tiny checkpoints' cases take these paths under the sanitizers";
  second_question_resumes(std::string(TF_SOURCE_DIR) + "/models/demo-lighton",
                          std::string(TF_SOURCE_DIR) + "/examples/line1.png", false);
}

TEST_P(PromptCacheEngine, ImageIdentityDecidesSharingNotContainerOrSize) {
  auto cached = make_engine(GetParam(), 1024), fresh = make_engine(GetParam(), 0);
  ASSERT_TRUE(cached && fresh);
  const Encoded v = encode_variants("photo_noise.png");
  const auto page = read_bytes(kGolden + "/images/page_1583x2048.png");
  // Page, a text of more than a block, then the varying image and a question.
  auto ask = [&](const std::vector<uint8_t>& image) {
    return request({{"", page}, {kPreamble, {}}, {"", image}, {"Describe this picture.", {}}}, 0);
  };
  Outcome a = drain(*cached->submit(ask(v.png)));
  ASSERT_TRUE(a.error.empty()) << a.error;
  auto ids = cached->tokenize(ask(v.png));
  ASSERT_TRUE(ids.ok());
  // The second image's span: the second run of image tokens.
  std::vector<int32_t> tail(*ids);
  int64_t p1 = 0;
  while (tail[static_cast<size_t>(p1)] != image_token()) ++p1;
  while (tail[static_cast<size_t>(p1)] == image_token()) tail[static_cast<size_t>(p1++)] = -1;
  const auto [i0, i1] = image_span(tail, image_token());
  ASSERT_GT(i0, p1) << "expected two separate images";
  ASSERT_GE(i0 / 64, 1) << "the text before the second image should fill a block";

  // Same size, one pixel different: cached rows stop before that image.
  Outcome b = drain(*cached->submit(ask(v.png_other)));
  Outcome b_ref = drain(*fresh->submit(ask(v.png_other)));
  ASSERT_TRUE(b.error.empty()) << b.error;
  EXPECT_GT(b.cached, 0);
  EXPECT_LE(b.cached, i0) << "rows of a different image were reused";
  EXPECT_EQ(b.ids, b_ref.ids);
  EXPECT_EQ(b.logprobs, b_ref.logprobs);

  // The same pixels as lossless WebP: the whole image is reused.
  Outcome c = drain(*cached->submit(ask(v.webp)));
  Outcome c_ref = drain(*fresh->submit(ask(v.png)));
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_GE(c.cached, i1 / 64 * 64);
  EXPECT_GT(c.cached, i0) << "the WebP copy of the same pixels did not share the PNG's rows";
  EXPECT_EQ(c.ids, c_ref.ids);
  EXPECT_EQ(c.ids, a.ids);
  EXPECT_EQ(c.logprobs, c_ref.logprobs);
}

TEST_P(PromptCacheEngine, TinyBudgetEvictsAndChangesNothing) {
  // A budget smaller than one image's vision output. The prompt blocks of both families live in the
  // model's pools, outside that budget: K/V rows in the paged pool (kv_pool_engine_test.cpp evicts
  // them under pool pressure) and Qwen3.5's recurrent states in state-pool slots
  // (state_slots_engine_test.cpp, snapshot_slots_test.cpp). Whatever is kept or dropped, the
  // outputs are those of an engine without a cache.
  auto cached = make_engine(GetParam(), 0.06), fresh = make_engine(GetParam(), 0);
  ASSERT_TRUE(cached && fresh);
  const auto page = read_bytes(kGolden + "/images/page_1583x2048.png");
  const std::vector<std::string> questions = {"What is the total?", "Which date is printed?",
                                              "Is there a signature?", "What is the total?"};
  for (size_t i = 0; i < questions.size(); ++i) {
    auto r = request({{"", page}, {kPreamble + " " + questions[i], {}}}, i % 2 ? 77 : 0);
    Outcome o = drain(*cached->submit(r));
    Outcome ref =
        drain(*fresh->submit(request({{"", page}, {kPreamble + " " + questions[i], {}}}, i % 2 ? 77 : 0)));
    ASSERT_TRUE(o.error.empty()) << o.error;
    EXPECT_EQ(o.ids, ref.ids) << "question " << i;
    EXPECT_EQ(o.logprobs, ref.logprobs) << "question " << i;
  }
  EXPECT_LE(metric(*cached, "tensorfold_prompt_cache_bytes"), static_cast<int64_t>(0.06 * 1048576));
}

TEST_P(PromptCacheEngine, ConcurrentRequestsWithTheCacheEqualSolo) {
  auto cached = make_engine(GetParam(), 1024, 6), fresh = make_engine(GetParam(), 0);
  ASSERT_TRUE(cached && fresh);
  const auto page = read_bytes(kGolden + "/images/page_1583x2048.png");
  auto make = [&](int i) {
    const std::string q = i % 3 == 0 ? "What is the total?" : i % 3 == 1 ? "Which date?" : "Any names?";
    return request({{"", page}, {kPreamble + " " + q, {}}}, i >= 3 ? 100 + static_cast<uint64_t>(i) : 0);
  };
  std::vector<Outcome> solo;
  for (int i = 0; i < 6; ++i) solo.push_back(drain(*fresh->submit(make(i))));
  drain(*cached->submit(make(0)));  // warm: the others resume while running side by side
  std::vector<std::shared_ptr<RequestChannel>> chans;
  for (int i = 5; i >= 0; --i) chans.push_back(cached->submit(make(i)));
  for (int k = 0; k < 6; ++k) {
    const int i = 5 - k;
    Outcome o = drain(*chans[static_cast<size_t>(k)]);
    ASSERT_TRUE(o.error.empty()) << o.error;
    EXPECT_GT(o.cached, 0) << "request " << i;
    EXPECT_EQ(o.ids, solo[static_cast<size_t>(i)].ids) << "request " << i;
    EXPECT_EQ(o.logprobs, solo[static_cast<size_t>(i)].logprobs) << "request " << i;
  }
}

TEST_P(PromptCacheEngine, RefusedRequestLeavesTheCacheAlone) {
  auto cached = make_engine(GetParam(), 1024);
  ASSERT_TRUE(cached);
  Outcome ok = drain(*cached->submit(request({{kPreamble, {}}}, 0)));
  ASSERT_TRUE(ok.error.empty()) << ok.error;
  const int64_t blocks = metric(*cached, "tensorfold_prompt_cache_blocks");
  const int64_t lookups = metric(*cached, "tensorfold_prompt_cache_lookups_total");
  ASSERT_GT(blocks, 0);
  // Token ids with an image placeholder but no image: refused before anything is computed or cached.
  auto ids = cached->tokenize(request({{kPreamble + " " + kPreamble, {}}}, 0));
  ASSERT_TRUE(ids.ok());
  GenerationRequest bad = request({}, 0);
  bad.messages.reset();
  bad.prompt_ids = *ids;
  bad.prompt_ids->push_back(image_token());
  Outcome o = drain(*cached->submit(std::move(bad)));
  EXPECT_NE(o.error.find("image placeholder tokens"), std::string::npos) << o.error;
  EXPECT_EQ(metric(*cached, "tensorfold_prompt_cache_blocks"), blocks);
  EXPECT_EQ(metric(*cached, "tensorfold_prompt_cache_lookups_total"), lookups);
}

INSTANTIATE_TEST_SUITE_P(Oracle, PromptCacheEngine,
                         ::testing::Values("lighton_ocr-tiny-bf16", "qwen3_5-tiny-bf16"), ckpt_param_name);

}  // namespace
