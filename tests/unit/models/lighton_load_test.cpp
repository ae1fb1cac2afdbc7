// Malformed LightOnOCR checkpoints are refused at load with one clear line. Each case copies a tiny
// golden checkpoint into a temp dir and edits config.json or rewrites model.safetensors.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "io/safetensors_writer.h"
#include "lighton_golden_util.h"

using namespace tf;
using namespace tf::golden;
namespace fs = std::filesystem;

namespace {

using TensorEdit = std::function<void(SafetensorsWriter&, const std::string& name, const TensorInfo& ti)>;

// A copy of ckpt/<src> with config edited by cfg_edit and every tensor passed through edit (which
// decides what to write; default: copy).
std::string make_ckpt(const std::string& src, const std::string& tag,
                      const std::function<void(nlohmann::json&)>& cfg_edit, const TensorEdit& edit = nullptr,
                      const std::function<void(SafetensorsWriter&)>& extra = nullptr) {
  const std::string from = golden_root() + "/ckpt/" + src;
  const fs::path dir = fs::temp_directory_path() / ("tf_lighton_" + std::to_string(getpid()) + "_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  nlohmann::json cfg = read_json(from + "/config.json");
  if (cfg_edit) cfg_edit(cfg);
  std::ofstream(dir / "config.json") << cfg.dump(1);
  if (!edit && !extra) {
    fs::copy_file(from + "/model.safetensors", dir / "model.safetensors");
  } else {
    auto wm = WeightMap::open(from);
    EXPECT_TRUE(wm.ok());
    SafetensorsWriter w;
    for (const std::string& name : wm->names()) {
      const TensorInfo* ti = wm->info(name);
      if (edit) {
        edit(w, name, *ti);
      } else {
        EXPECT_TRUE(w.add(name, ti->dtype, ti->shape, ti->data).ok());
      }
    }
    if (extra) extra(w);
    EXPECT_TRUE(w.write((dir / "model.safetensors").string()).ok());
  }
  return dir.string();
}

void copy_tensor(SafetensorsWriter& w, const std::string& name, const TensorInfo& ti) {
  EXPECT_TRUE(w.add(name, ti.dtype, ti.shape, ti.data).ok());
}

// Loads and returns the error line ("" if it loaded).
std::string load_error(const std::string& dir) {
  auto r = load_dir(dir);
  fs::remove_all(dir);
  return r.ok() ? "" : r.error().message;
}

void expect_refused(const std::string& msg, const std::vector<std::string>& parts) {
  ASSERT_FALSE(msg.empty()) << "the checkpoint was accepted";
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  std::printf("  refused: %s\n", msg.c_str());
}

TEST(LightonLoad, UnmodifiedCopiesLoad) {  // control: the copies themselves are fine
  EXPECT_EQ(load_error(make_ckpt("lighton_ocr-tiny-bf16", "ok", nullptr)), "");
  EXPECT_EQ(load_error(make_ckpt("mistral3-tiny-bf16-untied", "ok3", nullptr, copy_tensor)), "");
}

TEST(LightonLoad, UnknownModelType) {
  expect_refused(
      load_error(make_ckpt("lighton_ocr-tiny-bf16", "mt", [](auto& c) { c["model_type"] = "llava"; })),
      {"unknown model_type 'llava'", "lighton_ocr", "mistral3"});
}

TEST(LightonLoad, ConfigMissingRequiredField) {
  expect_refused(load_error(make_ckpt("lighton_ocr-tiny-bf16", "nofield",
                                      [](auto& c) { c["text_config"].erase("hidden_size"); })),
                 {"config.json", "text_config.hidden_size", "missing"});
  expect_refused(
      load_error(make_ckpt("lighton_ocr-tiny-bf16", "novision", [](auto& c) { c.erase("vision_config"); })),
      {"vision_config", "missing"});
}

TEST(LightonLoad, Mistral3WithMistralDecoder) {
  const std::string msg = load_error(make_ckpt("mistral3-tiny-bf16-untied", "mistral",
                                               [](auto& c) { c["text_config"]["model_type"] = "mistral"; }));
  EXPECT_EQ(
      msg,
      "this mistral3 checkpoint is not a LightOnOCR model (text_config.model_type is mistral); tensorfold "
      "serves mistral3 with a qwen3 decoder only");
}

TEST(LightonLoad, MissingTensor) {
  auto drop = [](SafetensorsWriter& w, const std::string& name, const TensorInfo& ti) {
    if (name != "model.language_model.norm.weight") copy_tensor(w, name, ti);
  };
  expect_refused(load_error(make_ckpt("lighton_ocr-tiny-bf16", "missing", nullptr, drop)),
                 {"missing tensor 'model.language_model.norm.weight'"});
  // Untied mistral3 without its lm_head (stored as language_model.lm_head.weight on disk).
  auto drop_head = [](SafetensorsWriter& w, const std::string& name, const TensorInfo& ti) {
    if (name.find("lm_head") == std::string::npos) copy_tensor(w, name, ti);
  };
  expect_refused(load_error(make_ckpt("mistral3-tiny-bf16-untied", "nohead", nullptr, drop_head)),
                 {"missing tensor", "lm_head.weight"});
}

TEST(LightonLoad, WrongShape) {
  auto reshape = [](SafetensorsWriter& w, const std::string& name, const TensorInfo& ti) {
    if (name == "model.vision_encoder.ln_pre.weight") {
      EXPECT_TRUE(w.add(name, ti.dtype, {2, ti.shape[0] / 2}, ti.data).ok());
    } else {
      copy_tensor(w, name, ti);
    }
  };
  expect_refused(load_error(make_ckpt("lighton_ocr-tiny-bf16", "shape", nullptr, reshape)),
                 {"model.vision_encoder.ln_pre.weight", "shape [2, 32]", "[64]"});
}

TEST(LightonLoad, WrongDtype) {
  std::vector<float> f32;
  auto to_f32 = [&](SafetensorsWriter& w, const std::string& name, const TensorInfo& ti) {
    if (name == "model.language_model.norm.weight") {
      Tensor t{const_cast<void*>(ti.data), ti.dtype, ti.shape};
      f32 = to_f32_vector(t);
      EXPECT_TRUE(w.add(name, DType::F32, ti.shape, f32.data()).ok());
    } else {
      copy_tensor(w, name, ti);
    }
  };
  expect_refused(load_error(make_ckpt("lighton_ocr-tiny-bf16", "dtype", nullptr, to_f32)),
                 {"model.language_model.norm.weight", "F32", "BF16"});
}

TEST(LightonLoad, LeftoverTensor) {
  std::vector<uint16_t> junk(8, 0);
  auto extra = [&](SafetensorsWriter& w) {
    EXPECT_TRUE(w.add("model.extra_head.weight", DType::BF16, {8}, junk.data()).ok());
  };
  expect_refused(load_error(make_ckpt("lighton_ocr-tiny-bf16", "extra", nullptr, copy_tensor, extra)),
                 {"model.extra_head.weight"});
}

// Transformers' PixtralMLP is gated with any ACT2FN entry; these six have an op (ActKind), others are
// refused by name.
TEST(LightonLoad, VisionHiddenActs) {
  for (const char* act : {"silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "quick_gelu", "relu"}) {
    SCOPED_TRACE(act);
    EXPECT_EQ(load_error(make_ckpt("lighton_ocr-tiny-bf16", std::string("act_") + act,
                                   [&](auto& c) { c["vision_config"]["hidden_act"] = act; })),
              "");
  }
  // Absent: PixtralVisionConfig's default, gelu.
  EXPECT_EQ(load_error(make_ckpt("lighton_ocr-tiny-bf16", "act_default",
                                 [](auto& c) { c["vision_config"].erase("hidden_act"); })),
            "");
  for (const char* act : {"tanh", "gelu_10", "swish", "SiLU"}) {
    expect_refused(load_error(make_ckpt("lighton_ocr-tiny-bf16", "act_bad",
                                        [&](auto& c) { c["vision_config"]["hidden_act"] = act; })),
                   {"vision_config.hidden_act", std::string("'") + act + "'", "gelu_new"});
  }
}

TEST(LightonLoad, UnsupportedVariantsNameTheField) {
  expect_refused(
      load_error(make_ckpt("lighton_ocr-tiny-bf16", "rope",
                           [](auto& c) { c["text_config"]["rope_parameters"]["rope_type"] = "yarn"; })),
      {"text_config.rope_parameters.rope_type", "yarn"});
}

}  // namespace
