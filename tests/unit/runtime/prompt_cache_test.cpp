// The prompt cache's parts: block keys carry image identity, the radix tree's LRU evicts leaves
// only, and for both families a sequence restored from snapshot blocks computes exactly the
// logits of a fresh single pass (bit for bit, also when only one row is left to compute).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "backend/cpu/cpu_backend.h"
#include "runtime/pipeline.h"
#include "runtime/prefix_cache.h"
#include "test_pipeline.h"

using namespace tf;

namespace {

const std::string kGolden = std::string(TF_SOURCE_DIR) + "/tests/golden";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

ProcessedImage fake_image(int64_t n_tokens, const std::string& identity) {
  ProcessedImage im;
  im.n_tokens = n_tokens;
  im.identity = identity;
  return im;
}

TEST(PromptBlockKeys, ImageRowsCarryTheirImageIdentity) {
  const int32_t img = 9;
  std::vector<int32_t> ids(200, 5);
  for (int i = 10; i < 150; ++i) ids[static_cast<size_t>(i)] = img;  // two images of 70 rows
  auto images = [](const char* first, const char* second) {
    std::vector<ProcessedImage> v;
    v.push_back(fake_image(70, first));
    v.push_back(fake_image(70, second));
    return v;
  };
  auto a = prompt_block_keys(ids, img, images("A", "B"));
  auto b = prompt_block_keys(ids, img, images("A", "C"));
  auto c = prompt_block_keys(ids, img, images("A", "B"));
  ASSERT_EQ(a.size(), 3u);  // 200 / 64 complete blocks
  EXPECT_EQ(a, c);
  EXPECT_EQ(a[0], b[0]);  // rows 10..63 are image A's in both
  EXPECT_NE(a[1], b[1]);  // rows 80..127 are image B vs C: never shared
  EXPECT_NE(a[2], b[2]);
  // Without image identity (text-only model) the same ids give the same keys.
  EXPECT_EQ(prompt_block_keys(ids, -1, {}), prompt_block_keys(ids, -1, {}));
  EXPECT_NE(prompt_block_keys(ids, -1, {})[1], a[1]);
}

CacheBlock fake_block(Backend& be, int64_t begin, size_t bytes) {
  CacheBlock b;
  b.begin = begin;
  b.end = begin + PrefixCache::kBlock;
  b.tensors.push_back(be.alloc(DType::BF16, {static_cast<int64_t>(bytes / 2)}));
  return b;
}

TEST(PrefixCacheTree, MatchesLongestChainAndEvictsLeastRecentLeaves) {
  auto be = make_cpu_backend();
  PrefixCache pc(4 * 1000);  // room for four 1000-byte blocks
  std::vector<std::string> p = {"a", "b", "c"}, q = {"a", "x"};
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(pc.insert(p, i, fake_block(*be, 64 * int64_t(i), 1000)));
  EXPECT_FALSE(pc.insert(p, 1, fake_block(*be, 64, 1000))) << "inserted twice";
  EXPECT_FALSE(pc.insert({"z", "y"}, 1, fake_block(*be, 64, 1000))) << "inserted without its parent";
  EXPECT_EQ(pc.match(p, 3).size(), 3u);
  EXPECT_EQ(pc.match(p, 2).size(), 2u);  // capped
  EXPECT_EQ(pc.match({"a", "b", "q"}, 3).size(), 2u);
  ASSERT_TRUE(pc.insert(q, 1, fake_block(*be, 64, 1000)));
  EXPECT_EQ(pc.bytes(), 4000u);
  // Full: the next block evicts the least recently used leaf ("c"), never an inner node.
  ASSERT_TRUE(pc.insert({"a", "x", "y"}, 2, fake_block(*be, 128, 1000)));
  EXPECT_EQ(pc.n_evicted(), 1);
  EXPECT_EQ(pc.match(p, 3).size(), 2u);
  EXPECT_EQ(pc.match({"a", "x", "y"}, 3).size(), 3u);
  EXPECT_EQ(pc.bytes(), 4000u);
  // A block larger than the budget is dropped and evicts nothing.
  EXPECT_FALSE(pc.insert(p, 2, fake_block(*be, 128, 5000)));
  EXPECT_EQ(pc.n_blocks(), 4u);
  // Images share the budget and the LRU order.
  ASSERT_TRUE(pc.insert_image("img", be->alloc(DType::BF16, {500})));
  EXPECT_NE(pc.find_image("img"), nullptr);
  EXPECT_EQ(pc.find_image("other"), nullptr);
  EXPECT_LE(pc.bytes(), pc.budget());
  PrefixCache off(0);
  EXPECT_FALSE(off.insert(p, 0, fake_block(*be, 0, 10)));
  EXPECT_TRUE(off.match(p, 3).empty());
}

// ---- snapshot / restore on the tiny oracle checkpoints -------------------------------------------

struct Loaded {
  std::unique_ptr<Pipeline> pipe;
  Prompt prompt;
  DeviceBuffer embeds;  // all images' rows
};

Loaded load(const std::string& ckpt, bool with_image) {
  Loaded r;
  auto p = Pipeline::load(kGolden + "/ckpt/" + ckpt, test_pipeline_options());
  EXPECT_TRUE(p.ok()) << p.error().message;
  r.pipe = std::move(p).value();
  std::string text =
      "Please read this scanned page carefully, then list every number, date and name you can find, one "
      "per line, in the order they appear, and say which ones you are unsure about.";
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  if (with_image) content.push_back({{"type", "image"}});
  content.push_back({{"type", "text"}, {"text", text + " " + text}});
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array({{{"role", "user"}, {"content", content}}});
  std::vector<std::vector<uint8_t>> images;
  if (with_image) images.push_back(read_bytes(kGolden + "/images/page_1583x2048.png"));
  auto pr = r.pipe->build_chat_prompt(msgs, images, {});
  EXPECT_TRUE(pr.ok()) << pr.error().message;
  r.prompt = std::move(pr).value();
  if (with_image) {
    std::vector<ImageInput> in;
    for (const auto& im : r.prompt.images) in.push_back(im.as_input());
    auto e = r.pipe->model().encode_images(in);
    EXPECT_TRUE(e.ok());
    r.embeds = std::move(e).value();
  }
  return r;
}

// Forwards prompt rows [begin, n) in one batch; returns the last row's logits.
Buffer prefill(Loaded& r, SequenceCache& cache, int64_t begin, int64_t n, bool keep) {
  const ModelInfo& info = r.pipe->info();
  ForwardBatch b;
  int64_t rows_before = 0, n_img = 0;
  for (int64_t i = 0; i < begin; ++i) rows_before += r.prompt.ids[size_t(i)] == info.image_token_id;
  for (int64_t i = begin; i < n; ++i) {
    b.token_ids.push_back(r.prompt.ids[size_t(i)]);
    b.positions.push_back(int32_t(i));
    n_img += r.prompt.ids[size_t(i)] == info.image_token_id;
  }
  Tensor slice;
  if (n_img) {
    slice = r.embeds.tensor().slice_rows(rows_before, rows_before + n_img);
    b.image_embeds = &slice;
  }
  b.logit_rows = {int32_t(n - begin - 1)};
  b.keep_block_states = keep;
  auto lg = r.pipe->model().forward(b, cache);
  EXPECT_TRUE(lg.ok()) << lg.error().message;
  return lg.ok() ? std::move(lg).value() : Buffer();
}

Buffer decode_one(Loaded& r, SequenceCache& cache, const Buffer& logits, int64_t pos) {
  const float* l = logits.as<float>();
  int32_t best = 0;
  for (int32_t i = 1; i < r.pipe->info().vocab_size; ++i)
    if (l[i] > l[best]) best = i;
  ForwardBatch b;
  b.token_ids = {best};
  b.positions = {int32_t(pos)};
  b.logit_rows = {0};
  auto lg = r.pipe->model().forward(b, cache);
  EXPECT_TRUE(lg.ok());
  return std::move(lg).value();
}

bool same_bits(const Buffer& a, const Buffer& b) {
  return a.nbytes() == b.nbytes() && a.nbytes() > 0 && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

class SnapshotRestore : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(SnapshotRestore, ResumedEqualsSinglePassBitForBit) {
  auto [ckpt, with_image] = GetParam();
  Loaded r = load(ckpt, with_image);
  ASSERT_TRUE(r.pipe);
  Model& m = r.pipe->model();
  std::vector<std::vector<int64_t>> grids;
  for (const auto& im : r.prompt.images) grids.push_back(im.grid_thw);
  // Text prompts are cut to 2 blocks + 1 token: the resumed part is a single prompt row.
  if (!with_image) r.prompt.ids.resize(std::min<size_t>(r.prompt.ids.size(), 129));
  const int64_t n = int64_t(r.prompt.ids.size());
  const int64_t k = (n - 1) / 64;
  ASSERT_GE(k, 1) << "prompt of " << n << " tokens is too short to resume a block";
  if (!with_image) {
    ASSERT_EQ(n, 129) << "the text prompt should leave exactly one row after the resumed blocks";
  }

  auto plain = m.new_cache(n + 4);
  ASSERT_TRUE(m.begin_prompt(*plain, r.prompt.ids, grids).ok());
  Buffer l_plain = prefill(r, *plain, 0, n, false);

  auto fresh = m.new_cache(n + 4);
  ASSERT_TRUE(m.begin_prompt(*fresh, r.prompt.ids, grids).ok());
  Buffer l_fresh = prefill(r, *fresh, 0, n, true);
  EXPECT_TRUE(same_bits(l_plain, l_fresh)) << "keeping block states changed the numbers";
  std::vector<CacheBlock> blocks;
  for (int64_t i = 0; i < k; ++i) {
    auto blk = m.snapshot(*fresh, 64 * i, 64 * (i + 1));
    ASSERT_TRUE(blk.ok()) << blk.error().message;
    blocks.push_back(std::move(blk).value());
  }
  std::vector<const CacheBlock*> chain;
  for (const auto& blk : blocks) chain.push_back(&blk);

  auto resumed = m.new_cache(n + 4);
  ASSERT_TRUE(m.begin_prompt(*resumed, r.prompt.ids, grids).ok());
  ASSERT_TRUE(m.restore(*resumed, chain).ok());
  Buffer l_res = prefill(r, *resumed, 64 * k, n, true);
  EXPECT_TRUE(same_bits(l_plain, l_res))
      << ckpt << ": logits of the first generated token differ after resume";
  // Decoding continues identically.
  Buffer a = std::move(l_plain), b = std::move(l_res);
  for (int64_t step = 0; step < 3; ++step) {
    a = decode_one(r, *plain, a, n + step);
    b = decode_one(r, *resumed, b, n + step);
    EXPECT_TRUE(same_bits(a, b)) << ckpt << ": decode step " << step << " differs after resume";
  }
  // Restoring into a cache that already holds rows, or blocks that do not chain, is refused.
  std::vector<const CacheBlock*> gap = {chain.back()};
  auto other = m.new_cache(n + 4);
  if (k > 1) {
    EXPECT_FALSE(m.restore(*other, gap).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Oracle, SnapshotRestore,
                         ::testing::Combine(::testing::Values("lighton_ocr-tiny-bf16", "qwen3_5-tiny-bf16",
                                                              "qwen3_5-tiny-fp32"),
                                            ::testing::Bool()),
                         [](const auto& i) {
                           std::string s = std::get<0>(i.param) + (std::get<1>(i.param) ? "_image" : "_text");
                           for (char& ch : s)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

}  // namespace
