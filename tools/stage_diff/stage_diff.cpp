// Where do tensorfold and Transformers part? Runs the oracle's case (prompt.json + greedy.json +
// stages.safetensors written by tools/reference/model_goldens.py or, for a demo checkpoint,
// `FULL_STAGES=1 tools/train_demo/demo_goldens.py`) through a checkpoint on one backend: the prompt is
// rebuilt from the case's messages and images and must equal the oracle's ids, then one teacher-forced
// forward over prompt + the oracle's greedy ids captures every stage, and each stage the oracle also
// captured is compared element by element, in the order the engine computed them.
//
// usage: stage_diff CKPT CASE_DIR --images DIR [--backend auto|cpu|cuda] [--step S]
//   DIR holds the case's images (prompt.json "images"). --step S also reports, for each [L, C] stage,
//   how many elements differ in the row that predicts new token S, and tensorfold's top-2 logits there
//   next to the oracle's margin (greedy.json).
// Prints one line per stage (elements that differ, max |diff|, cosine) and the first stage that differs.
// Exit 0 when the comparison ran, 2 when the rebuilt prompt differs from the oracle's, 1 on errors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "io/weight_map.h"
#include "models/lighton_ocr/capture_layout.h"
#include "runtime/pipeline.h"
#include "tensor/dtype.h"

using namespace tf;

