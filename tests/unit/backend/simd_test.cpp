// The CPU ops' AVX2 paths (backend/cpu/simd.h) and their blocked loops give the bits of the plain statements:
// attention row by row (dot_f32 scores, the max, exp and l in key order, acc += rnd(p) * v in key order) and
// linear element by element (dot_f32 / dot_f32_bf16, + bias, one rounding), with the paths on and off.
// Controls: a reference that sums the dot in one running sum instead of eight lanes must differ from the
// op somewhere on the same inputs, so a change of order would be caught.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/common.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/simd.h"
#include "backend/test_hooks.h"
#include "op_test_util.h"

using namespace tf;
using namespace tf::optest;

namespace {

struct SimdMode {  // the paths capped at a level (0 none, 1 AVX2, 2 AVX-512) for one scope; production's
                   // after
  explicit SimdMode(int level) { has = test_hooks::set_cpu_simd(level); }
  ~SimdMode() { test_hooks::set_cpu_simd(-1); }
  bool has = false;  // the CPU has the level
};

float dot_one_sum(const float* a, const float* b, int64_t n) {  // the control's order
  float s = 0.0f;
  for (int64_t k = 0; k < n; ++k) s += a[k] * b[k];
  return s;
}

// Row-at-a-time attention over contiguous f32 keys [n_k, kv_heads, d], the statements of attention.cpp.
std::vector<float> attention_rows(const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, const std::vector<int32_t>& ranges,
                                  int64_t n_q, int64_t heads, int64_t kv_heads, int64_t d, float scale,
                                  DType act, bool one_sum = false) {
  std::vector<float> out(static_cast<size_t>(n_q * heads * d)), acc(static_cast<size_t>(d)), p;
  for (int64_t i = 0; i < n_q; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kh = h / (heads / kv_heads), b = ranges[2 * i], e = ranges[2 * i + 1];
      const float* qr = q.data() + (i * heads + h) * d;
      p.assign(static_cast<size_t>(e - b), 0.0f);
      float m = -INFINITY, l = 0.0f;
      for (int64_t j = b; j < e; ++j) {
        const float* kr = k.data() + (j * kv_heads + kh) * d;
        p[j - b] = (one_sum ? dot_one_sum(qr, kr, d) : cpu::dot_f32(qr, kr, d)) * scale;
        m = std::max(m, p[j - b]);
      }
      for (float& x : p) {
        x = fm::exp(x - m);
        l += x;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = b; j < e; ++j) {
        const float pj = cpu::rnd(p[j - b], act);
        for (int64_t c = 0; c < d; ++c) acc[c] += pj * v[(j * kv_heads + kh) * d + c];
      }
      for (int64_t c = 0; c < d; ++c) out[(i * heads + h) * d + c] = cpu::rnd(acc[c] / l, act);
    }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct AttnCase {
  int64_t n_q, n_k, heads, kv_heads, d;
  int kind;  // 0 causal (the last n_q positions), 1 images of 37 keys, 2 random ranges
};

std::vector<int32_t> make_ranges(const AttnCase& c, uint32_t seed) {
  std::vector<int32_t> r(static_cast<size_t>(2 * c.n_q));
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < c.n_q; ++i) {
    int64_t b = 0, e = c.n_k - c.n_q + i + 1;
    if (c.kind == 1) {
      b = std::min<int64_t>(i / 37 * 37, c.n_k - 1);
      e = std::min<int64_t>(b + 37, c.n_k);
    } else if (c.kind == 2) {
      b = static_cast<int64_t>(rng() % static_cast<uint32_t>(c.n_k));
      e = b + 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(c.n_k - b));
    }
    r[2 * i] = static_cast<int32_t>(b);
    r[2 * i + 1] = static_cast<int32_t>(e);
  }
  return r;
}

