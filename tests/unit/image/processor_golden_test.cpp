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
  int rgb = 0, rgb_total = 0, pil = 0, pil_total = 0, resized = 0, pv = 0, processed = 0;
};

Image image_from_golden_rgb(const test::GoldenTensor& t) {
  Image im;
  im.height = static_cast<int>(t.shape[0]);
  im.width = static_cast<int>(t.shape[1]);
  if (t.dtype == "U8") {
    im.rgb = t.bytes;
  } else {  // a uint16 decode, widened to I32 in the golden
    im.bit_depth = 16;
    for (size_t i = 0; i + 4 <= t.bytes.size(); i += 4)
      im.rgb16.push_back(static_cast<uint16_t>(t.bytes[i] | (t.bytes[i + 1] << 8)));
  }
  return im;
}

void run_family(const std::string& family) {
  const std::string dir = "processor/" + family + "/";
  const auto meta = test::read_json(test::golden_path(dir + "processor.json"));
  if (!meta)
    GTEST_SKIP() << "missing golden tests/golden/" << dir << "processor.json (oracle: ref.py processor)";
  const auto store = test::read_safetensors(test::golden_path(dir + "tensors.safetensors"));
  const nlohmann::json& hashes = (*meta)["hashed_tensors"];
  const nlohmann::json& ipcfg = (*meta)["image_processor"];
  const bool qwen = family.rfind("qwen", 0) == 0;
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
    auto decoded = decode_image(*bytes, 0);  // the chat path
    // transformers.image_utils.load_image (PIL + exif_transpose), recorded by its SHA-256.
    if (rec.contains("load_image_sha256")) {
      auto pil = decode_image(*bytes, 0, {}, DecodeMode::pil);
      ++t.pil_total;
      const bool same =
          pil.ok() && pil->bit_depth == 8 &&
          sha256_hex(pil->rgb.data(), pil->rgb.size()) == rec["load_image_sha256"].get<std::string>();
      t.pil += same;
      EXPECT_TRUE(same) << "DecodeMode::pil differs from load_image";
    }
    if (rec.contains("chat_error")) {
      EXPECT_FALSE(decoded.ok()) << "Transformers refused it: " << rec["chat_error"];
      continue;
    }
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    // The chat loader's pixels: stored when small, always described by shape and SHA-256.
    const test::GoldenRef g_rgb = test::find_golden(store, hashes, name + ".rgb");
    const auto chat_shape = rec["chat_shape"].get<std::vector<int64_t>>();
    ++t.rgb_total;
    const bool wide = decoded->bit_depth == 16;
    EXPECT_EQ(wide, rec["chat_dtype"] == "uint16");
    const std::string got_sha = wide ? sha256_hex(decoded->rgb16.data(), decoded->rgb16.size() * 2)
                                     : sha256_hex(decoded->rgb.data(), decoded->rgb.size());
    const bool rgb_same = decoded->height == chat_shape[0] && decoded->width == chat_shape[1] &&
                          got_sha == rec["chat_sha256"].get<std::string>();
    t.rgb += rgb_same;
    if (!rgb_same) {
      const auto [nd, mx] = test::u8_diff(g_rgb, decoded->rgb);
      ADD_FAILURE() << "decoded RGB differs: got " << decoded->width << "x" << decoded->height
                    << ", golden H,W " << chat_shape[0] << "," << chat_shape[1] << " (" << rec["chat_dtype"]
                    << "); " << nd << " values differ, max " << mx;
    }
    if (rec.contains("process_error")) continue;
    // Preprocess the oracle's RGB (isolates the processor from the decoder); large ones are stored as a
    // hash only, so use our decode when it matched that hash.
    if (g_rgb.tensor == nullptr && !rgb_same) continue;
    const Image src = g_rgb.tensor != nullptr ? image_from_golden_rgb(*g_rgb.tensor) : decoded.value();
    image_detail::ResizedPlanes resized;
    const void* pv_data = nullptr;
    size_t pv_bytes = 0;
    PixtralProcessedImage pout;
    Qwen2VLProcessedImage qout;
    if (qwen) {
      auto r = qw->resize(src, 0);
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
      auto r = pix->resize(src, 0);
      ASSERT_TRUE(r.ok()) << r.error().message;
      resized = std::move(r).value();
      auto p = pix->preprocess(src, 0);
      ASSERT_TRUE(p.ok()) << p.error().message;
      pout = std::move(p).value();
      pv_data = pout.pixel_values.data();
      pv_bytes = pout.pixel_values.nbytes();
      EXPECT_EQ((std::vector<int64_t>{pout.height, pout.width}),
                rec["image_sizes"].get<std::vector<int64_t>>());
      EXPECT_EQ(pix->n_image_tokens(pout.height, pout.width, 2), rec["n_image_tokens"].get<int64_t>());
    }
    ++t.processed;
    EXPECT_EQ((std::vector<int>{resized.height, resized.width}), rec["target_hw"].get<std::vector<int>>());
    const test::GoldenRef g_res = test::find_golden(store, hashes, name + ".resized");
    if (!g_res.found()) ADD_FAILURE() << "no golden for the resized pixels";
    bool res_same = false;
    if (wide && g_res.tensor != nullptr) {  // stored widened to int32 (safetensors lacks uint16 in places)
      std::vector<int32_t> w32(resized.u16.begin(), resized.u16.end());
      res_same = test::equals_golden(g_res, w32.data(), w32.size() * 4);
    } else if (wide) {  // hashed as the uint16 bytes
      res_same = test::equals_golden(g_res, resized.u16.data(), resized.u16.size() * 2);
    } else {
      res_same = test::equals_golden(g_res, resized.u8.data(), resized.u8.size());
      if (!res_same) {
        const auto [nd, mx] = test::u8_diff(g_res, resized.u8);
        ADD_FAILURE() << "resized uint8 differs: " << nd << " values, max " << mx;
      }
    }
    t.resized += res_same;
    EXPECT_TRUE(res_same) << "resized pixels differ";
    const test::GoldenRef g_pv = test::find_golden(store, hashes, name + ".pixel_values");
    const bool pv_same = test::equals_golden(g_pv, pv_data, pv_bytes);
    t.pv += pv_same;
    EXPECT_TRUE(pv_same) << "pixel_values differ (shape golden " << nlohmann::json(g_pv.shape).dump() << ")";
  }
  std::printf(
      "%s goldens: chat decode %d/%d, load_image decode %d/%d, resized %d/%d, pixel_values %d/%d "
      "bit-exact\n",
      family.c_str(), t.rgb, t.rgb_total, t.pil, t.pil_total, t.resized, t.processed, t.pv, t.processed);
}

