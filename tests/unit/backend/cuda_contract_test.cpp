// The CUDA backend against the CPU reference, op by op (backend/ops.h). Ops without transcendental
// functions must give bit-identical results; the others (expf, erff, tanhf, cosf, sinf) at most
// 1 ulp (bf16) / 4 ulps (f32) away in at most 0.5% of the elements. Planted controls show that the
// comparator sees a one-ulp input change; the batch-invariance tests run on the CUDA backend alone.
// Every test skips where create_backend("cuda") fails. Qwen3.5 ops: cuda_contract_qwen_test.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "cuda_contract_util.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kActs[] = {DType::BF16, DType::F32};
constexpr DType kBF16 = DType::BF16, kF32 = DType::F32;

// ---- norms -----------------------------------------------------------------------------------
Buffer run_rms(Backend& be, const Buffer& x, const Buffer& w, RmsNormKind kind, bool in_place) {
  auto dx = upload_new(be, x), dw = upload_new(be, w);
  auto out = be.alloc(x.dtype(), x.shape());
  const Tensor& o = in_place ? dx.tensor() : out.tensor();
  be.rms_norm(dx, dw, 1e-6f, kind, o);
  return fetch(be, o);
}

TEST_F(CudaContract, RmsNorm) {
  struct Case {
    int64_t n, d;
    float sd;
  };
  // rms_norm.cu: calls of >= 128 rows of d % 8 == 0 up to 8192 in the warp form (one warp per row; 528 x
  // 128, 130 x 1000 in place), other rows up to 8192 staged in shared memory by a block, wider ones read
  // directly: all three.
  const Case cases[] = {{1, 67, 1},        {3, 1000, 1},  {7, 33, 3},   {257, 7, 1e-3f},
                        {33 * 16, 128, 1}, {17, 2048, 1}, {1, 1024, 1}, {1, 5, 1},
                        {2, 121, 2},       {1, 8192, 1},  {2, 9001, 1}, {130, 1000, 1}};
  uint32_t seed = 100;
  for (const Case& c : cases)
    for (DType act : kActs)
      for (RmsNormKind kind : {RmsNormKind::kWeight, RmsNormKind::kOnePlusWeight})
        for (DType wt : kActs) {
          if (kind == RmsNormKind::kWeight && wt != act) continue;  // kWeight: w in act
          const bool one_plus = kind == RmsNormKind::kOnePlusWeight;
          Buffer x = randn(act, {c.n, c.d}, seed++, c.sd);
          Buffer w =
              one_plus ? uniform(wt, {c.d}, seed++, -0.3f, 0.3f) : uniform(wt, {c.d}, seed++, 0.5f, 1.5f);
          for (bool in_place : {false, true}) {
            if (in_place && c.d != 1000) continue;
            EXPECT_TRUE(Exact(run_rms(cpu(), x, w, kind, false), run_rms(dev(), x, w, kind, in_place)))
                << cat("rms_norm [", c.n, ", ", c.d, "] act ", dtype_name(act), one_plus ? " 1+w " : " w ",
                       dtype_name(wt), in_place ? " in place" : "");
          }
        }
}

TEST_F(CudaContract, RmsNormPlantedControl) {
  for (DType act : kActs)
    for (RmsNormKind kind : {RmsNormKind::kWeight, RmsNormKind::kOnePlusWeight}) {
      SCOPED_TRACE(cat(dtype_name(act), kind == RmsNormKind::kWeight ? " w" : " 1+w"));
      Buffer x = randn(act, {7, 1000}, 31), w = uniform(act, {1000}, 32, 0.5f, 1.5f);
      const Buffer got = run_rms(dev(), x, w, kind, false);
      EXPECT_TRUE(Exact(run_rms(cpu(), x, w, kind, false), got));
      auto cpu_run = [&](const Buffer& xx) { return run_rms(cpu(), xx, w, kind, false); };
      EXPECT_TRUE(Differs(cpu_run(visible_bump(x, 3 * 1000, 4 * 1000, cpu_run)), got)) << "x row 3 + 1 ulp";
      EXPECT_TRUE(Differs(run_rms(cpu(), x, poke(w, 17, 0.25f), kind, false), got)) << "w[17] + 0.25";
    }
}

