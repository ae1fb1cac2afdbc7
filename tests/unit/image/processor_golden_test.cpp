// Decode + preprocess against Transformers 5.17 (tests/golden/images/ and
// tests/golden/processor/<family>/): decoded RGB, resized uint8, pixel_values (or their SHA-256),
// sizes, grid and token counts. The processor is also fed the oracle's own RGB, so a decoder
// difference and a processor difference show up separately.
#include <gtest/gtest.h>

#include <cstdio>

#include "golden_util.h"
#include "image/decode.h"
#include "image/pixtral_image_processor.h"
#include "image/qwen2_vl_image_processor.h"

namespace tf {
namespace {

struct Tally {
  int rgb = 0, rgb_total = 0, resized = 0, pv = 0, processed = 0;
};

Image image_from_golden_rgb(const test::GoldenTensor& t) {
  Image im;
  im.height = static_cast<int>(t.shape[0]);
  im.width = static_cast<int>(t.shape[1]);
  im.rgb = t.bytes;
  return im;
}

void run_family(const std::string& family) {
  const std::string dir = "processor/" + family + "/";
  const auto meta = test::read_json(test::golden_path(dir + "processor.json"));
  if (!meta) GTEST_SKIP() << "missing golden tests/golden/" << dir << "processor.json (oracle: ref.py processor)";
  const auto store = test::read_safetensors(test::golden_path(dir + "tensors.safetensors"));
  const nlohmann::json& hashes = (*meta)["hashed_tensors"];
  const nlohmann::json& ipcfg = (*meta)["image_processor"];
  const bool qwen = family == "qwen3_5";
  auto pix = PixtralImageProcessor::from_json(ipcfg);
  auto qw = Qwen2VLImageProcessor::from_json(ipcfg);
  if (qwen) {
    ASSERT_TRUE(qw.ok()) << qw.error().message;
  } else {
    ASSERT_TRUE(pix.ok()) << pix.error().message;
  }
  Tally t;
  for (auto it = (*meta)["images"].begin(); it != (*meta)["images"].end(); ++it) {
    const std::string name = it.key();
    const nlohmann::json& rec = it.value();
    SCOPED_TRACE(family + "/" + name);
    const auto bytes = test::read_file_bytes(test::golden_path("images/" + rec["file"].get<std::string>()));
    ASSERT_TRUE(bytes.has_value()) << "missing image file " << rec["file"];
    auto decoded = decode_image(*bytes, 0);
    if (rec.contains("chat_error")) {
      EXPECT_FALSE(decoded.ok()) << "Transformers refused it: " << rec["chat_error"];
      continue;
    }
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    const test::GoldenRef g_rgb = test::find_golden(store, hashes, name + ".rgb");
    ASSERT_TRUE(g_rgb.found());
    ++t.rgb_total;
    const bool rgb_same = decoded->height == g_rgb.shape[0] && decoded->width == g_rgb.shape[1] &&
                          test::equals_golden(g_rgb, decoded->rgb.data(), decoded->rgb.size());
    t.rgb += rgb_same;
    if (!rgb_same) {
      const auto [nd, mx] = test::u8_diff(g_rgb, decoded->rgb);
      ADD_FAILURE() << "decoded RGB differs: got " << decoded->width << "x" << decoded->height << ", golden shape "
                    << g_rgb.shape[0] << "x" << g_rgb.shape[1] << "; " << nd << " values differ, max " << mx;
    }
    if (rec.contains("process_error")) continue;
    // Preprocess the oracle's RGB (isolates the processor from the decoder).
    ASSERT_NE(g_rgb.tensor, nullptr) << "golden RGB stored only as a hash; cannot isolate the processor";
    const Image src = image_from_golden_rgb(*g_rgb.tensor);
    int h = 0, w = 0;
    std::vector<uint8_t> resized;
    const void* pv_data = nullptr;
    size_t pv_bytes = 0;
    PixtralProcessedImage pout;
    Qwen2VLProcessedImage qout;
    if (qwen) {
      auto r = qw->resized_chw(src, 0, &h, &w);
      ASSERT_TRUE(r.ok()) << r.error().message;
      resized = std::move(r).value();
      auto p = qw->preprocess(src, 0);
      ASSERT_TRUE(p.ok()) << p.error().message;
      qout = std::move(p).value();
      pv_data = qout.pixel_values.data();
      pv_bytes = qout.pixel_values.nbytes();
      EXPECT_EQ(std::vector<int64_t>(qout.grid_thw.begin(), qout.grid_thw.end()),
                rec["image_grid_thw"].get<std::vector<int64_t>>());
      EXPECT_EQ(qout.n_image_tokens, rec["n_image_tokens"].get<int64_t>());
    } else {
      auto r = pix->resized_chw(src, 0, &h, &w);
      ASSERT_TRUE(r.ok()) << r.error().message;
      resized = std::move(r).value();
      auto p = pix->preprocess(src, 0);
      ASSERT_TRUE(p.ok()) << p.error().message;
      pout = std::move(p).value();
      pv_data = pout.pixel_values.data();
      pv_bytes = pout.pixel_values.nbytes();
      EXPECT_EQ((std::vector<int64_t>{pout.height, pout.width}), rec["image_sizes"].get<std::vector<int64_t>>());
      EXPECT_EQ(pix->n_image_tokens(pout.height, pout.width, 2), rec["n_image_tokens"].get<int64_t>());
    }
    ++t.processed;
    EXPECT_EQ((std::vector<int>{h, w}), rec["target_hw"].get<std::vector<int>>());
    const test::GoldenRef g_res = test::find_golden(store, hashes, name + ".resized");
    const bool res_same = test::equals_golden(g_res, resized.data(), resized.size());
    t.resized += res_same;
    if (!res_same) {
      const auto [nd, mx] = test::u8_diff(g_res, resized);
      ADD_FAILURE() << "resized uint8 differs: " << nd << " values, max " << mx;
    }
    const test::GoldenRef g_pv = test::find_golden(store, hashes, name + ".pixel_values");
    const bool pv_same = test::equals_golden(g_pv, pv_data, pv_bytes);
    t.pv += pv_same;
    EXPECT_TRUE(pv_same) << "pixel_values differ (shape golden " << nlohmann::json(g_pv.shape).dump() << ")";
  }
  std::printf("%s goldens: decoded RGB %d/%d, resized %d/%d, pixel_values %d/%d bit-exact\n", family.c_str(),
              t.rgb, t.rgb_total, t.resized, t.processed, t.pv, t.processed);
}

TEST(ProcessorGolden, LightOnOcr) { run_family("lighton_ocr"); }
TEST(ProcessorGolden, Mistral3) { run_family("mistral3"); }
TEST(ProcessorGolden, Qwen3_5) { run_family("qwen3_5"); }

}  // namespace
}  // namespace tf
