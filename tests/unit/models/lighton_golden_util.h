// Shared pieces of the LightOnOCR golden tests: loading a tiny checkpoint, reading the oracle's
// golden case (prompt ids, pixel values rebuilt from the processor's resized uint8 tensors and
// verified against HF's sha256), and stage metrics.
#pragma once
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../test_backend.h"
#include "backend/ops.h"
#include "base/sha256.h"
#include "io/hf_config.h"
#include "io/weight_map.h"
#include "models/registry.h"

namespace tf::golden {

inline std::string golden_root() { return std::string(TF_SOURCE_DIR) + "/tests/golden"; }

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// The checkpoint directory of a golden: tests/golden/ckpt/<name>, or for a hidden_act variant
// (tools/reference/act_goldens.py; meta.json names base_checkpoint and config_overrides) the base's files
// beside its config.json with the overrides merged in, rebuilt in a temporary directory.
inline std::string checkpoint_dir(const std::string& name) {
  const std::string meta_path = golden_root() + "/model/" + name + "/meta.json";
  if (!std::filesystem::exists(meta_path)) return golden_root() + "/ckpt/" + name;
  const nlohmann::json meta = read_json(meta_path);
  if (!meta.contains("base_checkpoint")) return golden_root() + "/ckpt/" + name;
  namespace fs = std::filesystem;
  const fs::path base = golden_root() + "/ckpt/" + meta["base_checkpoint"].get<std::string>();
  const fs::path dir = fs::temp_directory_path() / ("tf_variant_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(base))
    if (e.path().filename() != "config.json")
      fs::create_symlink(fs::absolute(e.path()), dir / e.path().filename());
  nlohmann::json cfg = read_json((base / "config.json").string());
  cfg.merge_patch(meta["config_overrides"]);
  std::ofstream(dir / "config.json") << cfg.dump(1);
  return dir.string();
}

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

inline Expected<Loaded> load_dir(const std::string& dir) {
  Loaded out;
  TF_ASSIGN(out.backend, create_backend(test_backend_name()));
  TF_ASSIGN(JsonConfig cfg, JsonConfig::load(dir + "/config.json"));
  TF_ASSIGN(WeightMap wm, WeightMap::open(dir));
  TF_ASSIGN(out.model, load_model(cfg, std::move(wm), *out.backend));
  return out;
}

struct Case {
  std::vector<int32_t> prompt_ids;  // prompt.json input_ids
  std::vector<Buffer> pixels;       // per image [3, H, W] f32, bit-equal to HF's pixel_values
  std::vector<ImageInput> images;
  nlohmann::json greedy;  // greedy.json
};

// HF PixtralImageProcessor (torchvision backend) fused rescale+normalize: (x - mean*255) / (std*255) in f32.
inline Buffer normalize_pixtral(const Tensor& u8, const nlohmann::json& ip) {
  const int64_t C = u8.dim(0), H = u8.dim(1), W = u8.dim(2);
  Buffer px(DType::F32, {C, H, W});
  for (int64_t c = 0; c < C; ++c) {
    const float mean = static_cast<float>(ip["image_mean"][c].get<double>()) * 255.0f;
    const float std = static_cast<float>(ip["image_std"][c].get<double>()) * 255.0f;
    for (int64_t i = 0; i < H * W; ++i)
      px.as<float>()[c * H * W + i] =
          (static_cast<float>(u8.as<const uint8_t>()[c * H * W + i]) - mean) / std;
  }
  return px;
}

inline Expected<Case> read_case(const std::string& case_dir) {
  Case c;
  const auto prompt = read_json(case_dir + "/prompt.json");
  for (auto id : prompt["input_ids"]) c.prompt_ids.push_back(id.get<int32_t>());
  c.greedy = read_json(case_dir + "/greedy.json");
  if (prompt["images"].empty()) return c;
  const std::string proc = golden_root() + "/processor/pixtral_tiny";
  const auto pj = read_json(proc + "/processor.json");
  TF_ASSIGN(WeightMap pt, WeightMap::open_files({proc + "/tensors.safetensors"}));
  for (size_t i = 0; i < prompt["images"].size(); ++i) {
    std::string stem = prompt["images"][i].get<std::string>();
    stem = stem.substr(0, stem.rfind('.'));
    const TensorInfo* ti = pt.info(stem + ".resized");
    if (!ti) return make_error("processor golden lacks " + stem + ".resized");
    Tensor u8{const_cast<void*>(ti->data), ti->dtype, ti->shape};
    Buffer px = normalize_pixtral(u8, pj["image_processor"]);
    // The rebuilt pixel_values must be HF's, bit for bit (sha256 of the [1, 3, H, W] f32 bytes).
    const auto& h = pj["hashed_tensors"][stem + ".pixel_values"];
    if (sha256_hex(px.data(), px.nbytes()) != h["sha256"].get<std::string>())
      return make_error("rebuilt pixel_values of " + stem + " differ from HF's");
    const auto sz = prompt["image_sizes"][i];
    c.images.push_back(ImageInput{px.view(), sz[0].get<int64_t>(), sz[1].get<int64_t>()});
    c.pixels.push_back(std::move(px));
  }
  return c;
}

struct Metric {
  double rel = 0, cos = 0;
};

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
  m.cos = ab / std::max(std::sqrt(aa * bb), 1e-300);
  if (aa == 0 && bb == 0) m.cos = 1;
  return m;
}

}  // namespace tf::golden