TEST_F(CudaContract, LayerNorm) {
  struct Case {
    int64_t n, d;
    float eps;
  };
  const Case cases[] = {{1, 67, 1e-5f}, {7, 1000, 1e-6f}, {33, 1152, 1e-6f}, {257, 33, 1e-5f}};
  uint32_t seed = 200;
  for (const Case& c : cases)
    for (DType act : kActs)
      for (DType wt : {act, kF32}) {
        Buffer x = uniform(act, {c.n, c.d}, seed++, 1.0f, 5.0f);  // a large mean: the two passes matter
        Buffer w = uniform(wt, {c.d}, seed++, 0.5f, 1.5f), b = randn(wt, {c.d}, seed++, 0.2f);
        auto run = [&](Backend& be) {
          auto dx = upload_new(be, x), dw = upload_new(be, w), db = upload_new(be, b);
          auto out = be.alloc(act, {c.n, c.d});
          be.layer_norm(dx, dw, db, c.eps, out);
          return fetch(be, out);
        };
        EXPECT_TRUE(Exact(run(cpu()), run(dev())))
            << cat("layer_norm [", c.n, ", ", c.d, "] act ", dtype_name(act), " w/b ", dtype_name(wt));
      }
}

// ---- rotary embeddings -----------------------------------------------------------------------
// angles[n, half] = fl32(pos * inv_freq[k]), inv_freq[k] = theta^(-k/half), positions p0, p0+1, ...
Buffer rope_angles(int64_t n, int64_t half, int64_t p0, double theta = 1e6) {
  Buffer a(kF32, {n, half});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < half; ++k) {
      const float inv =
          static_cast<float>(std::pow(theta, -static_cast<double>(k) / static_cast<double>(half)));
      a.as<float>()[i * half + k] = static_cast<float>(p0 + i) * inv;
    }
  return a;
}

TEST_F(CudaContract, RopeCosSin) {
  struct Case {
    int64_t n, half, p0;
  };
  const Case cases[] = {{1, 64, 0}, {7, 32, 100}, {257, 64, 40000}, {33, 9, 5}, {17, 64, -1}};
  for (const Case& c : cases)
    for (DType act : kActs) {
      // p0 = -1: random angles in [-300, 300] instead of a position table.
      Buffer ang =
          c.p0 < 0 ? uniform(kF32, {c.n, c.half}, 41, -300.0f, 300.0f) : rope_angles(c.n, c.half, c.p0);
      auto run = [&](Backend& be) {
        auto da = upload_new(be, ang);
        auto cs = be.alloc(act, {c.n, 2 * c.half}), sn = be.alloc(act, {c.n, 2 * c.half});
        be.rope_cos_sin(da, cs, sn);
        return std::pair{fetch(be, cs), fetch(be, sn)};
      };
      auto [rc, rs] = run(cpu());
      auto [gc, gs] = run(dev());
      const std::string what = cat("rope_cos_sin [", c.n, ", ", c.half, "] p0 ", c.p0, " ", dtype_name(act));
      EXPECT_TRUE(Close(rc, gc, what + " cos"));
      EXPECT_TRUE(Close(rs, gs, what + " sin"));
    }
}

