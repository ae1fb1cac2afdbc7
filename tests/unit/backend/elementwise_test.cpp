// act_mul (silu), act (gelu), add, cast, embedding/gather/scatter, patchify, unfold_2x2, argmax, top_k.
#include <algorithm>

#include "op_test_util.h"

using namespace tf;
using namespace tf::optest;

namespace {

TEST(OpElementwise, SiluMulTwoRoundingsGeluAdd) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32})
    for (int64_t n : {1, 13, 5000}) {  // 5000 spans more than one internal chunk
      Buffer g = randn(act, {n}, 51, 3.0f), u = randn(act, {n}, 52, 2.0f);
      // GELU inputs stay in [-3, 3]: further out 1 + erf(x) cancels in f32 (as in PyTorch's opmath),
      // which an f64 reference does not reproduce.
      Buffer gx = randn(act, {n}, 53, 1.0f);
      for (int64_t i = 0; i < n; ++i)
        store_f32(gx.view(), i, std::clamp(load_f32(gx.view(), i), -3.0f, 3.0f));
      auto dg = upload_new(*be, g), du = upload_new(*be, u), dgx = upload_new(*be, gx);
      auto o1 = be->alloc(act, {n}), o2 = be->alloc(act, {n}), o3 = be->alloc(act, {n}),
           o4 = be->alloc(act, {n});
      be->act_mul(dg, du, ActKind::kSilu, o1);
      be->act(dgx, ActKind::kGelu, o2);
      be->act(dgx, ActKind::kGeluTanh, o3);
      be->add(dg, du, o4);
      auto gv = to_f64(g), uv = to_f64(u), xv = to_f64(gx);
      std::vector<double> r1(gv.size()), r1_one(gv.size()), r2(gv.size()), r3(gv.size()), r4(gv.size());
      for (size_t i = 0; i < gv.size(); ++i) {
        const double x = gv[i], s = x / (1 + std::exp(-x));
        r1[i] = rnd64(rnd64(s, act) * uv[i], act);
        r1_one[i] = rnd64(s * uv[i], act);
        const double y = xv[i];
        r2[i] = rnd64(0.5 * y * (1 + std::erf(y / std::sqrt(2.0))), act);
        r3[i] = rnd64(0.5 * y * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (y + 0.044715 * y * y * y))), act);
        r4[i] = rnd64(x + uv[i], act);
      }
      SCOPED_TRACE("n=" + std::to_string(n));
      auto got1 = host_f32(*be, o1);
      EXPECT_MATCHES_REF(got1, r1, act);
      EXPECT_MATCHES_REF(host_f32(*be, o2), r2, act);
      EXPECT_MATCHES_REF(host_f32(*be, o3), r3, act);
      EXPECT_MATCHES_REF(host_f32(*be, o4), r4, act);
      if (act == DType::BF16 && n == 5000) {
        EXPECT_FALSE(compare(got1, r1_one, act).ok) << "rounding point unseen";
      }
    }
}

TEST(OpElementwise, CastRoundsToNearestEven) {
  auto be = make_cpu_backend();
  Buffer x(DType::F32, {4});
  const float vals[4] = {1.00390625f, 1.01171875f, -3.3f, 1e-3f};
  std::memcpy(x.data(), vals, sizeof vals);
  auto dx = upload_new(*be, x);
  auto o = be->alloc(DType::BF16, {4}), back = be->alloc(DType::F32, {4});
  be->cast(dx, o);
  be->cast(o, back);
  auto got = host_f32(*be, back);
  std::vector<double> ref;
  for (float v : vals) ref.push_back(round_bf16(v));
  EXPECT_EQ(got[0], 1.0f);       // tie to even (down)
  EXPECT_EQ(got[1], 1.015625f);  // tie to even (up)
  EXPECT_MATCHES_REF(got, ref, DType::F32);
}

