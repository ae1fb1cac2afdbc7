// rope_cos_sin, rope and attention against float64 references.
#include <algorithm>

#include "op_test_util.h"

using namespace tf;
using namespace tf::optest;

namespace {

TEST(OpRope, CosSinTableAndRotationWithThreeRoundings) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32})
    for (int64_t r : {8, 6}) {  // r == 6 < d: partial rotary, the tail passes through
      const int64_t n = 5, heads = 3, d = 8;
      Buffer ang(DType::F32, {n, r / 2});
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < r / 2; ++j)
          ang.as<float>()[i * (r / 2) + j] =
              static_cast<float>(i * 7 + 1) * std::pow(10000.0f, -2.0f * j / r);
      Buffer x = randn(act, {n, heads, d}, 31 + r);
      auto da = upload_new(*be, ang), dx = upload_new(*be, x);
      auto cos = be->alloc(act, {n, r}), sin = be->alloc(act, {n, r}), out = be->alloc(act, {n, heads, d});
      be->rope_cos_sin(da, cos, sin);
      be->rope(dx, cos, sin, out);
      auto av = to_f64(ang), xv = to_f64(x);
      std::vector<double> cref(static_cast<size_t>(n * r)), sref(cref.size()), oref(xv.size()),
          oref_one(xv.size());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < r; ++j) {
          cref[i * r + j] = rnd64(std::cos(av[i * (r / 2) + j % (r / 2)]), act);
          sref[i * r + j] = rnd64(std::sin(av[i * (r / 2) + j % (r / 2)]), act);
        }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t j = 0; j < d; ++j) {
            const size_t o = static_cast<size_t>((i * heads + h) * d + j);
            if (j >= r) {
              oref[o] = oref_one[o] = xv[o];
              continue;
            }
            const double rot = j < r / 2 ? -xv[o + r / 2] : xv[o - r / 2];
            const double c = cref[i * r + j], s = sref[i * r + j];
            oref[o] = rnd64(rnd64(xv[o] * c, act) + rnd64(rot * s, act), act);
            oref_one[o] = rnd64(xv[o] * c + rot * s, act);
          }
      SCOPED_TRACE("r=" + std::to_string(r));
      EXPECT_MATCHES_REF(host_f32(*be, cos), cref, act);
      EXPECT_MATCHES_REF(host_f32(*be, sin), sref, act);
      EXPECT_MATCHES_REF(host_f32(*be, out), oref, act);
      if (act == DType::BF16) {
        // A single-rounding rotation is a different function; the comparator sees it.
        Buffer big = randn(act, {64, 4, 8}, 77);
        Buffer bang(DType::F32, {64, r / 2});
        for (int64_t i = 0; i < 64 * (r / 2); ++i) bang.as<float>()[i] = 0.37f * static_cast<float>(i);
        auto db = upload_new(*be, big), dba = upload_new(*be, bang);
        auto c2 = be->alloc(act, {64, r}), s2 = be->alloc(act, {64, r}), o2 = be->alloc(act, {64, 4, 8});
        be->rope_cos_sin(dba, c2, s2);
        be->rope(db, c2, s2, o2);
        auto bv = to_f64(big), cv = to_f64(download_new(*be, c2).view()),
             sv = to_f64(download_new(*be, s2).view());
        std::vector<double> three(bv.size()), one(bv.size());
        for (int64_t i = 0; i < 64; ++i)
          for (int64_t h = 0; h < 4; ++h)
            for (int64_t j = 0; j < 8; ++j) {
              const size_t o = static_cast<size_t>((i * 4 + h) * 8 + j);
              if (j >= r) {
                three[o] = one[o] = bv[o];
                continue;
              }
              const double rot = j < r / 2 ? -bv[o + r / 2] : bv[o - r / 2];
              three[o] = rnd64(rnd64(bv[o] * cv[i * r + j], act) + rnd64(rot * sv[i * r + j], act), act);
              one[o] = rnd64(bv[o] * cv[i * r + j] + rot * sv[i * r + j], act);
            }
        auto got = host_f32(*be, o2);
        EXPECT_TRUE(compare(got, three, act).ok);
        EXPECT_FALSE(compare(got, one, act).ok);
      }
    }
}

