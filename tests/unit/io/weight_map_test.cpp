#include "io/weight_map.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors_writer.h"
#include "io_test_util.h"

namespace tf {
namespace {

using testing::TempDir;
using testing::write_file;

std::vector<uint16_t> bf16_values(size_t n, uint16_t start) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint16_t>(start + i);
  return v;
}

// A small single-file checkpoint: 2 BF16 matrices, one F32 norm, one I64 buffer.
void write_small_checkpoint(const std::string& dir) {
  SafetensorsWriter w;
  auto a = bf16_values(64 * 32, 100);
  auto b = bf16_values(32, 7);
  float norm[32];
  for (int i = 0; i < 32; ++i) norm[i] = 1.0f + i;
  int64_t pos[4] = {0, 1, 2, 3};
  ASSERT_TRUE(w.add("model.layers.0.q_proj.weight", DType::BF16, {64, 32}, a.data()).ok());
  ASSERT_TRUE(w.add("model.layers.0.k_proj.weight", DType::BF16, {1, 32}, b.data()).ok());
  ASSERT_TRUE(w.add("model.norm.weight", DType::F32, {32}, norm).ok());
  ASSERT_TRUE(w.add("model.position_ids", DType::I64, {4}, pos).ok());
  ASSERT_TRUE(w.write(dir + "/model.safetensors").ok());
}

TEST(WeightMap, GetReturnsMappedBytes) {
  TempDir dir;
  write_small_checkpoint(dir.path());
  auto wm = WeightMap::open(dir.path());
  ASSERT_TRUE(wm.ok()) << wm.error().message;
  EXPECT_EQ(wm->size(), 4u);
  EXPECT_EQ(wm->names(),
            (std::vector<std::string>{"model.layers.0.k_proj.weight", "model.layers.0.q_proj.weight",
                                      "model.norm.weight", "model.position_ids"}));
  EXPECT_EQ(wm->names_with_prefix("model.layers.0."),
            (std::vector<std::string>{"model.layers.0.k_proj.weight", "model.layers.0.q_proj.weight"}));
  EXPECT_TRUE(wm->has("model.norm.weight"));
  EXPECT_FALSE(wm->has("lm_head.weight"));
  EXPECT_EQ(wm->info("lm_head.weight"), nullptr);
  const TensorInfo* qi = wm->info("model.layers.0.q_proj.weight");
  ASSERT_NE(qi, nullptr);
  EXPECT_EQ(qi->file, "model.safetensors");
  EXPECT_EQ(qi->nbytes, 64u * 32 * 2);
  EXPECT_EQ(wm->total_bytes(), 64u * 32 * 2 + 32 * 2 + 32 * 4 + 4 * 8);
  EXPECT_EQ(wm->dominant_dtype(), DType::BF16);

  auto q = wm->get("model.layers.0.q_proj.weight", DType::BF16, {64, 32});
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->data, qi->data);  // a view of the mapping, no copy
  EXPECT_EQ(q->shape, (Shape{64, 32}));
  EXPECT_EQ(q->as<uint16_t>()[0], 100);
  EXPECT_EQ(q->as<uint16_t>()[64 * 32 - 1], static_cast<uint16_t>(100 + 64 * 32 - 1));
  auto n = wm->get_any("model.norm.weight", {DType::BF16, DType::F32}, {32});
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(n->as<float>()[31], 32.0f);
  EXPECT_TRUE(wm->is_used("model.norm.weight"));
  EXPECT_FALSE(wm->is_used("model.position_ids"));
}

