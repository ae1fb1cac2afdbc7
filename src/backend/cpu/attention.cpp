// attention: per (query row, head) an f32 softmax over the row's key range with the unnormalised
// probabilities rounded to act before P·V (flash SDPA), keys visited in increasing order. Independent of
// batch composition and chunking: a decode row and the same row inside a prefill chunk see the same keys in
// the same order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"
#include "backend/op_checks.h"

namespace tf::cpu {

void attention(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges,
               float scale, const Tensor& out) {
  const opcheck::AttentionDims a = opcheck::attention(q, k, v, key_ranges, out);
  const int64_t n_q = a.n_q, heads = a.heads, d = a.d, n_k = a.n_k, kv_heads = a.kv_heads;
  const int32_t* ranges = key_ranges.as<const int32_t>();
  int64_t k_hi = 0;
  for (int64_t i = 0; i < n_q; ++i) {
    TF_CHECK(ranges[2 * i] >= 0 && ranges[2 * i] < ranges[2 * i + 1] && ranges[2 * i + 1] <= n_k);
    k_hi = std::max<int64_t>(k_hi, ranges[2 * i + 1]);
  }
  // Keys and values used by any row, as f32 (exact conversion); [k_hi, kv_heads, d].
  std::vector<float> kf(static_cast<size_t>(k_hi * kv_heads * d)), vf(kf.size());
  load_f32_row(k, 0, k_hi * kv_heads * d, kf.data());
  load_f32_row(v, 0, k_hi * kv_heads * d, vf.data());
  const int64_t group = heads / kv_heads;
  pool.parallel_for(n_q * heads, [&](int64_t t0, int64_t t1) {
    std::vector<float> qf(static_cast<size_t>(d)), acc(static_cast<size_t>(d)), p;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = t / heads, h = t % heads, kh = h / group;
      const int64_t b = ranges[2 * i], e = ranges[2 * i + 1];
      load_f32_row(q, t * d, d, qf.data());
      p.resize(static_cast<size_t>(e - b));
      float m = -INFINITY;
      for (int64_t j = b; j < e; ++j) {
        const float s = dot_f32(qf.data(), kf.data() + (j * kv_heads + kh) * d, d) * scale;
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
        const float* vr = vf.data() + (j * kv_heads + kh) * d;
        const float pj = rnd(p[j - b], act);
        for (int64_t c = 0; c < d; ++c) acc[c] += pj * vr[c];
      }
      for (int64_t c = 0; c < d; ++c) acc[c] = acc[c] / l;
      store_f32_row(out, t * d, d, acc.data());
    }
  });
}

}  // namespace tf::cpu
