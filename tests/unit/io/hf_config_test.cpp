#include "io/hf_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io_test_util.h"

namespace tf {
namespace {

using testing::TempDir;
using testing::write_file;

const char* kConfig = R"({
  "model_type": "mistral3",
  "eos_token_id": 151645,
  "tie_word_embeddings": true,
  "pad_token_id": null,
  "text_config": {
    "model_type": "qwen3",
    "hidden_size": 1024,
    "rms_norm_eps": 1e-06,
    "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"},
    "bad_size": "abc",
    "zero": 0,
    "neg": -3,
    "float_size": 1024.0,
    "huge": 18446744073709551615,
    "layer_types": ["full_attention", "linear_attention"],
    "mrope_section": [11, 11, 10],
    "mixed": [1, "x"]
  },
  "vision_config": "pixtral",
  "image_mean": [0.48145466, 0.4578275, 0.40821073],
  "generation_eos": [151645, 151643]
})";

JsonConfig parsed() {
  auto c = JsonConfig::parse(kConfig, "config.json");
  EXPECT_TRUE(c.ok()) << c.error().message;
  return c.ok() ? c.value() : JsonConfig();
}

TEST(HfConfig, TypedGetters) {
  JsonConfig c = parsed();
  EXPECT_EQ(*c.get_string("model_type"), "mistral3");
  EXPECT_EQ(*c.get_int("eos_token_id"), 151645);
  EXPECT_TRUE(*c.get_bool("tie_word_embeddings"));
  EXPECT_FALSE(*c.get_bool("missing_flag", false));
  EXPECT_EQ(*c.get_int("pad_token_id", -1), -1);  // null counts as absent
  EXPECT_FALSE(c.has("pad_token_id"));
  EXPECT_TRUE(c.has("text_config"));
  auto text = c.object("text_config");
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(text->path(), "text_config");
  EXPECT_EQ(text->field("hidden_size"), "text_config.hidden_size");
  EXPECT_EQ(*text->get_positive_int("hidden_size"), 1024);
  EXPECT_EQ(*text->get_number("rms_norm_eps"), 1e-6);
  auto rope = text->object("rope_parameters");
  ASSERT_TRUE(rope.ok());
  EXPECT_EQ(*rope->get_number("rope_theta"), 1e6);  // an integer is a number
  EXPECT_EQ(rope->path(), "text_config.rope_parameters");
  EXPECT_EQ(*text->get_string_list("layer_types"),
            (std::vector<std::string>{"full_attention", "linear_attention"}));
  EXPECT_EQ(*text->get_int_list("mrope_section"), (std::vector<int64_t>{11, 11, 10}));
  EXPECT_EQ(*text->get_int_list("nope", {1, 2}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*c.get_number_list("image_mean"), (std::vector<double>{0.48145466, 0.4578275, 0.40821073}));
  EXPECT_EQ(*c.get_ids("eos_token_id"), (std::vector<int64_t>{151645}));
  EXPECT_EQ(*c.get_ids("generation_eos"), (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(*c.get_ids("absent_ids", {7}), (std::vector<int64_t>{7}));
  EXPECT_EQ(*c.get_string("absent", "dflt"), "dflt");
  EXPECT_EQ(*c.get_number("absent", 0.5), 0.5);
  EXPECT_EQ(*c.get_positive_int("absent", 4), 4);
  auto vis = c.object_if("absent_config");
  ASSERT_TRUE(vis.ok());
  EXPECT_FALSE(vis->has_value());
  EXPECT_EQ(c.json()["model_type"], "mistral3");
}

TEST(HfConfig, ErrorsNameTheFieldPath) {
  JsonConfig c = parsed();
  JsonConfig text = *c.object("text_config");
  EXPECT_EQ(text.get_int("missing_size").error().message, "config.json: text_config.missing_size is missing");
  EXPECT_EQ(text.get_positive_int("bad_size").error().message,
            "config.json: text_config.bad_size must be a positive integer, got \"abc\"");
  EXPECT_EQ(text.get_positive_int("zero").error().message,
            "config.json: text_config.zero must be a positive integer, got 0");
  EXPECT_EQ(text.get_positive_int("neg", 5).error().message,
            "config.json: text_config.neg must be a positive integer, got -3");
  EXPECT_EQ(text.get_int("float_size").error().message,
            "config.json: text_config.float_size must be an integer, got 1024.0");
  EXPECT_EQ(text.get_int("huge").error().message,
            "config.json: text_config.huge must be an integer, got 18446744073709551615");
  EXPECT_EQ(text.get_int_list("mixed").error().message,
            "config.json: text_config.mixed must be a list of integers, got [1,\"x\"]");
  EXPECT_EQ(text.get_string_list("mrope_section").error().message,
            "config.json: text_config.mrope_section must be a list of strings, got [11,11,10]");
  EXPECT_EQ(text.get_number("model_type").error().message,
            "config.json: text_config.model_type must be a number, got \"qwen3\"");
  EXPECT_EQ(text.get_bool("hidden_size").error().message,
            "config.json: text_config.hidden_size must be true or false, got 1024");
  EXPECT_EQ(text.get_string("hidden_size", "x").error().message,
            "config.json: text_config.hidden_size must be a string, got 1024");
  EXPECT_EQ(c.get_int("pad_token_id").error().message, "config.json: pad_token_id is missing (null)");
  EXPECT_EQ(c.object("vision_config").error().message,
            "config.json: vision_config must be an object, got \"pixtral\"");
  EXPECT_EQ(c.object_if("vision_config").error().message,
            "config.json: vision_config must be an object, got \"pixtral\"");
  EXPECT_EQ(c.object("audio_config").error().message, "config.json: audio_config is missing");
  EXPECT_EQ(c.get_ids("model_type").error().message,
            "config.json: model_type must be an integer or a list of integers, got \"mistral3\"");
  EXPECT_EQ(text.get_ids("mixed").error().message,
            "config.json: text_config.mixed must be an integer or a list of integers, got [1,\"x\"]");
}

TEST(HfConfig, LoadRefusesMalformedFiles) {
  TempDir dir;
  write_file(dir / "config.json", "{\"a\": 1,}");
  auto c = JsonConfig::load(dir / "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message.rfind("config.json: not valid JSON: parse error at line 1", 0), 0u)
      << c.error().message;
  EXPECT_EQ(c.error().message.find('\n'), std::string::npos);
  write_file(dir / "config.json", "[1]");
  EXPECT_EQ(JsonConfig::load(dir / "config.json").error().message,
            "config.json: must hold a JSON object, got [1]");
  auto missing = JsonConfig::load(dir / "nope.json");
  EXPECT_EQ(missing.error().message, dir / "nope.json" + ": cannot read: No such file or directory");
}

TEST(HfConfig, LoadsCompanionFiles) {
  TempDir dir;
  auto none = load_hf_configs(dir.path());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, dir.path() + ": no config.json (not a Hugging Face checkpoint directory?)");

  write_file(dir / "config.json", kConfig);
  auto only = load_hf_configs(dir.path());
  ASSERT_TRUE(only.ok()) << only.error().message;
  EXPECT_FALSE(only->generation_config || only->tokenizer_config || only->processor_config ||
               only->preprocessor_config || only->image_processor_config);

  write_file(dir / "generation_config.json", R"({"eos_token_id": [151645, 151643], "do_sample": false})");
  write_file(dir / "tokenizer_config.json", R"({"eos_token": "<|im_end|>", "bos_token": null})");
  write_file(dir / "preprocessor_config.json", R"({"patch_size": 14, "size": {"longest_edge": 1540}})");
  write_file(dir / "processor_config.json",
             R"({"processor_class": "LightOnOcrProcessor", "patch_size": 14})");
  auto all = load_hf_configs(dir.path());
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(*all->generation_config->get_ids("eos_token_id"), (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(all->generation_config->file(), "generation_config.json");
  EXPECT_EQ(*all->tokenizer_config->get_string("eos_token"), "<|im_end|>");
  // No nested image_processor: the preprocessor file holds the image settings.
  ASSERT_TRUE(all->image_processor_config.has_value());
  EXPECT_EQ(all->image_processor_config->file(), "preprocessor_config.json");
  EXPECT_EQ(*all->image_processor_config->object("size")->get_int("longest_edge"), 1540);

  // A nested image_processor wins, as in Transformers' get_image_processor_dict.
  write_file(
      dir / "processor_config.json",
      R"({"processor_class": "LightOnOcrProcessor", "image_processor": {"patch_size": 16, "size": {"longest_edge": 1024}}})");
  auto nested = load_hf_configs(dir.path());
  ASSERT_TRUE(nested.ok()) << nested.error().message;
  EXPECT_EQ(nested->image_processor_config->path(), "image_processor");
  EXPECT_EQ(nested->image_processor_config->file(), "processor_config.json");
  EXPECT_EQ(*nested->image_processor_config->get_int("patch_size"), 16);
  EXPECT_EQ(nested->image_processor_config->object("size")->get_int("x").error().message,
            "processor_config.json: image_processor.size.x is missing");

  write_file(dir / "processor_config.json", R"({"image_processor": 3})");
  EXPECT_EQ(load_hf_configs(dir.path()).error().message,
            "processor_config.json: image_processor must be an object, got 3");
  write_file(dir / "processor_config.json", "{}");
  write_file(dir / "generation_config.json", "{oops");
  std::string msg = load_hf_configs(dir.path()).error().message;
  EXPECT_EQ(msg.rfind("generation_config.json: not valid JSON", 0), 0u) << msg;
}

TEST(HfConfig, SubViewsOutliveTheirParent) {
  std::optional<JsonConfig> inner;
  {
    JsonConfig c = parsed();
    inner = *c.object("text_config");
  }
  EXPECT_EQ(*inner->get_int("hidden_size"), 1024);
  JsonConfig empty;
  EXPECT_EQ(empty.get_int("x").error().message, "<none>: x is missing");
  EXPECT_TRUE(empty.keys().empty());
}

}  // namespace
}  // namespace tf
