// attention: per (query row, head) an f32 softmax over the row's key range with the unnormalised
// probabilities rounded to act before P·V (flash SDPA), keys visited in increasing order. Independent of
// batch composition and chunking: a decode row and the same row inside a prefill chunk see the same keys in
// the same order. paged_attention gathers each segment's keys from the block pool in logical order and
// runs the same row loop, so a row's bits are those attention() gives over its keys laid out contiguously.
#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"
#include "backend/op_checks.h"

namespace tf::cpu {
namespace {

// The members of one block: (query row, head) pairs of one kv head, each with its row's key range [b, e).
constexpr int64_t kBlock = 8;
struct BlockRow {
  const float* q;  // [d]
  int64_t b, e;
  float* p;    // [e - b]: the scores, then the unnormalised probabilities
  float* acc;  // [d]
  float l = 0.0f;
};

// s_j = dot_f32(q, k_j) * scale for key j of row x.
inline void score_one(BlockRow& x, const float* kj, int64_t j, int64_t d, float scale) {
  if (j >= x.b && j < x.e) x.p[j - x.b] = dot_f32(x.q, kj, d) * scale;
}

// acc += rnd(p_j) * v_j for key j of row x.
inline void pv_one(BlockRow& x, const float* vj, int64_t j, int64_t d, DType act) {
  if (j < x.b || j >= x.e) return;
  const float pj = rnd(x.p[j - x.b], act);
  for (int64_t c = 0; c < d; ++c) x.acc[c] += pj * vj[c];
}

#if TF_CPU_AVX2
// Keys [jb, je) of the block's rows, four keys at a time where a row takes all four (each row's keys
// still in increasing order, each score dot_f32's), else one at a time. Key j's row: k0 + j * stride.
TF_AVX2 void scores_avx2(BlockRow* br, int64_t nr, const float* k0, int64_t stride, int64_t d, int64_t jb,
                         int64_t je, float scale) {
  int64_t j = jb;
  for (; j + 4 <= je; j += 4) {
    const float* kj = k0 + j * stride;
    for (int64_t r = 0; r < nr; ++r) {
      BlockRow& x = br[r];
      if (x.b <= j && j + 4 <= x.e) {
        _mm_storeu_ps(x.p + (j - x.b), _mm_mul_ps(avx2::dot4(x.q, kj, stride, d), _mm_set1_ps(scale)));
      } else {
        for (int u = 0; u < 4; ++u) score_one(x, kj + u * stride, j + u, d, scale);
      }
    }
  }
  for (; j < je; ++j)
    for (int64_t r = 0; r < nr; ++r) score_one(br[r], k0 + j * stride, j, d, scale);
}

// acc += rnd(p_j) * v_j over keys [jb, je), four keys per pass over acc where a row takes all four (each
// element's additions still in increasing j).
TF_AVX2 void pv_avx2(BlockRow* br, int64_t nr, const float* v0, int64_t stride, int64_t d, int64_t jb,
                     int64_t je, DType act) {
  int64_t j = jb;
  for (; j + 4 <= je; j += 4) {
    const float* vj = v0 + j * stride;
    for (int64_t r = 0; r < nr; ++r) {
      BlockRow& x = br[r];
      if (x.b <= j && j + 4 <= x.e) {
        const float* pj = x.p + (j - x.b);
        const __m256 p0 = _mm256_set1_ps(rnd(pj[0], act)), p1 = _mm256_set1_ps(rnd(pj[1], act)),
                     p2 = _mm256_set1_ps(rnd(pj[2], act)), p3 = _mm256_set1_ps(rnd(pj[3], act));
        for (int64_t c = 0; c < d; c += 8) {
          __m256 a = _mm256_loadu_ps(x.acc + c);
          a = _mm256_add_ps(a, _mm256_mul_ps(p0, _mm256_loadu_ps(vj + c)));
          a = _mm256_add_ps(a, _mm256_mul_ps(p1, _mm256_loadu_ps(vj + stride + c)));
          a = _mm256_add_ps(a, _mm256_mul_ps(p2, _mm256_loadu_ps(vj + 2 * stride + c)));
          a = _mm256_add_ps(a, _mm256_mul_ps(p3, _mm256_loadu_ps(vj + 3 * stride + c)));
          _mm256_storeu_ps(x.acc + c, a);
        }
      } else {
        for (int u = 0; u < 4; ++u) pv_one(x, vj + u * stride, j + u, d, act);
      }
    }
  }
  for (; j < je; ++j)
    for (int64_t r = 0; r < nr; ++r) pv_one(br[r], v0 + j * stride, j, d, act);
}
#endif

// Rows `rows` of q attend keys kf/vf ([n_keys, kv_heads, d] f32) over ranges (pairs per query row), in
// blocks of (row, head) pairs that share a kv head (a few rows times the query heads of the group), so that
// each key's K and V rows are read once per block, not once per row and head. Every row and head runs the
// row-at-a-time statements: s_j = dot_f32(q, k_j) * scale, m = max(m, s_j) in increasing j, p_j = exp(s_j -
// m) and l += p_j in increasing j, acc += rnd(p_j) * v_j in increasing j, out = acc / l; the AVX2 paths
// (simd.h) compute the same statements eight lanes at a time.
void attend_rows(ThreadPool& pool, const Tensor& q, const float* kf, const float* vf, int64_t kv_heads,
                 const int32_t* ranges, const std::vector<int64_t>& rows, float scale, const Tensor& out) {
  const int64_t heads = q.dim(1), d = q.dim(2), n = static_cast<int64_t>(rows.size());
  const int64_t group = heads / kv_heads, stride = kv_heads * d;
  // A block: up to kBlock / group rows (at least one) times the group's query heads, which share the keys.
  const int64_t block_rows = std::max<int64_t>(1, kBlock / group), members = block_rows * group;
  const int64_t n_blocks = (n + block_rows - 1) / block_rows;
  const DType act = q.dtype;
  const bool vec = TF_CPU_AVX2 && simd_on() && d % 8 == 0;
  pool.parallel_for(n_blocks * kv_heads, [&](int64_t t0, int64_t t1) {
    std::vector<float> qf(static_cast<size_t>(members * d)), acc(qf.size());
    std::vector<std::vector<float>> p(static_cast<size_t>(members));
    std::vector<BlockRow> br(static_cast<size_t>(members));
    std::vector<int64_t> at(static_cast<size_t>(members));  // each member's row of q and out: i * heads + h
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t / kv_heads * block_rows, kh = t % kv_heads;
      const int64_t nr = std::min(block_rows, n - r0) * group;  // the block's members
      int64_t jb = INT64_MAX, je = 0;
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t i = rows[static_cast<size_t>(r0 + r / group)], h = kh * group + r % group;
        const int64_t b = ranges[2 * i], e = ranges[2 * i + 1];
        at[r] = i * heads + h;
        load_f32_row(q, at[r] * d, d, qf.data() + r * d);
        p[r].resize(static_cast<size_t>(e - b));
        br[r] = BlockRow{qf.data() + r * d, b, e, p[r].data(), acc.data() + r * d};
        jb = std::min(jb, b);
        je = std::max(je, e);
      }
      const float* k0 = kf + kh * d;  // key j of this head: k0 + j * stride
      const float* v0 = vf + kh * d;
#if TF_CPU_AVX2
      if (vec) scores_avx2(br.data(), nr, k0, stride, d, jb, je, scale);
#endif
      if (!vec)
        for (int64_t j = jb; j < je; ++j)
          for (int64_t r = 0; r < nr; ++r) score_one(br[r], k0 + j * stride, j, d, scale);
      for (int64_t r = 0; r < nr; ++r) {
        float* pr = br[r].p;
        const int64_t nk = br[r].e - br[r].b;
        float m = -INFINITY, l = 0.0f;
        for (int64_t j = 0; j < nk; ++j) m = std::max(m, pr[j]);
        for (int64_t j = 0; j < nk; ++j) {
          pr[j] = fm::exp(pr[j] - m);
          l += pr[j];
        }
        br[r].l = l;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
#if TF_CPU_AVX2
      if (vec) pv_avx2(br.data(), nr, v0, stride, d, jb, je, act);
#endif
      if (!vec)
        for (int64_t j = jb; j < je; ++j)
          for (int64_t r = 0; r < nr; ++r) pv_one(br[r], v0 + j * stride, j, d, act);
      for (int64_t r = 0; r < nr; ++r) {
        float* a = br[r].acc;
        for (int64_t c = 0; c < d; ++c) a[c] = a[c] / br[r].l;
        store_f32_row(out, at[r] * d, d, a);
      }
    }
  });
}

}  // namespace

