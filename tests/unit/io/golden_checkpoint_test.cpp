// Opens each tiny checkpoint the oracle wrote under tests/golden/ckpt/*/ and checks WeightMap
// against the safetensors headers read independently here (plain file reads + nlohmann), and the
// element count against the parameter count Transformers reported (oracle_build.json).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"

namespace tf {
namespace {

namespace fs = std::filesystem;

struct HeaderTensor {
  std::string dtype;
  Shape shape;
  uint64_t nbytes;
};

// name -> (dtype, shape, bytes) straight from one file's header.
std::map<std::string, HeaderTensor> read_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint8_t len[8] = {};
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json h = nlohmann::json::parse(text);
  std::map<std::string, HeaderTensor> out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& v = *it;
    out[it.key()] = {v["dtype"].get<std::string>(), v["shape"].get<Shape>(),
                     v["data_offsets"][1].get<uint64_t>() - v["data_offsets"][0].get<uint64_t>()};
  }
  return out;
}

std::vector<std::string> golden_checkpoints() {
  std::vector<std::string> dirs;
  fs::path root = fs::path(TF_SOURCE_DIR) / "tests/golden/ckpt";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return dirs;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && fs::exists(e.path() / "config.json")) dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST(GoldenCheckpoints, WeightMapMatchesHeaders) {
  std::vector<std::string> dirs = golden_checkpoints();
  if (dirs.empty()) GTEST_SKIP() << "no oracle checkpoints under tests/golden/ckpt/*/ (config.json) yet";
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    auto ck = open_checkpoint(dir);
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    WeightMap& wm = ck->weights;
    std::map<std::string, HeaderTensor> expected;
    for (const std::string& file : wm.files())
      for (auto& [name, t] : read_header(file)) {
        EXPECT_FALSE(expected.count(name)) << name;
        expected[name] = t;
      }
    ASSERT_FALSE(expected.empty());
    std::vector<std::string> names;
    uint64_t total = 0;
    for (const auto& [name, t] : expected) {
      names.push_back(name);
      total += t.nbytes;
    }
    EXPECT_EQ(wm.names(), names);
    EXPECT_EQ(wm.total_bytes(), total);
    std::map<std::string, size_t> float_bytes;
    for (const auto& [name, t] : expected) {
      const TensorInfo* ti = wm.info(name);
      ASSERT_NE(ti, nullptr) << name;
      EXPECT_EQ(dtype_name(ti->dtype), t.dtype) << name;
      EXPECT_EQ(ti->shape, t.shape) << name;
      EXPECT_EQ(ti->nbytes, t.nbytes) << name;
      auto got = wm.get(name, ti->dtype, t.shape);
      ASSERT_TRUE(got.ok()) << got.error().message;
      EXPECT_EQ(got->nbytes(), t.nbytes);
      if (t.dtype == "F32" || t.dtype == "BF16" || t.dtype == "F16" || t.dtype == "F64")
        float_bytes[t.dtype] += t.nbytes;
    }
    auto most = std::max_element(float_bytes.begin(), float_bytes.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    if (most != float_bytes.end()) {
      EXPECT_EQ(dtype_name(wm.dominant_dtype()), most->first);
    }
    EXPECT_TRUE(wm.check_all_used({}).ok());

    // The oracle records Transformers' parameter count; 5.17 drops qwen3_5's mtp.* tensors at load.
    std::ifstream build(dir + "/oracle_build.json");
    if (!build) {
      ADD_FAILURE() << dir << "/oracle_build.json is missing";
      continue;
    }
    nlohmann::json ob = nlohmann::json::parse(build);
    int64_t n_params = 0;
    for (const std::string& name : wm.names())
      if (name.rfind("mtp.", 0) != 0) n_params += shape_numel(wm.info(name)->shape);
    EXPECT_EQ(n_params, ob.at("n_params").get<int64_t>());
  }
}

}  // namespace
}  // namespace tf