TEST_F(CudaContract, Rope) {
  struct Case {
    int64_t n, heads, d, r;
  };
  // r < d: partial rotary (Qwen3.5: 64 of 256).
  const Case cases[] = {
      {1, 3, 64, 64}, {7, 5, 128, 128}, {33, 2, 256, 64}, {257, 1, 34, 18}, {17, 16, 128, 128}};
  uint32_t seed = 300;
  for (const Case& c : cases)
    for (DType act : kActs) {
      Buffer ang = rope_angles(c.n, c.r / 2, 7), cs(act, {c.n, c.r}), sn(act, {c.n, c.r});
      for (int64_t i = 0; i < c.n; ++i)
        for (int64_t j = 0; j < c.r; ++j) {
          const float a = ang.as<float>()[i * (c.r / 2) + j % (c.r / 2)];
          store_f32(cs.view(), i * c.r + j, std::cos(a));
          store_f32(sn.view(), i * c.r + j, std::sin(a));
        }
      Buffer x = randn(act, {c.n, c.heads, c.d}, seed++, 2.0f);
      auto run = [&](Backend& be, bool in_place) {
        auto dx = upload_new(be, x), dc = upload_new(be, cs), ds = upload_new(be, sn);
        auto out = be.alloc(act, x.shape());
        const Tensor& o = in_place ? dx.tensor() : out.tensor();
        be.rope(dx, dc, ds, o);
        return fetch(be, o);
      };
      const Buffer ref = run(cpu(), false);
      for (bool in_place : {false, true})
        EXPECT_TRUE(Exact(ref, run(dev(), in_place)))
            << cat("rope [", c.n, ", ", c.heads, ", ", c.d, "] r ", c.r, " ", dtype_name(act),
                   in_place ? " in place" : "");
    }
}

// ---- elementwise -----------------------------------------------------------------------------
// act_mul and act of every ActKind, add, sigmoid_mul.
enum class Ew { kActMul, kAct, kAdd, kSigmoidMul };
const ActKind kActKinds[] = {ActKind::kSilu,    ActKind::kGelu,      ActKind::kGeluTanh,
                             ActKind::kGeluNew, ActKind::kQuickGelu, ActKind::kRelu};

Buffer run_ew(Backend& be, Ew op, ActKind kind, const Buffer& a, const Buffer& b, bool in_place) {
  auto da = upload_new(be, a), db = upload_new(be, b);
  auto out = be.alloc(a.dtype(), a.shape());
  const Tensor& o = in_place ? da.tensor() : out.tensor();
  if (op == Ew::kActMul) be.act_mul(da, db, kind, o);
  if (op == Ew::kAct) be.act(da, kind, o);
  if (op == Ew::kAdd) be.add(da, db, o);
  if (op == Ew::kSigmoidMul) be.sigmoid_mul(da, db, o);
  return fetch(be, o);
}

std::string ew_name(Ew op, ActKind kind) {
  if (op == Ew::kActMul) return cat("act_mul ", act_kind_name(kind));
  if (op == Ew::kAct) return cat("act ", act_kind_name(kind));
  return op == Ew::kAdd ? "add" : "sigmoid_mul";
}

TEST_F(CudaContract, Elementwise) {
  const Shape shapes[] = {{1, 1}, {3, 7}, {7, 33}, {257, 67}, {17, 3072}, {2, 5000}};
  const float extremes[] = {0.0f,  -0.0f,  10.0f,  -10.0f,  30.0f, -30.0f,
                            88.7f, -88.7f, 100.0f, -100.0f, 1e-20f};
  uint32_t seed = 600;
  for (const Shape& s : shapes)
    for (DType act : kActs) {
      Buffer a = randn(act, s, seed++, 3.0f), b = randn(act, s, seed++, 2.0f);
      for (int64_t i = 0; i < std::min<int64_t>(a.numel(), std::size(extremes)); ++i)
        store_f32(a.view(), a.numel() - 1 - i, extremes[i]);
      for (Ew op : {Ew::kActMul, Ew::kAct, Ew::kAdd, Ew::kSigmoidMul})
        for (ActKind kind : kActKinds) {
          if ((op == Ew::kAdd || op == Ew::kSigmoidMul) && kind != ActKind::kSilu) continue;
          const Buffer ref = run_ew(cpu(), op, kind, a, b, false);
          // out may alias the (first) input of every one of these.
          for (bool in_place : {false, true}) {
            const Buffer got = run_ew(dev(), op, kind, a, b, in_place);
            const std::string what =
                cat(ew_name(op, kind), " ", shape_str(s), " ", dtype_name(act), in_place ? " in place" : "");
            if (op == Ew::kAdd || kind == ActKind::kRelu)
              EXPECT_TRUE(Exact(ref, got)) << what;
            else
              EXPECT_TRUE(Close(ref, got, what));
          }
        }
      // Planted control: gelu_new's per-op roundings against gelu_pytorch_tanh's single one.
      if (act == DType::BF16 && a.numel() > 1000) {
        EXPECT_TRUE(Differs(run_ew(cpu(), Ew::kAct, ActKind::kGeluTanh, a, b, false),
                            run_ew(dev(), Ew::kAct, ActKind::kGeluNew, a, b, false)));
      }
    }
}