void attention(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges,
               float scale, const Tensor& out) {
  const opcheck::AttentionDims a = opcheck::attention(q, k, v, key_ranges, out);
  const int32_t* ranges = key_ranges.as<const int32_t>();
  int64_t k_hi = 0;
  for (int64_t i = 0; i < a.n_q; ++i) {
    TF_CHECK(ranges[2 * i] >= 0 && ranges[2 * i] < ranges[2 * i + 1] && ranges[2 * i + 1] <= a.n_k);
    k_hi = std::max<int64_t>(k_hi, ranges[2 * i + 1]);
  }
  // Keys and values used by any row, as f32 (exact conversion); [k_hi, kv_heads, d].
  std::vector<float> kf(static_cast<size_t>(k_hi * a.kv_heads * a.d)), vf(kf.size());
  load_f32_row(k, 0, k_hi * a.kv_heads * a.d, kf.data());
  load_f32_row(v, 0, k_hi * a.kv_heads * a.d, vf.data());
  std::vector<int64_t> rows(static_cast<size_t>(a.n_q));
  for (int64_t i = 0; i < a.n_q; ++i) rows[static_cast<size_t>(i)] = i;
  attend_rows(pool, q, kf.data(), vf.data(), a.kv_heads, ranges, rows, scale, out);
}

