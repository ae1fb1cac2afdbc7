// The fused ops (backend/ops.h qkv_prep, add_rms_norm, glu) against the unfused ops they replace, on
// every backend: on the CPU (always) and on CUDA (where create_backend("cuda") works), fused == the
// same backend's unfused ops bit for bit, and CUDA == CPU bit for bit (rms_norm, rope, add, scatter_rows
// and act_mul are exact ops of the CUDA contract; act_mul's transcendentals are the CPU's double form
// in the fixture). Planted controls: a one-ulp input change and a changed norm weight must be seen.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cuda_contract_util.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kActs[] = {DType::BF16, DType::F32};

// Host column slice [c0, c0 + w) of every row of x[n, cols].
Buffer cols_of(const Buffer& x, int64_t c0, int64_t w) {
  const int64_t n = x.shape()[0], cols = x.shape()[1];
  const size_t es = dtype_size(x.dtype());
  Buffer out(x.dtype(), {n, w});
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(static_cast<char*>(out.data()) + i * w * es,
                static_cast<const char*>(x.data()) + (i * cols + c0) * es, w * es);
  return out;
}

// ---- qkv_prep --------------------------------------------------------------------------------
struct QkvCase {
  int64_t n, heads, kv, d, r;
  bool norm, slots;
};
// CUDA (qkv_prep.cu): 130 rows with norms in the warp form; 157 and 140 without in the plain form 8 values
// wide (partial and full rotary), 129 in the plain form a value wide (r / 2 not a multiple of 8); the others
// in the block form (1040-wide heads: the block form whatever the rows).
const QkvCase kQkvCases[] = {{1, 16, 8, 128, 128, true, true},   {7, 3, 1, 64, 64, true, false},
                             {33, 2, 2, 256, 64, true, true},    {5, 4, 4, 64, 64, false, false},
                             {130, 16, 8, 128, 128, true, true}, {3, 2, 1, 34, 18, false, true},
                             {2, 2, 1, 1040, 64, true, true},    {157, 4, 2, 64, 32, false, true},
                             {140, 3, 3, 64, 64, false, false},  {129, 2, 1, 48, 24, false, true}};

struct QkvInputs {
  Buffer qkv, qn, kn, cos, sin, slots, k0, v0;  // k0, v0: the K/V rows before the call
  int64_t m;
};

QkvInputs qkv_inputs(const QkvCase& c, DType act, uint32_t seed) {
  QkvInputs in;
  in.m = c.slots ? c.n + 9 : c.n;
  in.qkv = randn(act, {c.n, (c.heads + 2 * c.kv) * c.d}, seed, 2.0f);
  in.qn = uniform(act, {c.d}, seed + 1, 0.5f, 1.5f);
  in.kn = uniform(act, {c.d}, seed + 2, 0.5f, 1.5f);
  in.cos = Buffer(act, {c.n, c.r});
  in.sin = Buffer(act, {c.n, c.r});
  for (int64_t i = 0; i < c.n; ++i)
    for (int64_t j = 0; j < c.r; ++j) {
      const double a = (i + 3) * std::pow(1e4, -2.0 * (j % (c.r / 2)) / c.r);
      store_f32(in.cos.view(), i * c.r + j, static_cast<float>(std::cos(a)));
      store_f32(in.sin.view(), i * c.r + j, static_cast<float>(std::sin(a)));
    }
  std::vector<int32_t> perm(static_cast<size_t>(in.m));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed + 3));
  perm.resize(static_cast<size_t>(c.n));
  if (c.n >= 3) perm[1] = -1;  // a padding row: its k and v are not stored
  in.slots = i32({c.n}, perm);
  in.k0 = randn(act, {in.m, c.kv, c.d}, seed + 4);
  in.v0 = randn(act, {in.m, c.kv, c.d}, seed + 5);
  return in;
}

