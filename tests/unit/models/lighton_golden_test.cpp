// LightOnOCR tiny checkpoints on the CPU backend against Transformers 5.17 (the oracle's goldens
// in tests/golden/model/<ckpt>/<case>): every captured stage (fp32: relative error <= 1e-5;
// bf16: cosine >= 0.9999; or within 2x Transformers' own CUDA-vs-CPU noise at that stage, see
// oracle_noise.h), and 64 greedy tokens (equal, or the first difference at an HF tie or one-ulp
// near tie). Pixel values and prompt ids are the oracle's, fed directly.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "lighton_golden_util.h"
#include "models/lighton_ocr/capture_layout.h"
#include "oracle_noise.h"

using namespace tf;
using namespace tf::golden;
using namespace tf::oracle_noise;

namespace {

struct Ckpt {
  std::string name;
  bool fp32;
};

// (gh, gw) of each image in patches, for lighton_ocr::patch_conv_to_hf.
std::vector<std::pair<int64_t, int64_t>> patch_grids(const std::vector<ImageInput>& images, int64_t patch) {
  std::vector<std::pair<int64_t, int64_t>> g;
  for (const auto& im : images) g.emplace_back(im.height / patch, im.width / patch);
  return g;
}

void run_case(const Ckpt& ck, const std::string& case_name) {
  const std::string ckpt_dir = checkpoint_dir(ck.name);
  const std::string case_dir = golden_root() + "/model/" + ck.name + "/" + case_name;
  if (!std::filesystem::exists(case_dir + "/stages.safetensors")) GTEST_SKIP() << "missing " << case_dir;
  auto loaded = load_dir(ckpt_dir);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  Model& model = *loaded->model;
  auto cs = read_case(case_dir);
  ASSERT_TRUE(cs.ok()) << cs.error().message;
  const std::vector<int32_t>& prompt = cs->prompt_ids;
  std::vector<int32_t> new_ids;
  for (auto id : cs->greedy["new_ids"]) new_ids.push_back(id.get<int32_t>());
  const int64_t P = static_cast<int64_t>(prompt.size()), L = P + static_cast<int64_t>(new_ids.size());

  // ---- stage comparison: one teacher-forced pass over prompt + HF's 64 new ids, as the oracle ran it.
  const NoiseFloor nf = read_noise_floor(case_dir);
  ASSERT_TRUE(nf.present) << "missing " << case_dir << "/noise_floor.json (tools/reference/noise_floor.py)";
  auto st = WeightMap::open_files({case_dir + "/stages.safetensors"});
  ASSERT_TRUE(st.ok()) << st.error().message;
  std::map<std::string, std::vector<float>> mine;
  model.set_capture([&](const std::string& name, const Tensor& t) { mine[name] = to_f32_vector(t); });
  auto img = model.encode_images(cs->images);
  ASSERT_TRUE(img.ok()) << img.error().message;
  ForwardBatch fb;
  fb.token_ids = prompt;
  fb.token_ids.insert(fb.token_ids.end(), new_ids.begin(), new_ids.end());
  for (int64_t i = 0; i < L; ++i) fb.positions.push_back(static_cast<int32_t>(i));
  if (!cs->images.empty()) fb.image_embeds = &img->tensor();
  // lm_head.tail8 = logits rows P-1 .. P+6.
  for (int64_t i = P - 1; i < P + 7; ++i) fb.logit_rows.push_back(static_cast<int32_t>(i));
  auto cache = model.new_cache(L);
  auto logits = model.forward(fb, *cache);
  ASSERT_TRUE(logits.ok()) << logits.error().message;
  model.set_capture(nullptr);
  const int64_t V = model.info().vocab_size;
  mine["lm_head.tail8"] = std::vector<float>(logits->as<float>(), logits->as<float>() + 8 * V);

  const int64_t patch = model.info().patch_size;
  int n_stages = 0;
  for (const std::string& name : st->names()) {
    if (name.rfind("input.", 0) == 0 || name.find(":position_ids") != std::string::npos) continue;
    const TensorInfo* ti = st->info(name);
    ASSERT_TRUE(ti->dtype == DType::F32 || ti->dtype == DType::BF16) << name;
    std::vector<float> ref = stage_f32(ti->dtype, ti->data, shape_numel(ti->shape));
    auto it = mine.find(name);
    ASSERT_NE(it, mine.end()) << "the engine does not capture stage " << name;
    // Only Pixtral's patch_conv is kept in another layout by HF (the padded batch).
    const bool conv = lighton_ocr::is_patch_conv(name);
    std::vector<float> got =
        conv ? lighton_ocr::patch_conv_to_hf(it->second, ti->shape, patch_grids(cs->images, patch))
             : it->second;
    ASSERT_EQ(got.size(), ref.size()) << name << " HF shape " << shape_str(ti->shape);
    if (conv) lighton_ocr::mask_patch_conv_padding(ref, ti->shape, patch_grids(cs->images, patch));
    const Metric m = metric(got, ref);
    std::printf("  %-28s %-12s %-58s rel %.3e  cos %.8f\n", ck.name.c_str(), case_name.c_str(), name.c_str(),
                m.rel, m.cos);
    if (ck.fp32) {
      EXPECT_TRUE(fp32_stage_ok(m.rel, nf, name)) << name << " rel " << m.rel;
    } else {
      EXPECT_TRUE(bf16_stage_ok(m.cos, nf, name)) << name << " cos " << m.cos;
    }
    // Planted control: the same check must reject the capture with its largest row (and the rows after
    // it, 1/64 of the tensor at least) negated.
    std::vector<float> bad = got;
    const size_t w = static_cast<size_t>(ti->shape.back());
    const size_t n_bad = std::min(bad.size(), std::max(w, bad.size() / 64));
    size_t start = 0;
    double best = -1;
    for (size_t r = 0; r + w <= bad.size(); r += w) {
      double nrm = 0;
      for (size_t k = r; k < r + w; ++k) nrm += double(bad[k]) * bad[k];
      if (nrm > best) best = nrm, start = r;
    }
    start = std::min(start, bad.size() - n_bad);
    for (size_t k = start; k < start + n_bad; ++k) bad[k] = -bad[k] + (bad[k] == 0.0f ? 1.0f : 0.0f);
    const Metric c = metric(bad, ref);
    EXPECT_FALSE(ck.fp32 ? fp32_stage_ok(c.rel, nf, name, true) : bf16_stage_ok(c.cos, nf, name, true))
        << "planted control not caught for " << name;
    ++n_stages;
  }
  EXPECT_GT(n_stages, 5);

  // ---- greedy: chunked prefill (a split inside the image span when there is one), then decode.
  auto cache2 = model.new_cache(L + 1);
  const int64_t split = std::min<int64_t>(P - 1, 17);
  int64_t img_before = 0;
  for (int64_t i = 0; i < split; ++i) img_before += prompt[i] == model.info().image_token_id;
  Buffer last;
  for (auto [b0, b1] : {std::pair<int64_t, int64_t>{0, split}, {split, P}}) {
    ForwardBatch pb;
    pb.token_ids.assign(prompt.begin() + b0, prompt.begin() + b1);
    int64_t n_img = 0;
    for (int64_t i = b0; i < b1; ++i) {
      pb.positions.push_back(static_cast<int32_t>(i));
      n_img += prompt[i] == model.info().image_token_id;
    }
    Tensor slice;
    if (n_img) {
      const int64_t off = b0 == 0 ? 0 : img_before;
      slice = img->tensor().slice_rows(off, off + n_img);
      pb.image_embeds = &slice;
    }
    pb.logit_rows = {static_cast<int32_t>(b1 - b0 - 1)};
    auto lg = model.forward(pb, *cache2);
    ASSERT_TRUE(lg.ok()) << lg.error().message;
    last = std::move(*lg);
  }
  // Invariant 2 on the real model: the prompt's last row has the same bits whether the prompt was
  // one batch with 64 more rows or two chunks.
  EXPECT_EQ(std::memcmp(last.data(), logits->as<float>(), V * 4), 0) << "chunked prefill changed bits";
  auto argmax = [&](const float* row) {
    int64_t best = 0;
    for (int64_t j = 1; j < V; ++j)
      if (row[j] > row[best]) best = j;
    return static_cast<int32_t>(best);
  };
  int32_t next = argmax(last.as<float>());
  int matched = 0;
  for (size_t s = 0; s < new_ids.size(); ++s) {
    if (next != new_ids[s]) {
      const double margin = cs->greedy["steps"][s]["margin"].get<double>();
      std::printf(
          "  %s/%s: first greedy difference at new token %zu (position %lld): engine %d, HF %d, HF top-2 "
          "margin %g\n",
          ck.name.c_str(), case_name.c_str(), s, static_cast<long long>(P + s), next, new_ids[s], margin);
      const double top1 = cs->greedy["steps"][s]["top1_logit"].get<double>();
      const bool ok = acceptable_first_difference(margin, top1, !ck.fp32);
      std::printf("    %s\n", margin == 0.0 ? "an exact HF tie"
                              : ok          ? "a near tie: at most two bf16 ulps of the top logit"
                                            : "NOT a tie: a defect");
      EXPECT_TRUE(ok) << "greedy differs where HF's top-2 margin is " << margin << " (top-1 logit " << top1
                      << ")";
      break;
    }
    ++matched;
    ForwardBatch db;
    db.token_ids = {next};
    db.positions = {static_cast<int32_t>(P + s)};
    db.logit_rows = {0};
    auto lg = model.forward(db, *cache2);
    ASSERT_TRUE(lg.ok()) << lg.error().message;
    next = argmax(lg->as<float>());
  }
  std::printf("  %s/%s: greedy %d/%zu tokens equal to HF\n", ck.name.c_str(), case_name.c_str(), matched,
              new_ids.size());
}

class LightonGolden : public ::testing::TestWithParam<std::pair<Ckpt, std::string>> {};

TEST_P(LightonGolden, StagesAndGreedyMatchTransformers) { run_case(GetParam().first, GetParam().second); }

std::vector<std::pair<Ckpt, std::string>> all_cases() {
  std::vector<std::pair<Ckpt, std::string>> out;
  std::vector<Ckpt> ckpts = {{"lighton_ocr-tiny-fp32", true},
                             {"lighton_ocr-tiny-bf16", false},
                             {"mistral3-tiny-bf16-untied", false}};
  // hidden_act variants of a lighton/mistral3 checkpoint (tools/reference/act_goldens.py), when present
  std::vector<std::string> variants;
  if (std::filesystem::exists(golden_root() + "/model"))
    for (const auto& e : std::filesystem::directory_iterator(golden_root() + "/model")) {
      const std::string meta = e.path().string() + "/meta.json";
      if (!std::filesystem::exists(meta)) continue;
      const auto j = read_json(meta);
      const std::string base = j.value("base_checkpoint", "");
      if (base.rfind("lighton_ocr", 0) == 0 || base.rfind("mistral3", 0) == 0)
        variants.push_back(e.path().filename().string());
    }
  std::sort(variants.begin(), variants.end());
  for (const auto& v : variants) ckpts.push_back({v, v.find("fp32") != std::string::npos});
  for (const Ckpt& ck : ckpts) {
    const std::string dir = golden_root() + "/model/" + ck.name;
    std::vector<std::string> names;
    if (std::filesystem::exists(dir))
      for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.is_directory()) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    if (names.empty()) names.push_back("(missing)");
    for (auto& n : names) out.emplace_back(ck, n);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Oracle, LightonGolden, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  std::string s = info.param.first.name + "_" + info.param.second;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
});

}  // namespace