TEST_F(CudaContract, Cast) {
  // f32 -> bf16: random values over many binades, exact ties and near-ties around random bf16
  // values, and specials (overflow to inf, denormals, signed zeros, infinities, NaNs).
  std::vector<uint32_t> bits;
  std::mt19937 rng(700);
  for (int i = 0; i < 3000; ++i) {
    const uint32_t hi = (rng() & 0xffffu) << 16;
    for (uint32_t lo : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, static_cast<uint32_t>(rng() & 0xffffu)})
      bits.push_back(hi | lo);
  }
  for (float f :
       {3.4028235e38f, -3.4028235e38f, 3.3961e38f, 1e-40f, -1e-45f, 0.0f, -0.0f, 1.00390625f, 1.01171875f,
        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    bits.push_back(u);
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffc12345u}) bits.push_back(nan);
  Buffer f32(kF32, {static_cast<int64_t>(bits.size())});
  std::memcpy(f32.data(), bits.data(), bits.size() * 4);
  // bf16 -> f32: every bf16 pattern.
  Buffer bf(kBF16, {65536});
  for (int i = 0; i < 65536; ++i) bf.as<uint16_t>()[i] = static_cast<uint16_t>(i);
  auto run = [&](Backend& be, const Buffer& x, DType to) {
    auto dx = upload_new(be, x);
    auto out = be.alloc(to, x.shape());
    be.cast(dx, out);
    return fetch(be, out);
  };
  EXPECT_TRUE(Exact(run(cpu(), f32, kBF16), run(dev(), f32, kBF16), /*nan_equal=*/true)) << "f32 -> bf16";
  EXPECT_TRUE(Exact(run(cpu(), bf, kF32), run(dev(), bf, kF32), /*nan_equal=*/true)) << "bf16 -> f32";
  Buffer logits = randn(kF32, {33, 1000}, 701, 5.0f);
  EXPECT_TRUE(Exact(run(cpu(), logits, kBF16), run(dev(), logits, kBF16))) << "f32 -> bf16 [33, 1000]";
}

// ---- rows ------------------------------------------------------------------------------------
TEST_F(CudaContract, Embedding) {
  struct Case {
    int64_t vocab, d, n;
  };
  uint32_t seed = 800;
  for (const Case c : {Case{1000, 67, 1}, Case{1000, 67, 33}, Case{5003, 1024, 17}})
    for (DType tab : kActs)
      for (DType out_dt : kActs) {
        Buffer table = randn(tab, {c.vocab, c.d}, seed++, 3.0f);
        std::vector<int32_t> idv = rand_ints(c.n, 0, static_cast<int32_t>(c.vocab - 1), seed++);
        idv[0] = static_cast<int32_t>(c.vocab - 1);
        if (c.n > 2) idv[1] = 0, idv[2] = idv[0];  // a repeat
        Buffer ids = i32({c.n}, idv);
        auto run = [&](Backend& be) {
          auto di = upload_new(be, ids), dt = upload_new(be, table);
          auto out = be.alloc(out_dt, {c.n, c.d});
          be.embedding(di, dt, out);
          return fetch(be, out);
        };
        EXPECT_TRUE(Exact(run(cpu()), run(dev()))) << cat("embedding [", c.vocab, ", ", c.d, "] n ", c.n, " ",
                                                          dtype_name(tab), " -> ", dtype_name(out_dt));
      }
}

