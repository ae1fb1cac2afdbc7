// The vision phase batches across requests (runtime/engine_vision.cpp): the images of every request
// that starts in a step go through the encoder in one call, an image two of them share is encoded
// once, and each request's ids equal those it gets alone (its image rows do not depend on the call).
#include <gtest/gtest.h>

#include <regex>

#include "engine_test_util.h"

using namespace tf;
using namespace tf::enginetest;

namespace {

// A greedy request over `images` (files under tests/golden/images) and a question.
GenerationRequest request(const std::vector<std::string>& images, const std::string& question) {
  GenerationRequest r;
  r.id = "vision-batch";
  ordered_json content = ordered_json::array();
  for (size_t i = 0; i < images.size(); ++i) {
    content.push_back({{"type", "image_url"}, {"image_url", {{"url", "image:" + std::to_string(i + 1)}}}});
    r.images.push_back(read_bytes(kGolden + "/images/" + images[i]));
  }
  content.push_back({{"type", "text"}, {"text", question}});
  r.messages = ordered_json::array({{{"role", "user"}, {"content", content}}});
  r.max_tokens = 12;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.sampling_given.temperature = true;
  return r;
}

std::vector<int32_t> ids_of(RequestChannel& ch) {
  std::vector<int32_t> ids;
  for (;;) {
    auto e = ch.pop(120000);
    if (!e || e->kind == EngineEvent::Kind::Error) {
      ADD_FAILURE() << (e ? e->message : "timeout");
      return ids;
    }
    if (e->kind == EngineEvent::Kind::Token && e->token >= 0) ids.push_back(e->token);
    if (e->kind == EngineEvent::Kind::Finished) return ids;
  }
}

int64_t counter(const std::string& metrics, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(metrics, m, std::regex("\n" + name + " ([0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

class VisionBatch : public ::testing::TestWithParam<std::string> {};

TEST_P(VisionBatch, OneEncoderCallPerStepAndIdsEqualSolo) {
  EngineOptions o;
  o.backend = test_backend_name();
  o.checkpoint = kGolden + "/ckpt/" + GetParam();
  o.parallel = 8;
  o.cache_mb = 0;                // no vision cache: every solo run encodes its images again
  o.max_batch_tokens = 1 << 16;  // every starting request's images fit one step
  auto e = Engine::create(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  Engine& engine = **e;
  const std::vector<GenerationRequest> reqs = {
      request({"page_1583x2048.png"}, "Read the page."),
      request({"photo_noise.png"}, "What is this?"),
      request({"page_1583x2048.png"}, "Only the title."),  // the first request's image again
      request({"photo_noise.png", "gray_L.png"}, "Both, in order."),
  };
  std::vector<std::vector<int32_t>> solo;
  for (const auto& r : reqs) {
    solo.push_back(ids_of(*engine.submit(r)));
    ASSERT_EQ(solo.back().size(), 12u);
  }
  const std::string before = engine.metrics_text();
  EXPECT_EQ(counter(before, "tensorfold_vision_encode_calls_total"), 4);
  EXPECT_EQ(counter(before, "tensorfold_vision_images_encoded_total"), 5);

  engine.hold_admission(true);  // all four start in the same step
  std::vector<std::shared_ptr<RequestChannel>> chans;
  for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) chans.push_back(engine.submit(*it));
  engine.hold_admission(false);
  for (size_t k = 0; k < chans.size(); ++k) {
    const size_t i = reqs.size() - 1 - k;
    EXPECT_EQ(ids_of(*chans[k]), solo[i]) << GetParam() << ": request " << i << " changed in a shared encode";
  }
  const std::string after = engine.metrics_text();
  // One call, three distinct images (page, noise, gray) for the four requests' five.
  EXPECT_EQ(counter(after, "tensorfold_vision_encode_calls_total"), 5) << after;
  EXPECT_EQ(counter(after, "tensorfold_vision_images_encoded_total"), 8) << after;
  EXPECT_EQ(counter(after, "tensorfold_vision_cache_lookups_total"), 10) << after;
}

// With the vision cache on, a request whose images are cached encodes nothing; one with a cached and
// a new image encodes the new one only, next to another request's images, and reads as before.
TEST_P(VisionBatch, CachedImagesAreReusedInsideABatch) {
  EngineOptions o;
  o.backend = test_backend_name();
  o.checkpoint = kGolden + "/ckpt/" + GetParam();
  o.parallel = 8;
  o.max_batch_tokens = 1 << 16;
  auto e = Engine::create(o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  Engine& engine = **e;
  const GenerationRequest a = request({"page_1583x2048.png"}, "Read the page.");
  const GenerationRequest mixed = request({"gray_L.png", "page_1583x2048.png"}, "Both.");
  const GenerationRequest other = request({"photo_noise.png"}, "What is this?");
  const std::vector<int32_t> solo_a = ids_of(*engine.submit(a));  // caches the page's rows
  engine.hold_admission(true);
  auto ch_mixed = engine.submit(mixed);
  auto ch_other = engine.submit(other);
  engine.hold_admission(false);
  const std::vector<int32_t> got_mixed = ids_of(*ch_mixed), got_other = ids_of(*ch_other);
  const std::string m = engine.metrics_text();
  EXPECT_EQ(counter(m, "tensorfold_vision_encode_calls_total"), 2) << m;
  EXPECT_EQ(counter(m, "tensorfold_vision_images_encoded_total"), 3) << m;  // page; then gray + noise
  EXPECT_EQ(counter(m, "tensorfold_vision_cache_hits_total"), 1) << m;

  // The same requests on an engine without a cache, one by one.
  o.cache_mb = 0;
  auto fresh = Engine::create(o);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  EXPECT_EQ(ids_of(*(*fresh)->submit(a)), solo_a);
  EXPECT_EQ(ids_of(*(*fresh)->submit(mixed)), got_mixed);
  EXPECT_EQ(ids_of(*(*fresh)->submit(other)), got_other);
}

INSTANTIATE_TEST_SUITE_P(Oracle, VisionBatch, ::testing::Values("lighton_ocr-tiny-bf16", "qwen3_5-tiny-bf16"),
                         ckpt_param_name);

}  // namespace