TEST(OpSimd, AttentionEqualsTheRowAtATimeStatements) {
  auto be = make_cpu_backend();
  const AttnCase cases[] = {{1, 1, 2, 1, 8, 0},     {9, 9, 4, 2, 12, 0},     {70, 70, 4, 4, 64, 0},
                            {5, 203, 8, 2, 128, 0}, {111, 111, 4, 4, 64, 1}, {40, 150, 6, 3, 72, 2},
                            {33, 90, 2, 1, 16, 2},  {17, 60, 4, 2, 20, 2}};
  bool control_caught = false;
  uint32_t seed = 700;
  for (DType act : {DType::BF16, DType::F32})
    for (const AttnCase& c : cases) {
      Buffer q = randn(act, {c.n_q, c.heads, c.d}, seed++), k = randn(act, {c.n_k, c.kv_heads, c.d}, seed++),
             v = randn(act, {c.n_k, c.kv_heads, c.d}, seed++);
      const std::vector<int32_t> ranges = make_ranges(c, seed++);
      Buffer rg(DType::I32, {c.n_q, 2});
      std::memcpy(rg.data(), ranges.data(), ranges.size() * 4);
      auto dq = upload_new(*be, q), dk = upload_new(*be, k), dv = upload_new(*be, v),
           dr = upload_new(*be, rg);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      const auto qf = to_f32_vector(q.view()), kf = to_f32_vector(k.view()), vf = to_f32_vector(v.view());
      const auto ref = attention_rows(qf, kf, vf, ranges, c.n_q, c.heads, c.kv_heads, c.d, scale, act);
      SCOPED_TRACE("n_q=" + std::to_string(c.n_q) + " n_k=" + std::to_string(c.n_k) +
                   " d=" + std::to_string(c.d) + " kind=" + std::to_string(c.kind));
      for (int on : {0, 1, 2}) {
        SimdMode mode(on);
        auto out = be->alloc(act, {c.n_q, c.heads, c.d});
        be->attention(dq, dk, dv, dr, scale, out);
        EXPECT_TRUE(same_bits(host_f32(*be, out), ref)) << "simd " << on;
      }
      const auto control =
          attention_rows(qf, kf, vf, ranges, c.n_q, c.heads, c.kv_heads, c.d, scale, act, /*one_sum=*/true);
      control_caught = control_caught || !same_bits(control, ref);
    }
  EXPECT_TRUE(control_caught) << "a one-sum dot order went unseen";
}

// Paged: two segments whose blocks sit in the pool in a shuffled order; each row equals the row-at-a-time
// statements over its segment's keys laid out contiguously, whether a segment's keys are gathered first or
// read from the pool a block at a time.
TEST(OpSimd, PagedAttentionEqualsTheRowAtATimeStatements) {
  auto be = make_cpu_backend();
  const int64_t heads = 4, kv_heads = 2, d = 64, B = kKvBlock, n_blocks = 6;
  const int64_t seg_keys[2] = {150, 100}, seg_q[2] = {21, 1};  // a prefill chunk, a decode row
  const int32_t table[2][3] = {{4, 0, 5}, {2, 3, 1}};
  const DType act = DType::BF16;
  Buffer kp = randn(act, {n_blocks * B, kv_heads, d}, 801), vp = randn(act, {n_blocks * B, kv_heads, d}, 802);
  const int64_t n_q = seg_q[0] + seg_q[1];
  Buffer q = randn(act, {n_q, heads, d}, 803), tb(DType::I32, {2, 3}), sr(DType::I32, {3}),
         rg(DType::I32, {n_q, 2});
  std::memcpy(tb.data(), table, sizeof(table));
  const int32_t seg_rows[3] = {0, static_cast<int32_t>(seg_q[0]), static_cast<int32_t>(n_q)};
  std::memcpy(sr.data(), seg_rows, sizeof(seg_rows));
  std::vector<int32_t> ranges;
  for (int s = 0; s < 2; ++s)
    for (int64_t i = 0; i < seg_q[s]; ++i) {
      ranges.push_back(0);
      ranges.push_back(static_cast<int32_t>(seg_keys[s] - seg_q[s] + i + 1));
    }
  std::memcpy(rg.data(), ranges.data(), ranges.size() * 4);
  const float scale = 0.125f;
  std::vector<float> ref;
  const auto kpf = to_f32_vector(kp.view()), vpf = to_f32_vector(vp.view()), qf = to_f32_vector(q.view());
  const int64_t row = kv_heads * d;
  for (int s = 0; s < 2; ++s) {  // the segment's keys gathered in logical order
    std::vector<float> ks, vs;
    for (int64_t j = 0; j < seg_keys[s]; ++j) {
      const int64_t at = (table[s][j / B] * B + j % B) * row;
      ks.insert(ks.end(), kpf.begin() + at, kpf.begin() + at + row);
      vs.insert(vs.end(), vpf.begin() + at, vpf.begin() + at + row);
    }
    const std::vector<float> qs(qf.begin() + seg_rows[s] * heads * d,
                                qf.begin() + seg_rows[s + 1] * heads * d);
    const std::vector<int32_t> rs(ranges.begin() + 2 * seg_rows[s], ranges.begin() + 2 * seg_rows[s + 1]);
    const auto part = attention_rows(qs, ks, vs, rs, seg_q[s], heads, kv_heads, d, scale, act);
    ref.insert(ref.end(), part.begin(), part.end());
  }
  auto dq = upload_new(*be, q), dk = upload_new(*be, kp), dv = upload_new(*be, vp), dt = upload_new(*be, tb),
       ds = upload_new(*be, sr), dr = upload_new(*be, rg);
  struct RestoreTiles {
    ~RestoreTiles() { test_hooks::set_cpu_paged_tile_rows(-1); }
  } restore;
  // Every segment gathered (0), every segment read in place (1000), and the default (the decode row in
  // place, the 21-row chunk gathered).
  for (int64_t tile_rows : {int64_t{0}, int64_t{1000}, int64_t{-1}})
    for (int on : {0, 1, 2}) {
      test_hooks::set_cpu_paged_tile_rows(tile_rows);
      SimdMode mode(on);
      auto out = be->alloc(act, {n_q, heads, d});
      be->paged_attention(dq, dk, dv, dt, ds, dr, scale, out);
      EXPECT_TRUE(same_bits(host_f32(*be, out), ref)) << "simd " << on << ", tile rows " << tile_rows;
    }
}

