#include "io/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "io/safetensors_writer.h"
#include "io_test_util.h"

namespace tf {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;

// Sets environment variables for one test and restores them afterwards.
class EnvGuard {
 public:
  void set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
  }
  void unset(const char* name) {
    remember(name);
    ::unsetenv(name);
  }
  ~EnvGuard() {
    for (auto& [name, old] : saved_) {
      if (old)
        ::setenv(name.c_str(), old->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }

 private:
  void remember(const char* name) {
    for (auto& s : saved_)
      if (s.first == name) return;
    const char* v = std::getenv(name);
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

const char* kRev = "0123456789abcdef0123456789abcdef01234567";

// The layout huggingface_hub writes: blobs/<hash> holds content, snapshots/<rev>/<file> is a
// relative symlink to it, refs/main names the revision.
std::string make_cache_repo(const std::string& hub, const std::string& org, const std::string& name) {
  std::string repo = hub + "/models--" + org + "--" + name;
  std::string snap = repo + "/snapshots/" + kRev;
  fs::create_directories(repo + "/blobs");
  fs::create_directories(snap);
  fs::create_directories(repo + "/refs");
  write_file(repo + "/refs/main", std::string(kRev));  // no trailing newline, as the hub writes it
  write_file(repo + "/blobs/aaa1", R"({"model_type": "qwen3", "hidden_size": 8})");
  SafetensorsWriter w;
  float v[2] = {0.5f, 4.0f};
  EXPECT_TRUE(w.add("w", DType::F32, {2}, v).ok());
  EXPECT_TRUE(w.write(repo + "/blobs/bbb2").ok());
  write_file(repo + "/blobs/ccc3", R"({"eos_token_id": 2})");
  write_file(repo + "/blobs/ddd4", "{}");
  write_file(repo + "/blobs/eee5", "{{ messages }}");
  fs::create_symlink("../../blobs/aaa1", snap + "/config.json");
  fs::create_symlink("../../blobs/bbb2", snap + "/model.safetensors");
  fs::create_symlink("../../blobs/ccc3", snap + "/generation_config.json");
  fs::create_symlink("../../blobs/ddd4", snap + "/tokenizer.json");
  fs::create_symlink("../../blobs/eee5", snap + "/chat_template.jinja");
  return repo;
}

TEST(Checkpoint, ResolvesRepoIdInHfHome) {
  TempDir tmp;
  EnvGuard env;
  env.unset("HF_HUB_CACHE");
  env.unset("HUGGINGFACE_HUB_CACHE");
  env.set("HF_HOME", tmp.path());
  EXPECT_EQ(hf_hub_cache_dir(), tmp.path() + "/hub");
  std::string repo = make_cache_repo(tmp.path() + "/hub", "lightonai", "LightOnOCR-1B-1025");
  std::string snap = repo + "/snapshots/" + kRev;

  auto dir = resolve_checkpoint_dir("lightonai/LightOnOCR-1B-1025");
  ASSERT_TRUE(dir.ok()) << dir.error().message;
  EXPECT_EQ(*dir, snap);

  auto ck = open_checkpoint("lightonai/LightOnOCR-1B-1025");
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->source, "lightonai/LightOnOCR-1B-1025");
  EXPECT_EQ(ck->dir, snap);
  EXPECT_EQ(*ck->config.get_int("hidden_size"), 8);
  ASSERT_TRUE(ck->generation_config.has_value());
  EXPECT_EQ(*ck->generation_config->get_ids("eos_token_id"), (std::vector<int64_t>{2}));
  EXPECT_FALSE(ck->tokenizer_config.has_value());
  EXPECT_FALSE(ck->image_processor_config.has_value());
  EXPECT_EQ(ck->tokenizer_json, snap + "/tokenizer.json");
  EXPECT_EQ(ck->chat_template_jinja, snap + "/chat_template.jinja");
  EXPECT_EQ(ck->chat_template_json, "");
  auto w = ck->weights.get("w", DType::F32, {2});  // read through the symlink into blobs/
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->as<float>()[1], 4.0f);

  // The snapshot directory and the repo folder given directly resolve to the same place.
  EXPECT_EQ(*resolve_checkpoint_dir(snap + "/"), snap);
  EXPECT_EQ(*resolve_checkpoint_dir(repo), snap);
  // A revision: a snapshot name, or a ref.
  EXPECT_EQ(*resolve_checkpoint_dir(std::string("lightonai/LightOnOCR-1B-1025@") + kRev), snap);
  write_file(repo + "/refs/v1", std::string(kRev) + "\n");
  EXPECT_EQ(*resolve_checkpoint_dir("lightonai/LightOnOCR-1B-1025@v1"), snap);
}

TEST(Checkpoint, CacheLocationFollowsHuggingfaceHub) {
  EnvGuard env;
  env.unset("HF_HUB_CACHE");
  env.unset("HUGGINGFACE_HUB_CACHE");
  env.unset("HF_HOME");
  env.unset("XDG_CACHE_HOME");
  env.set("HOME", "/home/someone");
  EXPECT_EQ(hf_hub_cache_dir(), "/home/someone/.cache/huggingface/hub");
  env.set("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(hf_hub_cache_dir(), "/xdg/huggingface/hub");
  env.set("HF_HOME", "/hfhome/");
  EXPECT_EQ(hf_hub_cache_dir(), "/hfhome/hub");
  env.set("HF_HUB_CACHE", "/hubcache");
  EXPECT_EQ(hf_hub_cache_dir(), "/hubcache");
}

TEST(Checkpoint, MissingRepoSaysWhereItLooked) {
  TempDir tmp;
  EnvGuard env;
  env.set("HF_HUB_CACHE", tmp.path());
  auto dir = resolve_checkpoint_dir("org/missing-model");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().message, "cannot find checkpoint 'org/missing-model': no such directory, and no " +
                                     tmp.path() +
                                     "/models--org--missing-model in the Hugging Face cache (set "
                                     "HF_HOME or HF_HUB_CACHE, or pass a directory; nothing is downloaded)");
  EXPECT_EQ(resolve_checkpoint_dir("/no/such/dir").error().message,
            "cannot find checkpoint '/no/such/dir': no such directory");
  EXPECT_EQ(resolve_checkpoint_dir("").error().message, "no checkpoint given");
}

TEST(Checkpoint, BrokenCacheEntries) {
  TempDir tmp;
  EnvGuard env;
  env.set("HF_HUB_CACHE", tmp.path());
  std::string repo = make_cache_repo(tmp.path(), "org", "m");

  // refs/main names a snapshot that is not there.
  write_file(repo + "/refs/main", "ffffffffffffffffffffffffffffffffffffffff");
  auto dir = resolve_checkpoint_dir("org/m");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().message, "checkpoint 'org/m': " + repo +
                                     "/refs/main names revision "
                                     "ffffffffffffffffffffffffffffffffffffffff, but " +
                                     repo +
                                     "/snapshots/ffffffffffffffffffffffffffffffffffffffff does not exist "
                                     "(incomplete download?)");

  // No refs/main: the only snapshot is used; an unknown revision lists what exists.
  fs::remove(repo + "/refs/main");
  EXPECT_EQ(*resolve_checkpoint_dir("org/m"), repo + "/snapshots/" + kRev);
  auto bad_rev = resolve_checkpoint_dir("org/m@v9");
  ASSERT_FALSE(bad_rev.ok());
  EXPECT_EQ(bad_rev.error().message, "cannot find checkpoint 'org/m@v9': looked for " + repo +
                                         "/refs/v9 and " + repo +
                                         "/snapshots/v9; the cache has 1 snapshot (" + kRev + ")");

  // A symlink into blobs/ whose blob is gone.
  fs::remove(repo + "/blobs/aaa1");
  auto ck = open_checkpoint("org/m");
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.error().message, repo + "/snapshots/" + kRev +
                                    "/config.json is a symlink to ../../blobs/aaa1, which does not exist "
                                    "(incomplete download?)");
}