// {q_out, k_out, v_out} of qkv_prep (fused) or of rms_norm + rope + scatter_rows (unfused) on `be`.
std::vector<Buffer> run_qkv(Backend& be, const QkvCase& c, const QkvInputs& in, bool fused) {
  const DType act = in.qkv.dtype();
  auto dcos = upload_new(be, in.cos), dsin = upload_new(be, in.sin), dqn = upload_new(be, in.qn),
       dkn = upload_new(be, in.kn), dslots = upload_new(be, in.slots), dk = upload_new(be, in.k0),
       dv = upload_new(be, in.v0);
  auto q = be.alloc(act, {c.n, c.heads, c.d});
  if (fused) {
    auto dqkv = upload_new(be, in.qkv);
    be.qkv_prep(dqkv, c.norm ? &dqn.tensor() : nullptr, c.norm ? &dkn.tensor() : nullptr, 1e-6f, dcos, dsin,
                c.slots ? &dslots.tensor() : nullptr, q, dk, dv);
  } else {
    auto qs = upload_new(be, cols_of(in.qkv, 0, c.heads * c.d));
    auto ks = upload_new(be, cols_of(in.qkv, c.heads * c.d, c.kv * c.d));
    auto vs = upload_new(be, cols_of(in.qkv, (c.heads + c.kv) * c.d, c.kv * c.d));
    const Tensor qh = qs.tensor().reshaped({c.n, c.heads, c.d}), kh = ks.tensor().reshaped({c.n, c.kv, c.d});
    if (c.norm) {
      be.rms_norm(qh.reshaped({c.n * c.heads, c.d}), dqn, 1e-6f, RmsNormKind::kWeight,
                  qh.reshaped({c.n * c.heads, c.d}));
      be.rms_norm(kh.reshaped({c.n * c.kv, c.d}), dkn, 1e-6f, RmsNormKind::kWeight,
                  kh.reshaped({c.n * c.kv, c.d}));
    }
    be.rope(qh, dcos, dsin, q);
    be.rope(kh, dcos, dsin, kh);
    const Tensor vh = vs.tensor().reshaped({c.n, c.kv, c.d});
    if (c.slots) {  // scatter_rows of the rows whose slot is not negative
      const Buffer kx = fetch(be, kh), vx = fetch(be, vh);
      const size_t rb = static_cast<size_t>(c.kv * c.d) * dtype_size(act);
      std::vector<int32_t> keep_slots;
      Buffer kf(act, {c.n, c.kv, c.d}), vf(act, {c.n, c.kv, c.d});
      for (int64_t i = 0; i < c.n; ++i) {
        const int32_t sl = in.slots.as<int32_t>()[i];
        if (sl < 0) continue;
        const size_t r = keep_slots.size();
        std::memcpy(static_cast<char*>(kf.data()) + r * rb, static_cast<const char*>(kx.data()) + i * rb, rb);
        std::memcpy(static_cast<char*>(vf.data()) + r * rb, static_cast<const char*>(vx.data()) + i * rb, rb);
        keep_slots.push_back(sl);
      }
      const int64_t nk = static_cast<int64_t>(keep_slots.size());
      auto dks = upload_new(be, rows_of(kf, 0, nk)), dvs = upload_new(be, rows_of(vf, 0, nk));
      auto dkeep = upload_new(be, i32({nk}, keep_slots));
      be.scatter_rows(dks, dkeep, dk);
      be.scatter_rows(dvs, dkeep, dv);
    } else {
      be.copy(kh, dk);
      be.copy(vh, dv);
    }
  }
  std::vector<Buffer> r;
  r.push_back(fetch(be, q));
  r.push_back(fetch(be, dk));
  r.push_back(fetch(be, dv));
  return r;
}

std::string qkv_name(const QkvCase& c, DType act) {
  return cat("qkv_prep n ", c.n, " heads ", c.heads, "/", c.kv, " d ", c.d, " r ", c.r, c.norm ? " norm" : "",
             c.slots ? " slots " : " ", dtype_name(act));
}