struct LinCase {
  int64_t n, in_f, out_f;
  DType act, wdt;
  bool bias;
};

TEST(OpSimd, LinearEqualsTheDotOrder) {
  auto be = make_cpu_backend();
  const LinCase cases[] = {
      {1, 64, 33, DType::BF16, DType::BF16, false},  {2, 13, 5, DType::BF16, DType::BF16, true},
      {3, 300, 17, DType::F32, DType::F32, true},    {5, 1024, 20, DType::BF16, DType::BF16, true},
      {33, 72, 64, DType::BF16, DType::BF16, false}, {40, 20, 9, DType::F32, DType::BF16, false},
      {7, 8, 4, DType::BF16, DType::F32, true},      {66, 257, 35, DType::F32, DType::F32, false}};
  bool control_caught = false;
  uint32_t seed = 900;
  for (const LinCase& c : cases) {
    Buffer x = randn(c.act, {c.n, c.in_f}, seed++), w = randn(c.wdt, {c.out_f, c.in_f}, seed++, 0.2f),
           b = randn(c.wdt, {c.out_f}, seed++);
    const auto xf = to_f32_vector(x.view()), wf = to_f32_vector(w.view()), bf = to_f32_vector(b.view());
    std::vector<float> ref(static_cast<size_t>(c.n * c.out_f)), control(ref.size());
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t j = 0; j < c.out_f; ++j) {
        float s = cpu::dot_f32(xf.data() + i * c.in_f, wf.data() + j * c.in_f, c.in_f);
        float t = dot_one_sum(xf.data() + i * c.in_f, wf.data() + j * c.in_f, c.in_f);
        if (c.bias) s += bf[j], t += bf[j];
        ref[i * c.out_f + j] = cpu::rnd(s, c.act);
        control[i * c.out_f + j] = cpu::rnd(t, c.act);
      }
    control_caught = control_caught || !same_bits(control, ref);
    auto dx = upload_new(*be, x), dw = upload_new(*be, w), db = upload_new(*be, b);
    Tensor bt = db.tensor();
    SCOPED_TRACE("n=" + std::to_string(c.n) + " in=" + std::to_string(c.in_f) +
                 " out=" + std::to_string(c.out_f));
    for (int on : {0, 1, 2}) {
      SimdMode mode(on);
      auto out = be->alloc(c.act, {c.n, c.out_f});
      be->linear(dx, dw, c.bias ? &bt : nullptr, out);
      EXPECT_TRUE(same_bits(host_f32(*be, out), ref)) << "simd " << on;
    }
  }
  EXPECT_TRUE(control_caught) << "a one-sum dot order went unseen";
}