TEST(Checkpoint, PlainDirectoryAndItsRefusals) {
  TempDir tmp;
  std::string d = tmp / "ckpt";
  fs::create_directories(d);
  auto ck = open_checkpoint(d);
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.error().message, d + ": no config.json (not a Hugging Face checkpoint directory?)");

  write_file(d + "/config.json", R"({"model_type": "qwen3"})");
  ck = open_checkpoint(d);
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.error().message,
            d + ": no model.safetensors or model.safetensors.index.json (tensorfold reads safetensors only)");

  SafetensorsWriter w;
  uint8_t b = 1;
  ASSERT_TRUE(w.add("t", DType::U8, {1}, &b).ok());
  ASSERT_TRUE(w.write(d + "/model.safetensors").ok());
  write_file(d + "/processor_config.json", R"({"image_processor": {"patch_size": 14}})");
  write_file(d + "/chat_template.json", R"({"chat_template": "x"})");
  ck = open_checkpoint(d);
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->dir, d);
  EXPECT_EQ(ck->tokenizer_json, "");
  EXPECT_EQ(ck->chat_template_json, d + "/chat_template.json");
  ASSERT_TRUE(ck->image_processor_config.has_value());
  EXPECT_EQ(*ck->image_processor_config->get_int("patch_size"), 14);
  EXPECT_EQ(ck->weights.size(), 1u);

  write_file(d + "/config.json", R"({"model_type": )");
  ck = open_checkpoint(d);
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.error().message.rfind("config.json: not valid JSON", 0), 0u) << ck.error().message;
}

}  // namespace
}  // namespace tf
