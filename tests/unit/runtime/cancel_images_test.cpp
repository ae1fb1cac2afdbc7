// A client that leaves while its images are decoded: Pipeline::build_chat_prompt checks the request's
// cancel flag before each image and stops with an error instead of decoding the rest (the engine then
// logs reason=client-left). The end-to-end checks (tests/e2e/server_e2e.mjs) cover the live server.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "runtime/pipeline.h"
#include "test_pipeline.h"

using namespace tf;

namespace {

const std::string kGolden = std::string(TF_SOURCE_DIR) + "/tests/golden";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

TEST(CancelDuringImageDecoding, StopsBeforeTheNextImageAndOtherwiseDecodesAll) {
  auto pipe = Pipeline::load(kGolden + "/ckpt/lighton_ocr-tiny-bf16", test_pipeline_options());
  ASSERT_TRUE(pipe.ok()) << pipe.error().message;
  const auto msgs = nlohmann::ordered_json::parse(
      R"([{"role":"user","content":[{"type":"image"},{"type":"image"},{"type":"text","text":"read"}]}])");
  const std::vector<std::vector<uint8_t>> images = {read_bytes(kGolden + "/images/page_1583x2048.png"),
                                                    read_bytes(kGolden + "/images/page_1583x2048.png")};
  ASSERT_FALSE(images[0].empty());
  std::atomic<bool> cancelled{false};
  auto ok = (*pipe)->build_chat_prompt(msgs, images, ChatTemplateOptions{}, ImageLimits{}, &cancelled);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->images.size(), 2u);
  cancelled = true;
  auto left = (*pipe)->build_chat_prompt(msgs, images, ChatTemplateOptions{}, ImageLimits{}, &cancelled);
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.error().message.find("client left during image decoding"), std::string::npos)
      << left.error().message;
}

}  // namespace