void expect_qkv_fused_equals_unfused(Backend& be) {
  uint32_t seed = 7000;
  for (const QkvCase& c : kQkvCases)
    for (DType act : kActs) {
      const QkvInputs in = qkv_inputs(c, act, seed += 10);
      const auto f = run_qkv(be, c, in, true), u = run_qkv(be, c, in, false);
      for (int o = 0; o < 3; ++o) EXPECT_TRUE(Exact(u[o], f[o])) << qkv_name(c, act) << " output " << o;
    }
}

// ---- add_rms_norm ----------------------------------------------------------------------------
struct NormCase {
  int64_t n, d;
};
// CUDA (rms_norm.cu): calls of >= 128 rows of d % 8 == 0 in the warp form ({130, 64}, {200, 1024}), the
// others in the block form, 9001 as add then rms_norm.
const NormCase kNormCases[] = {{1, 1024}, {7, 1000}, {33, 4096}, {2, 9001},
                               {130, 64}, {3, 1001}, {200, 1024}};

// {h after, out}.
std::vector<Buffer> run_add_norm(Backend& be, const Buffer& h, const Buffer& delta, const Buffer& w,
                                 RmsNormKind kind, bool fused) {
  auto dh = upload_new(be, h), dd = upload_new(be, delta), dw = upload_new(be, w);
  auto out = be.alloc(h.dtype(), h.shape());
  if (fused) {
    be.add_rms_norm(dh, dd, dw, 1e-5f, kind, out);
  } else {
    be.add(dh, dd, dh);
    be.rms_norm(dh, dw, 1e-5f, kind, out);
  }
  std::vector<Buffer> r;
  r.push_back(fetch(be, dh));
  r.push_back(fetch(be, out));
  return r;
}

void expect_add_norm_fused_equals_unfused(Backend& be) {
  uint32_t seed = 8000;
  for (const NormCase& c : kNormCases)
    for (DType act : kActs)
      for (RmsNormKind kind : {RmsNormKind::kWeight, RmsNormKind::kOnePlusWeight}) {
        Buffer h = randn(act, {c.n, c.d}, seed++, 3.0f), delta = randn(act, {c.n, c.d}, seed++);
        Buffer w = uniform(act, {c.d}, seed++, 0.5f, 1.5f);
        const auto f = run_add_norm(be, h, delta, w, kind, true),
                   u = run_add_norm(be, h, delta, w, kind, false);
        for (int o = 0; o < 2; ++o)
          EXPECT_TRUE(Exact(u[o], f[o])) << cat("add_rms_norm [", c.n, ", ", c.d, "] ", dtype_name(act),
                                                kind == RmsNormKind::kWeight ? " w" : " 1+w", " output ", o);
      }
}

// ---- glu -------------------------------------------------------------------------------------
const ActKind kGluKinds[] = {ActKind::kSilu, ActKind::kGelu, ActKind::kGeluTanh, ActKind::kQuickGelu,
                             ActKind::kRelu};

Buffer run_glu(Backend& be, const Buffer& gu, ActKind kind, bool fused) {
  const int64_t n = gu.shape()[0], d = gu.shape()[1] / 2;
  auto out = be.alloc(gu.dtype(), {n, d});
  if (fused) {
    auto dgu = upload_new(be, gu);
    be.glu(dgu, kind, out);
  } else {
    auto g = upload_new(be, cols_of(gu, 0, d)), u = upload_new(be, cols_of(gu, d, d));
    be.act_mul(g, u, kind, out);
  }
  return fetch(be, out);
}