TEST(ProcessorGolden, Pixtral) { run_family("pixtral"); }
TEST(ProcessorGolden, PixtralTiny) { run_family("pixtral_tiny"); }
TEST(ProcessorGolden, Qwen3_5) { run_family("qwen3_5"); }
TEST(ProcessorGolden, Qwen3_5Tiny) { run_family("qwen3_5_tiny"); }

// The tiny checkpoints ship preprocessor_config.json as hub repos do; each must configure the
// processor exactly as the settings the oracle's tiny processor goldens were made with.
TEST(ProcessorGolden, CheckpointPreprocessorConfigsParse) {
  const std::vector<std::pair<std::string, std::string>> ckpts = {
      {"lighton_ocr-tiny-bf16", "pixtral_tiny"},
      {"mistral3-tiny-bf16-untied", "pixtral_tiny"},
      {"qwen3_5-tiny-bf16", "qwen3_5_tiny"}};
  for (const auto& [ckpt, family] : ckpts) {
    const auto cfg = test::read_json(test::golden_path("ckpt/" + ckpt + "/preprocessor_config.json"));
    const auto meta = test::read_json(test::golden_path("processor/" + family + "/processor.json"));
    if (!cfg || !meta) GTEST_SKIP() << "missing tests/golden/ckpt/" << ckpt << "/preprocessor_config.json";
    const nlohmann::json& ref = (*meta)["image_processor"];
    if (family == "qwen3_5_tiny") {
      auto p = Qwen2VLImageProcessor::from_json(*cfg);
      ASSERT_TRUE(p.ok()) << p.error().message;
      EXPECT_EQ(p->config().max_pixels, ref["size"]["longest_edge"].get<int64_t>());
      EXPECT_EQ(p->config().min_pixels, ref["size"]["shortest_edge"].get<int64_t>());
      EXPECT_EQ(p->config().patch_size, ref["patch_size"].get<int64_t>());
    } else {
      auto p = PixtralImageProcessor::from_json(*cfg);
      ASSERT_TRUE(p.ok()) << p.error().message;
      EXPECT_EQ(p->config().max_height, ref["size"]["longest_edge"].get<int64_t>());
      EXPECT_EQ(p->config().patch_height, ref["patch_size"].get<int64_t>());
    }
  }
}

}  // namespace
}  // namespace tf
