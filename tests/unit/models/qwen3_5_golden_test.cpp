// Qwen3.5 tiny checkpoints against the Transformers 5.17 goldens: every captured stage of a
// teacher-forced pass (fp32: rel ≤ 1e-5; bf16: cosine ≥ 0.9999), M-RoPE position ids exactly,
// and 64 greedy ids (equal, or the first difference at an exact HF tie).
#include <cstdio>
#include <set>

#include "io/safetensors.h"
#include "qwen3_5_test_util.h"

using namespace tf;
using namespace tf::q35test;

namespace {

struct CkptSpec {
  const char* ckpt;
  bool fp32;
  std::vector<std::string> cases;
};

// One model load per checkpoint for the whole suite.
std::map<std::string, Loaded>& models() {
  static std::map<std::string, Loaded> m;
  return m;
}
const Loaded& model_for(const std::string& ckpt) {
  auto& m = models();
  auto it = m.find(ckpt);
  if (it == m.end()) {
    auto l = load_dir(golden_root() + "/ckpt/" + ckpt);
    EXPECT_TRUE(l.ok()) << (l.ok() ? "" : l.error().message);
    it = m.emplace(ckpt, l.ok() ? std::move(*l) : Loaded{}).first;
  }
  return it->second;
}

std::vector<float> f32_of(const SafetensorsEntry& e) {
  return oracle_noise::stage_f32(e.dtype, e.data, shape_numel(e.shape));
}

// Teacher-forced pass (prompt + HF's 64 greedy ids, use_cache=False in the oracle) with captures.
// hf_image_embeds: use HF's merger output as the image rows instead of ours.
struct Pass {
  std::map<std::string, std::vector<float>> got;
  std::vector<int32_t> thw;
};

Pass teacher_forced(const Loaded& L, const Case& c, const std::vector<int32_t>& ids,
                    const Tensor* hf_image_embeds) {
  Pass out;
  auto* m = L.q35();
  m->set_capture([&](const std::string& name, const Tensor& host) { out.got[name] = to_f32_vector(host); });
  auto emb = m->encode_images(c.images);
  EXPECT_TRUE(emb.ok()) << emb.error().message;
  const int64_t P = static_cast<int64_t>(c.prompt_ids.size()), n = static_cast<int64_t>(ids.size());
  auto cache = m->new_cache(n);
  auto* qc = dynamic_cast<qwen3_5::Qwen35Cache*>(cache.get());
  if (!c.grids.empty()) {
    auto ri = qwen3_5::rope_index(ids, m->info().image_token_id, c.grids, 2);
    EXPECT_TRUE(ri.ok()) << ri.error().message;
    if (ri.ok()) qc->set_rope_index(std::move(*ri));
  }
  ForwardBatch b;
  b.token_ids = ids;
  for (int64_t i = 0; i < n; ++i) b.positions.push_back(static_cast<int32_t>(i));
  if (!c.images.empty()) b.image_embeds = hf_image_embeds ? hf_image_embeds : &emb->tensor();
  for (int64_t r = P - 1; r < P + 7; ++r) b.logit_rows.push_back(static_cast<int32_t>(r));
  auto lg = m->forward(b, *cache);
  m->set_capture(nullptr);
  EXPECT_TRUE(lg.ok()) << lg.error().message;
  if (lg.ok()) out.got["lm_head.tail8"] = to_f32_vector(lg->view());
  out.thw = qc->rope().thw;
  return out;
}

// Vision stages are compared on our own pass from pixel_values. Decoder stages are compared on a
// pass fed HF's merger output as the image rows (stage isolation: the tiny model amplifies the
// last-bit noise of the image embeddings through its GDN layers); the end-to-end decoder numbers
// are printed too.
void check_stages(const std::string& ckpt, const std::string& conv, bool fp32) {
  const std::string dir = golden_root() + "/model/" + ckpt + "/" + conv;
  const Loaded& L = model_for(ckpt);
  ASSERT_TRUE(L.model);
  auto c = read_case(dir);
  ASSERT_TRUE(c.ok()) << c.error().message;
  const oracle_noise::NoiseFloor nf = oracle_noise::read_noise_floor(dir);
  ASSERT_TRUE(nf.present) << "missing " << dir << "/noise_floor.json (tools/reference/noise_floor.py)";
  auto st = SafetensorsFile::open(dir + "/stages.safetensors");
  ASSERT_TRUE(st.ok()) << st.error().message;
  std::vector<int32_t> ids = c->prompt_ids;
  for (auto id : c->greedy["new_ids"]) ids.push_back(id.get<int32_t>());
  const int64_t n = static_cast<int64_t>(ids.size());
  const Pass e2e = teacher_forced(L, *c, ids, nullptr);
  Pass iso;
  DeviceBuffer hf_emb;
  if (const auto* mg = st->find("model.visual.merger")) {
    Buffer h(L.model->info().dtype, mg->shape);
    const std::vector<float> v = f32_of(*mg);
    for (int64_t i = 0; i < h.numel(); ++i) store_f32(h.view(), i, v[static_cast<size_t>(i)]);
    hf_emb = upload_new(*L.backend, h.view());
    iso = teacher_forced(L, *c, ids, &hf_emb.tensor());
  }
  const Pass& dec = hf_emb.empty() ? e2e : iso;

  int checked = 0;
  for (const auto& e : st->tensors()) {
    if (e.name == "input.input_ids" || e.name == "input.pixel_values") continue;
    if (e.name == "model.language_model.rotary_emb:position_ids") {  // [3, 1, L] int64
      const auto* p = reinterpret_cast<const int64_t*>(e.data);
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t i = 0; i < n; ++i) {
          const int64_t have = e2e.thw.empty() ? i : e2e.thw[static_cast<size_t>(3 * i + a)];
          ASSERT_EQ(have, p[a * n + i]) << "position_ids axis " << a << " row " << i;
        }
      ++checked;
      continue;
    }
    const bool vision = e.name.rfind("model.visual.", 0) == 0;
    const Pass& pass = vision ? e2e : dec;
    auto it = pass.got.find(e.name);
    ASSERT_NE(it, pass.got.end()) << "no capture for golden stage " << e.name;
    const std::vector<float> ref = f32_of(e);
    ASSERT_EQ(it->second.size(), ref.size()) << e.name;
    const Metric mt = metric(it->second, ref);
    std::string extra;
    if (!vision && !hf_emb.empty()) {
      const Metric me = metric(e2e.got.at(e.name), ref);
      char buf[96];
      std::snprintf(buf, sizeof buf, "   (end to end: rel %.3g cos %.8f)", me.rel, me.cos);
      extra = buf;
    }
    std::printf("  %-46s rel %.3g  cos %.8f%s\n", e.name.c_str(), mt.rel, mt.cos, extra.c_str());
    if (fp32) {
      EXPECT_TRUE(oracle_noise::fp32_stage_ok(mt.rel, nf, e.name))
          << ckpt << "/" << conv << " " << e.name << " rel " << mt.rel;
    } else {
      // Isolated (HF's merger output as image rows): the fixed threshold. End to end: the oracle's noise
      // bound.
      EXPECT_GE(mt.cos, 0.9999) << ckpt << "/" << conv << " " << e.name;
      if (!vision && !hf_emb.empty()) {
        const Metric me = metric(e2e.got.at(e.name), ref);
        EXPECT_TRUE(oracle_noise::bf16_stage_ok(me.cos, nf, e.name))
            << ckpt << "/" << conv << " " << e.name << " end to end";
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

class Qwen35Golden : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(Qwen35Golden, StagesMatchTransformers) {
  const auto& [ckpt, conv] = GetParam();
  SCOPED_TRACE(ckpt + "/" + conv);
  check_stages(ckpt, conv, ckpt.find("fp32") != std::string::npos);
}

TEST_P(Qwen35Golden, GreedyMatchesTransformers) {
  const auto& [ckpt, conv] = GetParam();
  const Loaded& L = model_for(ckpt);
  ASSERT_TRUE(L.model);
  auto c = read_case(golden_root() + "/model/" + ckpt + "/" + conv);
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto ids = greedy(L, *c, 64);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  expect_greedy_matches(*ids, c->greedy, ckpt + "/" + conv, ckpt.find("bf16") != std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    All, Qwen35Golden,
    ::testing::Values(std::pair<std::string, std::string>{"qwen3_5-tiny-fp32", "ocr_nothink"},
                      std::pair<std::string, std::string>{"qwen3_5-tiny-fp32", "two_images"},
                      std::pair<std::string, std::string>{"qwen3_5-tiny-fp32", "text_only"},
                      std::pair<std::string, std::string>{"qwen3_5-tiny-bf16", "ocr_nothink"},
                      std::pair<std::string, std::string>{"qwen3_5-tiny-bf16", "grounding_think"},
                      std::pair<std::string, std::string>{"qwen3_5-tiny-bf16", "two_images"},
                      std::pair<std::string, std::string>{"qwen3_5-tiny-bf16", "text_only"},
                      std::pair<std::string, std::string>{"qwen3_5-tiny-bf16-untied", "text_only"}),
    [](const auto& info) {
      std::string s = info.param.first.substr(13) + "_" + info.param.second;
      for (auto& ch : s)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

}  // namespace
