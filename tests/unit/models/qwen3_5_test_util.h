// Shared pieces of the Qwen3.5 golden tests: loading a tiny checkpoint, reading an oracle case
// (prompt ids, grids, pixel_values rebuilt through the Qwen2-VL processor from the stored resized
// uint8 images and checked against HF's sha256), teacher-forced captures and stage metrics.
#pragma once
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../test_backend.h"
#include "backend/ops.h"
#include "base/sha256.h"
#include "image/qwen2_vl_image_processor.h"
#include "io/hf_config.h"
#include "io/weight_map.h"
#include "models/qwen3_5/model.h"
#include "models/registry.h"
#include "oracle_noise.h"

namespace tf::q35test {

inline std::string golden_root() { return std::string(TF_SOURCE_DIR) + "/tests/golden"; }

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  qwen3_5::Qwen35Model* q35() const { return dynamic_cast<qwen3_5::Qwen35Model*>(model.get()); }
};

inline Expected<Loaded> load_dir(const std::string& dir, const std::string& config_path = "") {
  Loaded out;
  TF_ASSIGN(out.backend, create_backend(test_backend_name()));
  TF_ASSIGN(JsonConfig cfg, JsonConfig::load(config_path.empty() ? dir + "/config.json" : config_path));
  TF_ASSIGN(WeightMap wm, WeightMap::open(dir));
  TF_ASSIGN(out.model, load_model(cfg, std::move(wm), *out.backend));
  return out;
}

struct Case {
  std::vector<int32_t> prompt_ids;
  std::vector<std::array<int64_t, 3>> grids;
  std::vector<Buffer> pixels;  // per image [gh*gw, 1536] f32, HF's pixel_values rows
  std::vector<ImageInput> images;
  nlohmann::json greedy;
};

inline Expected<Case> read_case(const std::string& case_dir) {
  Case c;
  const auto prompt = read_json(case_dir + "/prompt.json");
  for (auto id : prompt["input_ids"]) c.prompt_ids.push_back(id.get<int32_t>());
  c.greedy = read_json(case_dir + "/greedy.json");
  if (!prompt.contains("images") || prompt["images"].empty()) return c;
  const std::string proc = golden_root() + "/processor/qwen3_5_tiny";
  const auto pj = read_json(proc + "/processor.json");
  TF_ASSIGN(auto ip, Qwen2VLImageProcessor::from_json(pj["image_processor"]));
  TF_ASSIGN(WeightMap pt, WeightMap::open_files({proc + "/tensors.safetensors"}));
  Sha256 all;
  for (size_t i = 0; i < prompt["images"].size(); ++i) {
    std::string stem = prompt["images"][i].get<std::string>();
    stem = stem.substr(0, stem.rfind('.'));
    const TensorInfo* ti = pt.info(stem + ".resized");
    if (!ti) return make_error("processor golden lacks " + stem + ".resized");
    const int64_t H = ti->shape[1], W = ti->shape[2];
    Image im;
    im.width = static_cast<int>(W);
    im.height = static_cast<int>(H);
    im.rgb.assign(static_cast<size_t>(3 * H * W), 0);
    const auto* u8 = static_cast<const uint8_t*>(ti->data);
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t p = 0; p < H * W; ++p) im.rgb[static_cast<size_t>(p * 3 + ch)] = u8[ch * H * W + p];
    TF_ASSIGN(auto pr, ip.preprocess(im, static_cast<int>(i)));  // already at the target size: no resize
    const auto& g = prompt["image_grid_thw"][i];
    c.grids.push_back({g[0].get<int64_t>(), g[1].get<int64_t>(), g[2].get<int64_t>()});
    if (pr.grid_thw != c.grids.back()) return make_error("processor grid differs from HF's for " + stem);
    all.update(pr.pixel_values.data(), pr.pixel_values.nbytes());
    c.images.push_back(ImageInput{pr.pixel_values.view(), pr.height, pr.width});
    c.pixels.push_back(std::move(pr.pixel_values));
  }
  // The rebuilt pixel_values (all images concatenated) must be HF's, bit for bit.
  const auto& ht = prompt["hashed_tensors"];
  if (ht.contains("input.pixel_values") &&
      all.hex_digest() != ht["input.pixel_values"]["sha256"].get<std::string>())
    return make_error("rebuilt pixel_values differ from HF's");
  return c;
}

