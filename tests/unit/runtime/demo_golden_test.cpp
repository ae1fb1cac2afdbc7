// The bundled demo checkpoints (models/demo-lighton, models/demo-qwen35) against the oracle: for every case
// in tests/golden/model/demo-*/ (one image, the `tensorfold ocr` prompt, made by
// tools/train_demo/demo_goldens.py with Transformers 5.17), the prompt tensorfold builds must equal
// Transformers' (text, ids, pixel_values hash), and greedy decoding must reproduce Transformers' whole output
// up to and including its EOS; a first difference is accepted only where HF's top-2 margin is an exact tie or
// one bf16 ulp of the top logit. Lives with the runtime tests because the prompt path (template + processor +
// tokenizer) is the pipeline's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../models/oracle_noise.h"
#include "../sanitized.h"
#include "base/sha256.h"
#include "runtime/pipeline.h"
#include "tensor/dtype.h"
#include "test_pipeline.h"

using namespace tf;
namespace fs = std::filesystem;

namespace {

const std::string kRoot = std::string(TF_SOURCE_DIR);

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

nlohmann::ordered_json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::ordered_json::parse(f);
}

struct Case {
  std::string model, name;
};

#ifdef TF_TEST_SANITIZED
// Under the sanitizers a whole page (demo-qwen35 `page`: 364 prompt tokens, ~110 new) takes ~5 minutes on two
// cores and a table or receipt ~2: the sanitizer build runs the cases of at most this many prompt tokens (the
// lines), which take the same code paths; the test gate runs every case.
constexpr int64_t kMaxPromptTokens = 100;
#else
constexpr int64_t kMaxPromptTokens = INT64_MAX;
#endif

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* m : {"demo-lighton", "demo-qwen35"}) {
    const fs::path dir = fs::path(kRoot) / "tests/golden/model" / m;
    if (!fs::exists(dir)) continue;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory()) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      const fs::path greedy = dir / n / "greedy.json";
      if (fs::exists(greedy) && read_json(greedy.string()).value("prompt_len", int64_t{0}) > kMaxPromptTokens)
        continue;
      out.push_back({m, n});
    }
  }
  return out;
}

class DemoGolden : public ::testing::TestWithParam<Case> {};

TEST(DemoGoldenSet, BothDemoCheckpointsHaveGoldens) {
  size_t lighton = 0, qwen = 0;
  for (const auto& c : cases()) (c.model == "demo-lighton" ? lighton : qwen)++;
  EXPECT_GE(lighton, 2u) << "tests/golden/model/demo-lighton: expected >= 2 oracle cases";
  EXPECT_GE(qwen, 2u) << "tests/golden/model/demo-qwen35: expected >= 2 oracle cases";
}

TEST_P(DemoGolden, PromptAndWholeGreedyOutputMatchTransformers) {
  const Case& c = GetParam();
  const std::string gdir = kRoot + "/tests/golden/model/" + c.model;
  const std::string dir = gdir + "/" + c.name;
  auto meta = read_json(gdir + "/meta.json");
  ASSERT_TRUE(meta.contains("images") && meta["images"].contains(c.name))
      << "meta.json names no image for " << c.name;
  const std::string image_path = kRoot + "/" + meta["images"][c.name].get<std::string>();
  ASSERT_TRUE(fs::exists(image_path)) << "missing " << image_path;
  auto pipe = Pipeline::load(kRoot + "/models/" + c.model, test_pipeline_options());
  ASSERT_TRUE(pipe.ok()) << pipe.error().message;
  Pipeline& p = **pipe;
  auto pj = read_json(dir + "/prompt.json");
  auto gj = read_json(dir + "/greedy.json");

  std::vector<std::vector<uint8_t>> images{read_bytes(image_path)};
  ChatTemplateOptions opts;
  opts.add_generation_prompt = true;
  opts.kwargs = pj["template_kwargs"];
  auto prompt = p.build_chat_prompt(pj["messages"], images, opts);
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(prompt->text, pj["prompt_text"].get<std::string>());
  ASSERT_EQ(prompt->ids, pj["input_ids"].get<std::vector<int32_t>>())
      << "prompt ids differ from Transformers";
  ASSERT_EQ(prompt->images.size(), 1u);
  ASSERT_TRUE(pj["hashed_tensors"].contains("input.pixel_values"));
  const auto& pv = prompt->images[0].pixel_values;
  // One image: Transformers' pixel_values are this image's tensor alone ([3, H, W] batched to [1, 3, H, W]
  // for Pixtral, [h*w, 1536] patches for Qwen), so the raw bytes hash the same.
  EXPECT_EQ(sha256_hex(pv.data(), pv.nbytes()),
            pj["hashed_tensors"]["input.pixel_values"]["sha256"].get<std::string>())
      << "pixel_values differ from Transformers";

  const std::vector<int32_t> want = gj["new_ids"].get<std::vector<int32_t>>();
  ASSERT_FALSE(want.empty());
  GenerateOptions go;
  go.sampling.temperature = 0.0f;
  go.max_tokens = static_cast<int64_t>(want.size()) + 8;  // room past Transformers' EOS (a page: ~100 tokens)
  auto r = generate(p, *prompt, go);
  ASSERT_TRUE(r.ok()) << r.error().message;
  size_t first_diff = 0;
  while (first_diff < want.size() && first_diff < r->ids.size() && r->ids[first_diff] == want[first_diff])
    ++first_diff;
  if (first_diff == want.size() && r->ids.size() == want.size()) {
    std::printf("  %s/%s: all %zu greedy ids equal Transformers' (min HF top-2 margin %g)\n", c.model.c_str(),
                c.name.c_str(), want.size(), gj["min_margin"].get<double>());
    return;
  }
  ASSERT_LT(first_diff, want.size()) << "tensorfold went on after Transformers' EOS";
  ASSERT_LT(first_diff, r->ids.size()) << "tensorfold stopped before Transformers did";
  const double margin = gj["steps"][first_diff]["margin"].get<double>();
  const double top1 = gj["steps"][first_diff]["top1_logit"].get<double>();
  std::printf("  %s/%s: first greedy difference at new token %zu: ours %d, HF %d, HF top-2 margin %g\n",
              c.model.c_str(), c.name.c_str(), first_diff, r->ids[first_diff], want[first_diff], margin);
  EXPECT_TRUE(oracle_noise::acceptable_first_difference(margin, top1, /*bf16_logits=*/true, /*max_ulps=*/1))
      << "greedy ids differ where Transformers' top-2 margin is " << margin << " (top-1 logit " << top1
      << ")";
}

INSTANTIATE_TEST_SUITE_P(Oracle, DemoGolden, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string s = i.param.model + "_" + i.param.name;
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace
