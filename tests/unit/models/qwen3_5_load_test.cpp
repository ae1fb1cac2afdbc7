// Qwen3.5 admission: text-only configs (vision_config absent or null), a vision tower tensorfold
// cannot read, MTP weights, layer_types fallback, and the prompt-cache state property (states
// after a chunk-aligned split prefill equal those of one pass, bit for bit).
#include <unistd.h>
#include <filesystem>
#include <fstream>

#include "models/qwen3_5/config.h"
#include "qwen3_5_test_util.h"

using namespace tf;
using namespace tf::q35test;
namespace fs = std::filesystem;

namespace {

const std::string kBf16 = "qwen3_5-tiny-bf16";

// A scratch checkpoint dir: the tiny checkpoint's weights (symlinked) with an edited config.json.
struct TempCkpt {
  fs::path dir;
  explicit TempCkpt(const nlohmann::json& config) {
    dir = fs::temp_directory_path() /
          ("tf_qwen35_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(dir);
    fs::create_symlink(golden_root() + "/ckpt/" + kBf16 + "/model.safetensors", dir / "model.safetensors");
    std::ofstream(dir / "config.json") << config.dump();
  }
  ~TempCkpt() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

nlohmann::json base_config() { return read_json(golden_root() + "/ckpt/" + kBf16 + "/config.json"); }

TEST(Qwen35Load, WithoutVisionConfigServesText) {
  for (bool null_vision : {false, true}) {
    auto cfg = base_config();
    if (null_vision)
      cfg["vision_config"] = nullptr;
    else
      cfg.erase("vision_config");
    TempCkpt tmp(cfg);
    auto l = load_dir(tmp.dir.string());
    ASSERT_TRUE(l.ok()) << l.error().message;
    EXPECT_EQ(l->model->info().image_token_id, -1);
    EXPECT_EQ(l->model->n_image_tokens(64, 64), 0);
    Buffer px(DType::F32, {4, 1536});
    auto e = l->model->encode_images({ImageInput{px.view(), 32, 32}});
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().message.find("no image tower"), std::string::npos) << e.error().message;
    if (null_vision) continue;
    // The text path is the full model's: HF's text_only greedy ids come out.
    auto c = read_case(golden_root() + "/model/" + kBf16 + "/text_only");
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto ids = greedy(*l, *c, 64);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    expect_greedy_matches(*ids, c->greedy, "text-only config", true);
  }
}

TEST(Qwen35Load, UnreadableVisionTowerIsRefusedByName) {
  {
    auto cfg = base_config();
    cfg["vision_config"]["num_heads"] = 3;  // 64 / 3
    TempCkpt tmp(cfg);
    auto l = load_dir(tmp.dir.string());
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.error().message.find("vision_config.num_heads"), std::string::npos) << l.error().message;
  }
  {
    auto cfg = base_config();
    cfg["vision_config"]["num_position_embeddings"] = 2300;  // not a square table
    TempCkpt tmp(cfg);
    auto l = load_dir(tmp.dir.string());
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.error().message.find("vision_config.num_position_embeddings"), std::string::npos)
        << l.error().message;
  }
  {
    auto cfg = base_config();
    cfg["vision_config"]["hidden_act"] = "tanh";  // in ACT2FN, not admitted
    TempCkpt tmp(cfg);
    auto l = load_dir(tmp.dir.string());
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.error().message.find("vision_config.hidden_act"), std::string::npos) << l.error().message;
    EXPECT_NE(l.error().message.find("'tanh'"), std::string::npos) << l.error().message;
  }
  // Qwen3_5VisionMLP is fc2(act(fc1(x))) with any ACT2FN entry; these six have an op.
  for (const char* act : {"silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "quick_gelu", "relu"}) {
    auto cfg = base_config();
    cfg["vision_config"]["hidden_act"] = act;
    TempCkpt tmp(cfg);
    auto l = load_dir(tmp.dir.string());
    EXPECT_TRUE(l.ok()) << act << ": " << l.error().message;
  }
  {
    auto cfg = base_config();
    cfg["vision_config"]["intermediate_size"] = 96;  // the stored tensors say 128
    TempCkpt tmp(cfg);
    auto l = load_dir(tmp.dir.string());
    ASSERT_FALSE(l.ok());
    EXPECT_NE(l.error().message.find("model.visual.blocks.0.mlp.linear_fc1.weight"), std::string::npos)
        << l.error().message;
  }
}

TEST(Qwen35Load, MtpWeightsAreMappedNotRefused) {
  auto l = load_dir(golden_root() + "/ckpt/" + kBf16);
  ASSERT_TRUE(l.ok()) << l.error().message;
  const auto& mtp = l->q35()->weights().mtp;
  EXPECT_TRUE(mtp.present);
  EXPECT_EQ(mtp.n_tensors, 15);
  ASSERT_EQ(mtp.layers.size(), 1u);
  EXPECT_FALSE(mtp.layers[0].attn.q_proj.empty());
  EXPECT_FALSE(mtp.norm.empty());
  // A stray tensor outside mtp.* is still an error (leftovers are refused).
}

TEST(Qwen35Load, LayerTypesFallBackToFullAttentionInterval) {
  auto cfg = base_config();
  cfg["text_config"].erase("layer_types");
  cfg["text_config"]["full_attention_interval"] = 4;
  auto j = JsonConfig::from_json(cfg, "config.json");
  ASSERT_TRUE(j.ok());
  auto c = qwen3_5::parse_config(*j);
  ASSERT_TRUE(c.ok()) << c.error().message;
  const std::vector<bool> want{false, false, false, true, false, false};
  EXPECT_EQ(c->text.full_attention, want);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->text.rotary_dim, 16);
  EXPECT_EQ(c->text.mrope_section, (std::array<int64_t, 3>{3, 3, 2}));
  cfg["text_config"]["layer_types"] = {"linear_attention", "sliding_attention", "full_attention",
                                       "linear_attention", "linear_attention",  "full_attention"};
  auto j2 = JsonConfig::from_json(cfg, "config.json");
  auto c2 = qwen3_5::parse_config(*j2);
  ASSERT_FALSE(c2.ok());
  EXPECT_NE(c2.error().message.find("text_config.layer_types"), std::string::npos) << c2.error().message;
}