void expect_glu_fused_equals_unfused(Backend& be) {
  uint32_t seed = 9000;
  // CUDA: calls of >= 128 rows of d % 8 == 0 in 8-wide vectors ({130, 1024}), the others one element each.
  for (const Shape& s : {Shape{1, 6144}, Shape{7, 66}, Shape{33, 8192}, Shape{130, 1024}})
    for (DType act : kActs)
      for (ActKind kind : kGluKinds) {
        Buffer gu = randn(act, s, seed++, 3.0f);
        EXPECT_TRUE(Exact(run_glu(be, gu, kind, false), run_glu(be, gu, kind, true)))
            << cat("glu ", act_kind_name(kind), " ", shape_str(s), " ", dtype_name(act));
      }
}

TEST(FusedOps, CpuEqualsUnfused) {
  auto be = make_cpu_backend();
  expect_qkv_fused_equals_unfused(*be);
  expect_add_norm_fused_equals_unfused(*be);
  expect_glu_fused_equals_unfused(*be);
}

// CUDA: fused == CUDA unfused, and CUDA fused == CPU fused, bit for bit.
TEST_F(CudaContract, FusedOps) {
  expect_qkv_fused_equals_unfused(dev());
  expect_add_norm_fused_equals_unfused(dev());
  expect_glu_fused_equals_unfused(dev());
  uint32_t seed = 9500;
  for (const QkvCase& c : kQkvCases)
    for (DType act : kActs) {
      const QkvInputs in = qkv_inputs(c, act, seed += 10);
      const auto ref = run_qkv(cpu(), c, in, true), got = run_qkv(dev(), c, in, true);
      for (int o = 0; o < 3; ++o)
        EXPECT_TRUE(Exact(ref[o], got[o])) << qkv_name(c, act) << " cuda vs cpu, output " << o;
    }
  for (const NormCase& c : kNormCases)
    for (DType act : kActs) {
      Buffer h = randn(act, {c.n, c.d}, seed++, 3.0f), delta = randn(act, {c.n, c.d}, seed++);
      Buffer w = uniform(act, {c.d}, seed++, 0.5f, 1.5f);
      const auto ref = run_add_norm(cpu(), h, delta, w, RmsNormKind::kWeight, true);
      const auto got = run_add_norm(dev(), h, delta, w, RmsNormKind::kWeight, true);
      for (int o = 0; o < 2; ++o) EXPECT_TRUE(Exact(ref[o], got[o])) << "add_rms_norm cuda vs cpu " << c.d;
    }
  for (ActKind kind : kGluKinds) {
    Buffer gu = randn(DType::BF16, {9, 6144}, seed++, 3.0f);
    EXPECT_TRUE(Close(run_glu(cpu(), gu, kind, true), run_glu(dev(), gu, kind, true),
                      cat("glu ", act_kind_name(kind), " cuda vs cpu")));
  }
}

TEST_F(CudaContract, FusedOpsPlantedControl) {
  const QkvCase c = kQkvCases[0];
  QkvInputs in = qkv_inputs(c, DType::BF16, 123);
  const auto got = run_qkv(dev(), c, in, true);
  in.qn = poke(in.qn, 5, 0.25f);  // q_norm weight 5 changed: q differs, k and v do not
  const auto ref = run_qkv(cpu(), c, in, true);
  EXPECT_TRUE(Differs(ref[0], got[0])) << "q_norm[5] + 0.25";
  EXPECT_TRUE(Exact(ref[1], got[1]));
  Buffer h = randn(DType::BF16, {3, 1024}, 5, 3.0f), delta = randn(DType::BF16, {3, 1024}, 6);
  Buffer w = uniform(DType::BF16, {1024}, 7, 0.5f, 1.5f);
  const auto f = run_add_norm(dev(), h, delta, w, RmsNormKind::kWeight, true);
  auto cpu_run = [&](const Buffer& dd) {
    return std::move(run_add_norm(cpu(), h, dd, w, RmsNormKind::kWeight, true)[1]);
  };
  EXPECT_TRUE(Differs(cpu_run(visible_bump(delta, 1024, 2048, cpu_run)), f[1])) << "delta row 1 + 1 ulp";
}

}  // namespace
