// attention: per (query row, head) an f32 softmax over the row's key range with the unnormalised
// probabilities rounded to act before P·V (flash SDPA), keys visited in increasing order. Independent of
// batch composition and chunking: a decode row and the same row inside a prefill chunk see the same keys in
// the same order. paged_attention runs the same row loop over each segment's keys in logical order: segments
// of few rows (decode) read the block pool in place, a block of one kv head at a time, others gather the
// segment's keys first; either way a row's bits are those attention() gives over its keys laid out
// contiguously.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/simd.h"
#include "backend/op_checks.h"
#include "backend/test_hooks.h"

namespace tf::cpu {
namespace {

// Segments of at most this many rows read the pool's blocks in place; more rows share each key enough that
// converting the segment's keys once pays (test_hooks::set_cpu_paged_tile_rows; the same bits either way).
constexpr int64_t kPagedTileRows = 16;
std::atomic<int64_t> g_tile_rows{kPagedTileRows};
int64_t paged_tile_rows() { return g_tile_rows.load(std::memory_order_relaxed); }

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
using Dot4 = __m128 (*)(const float*, const float*, int64_t, int64_t);
using Axpy4 = void (*)(float*, const float*, const float*, int64_t, int64_t);

// Keys [jb, je) of the block's rows, four keys at a time where a row takes all four (each row's keys
// still in increasing order, each score dot_f32's), else one at a time. Key j's row: k0 + (j - jo) * stride.
template <Dot4 dot4>
inline void scores_vec(BlockRow* br, int64_t nr, const float* k0, int64_t jo, int64_t stride, int64_t d,
                       int64_t jb, int64_t je, float scale) {
  int64_t j = jb;
  for (; j + 4 <= je; j += 4) {
    const float* kj = k0 + (j - jo) * stride;
    for (int64_t r = 0; r < nr; ++r) {
      BlockRow& x = br[r];
      if (x.b <= j && j + 4 <= x.e) {
        _mm_storeu_ps(x.p + (j - x.b), _mm_mul_ps(dot4(x.q, kj, stride, d), _mm_set1_ps(scale)));
      } else {
        for (int u = 0; u < 4; ++u) score_one(x, kj + u * stride, j + u, d, scale);
      }
    }
  }
  for (; j < je; ++j)
    for (int64_t r = 0; r < nr; ++r) score_one(br[r], k0 + (j - jo) * stride, j, d, scale);
}

// acc += rnd(p_j) * v_j over keys [jb, je), four keys per pass over acc where a row takes all four (each
// element's additions still in increasing j).
template <Axpy4 axpy4>
inline void pv_vec(BlockRow* br, int64_t nr, const float* v0, int64_t jo, int64_t stride, int64_t d,
                   int64_t jb, int64_t je, DType act) {
  int64_t j = jb;
  for (; j + 4 <= je; j += 4) {
    const float* vj = v0 + (j - jo) * stride;
    for (int64_t r = 0; r < nr; ++r) {
      BlockRow& x = br[r];
      if (x.b <= j && j + 4 <= x.e) {
        const float* pj = x.p + (j - x.b);
        const float p[4] = {rnd(pj[0], act), rnd(pj[1], act), rnd(pj[2], act), rnd(pj[3], act)};
        axpy4(x.acc, p, vj, stride, d);
      } else {
        for (int u = 0; u < 4; ++u) pv_one(x, vj + u * stride, j + u, d, act);
      }
    }
  }
  for (; j < je; ++j)
    for (int64_t r = 0; r < nr; ++r) pv_one(br[r], v0 + (j - jo) * stride, j, d, act);
}

// The walkers compiled for each instruction set (flatten: the four-key helpers inline into the loops).
TF_AVX2 __attribute__((flatten)) void scores_avx2(BlockRow* br, int64_t nr, const float* x0, int64_t jo,
                                                  int64_t stride, int64_t d, int64_t jb, int64_t je,
                                                  float scale) {
  scores_vec<avx2::dot4>(br, nr, x0, jo, stride, d, jb, je, scale);
}
TF_AVX2 __attribute__((flatten)) void pv_avx2(BlockRow* br, int64_t nr, const float* x0, int64_t jo,
                                              int64_t stride, int64_t d, int64_t jb, int64_t je, DType act) {
  pv_vec<avx2::axpy4>(br, nr, x0, jo, stride, d, jb, je, act);
}
// simd_level() 2: four keys' dots two per 16-lane vector, P · V sixteen elements of acc at a time.
TF_AVX512 __attribute__((flatten)) void scores_avx512(BlockRow* br, int64_t nr, const float* x0, int64_t jo,
                                                      int64_t stride, int64_t d, int64_t jb, int64_t je,
                                                      float scale) {
  scores_vec<avx512::dot4>(br, nr, x0, jo, stride, d, jb, je, scale);
}
TF_AVX512 __attribute__((flatten)) void pv_avx512(BlockRow* br, int64_t nr, const float* x0, int64_t jo,
                                                  int64_t stride, int64_t d, int64_t jb, int64_t je,
                                                  DType act) {
  pv_vec<avx512::axpy4>(br, nr, x0, jo, stride, d, jb, je, act);
}
#endif

// Keys [jb, je) of the block's rows: scores (values false) or acc += rnd(p) * v (true), key j's row at
// x0 + (j - jo) * stride.
void keys_pass(bool values, int vec, BlockRow* br, int64_t nr, const float* x0, int64_t jo, int64_t stride,
               int64_t d, int64_t jb, int64_t je, float scale, DType act) {
#if TF_CPU_AVX2
  if (vec == 2) {
    if (values)
      pv_avx512(br, nr, x0, jo, stride, d, jb, je, act);
    else
      scores_avx512(br, nr, x0, jo, stride, d, jb, je, scale);
    return;
  }
  if (vec == 1) {
    if (values)
      pv_avx2(br, nr, x0, jo, stride, d, jb, je, act);
    else
      scores_avx2(br, nr, x0, jo, stride, d, jb, je, scale);
    return;
  }
#endif
  (void)vec;
  for (int64_t j = jb; j < je; ++j)
    for (int64_t r = 0; r < nr; ++r) {
      const float* xj = x0 + (j - jo) * stride;
      if (values)
        pv_one(br[r], xj, j, d, act);
      else
        score_one(br[r], xj, j, d, scale);
    }
}

// Where a call's keys come from: f32 rows [n, kv_heads, d] laid out contiguously (kf, vf), or a segment's
// blocks of the paged pool (k_pool / v_pool [n_k, kv_heads, d], block j / kKvBlock at table[j / kKvBlock]),
// converted to f32 one block of one kv head at a time as a task reaches it (no copy of the whole segment).
struct KvRows {
  const float* kf = nullptr;
  const float* vf = nullptr;
  const Tensor* k_pool = nullptr;
  const Tensor* v_pool = nullptr;
  const int32_t* table = nullptr;
};

// Rows [i0, i1) of q whose keys come from src.
struct Part {
  int64_t i0, i1;
  KvRows src;
};

// The rows of each part attend their keys over ranges (pairs per query row), in blocks of (row, head) pairs
// that share a kv head (a few rows times the query heads of the group), so that each key's K and V rows are
// read once per block, not once per row and head; every part's blocks in one parallel loop. Every row and
// head runs the row-at-a-time statements: s_j = dot_f32(q, k_j) * scale, m = max(m, s_j) in increasing j,
// p_j = exp(s_j - m) and l += p_j in increasing j, acc += rnd(p_j) * v_j in increasing j, out = acc / l;
// the AVX2 paths (simd.h) compute the same statements eight lanes at a time.
void attend_rows(ThreadPool& pool, const Tensor& q, const std::vector<Part>& parts, int64_t kv_heads,
                 const int32_t* ranges, float scale, const Tensor& out) {
  const int64_t heads = q.dim(1), d = q.dim(2);
  const int64_t group = heads / kv_heads, stride = kv_heads * d;
  // A block: up to kBlock / group rows (at least one) times the group's query heads, which share the keys.
  const int64_t block_rows = std::max<int64_t>(1, kBlock / group), members = block_rows * group;
  std::vector<int64_t> first{0};  // part p's tasks: [first[p], first[p + 1]), a block and a kv head each
  bool paged = false;
  for (const Part& pt : parts) {
    first.push_back(first.back() + (pt.i1 - pt.i0 + block_rows - 1) / block_rows * kv_heads);
    paged = paged || pt.src.table;
  }
  const DType act = q.dtype;
  // 0: the portable statements; 1: AVX2 (d % 8 == 0); 2: AVX-512 (d % 16 == 0).
  const int vec = !TF_CPU_AVX2 || d % 8 != 0 ? 0 : std::min(simd_level(), d % 16 == 0 ? 2 : 1);
  pool.parallel_for(first.back(), [&](int64_t t0, int64_t t1) {
    std::vector<float> qf(static_cast<size_t>(members * d)), acc(qf.size());
    std::vector<std::vector<float>> p(static_cast<size_t>(members));
    std::vector<BlockRow> br(static_cast<size_t>(members));
    std::vector<int64_t> at(static_cast<size_t>(members));  // each member's row of q and out: i * heads + h
    std::vector<float> tile(paged ? static_cast<size_t>(kKvBlock * d) : 0);  // paged: one block, one head
    for (int64_t t = t0; t < t1; ++t) {
      const size_t pi =
          static_cast<size_t>(std::upper_bound(first.begin(), first.end(), t) - first.begin() - 1);
      const KvRows& src = parts[pi].src;
      const int64_t tl = t - first[pi], kh = tl % kv_heads;
      const int64_t r0 = parts[pi].i0 + tl / kv_heads * block_rows;
      const int64_t nr = std::min(block_rows, parts[pi].i1 - r0) * group;  // the block's members
      int64_t jb = INT64_MAX, je = 0;
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t i = r0 + r / group, h = kh * group + r % group;
        const int64_t b = ranges[2 * i], e = ranges[2 * i + 1];
        at[r] = i * heads + h;
        load_f32_row(q, at[r] * d, d, qf.data() + r * d);
        p[r].resize(static_cast<size_t>(e - b));
        br[r] = BlockRow{qf.data() + r * d, b, e, p[r].data(), acc.data() + r * d};
        jb = std::min(jb, b);
        je = std::max(je, e);
      }
      // Keys [jb, je) of this kv head, scores (values false) or P · V: contiguous rows at once, or the
      // pool's blocks in increasing order, each converted into the tile (key j at tile + (j - j0) * d).
      auto pass = [&](bool values) {
        if (!src.table) {
          const float* x0 = (values ? src.vf : src.kf) + kh * d;
          keys_pass(values, vec, br.data(), nr, x0, 0, stride, d, jb, je, scale, act);
          return;
        }
        const Tensor& pool_t = values ? *src.v_pool : *src.k_pool;
        for (int64_t j0 = jb / kKvBlock * kKvBlock; j0 < je; j0 += kKvBlock) {
          const int64_t lo = std::max(jb, j0), hi = std::min(je, j0 + kKvBlock);
          const int64_t row0 = static_cast<int64_t>(src.table[j0 / kKvBlock]) * kKvBlock;
          for (int64_t j = lo; j < hi; ++j)
            load_f32_row(pool_t, ((row0 + j - j0) * kv_heads + kh) * d, d, tile.data() + (j - j0) * d);
          keys_pass(values, vec, br.data(), nr, tile.data(), j0, d, d, lo, hi, scale, act);
        }
      };
      pass(false);
      for (int64_t r = 0; r < nr; ++r) {
        float* pr = br[r].p;
        const int64_t nk = br[r].e - br[r].b;
        exp_row(pr, max_row(pr, nk), nk, pr);
        float l = 0.0f;
        for (int64_t j = 0; j < nk; ++j) l += pr[j];
        br[r].l = l;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      pass(true);
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
  KvRows src;
  src.kf = kf.data();
  src.vf = vf.data();
  attend_rows(pool, q, {Part{0, a.n_q, src}}, a.kv_heads, ranges, scale, out);
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
  const int64_t tile_rows = paged_tile_rows();
  TF_CHECK(sr[0] == 0 && sr[n_seg] == a.n_q);
  std::vector<float> kf, vf;
  std::vector<Part> in_place;  // the segments of few rows, attended together at the end
  for (int64_t s = 0; s < n_seg; ++s) {
    TF_CHECK(sr[s] <= sr[s + 1]);
    if (sr[s] == sr[s + 1]) continue;
    int64_t n = 0;  // this segment's keys [0, n) in logical order
    for (int64_t i = sr[s]; i < sr[s + 1]; ++i) {
      TF_CHECK(ranges[2 * i] >= 0 && ranges[2 * i] < ranges[2 * i + 1] &&
               ranges[2 * i + 1] <= max_blocks * B);
      n = std::max<int64_t>(n, ranges[2 * i + 1]);
    }
    const int32_t* table = tab + s * max_blocks;
    for (int64_t j0 = 0; j0 < n; j0 += B) TF_CHECK(table[j0 / B] >= 0 && (table[j0 / B] + 1) * B <= a.n_k);
    KvRows src;
    if (sr[s + 1] - sr[s] <= tile_rows) {  // few rows (decode): the pool's blocks in place
      src.k_pool = &k_pool;
      src.v_pool = &v_pool;
      src.table = table;
      in_place.push_back(Part{sr[s], sr[s + 1], src});
      continue;
    }
    // Many rows share each key: the segment's keys once, as f32 [n, kv_heads, d].
    kf.resize(static_cast<size_t>(n * row_elems));
    vf.resize(kf.size());
    for (int64_t j0 = 0; j0 < n; j0 += B) {
      const int64_t m = std::min(B, n - j0);
      load_f32_row(k_pool, table[j0 / B] * B * row_elems, m * row_elems, kf.data() + j0 * row_elems);
      load_f32_row(v_pool, table[j0 / B] * B * row_elems, m * row_elems, vf.data() + j0 * row_elems);
    }
    src.kf = kf.data();
    src.vf = vf.data();
    attend_rows(pool, q, {Part{sr[s], sr[s + 1], src}}, a.kv_heads, ranges, scale, out);
  }
  if (!in_place.empty()) attend_rows(pool, q, in_place, a.kv_heads, ranges, scale, out);
}

}  // namespace tf::cpu

namespace tf::test_hooks {
void set_cpu_paged_tile_rows(int64_t rows) {
  cpu::g_tile_rows.store(rows < 0 ? cpu::kPagedTileRows : rows, std::memory_order_relaxed);
}
}  // namespace tf::test_hooks