TEST_F(CudaContract, GatherScatterRows) {
  const Shape shapes[] = {{50, 3, 7}, {2000, 1024}, {9, 1}};
  uint32_t seed = 900;
  for (const Shape& s : shapes)
    for (DType dt : kActs)
      for (int64_t m : {int64_t{1}, int64_t{13}}) {
        const int64_t n = s[0];
        if (m > n) continue;
        Shape sm = s;
        sm[0] = m;
        Buffer big = randn(dt, s, seed++), small = randn(dt, sm, seed++);
        Buffer gather_idx =
            i32({m}, rand_ints(m, 0, static_cast<int32_t>(n - 1), seed++));  // repeats allowed
        std::vector<int32_t> perm(static_cast<size_t>(n));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), std::mt19937(seed++));
        perm.resize(static_cast<size_t>(m));  // scatter targets are distinct
        Buffer scatter_idx = i32({m}, perm);
        auto run = [&](Backend& be) {
          auto db = upload_new(be, big), ds = upload_new(be, small), dg = upload_new(be, gather_idx),
               dsi = upload_new(be, scatter_idx);
          auto out = be.alloc(dt, sm);
          be.gather_rows(db, dg, out);
          be.scatter_rows(ds, dsi, db);
          return std::pair{fetch(be, out), fetch(be, db)};
        };
        auto [rg, rs] = run(cpu());
        auto [gg, gs] = run(dev());
        const std::string what = cat(shape_str(s), " m ", m, " ", dtype_name(dt));
        EXPECT_TRUE(Exact(rg, gg)) << "gather_rows " << what;
        EXPECT_TRUE(Exact(rs, gs)) << "scatter_rows " << what;
      }
}

// Row slices of a cache into a flat block and back into other rows (shapes differ, same numel).
TEST_F(CudaContract, Copy) {
  for (DType dt : kActs) {
    Buffer cache = randn(dt, {40, 4, 9}, 950);
    auto run = [&](Backend& be) {
      auto dc = upload_new(be, cache);
      auto block = be.alloc(dt, {7 * 4 * 9});
      be.copy(dc.tensor().slice_rows(5, 12), block);
      be.copy(block.tensor().reshaped({7, 4, 9}), dc.tensor().slice_rows(31, 38));
      return std::pair{fetch(be, block), fetch(be, dc)};
    };
    auto [rb, rc] = run(cpu());
    auto [gb, gc] = run(dev());
    EXPECT_TRUE(Exact(rb, gb)) << "block " << dtype_name(dt);
    EXPECT_TRUE(Exact(rc, gc)) << "cache " << dtype_name(dt);
  }
}

// ---- vision layout ---------------------------------------------------------------------------
TEST_F(CudaContract, Patchify) {
  struct Case {
    int64_t C, p, gh, gw, H, W;
  };
  const Case cases[] = {{3, 14, 3, 5, 3 * 14 + 5, 5 * 14 + 13},
                        {3, 16, 1, 1, 16, 16},
                        {1, 2, 7, 9, 15, 19},
                        {3, 14, 36, 52, 36 * 14 + 6, 52 * 14 + 3}};
  uint32_t seed = 1000;
  for (const Case& c : cases) {
    Buffer px = randn(kF32, {c.C, c.H, c.W}, seed++, 2.0f);
    for (DType act : kActs) {
      auto run = [&](Backend& be) {
        auto dp = upload_new(be, px);
        auto out = be.alloc(act, {c.gh * c.gw, c.C * c.p * c.p});
        be.patchify(dp, c.p, c.gh, c.gw, out);
        return fetch(be, out);
      };
      EXPECT_TRUE(Exact(run(cpu()), run(dev())))
          << cat("patchify C ", c.C, " p ", c.p, " grid ", c.gh, "x", c.gw, " ", dtype_name(act));
    }
  }
}

TEST_F(CudaContract, Unfold2x2) {
  struct Case {
    int64_t gh, gw, c;
  };
  uint32_t seed = 1100;
  for (const Case c : {Case{5, 7, 67}, Case{4, 6, 33}, Case{3, 3, 1}, Case{37, 53, 1152}})
    for (DType dt : kActs) {
      Buffer x = randn(dt, {c.gh * c.gw, c.c}, seed++);
      auto run = [&](Backend& be) {
        auto dx = upload_new(be, x);
        auto out = be.alloc(dt, {(c.gh / 2) * (c.gw / 2), 4 * c.c});
        be.unfold_2x2(dx, c.gh, c.gw, out);
        return fetch(be, out);
      };
      EXPECT_TRUE(Exact(run(cpu()), run(dev())))
          << cat("unfold_2x2 ", c.gh, "x", c.gw, " c ", c.c, " ", dtype_name(dt));
    }
}