// The prompt cache resumes at multiples of the delta-rule chunk: conv window, recurrent state and
// K/V after prompt[0:n] equal those after prompt[0:64] + prompt[64:128] + prompt[128:n].
TEST(Qwen35Load, ChunkAlignedPrefillStatesAreBitExact) {
  auto l = load_dir(golden_root() + "/ckpt/" + kBf16);
  ASSERT_TRUE(l.ok()) << l.error().message;
  auto c = read_case(golden_root() + "/model/" + kBf16 + "/ocr_nothink");
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto* m = l->q35();
  auto emb = m->encode_images(c->images);
  ASSERT_TRUE(emb.ok());
  std::vector<int32_t> ids = c->prompt_ids;
  for (auto id : c->greedy["new_ids"]) ids.push_back(id.get<int32_t>());
  const int64_t n = static_cast<int64_t>(ids.size());
  ASSERT_GT(n, 128);
  auto ri = qwen3_5::rope_index(ids, m->info().image_token_id, c->grids, 2);
  ASSERT_TRUE(ri.ok());
  // Image rows of the prompt, in order, so a chunk gets its slice of the embeddings.
  std::vector<int64_t> img_before(static_cast<size_t>(n + 1), 0);
  for (int64_t i = 0; i < n; ++i)
    img_before[static_cast<size_t>(i + 1)] =
        img_before[static_cast<size_t>(i)] + (ids[static_cast<size_t>(i)] == m->info().image_token_id);
  auto run = [&](const std::vector<int64_t>& cuts, std::vector<float>* last_logits) {
    auto cache = m->new_cache(n);
    dynamic_cast<qwen3_5::Qwen35Cache*>(cache.get())->set_rope_index(*ri);
    int64_t a = 0;
    for (int64_t bnd : cuts) {
      ForwardBatch b;
      b.token_ids.assign(ids.begin() + a, ids.begin() + bnd);
      for (int64_t i = a; i < bnd; ++i) b.positions.push_back(static_cast<int32_t>(i));
      const Tensor slice =
          emb->tensor().slice_rows(img_before[static_cast<size_t>(a)], img_before[static_cast<size_t>(bnd)]);
      b.image_embeds = slice.dim(0) ? &slice : nullptr;
      if (bnd == n) b.logit_rows = {static_cast<int32_t>(bnd - a - 1)};
      auto r = m->forward(b, *cache);
      EXPECT_TRUE(r.ok()) << r.error().message;
      if (bnd == n && r.ok()) *last_logits = to_f32_vector(r->view());
      a = bnd;
    }
    return cache;
  };
  std::vector<float> l1, l2, l3;
  auto c1 = run({n}, &l1);
  auto c2 = run({64, 128, n}, &l2);
  auto c3 = run({70, n}, &l3);  // control: not chunk-aligned
  auto* q1 = dynamic_cast<qwen3_5::Qwen35Cache*>(c1.get());
  auto* q2 = dynamic_cast<qwen3_5::Qwen35Cache*>(c2.get());
  auto* q3 = dynamic_cast<qwen3_5::Qwen35Cache*>(c3.get());
  auto same = [&](const Tensor& x, const Tensor& y) {
    Buffer hx = download_new(*l->backend, x), hy = download_new(*l->backend, y);
    return hx.nbytes() == hy.nbytes() && std::memcmp(hx.data(), hy.data(), hx.nbytes()) == 0;
  };
  bool control_differs = false;
  for (size_t i = 0; i < q1->state.size(); ++i) {
    if (q1->state[i].empty()) {
      const size_t pl = static_cast<size_t>(q1->kv_layer[i]);
      KvPool& pool = q1->table.pool();  // one pool: the model's
      for (int64_t p = 0; p < n; ++p) {
        const int64_t s1 = q1->table.slot(p), s2 = q2->table.slot(p);
        EXPECT_TRUE(same(pool.k(pl).slice_rows(s1, s1 + 1), pool.k(pl).slice_rows(s2, s2 + 1)))
            << "layer " << i;
        EXPECT_TRUE(same(pool.v(pl).slice_rows(s1, s1 + 1), pool.v(pl).slice_rows(s2, s2 + 1)))
            << "layer " << i;
      }
      continue;
    }
    EXPECT_TRUE(same(q1->conv[i], q2->conv[i])) << "conv state, layer " << i;
    EXPECT_TRUE(same(q1->state[i], q2->state[i])) << "recurrent state, layer " << i;
    control_differs |= !same(q1->state[i], q3->state[i]);
  }
  EXPECT_EQ(l1, l2);
  EXPECT_TRUE(control_differs) << "control: an unaligned split should change some state bits";
}

TEST(Qwen35Load, ForwardRejectsOutOfOrderRowsWithoutChangingTheCache) {
  auto l = load_dir(golden_root() + "/ckpt/" + kBf16);
  ASSERT_TRUE(l.ok()) << l.error().message;
  auto cache = l->model->new_cache(16);
  ForwardBatch b;
  b.token_ids = {5, 6};
  b.positions = {1, 2};  // must start at 0
  auto r = l->model->forward(b, *cache);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("position"), std::string::npos);
  EXPECT_EQ(dynamic_cast<qwen3_5::Qwen35Cache*>(cache.get())->n_past(), 0);
  b.positions = {0, 1};
  b.token_ids = {5, 1424};  // one image token, two embedding rows
  DeviceBuffer two = l->model->backend().alloc(l->model->info().dtype, {2, l->model->info().hidden_size});
  b.image_embeds = &two.tensor();
  EXPECT_FALSE(l->model->forward(b, *cache).ok());
  EXPECT_EQ(dynamic_cast<qwen3_5::Qwen35Cache*>(cache.get())->n_past(), 0);
  b.image_embeds = nullptr;
  b.token_ids = {5, 6};
  EXPECT_TRUE(l->model->forward(b, *cache).ok());
  EXPECT_EQ(dynamic_cast<qwen3_5::Qwen35Cache*>(cache.get())->n_past(), 2);
}

}  // namespace