std::vector<double> attn_ref(const std::vector<double>& q, const std::vector<double>& k,
                             const std::vector<double>& v, const std::vector<int32_t>& ranges, int64_t n_q,
                             int64_t heads, int64_t kv_heads, int64_t d, double scale, DType act,
                             bool round_p = true) {
  std::vector<double> out(static_cast<size_t>(n_q * heads * d));
  for (int64_t i = 0; i < n_q; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kh = h / (heads / kv_heads), b = ranges[2 * i], e = ranges[2 * i + 1];
      std::vector<double> s;
      double m = -1e300;
      for (int64_t j = b; j < e; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += q[(i * heads + h) * d + c] * k[(j * kv_heads + kh) * d + c];
        s.push_back(dot * scale);
        m = std::max(m, s.back());
      }
      double l = 0;
      for (double& x : s) l += (x = std::exp(x - m));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (int64_t j = b; j < e; ++j)
          acc += (round_p ? rnd64(s[j - b], act) : s[j - b]) * v[(j * kv_heads + kh) * d + c];
        out[(i * heads + h) * d + c] = rnd64(acc / l, act);
      }
    }
  return out;
}

TEST(OpAttention, CausalGqaAndBlockDiagonal) {
  auto be = make_cpu_backend();
  for (DType act : {DType::BF16, DType::F32}) {
    struct Case {
      int64_t n_q, n_k, heads, kv_heads, d;
      bool causal = true;
    };
    for (Case c :
         {Case{1, 1, 2, 1, 8}, Case{7, 7, 4, 2, 12}, Case{3, 10, 6, 3, 5}, Case{9, 9, 2, 2, 16, false}}) {
      Buffer q = randn(act, {c.n_q, c.heads, c.d}, 41), k = randn(act, {c.n_k, c.kv_heads, c.d}, 42),
             v = randn(act, {c.n_k, c.kv_heads, c.d}, 43);
      std::vector<int32_t> ranges(static_cast<size_t>(2 * c.n_q));
      for (int64_t i = 0; i < c.n_q; ++i) {
        if (c.causal) {  // the last n_q positions of a sequence of n_k
          ranges[2 * i] = 0;
          ranges[2 * i + 1] = static_cast<int32_t>(c.n_k - c.n_q + i + 1);
        } else {  // two "images": rows [0,4) and [4,9)
          ranges[2 * i] = i < 4 ? 0 : 4;
          ranges[2 * i + 1] = i < 4 ? 4 : 9;
        }
      }
      Buffer rg(DType::I32, {c.n_q, 2});
      std::memcpy(rg.data(), ranges.data(), ranges.size() * 4);
      auto dq = upload_new(*be, q), dk = upload_new(*be, k), dv = upload_new(*be, v),
           dr = upload_new(*be, rg);
      auto out = be->alloc(act, {c.n_q, c.heads, c.d});
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      be->attention(dq, dk, dv, dr, scale, out);
      auto ref =
          attn_ref(to_f64(q), to_f64(k), to_f64(v), ranges, c.n_q, c.heads, c.kv_heads, c.d, scale, act);
      SCOPED_TRACE("n_q=" + std::to_string(c.n_q) + " d=" + std::to_string(c.d));
      EXPECT_MATCHES_REF(host_f32(*be, out), ref, act);
      if (act == DType::BF16 && c.n_k >= 9) {
        // Rounding P to bf16 is observable: the unrounded-P reference is rejected.
        auto exact = attn_ref(to_f64(q), to_f64(k), to_f64(v), ranges, c.n_q, c.heads, c.kv_heads, c.d, scale,
                              act, /*round_p=*/false);
        EXPECT_FALSE(compare(host_f32(*be, out), exact, act).ok) << "P rounding point unseen";
      }
    }
  }
}

}  // namespace