TEST(WeightMap, RefusesMissingWrongShapeWrongDtype) {
  TempDir dir;
  write_small_checkpoint(dir.path());
  auto wm = WeightMap::open(dir.path());
  ASSERT_TRUE(wm.ok()) << wm.error().message;
  auto r = wm->get("lm_head.weight", DType::BF16, {64, 32});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "checkpoint is missing tensor 'lm_head.weight' (expected BF16 [64, 32])");
  r = wm->get_any("lm_head.weight", {DType::F32, DType::BF16}, {64, 32});
  EXPECT_EQ(r.error().message,
            "checkpoint is missing tensor 'lm_head.weight' (expected F32 or BF16 [64, 32])");
  r = wm->get("model.layers.0.q_proj.weight", DType::BF16, {32, 64});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "tensor 'model.layers.0.q_proj.weight' has shape [64, 32] but the config implies [32, 64]");
  r = wm->get("model.layers.0.q_proj.weight", DType::F16, {64, 32});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "tensor 'model.layers.0.q_proj.weight' is BF16 but F16 was expected");
  r = wm->get_any("model.norm.weight", {DType::F16, DType::BF16, DType::F64}, {32});
  EXPECT_EQ(r.error().message, "tensor 'model.norm.weight' is F32 but F16, BF16 or F64 was expected");
  // Refused fetches do not count as use.
  EXPECT_FALSE(wm->is_used("model.layers.0.q_proj.weight"));
}

TEST(WeightMap, UnusedTensorsAreAnError) {
  TempDir dir;
  SafetensorsWriter w;
  uint8_t byte = 1;
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(w.add("extra." + std::to_string(i), DType::U8, {1}, &byte).ok());
  ASSERT_TRUE(w.add("mtp.fc.weight", DType::U8, {1}, &byte).ok());
  ASSERT_TRUE(w.add("used", DType::U8, {1}, &byte).ok());
  ASSERT_TRUE(w.write(dir / "model.safetensors").ok());
  auto wm = WeightMap::open(dir.path());
  ASSERT_TRUE(wm.ok()) << wm.error().message;
  ASSERT_TRUE(wm->get("used", DType::U8, {1}).ok());
  Status s = wm->check_all_used({{"mtp.", "multi-token prediction layers are not used"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message,
            "checkpoint has 9 tensors the model does not use: 'extra.0', 'extra.1', 'extra.2', 'extra.3', "
            "'extra.4', and 4 more");
  wm->mark_used("extra.0");
  wm->mark_used("not-a-tensor");  // ignored
  for (int i = 1; i < 8; ++i) wm->mark_used("extra." + std::to_string(i));
  s = wm->check_all_used({{"mtp.", "multi-token prediction layers are not used"}});
  EXPECT_EQ(s.error().message, "checkpoint has 1 tensor the model does not use: 'extra.8'");
  EXPECT_EQ(wm->unused(), (std::vector<std::string>{"extra.8", "mtp.fc.weight"}));
  EXPECT_TRUE(wm->check_all_used({{"mtp.", "not used"}, {"extra.", "test"}}).ok());
  EXPECT_FALSE(wm->check_all_used({}).ok());  // mtp. is not allowed by default
}

TEST(WeightMap, MisalignedTensorIsCopiedToAlignedMemory) {
  TempDir dir;
  // Data section starts at a multiple of 8; 'f' begins at data offset 1, so it is misaligned for F32.
  std::string header = R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                       R"("f":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  while ((8 + header.size()) % 8) header.push_back(' ');
  std::vector<uint8_t> data(9);
  data[0] = 42;
  float vals[2] = {3.5f, -1.25f};
  std::memcpy(data.data() + 1, vals, 8);
  write_file(dir / "model.safetensors", testing::raw_safetensors(header, data));
  auto wm = WeightMap::open(dir.path());
  ASSERT_TRUE(wm.ok()) << wm.error().message;
  const TensorInfo* fi = wm->info("f");
  ASSERT_EQ(reinterpret_cast<uintptr_t>(fi->data) % 4, 1u);
  auto f = wm->get("f", DType::F32, {2});
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_NE(f->data, fi->data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->data) % 4, 0u);
  EXPECT_EQ(f->as<float>()[0], 3.5f);
  EXPECT_EQ(f->as<float>()[1], -1.25f);
  auto again = wm->get("f", DType::F32, {2});
  EXPECT_EQ(again->data, f->data);  // copied once
  auto b = wm->get("b", DType::U8, {1});
  EXPECT_EQ(b->data, wm->info("b")->data);  // bytes need no alignment
  EXPECT_EQ(*b->as<uint8_t>(), 42);

  // Views survive moving the map (models keep it as a member and alias the weights).
  WeightMap moved = std::move(wm.value());
  WeightMap moved_again;
  moved_again = std::move(moved);
  EXPECT_EQ(f->as<float>()[1], -1.25f);
  EXPECT_EQ(*b->as<uint8_t>(), 42);
  EXPECT_EQ(moved_again.get("f", DType::F32, {2})->data, f->data);
}

TEST(WeightMap, RefusesDirectoryWithoutWeights) {
  TempDir dir;
  auto wm = WeightMap::open(dir.path());
  ASSERT_FALSE(wm.ok());
  EXPECT_EQ(wm.error().message,
            dir.path() +
                ": no model.safetensors or model.safetensors.index.json (tensorfold reads safetensors only)");
}

TEST(WeightMap, PropagatesHeaderErrors) {
  TempDir dir;
  write_file(dir / "model.safetensors",
             testing::raw_safetensors(R"({"x":{"dtype":"BF16","shape":[2,4],"data_offsets":[0,12]}})",
                                      testing::iota_bytes(12)));
  auto wm = WeightMap::open(dir.path());
  ASSERT_FALSE(wm.ok());
  EXPECT_EQ(wm.error().message,
            "model.safetensors: tensor 'x' data_offsets [0, 12] hold 12 bytes but BF16 [2, 4] needs 16");
}

// Two shards and an index.
void write_sharded(const std::string& dir, const std::string& index) {
  SafetensorsWriter a, b;
  float one = 1.0f, two = 2.0f, three = 3.0f;
  ASSERT_TRUE(a.add("layer.0.w", DType::F32, {1}, &one).ok());
  ASSERT_TRUE(a.add("layer.1.w", DType::F32, {1}, &two).ok());
  ASSERT_TRUE(b.add("head.w", DType::F32, {1}, &three).ok());
  ASSERT_TRUE(a.write(dir + "/model-00001-of-00002.safetensors").ok());
  ASSERT_TRUE(b.write(dir + "/model-00002-of-00002.safetensors").ok());
  write_file(dir + "/model.safetensors.index.json", index);
}

const char* kGoodIndex = R"({"metadata":{"total_size":12},"weight_map":{
  "layer.0.w":"model-00001-of-00002.safetensors",
  "layer.1.w":"model-00001-of-00002.safetensors",
  "head.w":"model-00002-of-00002.safetensors"}})";