// bf16 rows to f32 (load_f32_row): every bit pattern's shift, eight at a time and in the tail, both ways.
TEST(OpSimd, Bf16RowsConvertExactly) {
  std::vector<uint16_t> all(65536 + 5);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 40503u);  // odd: a permutation
  for (int on : {0, 1, 2}) {
    SimdMode mode(on);
    for (int64_t n : {int64_t{3}, int64_t{8}, int64_t{13}, static_cast<int64_t>(all.size())}) {
      std::vector<float> got(static_cast<size_t>(n), -1.0f);
      cpu::bf16_row_to_f32(all.data(), n, got.data());
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &got[static_cast<size_t>(i)], 4);
        ASSERT_EQ(bits, uint32_t{all[static_cast<size_t>(i)]} << 16)
            << "simd " << on << ", n " << n << ", i " << i;
      }
    }
  }
}

// exp_row against fm::exp one value at a time, in both fmath modes: every 4,099th float of the whole range
// (NaNs, infinities, subnormals, both signs) and every 4,093rd float of [-30, 0] (attention's x - max), from
// unaligned starts and odd lengths, in place and not. Control: without the halfway test some lane must differ
// (glibc's expf, 2^-33 from e^x before its rounding, lands on the other side of a halfway point from the
// vector's own double for about one value in 2^8; exp in double is too close to e^x to show it).
TEST(OpSimd, ExpRowEqualsTheScalarCalls) {
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) {
    float x;
    const uint32_t u = static_cast<uint32_t>(b);
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  for (uint32_t u = 0x80000000u; u <= 0xC1F00000u; u += 4093) {  // -0 down to -30
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  const float sub = 0.75f;
  for (const CpuTranscendentals tm : {CpuTranscendentals::kLibm, CpuTranscendentals::kDouble}) {
    set_cpu_transcendentals(tm);
    std::vector<float> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) want[i] = fm::exp(xs[i] - sub);
    for (int on : {0, 1, 2}) {
      SimdMode mode(on);
      for (size_t start : {size_t{0}, size_t{3}}) {
        const int64_t n = static_cast<int64_t>(xs.size() - start - 5);
        std::vector<float> got(xs.begin(), xs.end());
        cpu::exp_row(got.data() + start, sub, n, got.data() + start);  // in place
        for (int64_t i = 0; i < n; ++i) {
          const size_t at = start + static_cast<size_t>(i);
          ASSERT_EQ(std::memcmp(&got[at], &want[at], 4), 0)
              << "simd " << on << ", x " << xs[at] << ": " << got[at] << " vs " << want[at];
        }
      }
      if (!mode.has || on == 0 || tm != CpuTranscendentals::kLibm) continue;
      std::vector<float> loose(xs.size());
      cpu::exp_row(xs.data(), sub, static_cast<int64_t>(xs.size()), loose.data(), /*guard=*/false);
      size_t differ = 0;
      for (size_t i = 0; i < xs.size(); ++i) differ += std::memcmp(&loose[i], &want[i], 4) != 0;
      EXPECT_GT(differ, 0u) << "control: the unguarded vector path should differ somewhere";
    }
  }
  set_cpu_transcendentals(CpuTranscendentals::kLibm);
}

TEST(OpSimd, TheHookTurnsThePathsOnAndOff) {
  {
    SimdMode off(0);
    EXPECT_EQ(cpu::simd_level(), 0);
    EXPECT_FALSE(cpu::simd_on());
  }
  {
    SimdMode avx2(1);
    EXPECT_EQ(cpu::simd_level(), avx2.has ? 1 : 0);  // AVX2 wherever the CPU has it
  }
  SimdMode avx512(2);
  if (avx512.has)
    EXPECT_EQ(cpu::simd_level(), 2);
  else
    EXPECT_LE(cpu::simd_level(), 1);  // the CPU's best below AVX-512
}

}  // namespace
