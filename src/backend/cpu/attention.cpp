// attention: per (query row, head) an f32 softmax over the row's key range with the unnormalised
// probabilities rounded to act before P·V (flash SDPA), keys visited in increasing order. Independent of
// batch composition and chunking: a decode row and the same row inside a prefill chunk see the same keys in
// the same order. paged_attention gathers each segment's keys from the block pool in logical order and
// runs the same row loop, so a row's bits are those attention() gives over its keys laid out contiguously.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"
#include "backend/op_checks.h"

namespace tf::cpu {
namespace {

// Rows `rows` of q attend keys kf/vf ([n_keys, kv_heads, d] f32) over ranges (pairs per query row).
void attend_rows(ThreadPool& pool, const Tensor& q, const float* kf, const float* vf, int64_t kv_heads,
                 const int32_t* ranges, const std::vector<int64_t>& rows, float scale, const Tensor& out) {
  const int64_t heads = q.dim(1), d = q.dim(2), n = static_cast<int64_t>(rows.size());
  const int64_t group = heads / kv_heads;
  pool.parallel_for(n * heads, [&](int64_t t0, int64_t t1) {
    std::vector<float> qf(static_cast<size_t>(d)), acc(static_cast<size_t>(d)), p;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = rows[static_cast<size_t>(t / heads)], h = t % heads, kh = h / group;
      const int64_t b = ranges[2 * i], e = ranges[2 * i + 1];
      load_f32_row(q, (i * heads + h) * d, d, qf.data());
      p.resize(static_cast<size_t>(e - b));
      float m = -INFINITY;
      for (int64_t j = b; j < e; ++j) {
        const float s = dot_f32(qf.data(), kf + (j * kv_heads + kh) * d, d) * scale;
        p[j - b] = s;
        m = std::max(m, s);
      }
      float l = 0.0f;
      for (int64_t j = 0; j < e - b; ++j) {
        p[j] = fm::exp(p[j] - m);
        l += p[j];
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      const DType act = q.dtype;
      for (int64_t j = b; j < e; ++j) {
        const float* vr = vf + (j * kv_heads + kh) * d;
        const float pj = rnd(p[j - b], act);
        for (int64_t c = 0; c < d; ++c) acc[c] += pj * vr[c];
      }
      for (int64_t c = 0; c < d; ++c) acc[c] = acc[c] / l;
      store_f32_row(out, (i * heads + h) * d, d, acc.data());
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