TEST(WeightMap, ShardedCheckpointLoads) {
  TempDir dir;
  write_sharded(dir.path(), kGoodIndex);
  auto wm = WeightMap::open(dir.path());
  ASSERT_TRUE(wm.ok()) << wm.error().message;
  EXPECT_EQ(wm->size(), 3u);
  EXPECT_EQ(wm->files().size(), 2u);  // each shard opened once
  EXPECT_EQ(wm->info("head.w")->file, "model-00002-of-00002.safetensors");
  auto h = wm->get("head.w", DType::F32, {1});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->as<float>()[0], 3.0f);
  EXPECT_EQ(wm->get("layer.1.w", DType::F32, {1})->as<float>()[0], 2.0f);
  EXPECT_EQ(wm->total_bytes(), 12u);
  EXPECT_EQ(wm->dominant_dtype(), DType::F32);
}

TEST(WeightMap, ShardedIndexPointingToMissingFile) {
  TempDir dir;
  write_sharded(dir.path(), R"({"weight_map":{"layer.0.w":"model-00001-of-00002.safetensors",
    "head.w":"model-00003-of-00003.safetensors"}})");
  auto wm = WeightMap::open(dir.path());
  ASSERT_FALSE(wm.ok());
  EXPECT_EQ(wm.error().message,
            "model.safetensors.index.json: shard model-00003-of-00003.safetensors (holding "
            "'head.w' and 0 other tensors) is not in " +
                dir.path());
}

