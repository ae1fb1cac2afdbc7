// Chat templates vs goldens rendered by Transformers 5.17 apply_chat_template (tests/golden/templates,
// made by tools/reference/text_goldens.py on the GPU machine) and by Python Jinja2 3.1.6 with HF's
// settings (tests/data/templates/golden).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "text/chat_template.h"

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const fs::path kRoot = TF_SOURCE_DIR;

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json read_json(const fs::path& p) { return json::parse(read_text(p)); }

tf::ChatTemplateOptions options_for(const json& c) {
  tf::ChatTemplateOptions o;
  o.add_generation_prompt = c.value("add_generation_prompt", false);
  o.continue_final_message = c.value("continue_final_message", false);
  // apply_chat_template got tools=None / documents=None when the case has none ([] stays []).
  if (c.contains("tools")) o.tools = c["tools"];
  if (c.contains("documents")) o.documents = c["documents"];
  if (c.contains("kwargs")) o.kwargs = c["kwargs"];
  return o;
}

TEST(ChatTemplateGolden, TransformersApplyChatTemplate) {
  const fs::path dir = kRoot / "tests/golden/templates";
  if (!fs::exists(dir / "cases.json")) GTEST_SKIP() << "missing " << (dir / "cases.json");
  const json cases = read_json(dir / "cases.json").at("cases");
  const json hf_context = read_json(dir / "hf_context.json");
  int n_files = 0, n_text = 0, n_errors = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string fname = entry.path().filename().string();
    if (fname == "cases.json" || fname == "hf_context.json" || fname == "meta.json" ||
        entry.path().extension() != ".json") {
      continue;
    }
    const json golden = read_json(entry.path());
    const std::string tpl_file = golden.at("template");
    // "<name>.chat_template[.<variant>].jinja" -> "<name>[.<variant>]"
    std::string tpl_name = tpl_file.substr(0, tpl_file.size() - 6);
    tpl_name.erase(tpl_name.find(".chat_template"), 14);
    const std::string source = read_text(kRoot / "tests/data/templates" / tpl_file);
    // The special_tokens_map Transformers passed to render() for this tokenizer (recorded by the oracle).
    const json special = hf_context.at("special_tokens_map").at(golden.at("tokenizer").get<std::string>());
    auto ct = tf::ChatTemplate::create(source, special);
    ASSERT_TRUE(ct.ok()) << tpl_file << ": " << ct.error().message;
    ++n_files;
    const json& results = golden.at("results");
    ASSERT_EQ(results.size(), cases.size()) << fname;
    for (size_t i = 0; i < cases.size(); ++i) {
      const json& c = cases[i];
      const json& r = results[i];
      ASSERT_EQ(r.at("name"), c.at("name"));
      auto out = ct->apply(c.at("messages"), options_for(c));
      const std::string where = fname + " / " + c.at("name").get<std::string>();
      if (r.contains("text")) {
        ASSERT_TRUE(out.ok()) << where << ": " << out.error().message;
        EXPECT_EQ(*out, r["text"].get<std::string>()) << where;
        ++n_text;
      } else {
        ASSERT_FALSE(out.ok()) << where << ": rendered, but Transformers raised " << r["error"].dump();
        if (r["error"].value("from_raise_exception", false)) {
          EXPECT_EQ(out.error().message, r["error"]["message"].get<std::string>()) << where;
        }
        ++n_errors;
      }
    }
  }
  EXPECT_GE(n_files, 4);
  std::printf(
      "chat-template goldens: %d (template, tokenizer) files, %d renders equal, %d errors reproduced\n",
      n_files, n_text, n_errors);
}

TEST(ChatTemplateGolden, PythonJinja2ResearchRenders) {
  const fs::path dir = kRoot / "tests/data/templates/golden";
  if (!fs::exists(dir / "render_cases.json")) GTEST_SKIP() << "missing " << (dir / "render_cases.json");
  const json cases = read_json(dir / "render_cases.json");
  const json expected = read_json(dir / "render_expected_python_jinja2.json");
  int n = 0;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string key = it.key();
    const std::string tpl_file = key.substr(0, key.find("::"));
    const std::string case_name = key.substr(key.find("::") + 2);
    const json* c = nullptr;
    for (const auto& x : cases) {
      if (x.at("name") == case_name) c = &x;
    }
    ASSERT_NE(c, nullptr) << key;
    // These renders were made with Template.render(messages=..., tools=..., add_generation_prompt=...,
    // enable_thinking=... when given): no special tokens, no documents.
    json ctx = json::object();
    ctx["messages"] = c->at("messages");
    ctx["tools"] = c->contains("tools") ? c->at("tools") : json();
    ctx["add_generation_prompt"] = c->value("add_generation_prompt", false);
    if (c->contains("enable_thinking")) ctx["enable_thinking"] = c->at("enable_thinking");
    auto tpl = tf::jinja::Template::parse(read_text(kRoot / "tests/data/templates" / tpl_file));
    ASSERT_TRUE(tpl.ok()) << tpl.error().message;
    auto out = tpl->render(ctx);
    const std::string want = it.value().get<std::string>();
    if (want.rfind("ERROR:", 0) == 0) {
      EXPECT_FALSE(out.ok()) << key;
    } else {
      ASSERT_TRUE(out.ok()) << key << ": " << out.error().message;
      EXPECT_EQ(*out, want) << key;
    }
    ++n;
  }
  EXPECT_EQ(n, 24);
}