void paged_attention(ThreadPool& pool, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                     const Tensor& tables, const Tensor& seg_rows, const Tensor& key_ranges, float scale,
                     const Tensor& out) {
  const opcheck::AttentionDims a =
      opcheck::paged_attention(q, k_pool, v_pool, tables, seg_rows, key_ranges, out);
  const int32_t* ranges = key_ranges.as<const int32_t>();
  const int32_t* sr = seg_rows.as<const int32_t>();
  const int32_t* tab = tables.as<const int32_t>();
  const int64_t n_seg = tables.dim(0), max_blocks = tables.dim(1), B = kKvBlock;
  const int64_t row_elems = a.kv_heads * a.d;
  TF_CHECK(sr[0] == 0 && sr[n_seg] == a.n_q);
  std::vector<float> kf, vf;
  std::vector<int64_t> rows;
  for (int64_t s = 0; s < n_seg; ++s) {
    TF_CHECK(sr[s] <= sr[s + 1]);
    if (sr[s] == sr[s + 1]) continue;
    int64_t n = 0;  // this segment's keys [0, n) in logical order, as f32: [n, kv_heads, d]
    rows.clear();
    for (int64_t i = sr[s]; i < sr[s + 1]; ++i) {
      TF_CHECK(ranges[2 * i] >= 0 && ranges[2 * i] < ranges[2 * i + 1] &&
               ranges[2 * i + 1] <= max_blocks * B);
      n = std::max<int64_t>(n, ranges[2 * i + 1]);
      rows.push_back(i);
    }
    kf.resize(static_cast<size_t>(n * row_elems));
    vf.resize(kf.size());
    for (int64_t j0 = 0; j0 < n; j0 += B) {
      const int32_t blk = tab[s * max_blocks + j0 / B];
      TF_CHECK(blk >= 0 && (blk + 1) * B <= a.n_k);
      const int64_t m = std::min(B, n - j0);
      load_f32_row(k_pool, blk * B * row_elems, m * row_elems, kf.data() + j0 * row_elems);
      load_f32_row(v_pool, blk * B * row_elems, m * row_elems, vf.data() + j0 * row_elems);
    }
    attend_rows(pool, q, kf.data(), vf.data(), a.kv_heads, ranges, rows, scale, out);
  }
}

}  // namespace tf::cpu