TEST(WeightMap, ShardedIndexPointingToShardWithoutTheTensor) {
  TempDir dir;
  write_sharded(dir.path(), R"({"weight_map":{"layer.0.w":"model-00001-of-00002.safetensors",
    "head.w":"model-00001-of-00002.safetensors", "layer.1.w":"model-00001-of-00002.safetensors"}})");
  auto wm = WeightMap::open(dir.path());
  ASSERT_FALSE(wm.ok());
  EXPECT_EQ(wm.error().message,
            "model.safetensors.index.json maps tensor 'head.w' to "
            "model-00001-of-00002.safetensors, which does not contain it");
}

TEST(WeightMap, ShardedIndexRefusals) {
  TempDir dir;
  write_sharded(dir.path(), R"({"weight_map":{"layer.0.w":"../model-00001-of-00002.safetensors"}})");
  auto wm = WeightMap::open(dir.path());
  EXPECT_EQ(wm.error().message,
            "model.safetensors.index.json: weight_map maps tensor 'layer.0.w' to "
            "'../model-00001-of-00002.safetensors', which is not a file name inside the checkpoint");
  write_file(dir / "model.safetensors.index.json", R"({"metadata":{}})");
  EXPECT_EQ(WeightMap::open(dir.path()).error().message, "model.safetensors.index.json: has no weight_map");
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{"a":3}})");
  EXPECT_EQ(WeightMap::open(dir.path()).error().message,
            "model.safetensors.index.json: weight_map maps tensor 'a' to a non-string");
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":)");
  std::string msg = WeightMap::open(dir.path()).error().message;
  EXPECT_EQ(msg.rfind("model.safetensors.index.json: not valid JSON: ", 0), 0u) << msg;
}

TEST(WeightMap, TensorInTwoShardsIsRefused) {
  TempDir dir;
  write_sharded(dir.path(), kGoodIndex);
  SafetensorsWriter c;
  float x = 0;
  ASSERT_TRUE(c.add("head.w", DType::F32, {1}, &x).ok());
  ASSERT_TRUE(c.add("other", DType::F32, {1}, &x).ok());
  ASSERT_TRUE(c.write(dir / "extra.safetensors").ok());
  write_file(dir / "model.safetensors.index.json", R"({"weight_map":{
    "layer.0.w":"model-00001-of-00002.safetensors", "layer.1.w":"model-00001-of-00002.safetensors",
    "head.w":"model-00002-of-00002.safetensors", "other":"extra.safetensors"}})");
  auto wm = WeightMap::open(dir.path());
  ASSERT_FALSE(wm.ok());
  EXPECT_EQ(wm.error().message,
            "tensor 'head.w' appears in both extra.safetensors and model-00002-of-00002.safetensors");
}

TEST(WeightMap, SingleFileWinsOverIndexLikeTransformers) {
  TempDir dir;
  write_sharded(dir.path(), kGoodIndex);
  write_small_checkpoint(dir.path());
  auto wm = WeightMap::open(dir.path());
  ASSERT_TRUE(wm.ok()) << wm.error().message;
  EXPECT_TRUE(wm->has("model.norm.weight"));
  EXPECT_FALSE(wm->has("head.w"));
}

TEST(WeightMap, OpenFilesAndMove) {
  TempDir dir;
  write_small_checkpoint(dir.path());
  auto wm = WeightMap::open_files({dir / "model.safetensors"});
  ASSERT_TRUE(wm.ok()) << wm.error().message;
  WeightMap moved = std::move(wm.value());
  auto t = moved.get("model.position_ids", DType::I64, {4});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->as<int64_t>()[3], 3);
  EXPECT_EQ(moved.dir(), dir.path());
}

}  // namespace
}  // namespace tf