struct Metric {
  double rel = 0, cos = 0;
};

// rel = ||a - b|| / ||b||, cos = cosine similarity (both over the whole stage).
inline Metric metric(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0, dd = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
    dd += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  }
  Metric m;
  m.rel = std::sqrt(dd) / std::max(std::sqrt(bb), 1e-30);
  m.cos = (aa == 0 && bb == 0) ? 1.0 : ab / std::max(std::sqrt(aa * bb), 1e-300);
  return m;
}

inline int32_t argmax_row(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

// Greedy decoding as generate(do_sample=False): prefill the prompt in one forward, then one token
// per step. Returns the n_new ids.
inline Expected<std::vector<int32_t>> greedy(const Loaded& L, const Case& c, int n_new) {
  auto* m = L.q35();
  TF_ASSIGN(DeviceBuffer emb, m->encode_images(c.images));
  const int64_t P = static_cast<int64_t>(c.prompt_ids.size());
  auto cache = m->new_cache(P + n_new);
  auto* qc = dynamic_cast<qwen3_5::Qwen35Cache*>(cache.get());
  if (!c.grids.empty()) {
    TF_ASSIGN(auto ri, qwen3_5::rope_index(c.prompt_ids, m->info().image_token_id, c.grids, 2));
    qc->set_rope_index(std::move(ri));
  }
  ForwardBatch b;
  b.token_ids = c.prompt_ids;
  for (int64_t i = 0; i < P; ++i) b.positions.push_back(static_cast<int32_t>(i));
  b.image_embeds = c.images.empty() ? nullptr : &emb.tensor();
  b.logit_rows = {static_cast<int32_t>(P - 1)};
  std::vector<int32_t> out;
  TF_ASSIGN(Buffer lg, m->forward(b, *cache));
  const int64_t V = m->info().vocab_size;
  out.push_back(argmax_row(lg.as<float>(), V));
  for (int s = 1; s < n_new; ++s) {
    ForwardBatch d;
    d.token_ids = {out.back()};
    d.positions = {static_cast<int32_t>(P + s - 1)};
    d.logit_rows = {0};
    TF_ASSIGN(Buffer l2, m->forward(d, *cache));
    out.push_back(argmax_row(l2.as<float>(), V));
  }
  return out;
}

// Compares greedy ids with HF's: equal, or the first difference sits at an HF tie. margin 0 is an
// exact tie; for bf16 logits a margin of one bf16 ulp of HF's top-1 logit is also accepted (and
// printed as NEAR-TIE): both candidates are then adjacent bf16 values, and last-bit differences of
// the f32 accumulations decide between them (HF's own cached decode and full pass disagree at such
// steps: greedy.json teacher_forced_agree < 64).
inline void expect_greedy_matches(const std::vector<int32_t>& got, const nlohmann::json& g,
                                  const std::string& what, bool bf16_logits) {
  const auto& want = g["new_ids"];
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i].get<int32_t>()) continue;
    const auto& st = g["steps"][i];
    const double margin = st["margin"].get<double>();
    const double top1 = st["top1_logit"].get<double>();
    const bool near_tie = margin > 0 && oracle_noise::acceptable_first_difference(margin, top1, bf16_logits);
    std::printf("[%s] first greedy difference at step %zu: ours %d, HF %d, HF top-2 margin %g%s\n",
                what.c_str(), i, got[i], want[i].get<int32_t>(), margin,
                near_tie ? "  NEAR-TIE (at most two bf16 ulps)" : "");
    if (!near_tie) {
      EXPECT_EQ(margin, 0.0) << what << ": greedy differs at step " << i << " where HF's margin is "
                             << margin;
    }
    return;
  }
  std::printf("[%s] greedy: all %zu ids equal HF\n", what.c_str(), got.size());
}

}  // namespace tf::q35test