TEST(ChatTemplateLoader, TinyCheckpointsCarryTheirTemplate) {
  const fs::path ckpt = kRoot / "tests/golden/ckpt";
  if (!fs::exists(ckpt)) GTEST_SKIP() << "missing " << ckpt;
  int n = 0;
  for (const auto& entry : fs::directory_iterator(ckpt)) {
    if (!fs::exists(entry.path() / "chat_template.jinja")) continue;
    auto src = tf::load_chat_template_source(entry.path().string());
    ASSERT_TRUE(src.ok()) << src.error().message;
    EXPECT_EQ(*src, read_text(entry.path() / "chat_template.jinja"));
    auto ct = tf::load_chat_template(entry.path().string());
    ASSERT_TRUE(ct.ok()) << entry.path() << ": " << ct.error().message;
    ++n;
  }
  EXPECT_GT(n, 0);
}

TEST(ChatTemplateLoader, SpecialTokensMapMatchesTransformers) {
  const fs::path dir = kRoot / "tests/golden/templates";
  if (!fs::exists(dir / "hf_context.json")) GTEST_SKIP() << "missing " << (dir / "hf_context.json");
  const json recorded = read_json(dir / "hf_context.json").at("special_tokens_map");
  int n = 0;
  for (auto it = recorded.begin(); it != recorded.end(); ++it) {
    const fs::path ckpt = kRoot / "tests/golden/ckpt" / it.key();
    if (!fs::exists(ckpt / "tokenizer_config.json")) continue;
    auto got = tf::load_special_tokens_map(ckpt.string());
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(nlohmann::json(*got), nlohmann::json(it.value())) << it.key();  // unordered comparison
    ++n;
  }
  EXPECT_GT(n, 0);
}

TEST(ChatTemplateLoader, MissingTemplateIsAnError) {
  const fs::path dir = fs::temp_directory_path() / "tf_chat_template_missing";
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  auto src = tf::load_chat_template_source(dir.string());
  EXPECT_FALSE(src.ok());
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": [{"name": "tool_use", "template": "x"},
      {"name": "default", "template": "{{ bos_token }}hi"}], "bos_token": {"content": "<s>", "lstrip": false},
      "eos_token": "</s>", "unk_token": null})";
  auto src2 = tf::load_chat_template_source(dir.string());
  ASSERT_TRUE(src2.ok()) << src2.error().message;
  EXPECT_EQ(*src2, "{{ bos_token }}hi");
  auto special = tf::load_special_tokens_map(dir.string());
  ASSERT_TRUE(special.ok());
  EXPECT_EQ(special->dump(), R"({"bos_token":"<s>","eos_token":"</s>"})");
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": 5})";
  EXPECT_FALSE(tf::load_special_tokens_map(dir.string()).ok());
  std::ofstream(dir / "tokenizer_config.json") << "{not json";
  EXPECT_FALSE(tf::load_chat_template_source(dir.string()).ok());
  fs::remove_all(dir);
}

TEST(ChatTemplate, BadArgumentsAreErrors) {
  auto ct = tf::ChatTemplate::create("{% for m in messages %}{{ m.content }}{% endfor %}");
  ASSERT_TRUE(ct.ok());
  EXPECT_FALSE(ct->apply(json::object()).ok());
  EXPECT_FALSE(ct->apply(json::array()).ok());
  tf::ChatTemplateOptions o;
  o.tools = json::array({1});
  EXPECT_FALSE(ct->apply(json::parse(R"([{"role":"user","content":"x"}])"), o).ok());
  tf::ChatTemplateOptions both;
  both.add_generation_prompt = true;
  both.continue_final_message = true;
  EXPECT_FALSE(ct->apply(json::parse(R"([{"role":"user","content":"x"}])"), both).ok());
  EXPECT_FALSE(tf::ChatTemplate::create("{% if %}").ok());
}

}  // namespace
