// copy: byte-exact, shape-agnostic (same dtype and element count), leaves the rest of dst alone.
#include "op_test_util.h"

using namespace tf;
using namespace tf::optest;

namespace {

TEST(OpCopy, RowSliceRoundTripIsByteExact) {
  auto be = make_cpu_backend();
  for (DType dt : {DType::BF16, DType::F32}) {
    Buffer src = randn(dt, {10, 3, 4}, 71);  // [capacity, kv_heads, head_dim]
    auto dsrc = upload_new(*be, src);
    auto block = be->alloc(dt, {4, 12});  // another shape, same element count as 4 rows
    be->copy(dsrc.tensor().slice_rows(3, 7), block);
    auto dst = be->alloc(dt, {10, 3, 4});
    be->copy(block, dst.tensor().slice_rows(5, 9));
    Buffer got = download_new(*be, dst);
    const size_t rb = src.nbytes() / 10;
    const char* s = static_cast<const char*>(src.data());
    const char* g = static_cast<const char*>(got.data());
    EXPECT_EQ(std::memcmp(g + 5 * rb, s + 3 * rb, 4 * rb), 0);
    for (size_t i = 0; i < 5 * rb; ++i) ASSERT_EQ(g[i], 0) << "copy wrote outside its rows";
    for (size_t i = 9 * rb; i < 10 * rb; ++i) ASSERT_EQ(g[i], 0) << "copy wrote outside its rows";
  }
}

TEST(OpCopy, F32StateIsNotRounded) {
  auto be = make_cpu_backend();
  Buffer src(DType::F32, {2, 2});
  const float vals[4] = {1.00390625f, 1.0000001f, -3.3f, 1e-30f};  // not bf16-representable
  std::memcpy(src.data(), vals, sizeof vals);
  auto d = upload_new(*be, src);
  auto o = be->alloc(DType::F32, {4});
  be->copy(d, o);
  Buffer got = download_new(*be, o);
  EXPECT_EQ(std::memcmp(got.data(), vals, sizeof vals), 0);
}

}  // namespace

// alloc_pool (the K/V pool, state slots: mapped on the CPU) starts zero-filled like alloc, small or large,
// and holds what is written; alloc_uninit gives the shape asked for, which concat_rows fills whole.
TEST(BackendAlloc, PoolBuffersStartZeroAndUninitBuffersHaveTheirShape) {
  auto be = make_cpu_backend();
  for (int64_t rows : {int64_t{3}, int64_t{1} << 16}) {  // one page, and 32 MiB of f32 rows of 128
    auto pool = be->alloc_pool(DType::F32, {rows, 128});
    ASSERT_EQ(pool.tensor().numel(), rows * 128);
    const float* p = pool.tensor().as<const float>();
    for (int64_t i = 0; i < rows * 128; i += 61) ASSERT_EQ(p[i], 0.0f) << "pool element " << i;
    Buffer src = randn(DType::F32, {2, 128}, 73);
    auto dsrc = upload_new(*be, src);
    be->copy(dsrc, pool.tensor().slice_rows(rows - 2, rows));
    EXPECT_TRUE(bits_equal(*be, dsrc, pool.tensor().slice_rows(rows - 2, rows)));
  }
  auto u = be->alloc_uninit(DType::BF16, {5, 7});
  EXPECT_EQ(u.tensor().shape, (Shape{5, 7}));
  EXPECT_EQ(u.tensor().dtype, DType::BF16);
}