TEST(OpRows, EmbeddingGatherScatter) {
  auto be = make_cpu_backend();
  Buffer table = randn(DType::BF16, {11, 6}, 61);
  Buffer ids(DType::I32, {4});
  const int32_t idv[4] = {10, 0, 3, 3};
  std::memcpy(ids.data(), idv, sizeof idv);
  auto dt = upload_new(*be, table), di = upload_new(*be, ids);
  auto emb = be->alloc(DType::BF16, {4, 6}), emb32 = be->alloc(DType::F32, {4, 6});
  be->embedding(di, dt, emb);
  be->embedding(di, dt, emb32);
  auto tv = to_f64(table);
  std::vector<double> ref;
  for (int32_t id : idv)
    for (int c = 0; c < 6; ++c) ref.push_back(tv[id * 6 + c]);
  EXPECT_MATCHES_REF(host_f32(*be, emb), ref, DType::BF16);
  EXPECT_MATCHES_REF(host_f32(*be, emb32), ref, DType::F32);

  // scatter rows 0,2 of a 2-row source into a 4-row destination, then gather them back.
  Buffer src = randn(DType::BF16, {2, 6}, 62), rows(DType::I32, {2});
  rows.as<int32_t>()[0] = 2;
  rows.as<int32_t>()[1] = 0;
  auto ds = upload_new(*be, src), dr = upload_new(*be, rows);
  be->scatter_rows(ds, dr, emb);
  auto g = be->alloc(DType::BF16, {2, 6});
  be->gather_rows(emb, dr, g);
  EXPECT_TRUE(bits_equal(*be, g, ds));
  auto after = host_f32(*be, emb);
  std::vector<double> ref2 = ref;
  auto sv = to_f64(src);
  for (int c = 0; c < 6; ++c) {
    ref2[2 * 6 + c] = sv[c];
    ref2[0 * 6 + c] = sv[6 + c];
  }
  EXPECT_MATCHES_REF(after, ref2, DType::BF16);
}

TEST(OpPatch, PatchifyCastsAndCrops) {
  auto be = make_cpu_backend();
  const int64_t C = 3, H = 11, W = 9, p = 2, gh = 5, gw = 4;  // H, W not multiples: crop to the grid
  Buffer px = randn(DType::F32, {C, H, W}, 71);
  auto dp = upload_new(*be, px);
  for (DType act : {DType::BF16, DType::F32}) {
    auto out = be->alloc(act, {gh * gw, C * p * p});
    be->patchify(dp, p, gh, gw, out);
    auto pv = to_f64(px);
    std::vector<double> ref;
    for (int64_t i = 0; i < gh; ++i)
      for (int64_t j = 0; j < gw; ++j)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t ky = 0; ky < p; ++ky)
            for (int64_t kx = 0; kx < p; ++kx)
              ref.push_back(rnd64(pv[(c * H + i * p + ky) * W + j * p + kx], act));
    EXPECT_MATCHES_REF(host_f32(*be, out), ref, act);
  }
}

TEST(OpPatch, Unfold2x2ChannelMajorDropsOddRowAndColumn) {
  auto be = make_cpu_backend();
  const int64_t gh = 5, gw = 3, c = 4;
  Buffer x = randn(DType::F32, {gh * gw, c}, 81);
  auto dx = upload_new(*be, x);
  auto out = be->alloc(DType::F32, {(gh / 2) * (gw / 2), 4 * c});
  be->unfold_2x2(dx, gh, gw, out);
  // Reference: literal F.unfold on a [c, gh, gw] grid: column t = bi*(gw/2)+bj, channel-major rows.
  auto xv = to_f64(x);
  std::vector<double> ref(static_cast<size_t>((gh / 2) * (gw / 2) * 4 * c));
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t ki = 0; ki < 2; ++ki)
      for (int64_t kj = 0; kj < 2; ++kj)
        for (int64_t bi = 0; bi < gh / 2; ++bi)
          for (int64_t bj = 0; bj < gw / 2; ++bj) {
            const int64_t unfold_row = ch * 4 + ki * 2 + kj, col = bi * (gw / 2) + bj;
            ref[col * 4 * c + unfold_row] = xv[((2 * bi + ki) * gw + 2 * bj + kj) * c + ch];
          }
  EXPECT_MATCHES_REF(host_f32(*be, out), ref, DType::F32);
}

TEST(OpLogits, ArgmaxAndTopKTiesToLowerIndex) {
  auto be = make_cpu_backend();
  Buffer l = randn(DType::F32, {3, 37}, 91);
  l.as<float>()[37 + 5] = 50.0f;  // row 1: tie between 5 and 20, expect 5 first
  l.as<float>()[37 + 20] = 50.0f;
  auto dl = upload_new(*be, l);
  auto am = be->alloc(DType::I32, {3});
  auto vals = be->alloc(DType::F32, {3, 4});
  auto idx = be->alloc(DType::I32, {3, 4});
  be->argmax(dl, am);
  be->top_k(dl, 4, vals, idx);
  Buffer ham = download_new(*be, am), hidx = download_new(*be, idx), hv = download_new(*be, vals);
  for (int r = 0; r < 3; ++r) {
    std::vector<int> order(37);
    for (int j = 0; j < 37; ++j) order[j] = j;
    const float* row = l.as<float>() + r * 37;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    EXPECT_EQ(ham.as<int32_t>()[r], order[0]);
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(hidx.as<int32_t>()[r * 4 + j], order[j]);
      EXPECT_EQ(hv.as<float>()[r * 4 + j], row[order[j]]);
    }
  }
  EXPECT_EQ(ham.as<int32_t>()[1], 5);
  EXPECT_EQ(hidx.as<int32_t>()[4 + 1], 20);
}

}  // namespace