// ---- logits ----------------------------------------------------------------------------------
// Logits quantised to 0.5 (many ties) with planted rows: a duplicated maximum, a constant row, the
// maximum at the last index, masked (-inf) entries. Zeros are +0 here; signed zeros are tested apart.
Buffer tie_logits(int64_t n, int64_t V, uint32_t seed) {
  Buffer l = randn(kF32, {n, V}, seed, 2.0f);
  float* p = l.as<float>();
  for (int64_t i = 0; i < n * V; ++i) p[i] = std::round(p[i] * 2.0f) / 2.0f + 0.0f;
  std::mt19937 rng(seed + 1);
  for (int64_t r = 0; r < n && V > 1; ++r) {
    float* row = p + r * V;
    const int64_t a = static_cast<int64_t>(rng() % static_cast<uint32_t>(V)),
                  b = static_cast<int64_t>(rng() % static_cast<uint32_t>(V));
    switch (r % 5) {
      case 1:
        row[a] = row[b] = 40.0f;
        break;
      case 2:
        std::fill(row, row + V, 0.5f);
        break;
      case 3:
        row[V - 1] = 40.0f;
        break;
      case 4:
        for (int64_t j = 0; j < V; j += 2) row[j] = -std::numeric_limits<float>::infinity();
        break;
      default:
        break;
    }
  }
  return l;
}

std::vector<Buffer> run_logits(Backend& be, const Buffer& l, int64_t k) {
  auto dl = upload_new(be, l);
  const int64_t n = l.shape()[0];
  auto am = be.alloc(DType::I32, {n}), vals = be.alloc(kF32, {n, k}), idx = be.alloc(DType::I32, {n, k});
  be.argmax(dl, am);
  be.top_k(dl, k, vals, idx);
  std::vector<Buffer> r;
  r.push_back(fetch(be, am));
  r.push_back(fetch(be, vals));
  r.push_back(fetch(be, idx));
  return r;
}

TEST_F(CudaContract, ArgmaxTopK) {
  struct Case {
    int64_t n, V, k;
  };
  const Case cases[] = {{1, 1, 1},     {3, 33, 1}, {5, 33, 5},      {5, 33, 33},
                        {9, 1000, 50}, {10, 7, 3}, {3, 248320, 20}, {1, 151936, 1}};
  uint32_t seed = 1200;
  for (const Case& c : cases) {
    Buffer l = tie_logits(c.n, c.V, seed += 2);
    const auto ref = run_logits(cpu(), l, c.k), got = run_logits(dev(), l, c.k);
    const std::string what = cat("[", c.n, ", ", c.V, "] k ", c.k);
    EXPECT_TRUE(Exact(ref[0], got[0])) << "argmax " << what;
    EXPECT_TRUE(Exact(ref[1], got[1])) << "top_k values " << what;
    EXPECT_TRUE(Exact(ref[2], got[2])) << "top_k indices " << what;
  }
  // -0 == +0: a tie by value, so the lower index comes first (ops.h: ties by lower index).
  const float z[7] = {-1.0f, -1.0f, -0.0f, -1.0f, -1.0f, 0.0f, -2.0f};
  Buffer l(kF32, {1, 7});
  std::memcpy(l.data(), z, sizeof z);
  const auto ref = run_logits(cpu(), l, 7), got = run_logits(dev(), l, 7);
  EXPECT_EQ(ref[0].as<int32_t>()[0], 2);
  EXPECT_TRUE(Exact(ref[0], got[0])) << "argmax with -0 before +0";
  EXPECT_TRUE(Exact(ref[2], got[2])) << "top_k indices with -0 before +0";
  EXPECT_TRUE(Exact(ref[1], got[1])) << "top_k values with -0 before +0";
}

}  // namespace
