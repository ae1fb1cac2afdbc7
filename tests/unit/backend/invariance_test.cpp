// docs/design.md, invariant 2: a row's bits do not depend on the batch it is in, on chunking, or on the
// number of threads. Each check has a planted control: a perturbed input must change the bits.
#include "op_test_util.h"

using namespace tf;
using namespace tf::optest;

namespace {

// Row r of linear(x) computed inside a batch of 7, alone, and with 1 or 2 threads.
TEST(OpInvariance, LinearRowIndependentOfBatchAndThreads) {
  ThreadPool one(1), two(2);
  auto b1 = make_cpu_backend(&one), b2 = make_cpu_backend(&two);
  for (DType act : {DType::BF16, DType::F32}) {
    Buffer x = randn(act, {7, 203}, 101), w = randn(act, {77, 203}, 102, 0.1f);
    auto x2 = upload_new(*b2, x), w2 = upload_new(*b2, w);
    auto full2 = b2->alloc(act, {7, 77});
    b2->linear(x2, w2, nullptr, full2);
    auto x1 = upload_new(*b1, x), w1 = upload_new(*b1, w);
    auto full1 = b1->alloc(act, {7, 77});
    b1->linear(x1, w1, nullptr, full1);
    EXPECT_TRUE(bits_equal(*b1, full1, full2));
    for (int64_t r : {0, 3, 6}) {
      auto single = b2->alloc(act, {1, 77});
      b2->linear(x2.tensor().slice_rows(r, r + 1), w2, nullptr, single);
      EXPECT_TRUE(bits_equal(*b2, single, full2.tensor().slice_rows(r, r + 1))) << "row " << r;
    }
    // Control: the same comparison with one input element of row 3 nudged must differ.
    Buffer xp = randn(act, {7, 203}, 101);
    store_f32(xp.view(), 3 * 203 + 100, load_f32(xp.view(), 3 * 203 + 100) + 0.5f);
    auto xp2 = upload_new(*b2, xp);
    auto pert = b2->alloc(act, {7, 77});
    b2->linear(xp2, w2, nullptr, pert);
    EXPECT_FALSE(bits_equal(*b2, pert.tensor().slice_rows(3, 4), full2.tensor().slice_rows(3, 4)));
  }
}

// Causal attention over a KV cache: prefill of 9 rows at once == prefill in chunks (4 + 5) ==
// 9 single-row decode steps, for 1 and 2 threads.
TEST(OpInvariance, AttentionPrefillChunksAndDecodeAgree) {
  ThreadPool one(1), two(2);
  auto b1 = make_cpu_backend(&one), b2 = make_cpu_backend(&two);
  const int64_t n = 9, heads = 4, kvh = 2, d = 24;
  Buffer q = randn(DType::BF16, {n, heads, d}, 111), k = randn(DType::BF16, {n, kvh, d}, 112),
         v = randn(DType::BF16, {n, kvh, d}, 113);
  auto run = [&](Backend& be, const Buffer& qb, int64_t r0, int64_t r1) {
    auto dq = upload_new(be, qb.view().slice_rows(r0, r1)), dk = upload_new(be, k), dv = upload_new(be, v);
    Buffer rg(DType::I32, {r1 - r0, 2});
    for (int64_t i = r0; i < r1; ++i) {
      rg.as<int32_t>()[2 * (i - r0)] = 0;
      rg.as<int32_t>()[2 * (i - r0) + 1] = static_cast<int32_t>(i + 1);
    }
    auto dr = upload_new(be, rg);
    auto out = be.alloc(DType::BF16, {r1 - r0, heads, d});
    be.attention(dq, dk, dv, dr, 0.2f, out);
    return download_new(be, out);
  };
  Buffer full = run(*b2, q, 0, n);
  auto same_rows = [&](const Buffer& part, int64_t r0) {
    const size_t rb = full.nbytes() / n;
    return std::memcmp(part.data(), static_cast<char*>(full.data()) + rb * r0, part.nbytes()) == 0;
  };
  EXPECT_TRUE(same_rows(run(*b1, q, 0, n), 0));
  EXPECT_TRUE(same_rows(run(*b2, q, 0, 4), 0));
  EXPECT_TRUE(same_rows(run(*b2, q, 4, 9), 4));
  for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(same_rows(run(*b1, q, i, i + 1), i)) << "decode row " << i;
  Buffer qp = randn(DType::BF16, {n, heads, d}, 111);
  store_f32(qp.view(), 6 * heads * d + 5, load_f32(qp.view(), 6 * heads * d + 5) + 1.0f);
  EXPECT_FALSE(same_rows(run(*b2, qp, 6, 7), 6)) << "planted control not caught";
}

// Norms and elementwise ops: a row alone equals the row in a batch, with 1 or 2 threads.
TEST(OpInvariance, NormAndElementwiseRows) {
  ThreadPool one(1), two(2);
  auto b1 = make_cpu_backend(&one), b2 = make_cpu_backend(&two);
  Buffer x = randn(DType::BF16, {7, 300}, 121), w = randn(DType::BF16, {300}, 122);
  auto run_norm = [&](Backend& be, int64_t r0, int64_t r1) {
    auto dx = upload_new(be, x.view().slice_rows(r0, r1)), dw = upload_new(be, w);
    auto out = be.alloc(DType::BF16, {r1 - r0, 300});
    be.rms_norm(dx, dw, 1e-6f, RmsNormKind::kWeight, out);
    auto o2 = be.alloc(DType::BF16, {r1 - r0, 300});
    be.act_mul(out, dx, ActKind::kSilu, o2);
    return download_new(be, o2);
  };
  Buffer full = run_norm(*b2, 0, 7);
  EXPECT_EQ(std::memcmp(run_norm(*b1, 0, 7).data(), full.data(), full.nbytes()), 0);
  Buffer r5 = run_norm(*b1, 5, 6);
  EXPECT_EQ(std::memcmp(r5.data(), static_cast<char*>(full.data()) + 5 * 600, 600), 0);
  Buffer r4 = run_norm(*b1, 4, 5);
  EXPECT_NE(std::memcmp(r4.data(), static_cast<char*>(full.data()) + 5 * 600, 600), 0) << "control";
}

}  // namespace