namespace {

int fail(const std::string& m) {
  std::fprintf(stderr, "stage_diff: %s\n", m.c_str());
  return 1;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool read_json(const std::string& path, nlohmann::ordered_json& out) {
  std::ifstream f(path);
  if (!f) return false;
  out = nlohmann::ordered_json::parse(f, nullptr, false);
  return !out.is_discarded();
}

// The oracle's stage as f32 (its captures are F32 or BF16).
std::vector<float> oracle_f32(const TensorInfo& ti) {
  Tensor t{const_cast<void*>(ti.data), ti.dtype, ti.shape};
  return to_f32_vector(t);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fputs("usage: stage_diff CKPT CASE_DIR --images DIR [--backend auto|cpu|cuda] [--step S]\n", stderr);
    return 1;
  }
  const std::string ckpt = argv[1], case_dir = argv[2];
  std::string images_dir, backend = "auto";
  int64_t step = -1;
  if ((argc - 3) % 2 != 0) return fail(std::string("missing value after ") + argv[argc - 1]);
  for (int i = 3; i + 1 < argc; i += 2) {  // --flag value pairs
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--images")
      images_dir = v;
    else if (a == "--backend")
      backend = v;
    else if (a == "--step")
      step = std::atoll(v.c_str());
    else
      return fail("unknown argument " + a);
  }
  nlohmann::ordered_json pj, gj;
  if (!read_json(case_dir + "/prompt.json", pj)) return fail("cannot read " + case_dir + "/prompt.json");
  if (!read_json(case_dir + "/greedy.json", gj)) return fail("cannot read " + case_dir + "/greedy.json");
  auto stages = WeightMap::open_files({case_dir + "/stages.safetensors"});
  if (!stages.ok()) return fail(stages.error().message);
  PipelineOptions po;
  po.backend = backend;
  auto pipe = Pipeline::load(ckpt, po);
  if (!pipe.ok()) return fail(pipe.error().message);
  Pipeline& p = **pipe;

  // ---- the prompt, rebuilt as `tensorfold ocr` / the server would, must be the oracle's.
  std::vector<std::vector<uint8_t>> images;
  for (const auto& name : pj["images"]) {
    images.push_back(read_bytes(images_dir + "/" + name.get<std::string>()));
    if (images.back().empty()) return fail("cannot read image " + images_dir + "/" + name.get<std::string>());
  }
  ChatTemplateOptions opts;
  opts.add_generation_prompt = true;
  opts.kwargs = pj.value("template_kwargs", nlohmann::ordered_json::object());
  auto prompt = p.build_chat_prompt(pj["messages"], images, opts);
  if (!prompt.ok()) return fail(prompt.error().message);
  if (prompt->ids != pj["input_ids"].get<std::vector<int32_t>>()) {
    std::printf("prompt ids differ from the oracle's (%zu vs %zu ids): nothing compared\n",
                prompt->ids.size(), pj["input_ids"].size());
    return 2;
  }
  std::string pixels = "not recorded by the oracle";
  if (prompt->images.size() == 1 && pj.contains("hashed_tensors") &&
      pj["hashed_tensors"].contains("input.pixel_values")) {
    const auto& pv = prompt->images[0].pixel_values;
    pixels = sha256_hex(pv.data(), pv.nbytes()) ==
                     pj["hashed_tensors"]["input.pixel_values"]["sha256"].get<std::string>()
                 ? "equal"
                 : "DIFFERS";
  }
  std::printf("prompt: %zu ids equal the oracle's; pixel_values hash %s\n", prompt->ids.size(),
              pixels.c_str());

  // ---- one teacher-forced pass over prompt + the oracle's greedy ids, every stage captured.
  const std::vector<int32_t> new_ids = gj["new_ids"].get<std::vector<int32_t>>();
  std::vector<int32_t> ids = prompt->ids;
  ids.insert(ids.end(), new_ids.begin(), new_ids.end());
  const int64_t P = static_cast<int64_t>(prompt->ids.size()), L = static_cast<int64_t>(ids.size());
  Model& m = p.model();
  std::map<std::string, std::vector<float>> mine;
  std::vector<std::string> order;
  m.set_capture([&](const std::string& name, const Tensor& t) {
    if (!mine.count(name)) order.push_back(name);
    mine[name] = to_f32_vector(t);
  });
  std::vector<ImageInput> inputs;
  std::vector<std::vector<int64_t>> grids;
  std::vector<std::pair<int64_t, int64_t>> grids_hw;  // patches per image, for Pixtral's patch_conv
  const int64_t patch = std::max<int64_t>(1, m.info().patch_size);
  for (const auto& im : prompt->images) {
    inputs.push_back(im.as_input());
    grids.push_back(im.grid_thw);
    grids_hw.emplace_back(im.height / patch, im.width / patch);
  }
  DeviceBuffer embeds;
  if (!inputs.empty()) {
    auto e = m.encode_images(inputs);
    if (!e.ok()) return fail(e.error().message);
    embeds = std::move(*e);
  }
  auto cache = m.new_cache(L);
  if (Status s = m.begin_prompt(*cache, ids, grids); !s.ok()) return fail(s.error().message);
  ForwardBatch fb;
  fb.token_ids = ids;
  for (int64_t i = 0; i < L; ++i) fb.positions.push_back(static_cast<int32_t>(i));
  if (!inputs.empty()) fb.image_embeds = &embeds.tensor();
  for (int64_t i = P - 1; i < L; ++i) fb.logit_rows.push_back(static_cast<int32_t>(i));
  auto logits = m.forward(fb, *cache);
  m.set_capture(nullptr);
  if (!logits.ok()) return fail(logits.error().message);
  const int64_t V = m.info().vocab_size, n_rows = static_cast<int64_t>(fb.logit_rows.size());
  const float* lg = logits->as<float>();
  mine["lm_head.tail8"] = std::vector<float>(lg, lg + std::min<int64_t>(8, n_rows) * V);
  order.push_back("lm_head.tail8");

  // ---- stage by stage, in the engine's order.
  const int64_t row = step >= 0 ? P - 1 + step : -1;
  std::string first;
  int compared = 0;
  for (const std::string& name : order) {
    const TensorInfo* ti = stages->info(name);
    if (!ti || (ti->dtype != DType::F32 && ti->dtype != DType::BF16)) continue;
    std::vector<float> ref = oracle_f32(*ti);
    std::vector<float> got = mine[name];
    int64_t n_patches = 0;
    for (const auto& [gh, gw] : grids_hw) n_patches += gh * gw;
    if (lighton_ocr::is_patch_conv(name) && ti->shape.size() == 4 &&
        static_cast<int64_t>(got.size()) ==
            n_patches * ti->shape[1]) {  // HF: the padded batch [B, C, gh, gw]
      got = lighton_ocr::patch_conv_to_hf(got, ti->shape, grids_hw);
      lighton_ocr::mask_patch_conv_padding(ref, ti->shape, grids_hw);
    }
    if (got.size() != ref.size()) {
      std::printf("%-58s size %zu, oracle %zu: not compared\n", name.c_str(), got.size(), ref.size());
      continue;
    }
    size_t n_diff = 0;
    double max_d = 0, ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double d = std::fabs(double(got[i]) - double(ref[i]));
      n_diff += d != 0 || std::isnan(d);
      max_d = std::max(max_d, d);
      ab += double(got[i]) * ref[i];
      aa += double(got[i]) * got[i];
      bb += double(ref[i]) * ref[i];
    }
    const double cos = aa == 0 && bb == 0 ? 1.0 : ab / std::max(std::sqrt(aa * bb), 1e-300);
    std::string row_note;
    const int64_t C = ti->shape.empty() ? 0 : ti->shape.back();
    if (row >= 0 && C > 0 && static_cast<int64_t>(ref.size()) == L * C) {
      int64_t nd = 0;
      for (int64_t c = 0; c < C; ++c)
        nd += got[static_cast<size_t>(row * C + c)] != ref[static_cast<size_t>(row * C + c)];
      row_note = "  row " + std::to_string(row) + ": " + std::to_string(nd) + "/" + std::to_string(C);
    }
    std::printf("%-58s %9zu/%-9zu differ  max|d| %-10.3g cos %.9f%s\n", name.c_str(), n_diff, ref.size(),
                max_d, cos, row_note.c_str());
    if (n_diff && first.empty()) first = name;
    ++compared;
  }
  std::printf("%d stages compared; %s\n", compared,
              first.empty() ? "all bit-equal" : ("first stage that differs: " + first).c_str());
  if (step >= 0 && step < n_rows && step < static_cast<int64_t>(new_ids.size())) {
    const float* r = lg + step * V;
    int64_t a = 0, b = -1;
    for (int64_t j = 1; j < V; ++j)
      if (r[j] > r[a]) a = j;
    for (int64_t j = 0; j < V; ++j)
      if (j != a && (b < 0 || r[j] > r[b])) b = j;
    const auto& s = gj["steps"][static_cast<size_t>(step)];
    std::printf(
        "new token %lld: tensorfold top-2 %lld (%.6g), %lld (%.6g); oracle id %d, top-1 %.6g, margin %.6g\n",
        static_cast<long long>(step), static_cast<long long>(a), r[a], static_cast<long long>(b), r[b],
        new_ids[static_cast<size_t>(step)], s.value("top1_logit", 0.0), s.value("margin", 0.0));
  }
  return 0;
}
