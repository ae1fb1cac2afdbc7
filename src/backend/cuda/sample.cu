// sample (backend/ops.h): one block of 1024 threads per logit row, rows independent, so a row's token
// depends on its logits and parameters only (not on the other rows, their number or its slot).
//
// The reference (backend/sampling.h) sorts the whole row for top-p and sums f32 probabilities one after
// the other. Here every decision is an exact selection by thresholds over the row, with deterministic
// integer sums:
//   - argmax (greedy, and the max m of the row): one pass, ties to the lower index (exact);
//   - top-k: the k-th largest logit by a radix select on its order-preserving 32-bit key (11, 11, 10
//     bits: three passes, the first shared with the argmax pass; count histograms in shared memory).
//     s = logits / T is monotone in the logit, so the k-th largest s is fl(kth logit / T) and the kept
//     set {s >= it} is the reference's, ties included (exact);
//   - masses: e = expf(s - max s) as a fixed-point integer floor(e * 2^q) (q = 62 - bits(V), so no sum
//     overflows); integer sums are associative, so every threshold below is deterministic;
//   - top-p: the reference drops the ascending (s, index) prefix whose cumulative mass is <= 1 - top_p.
//     A radix search over the keys of s with mass histograms finds the value s* where the ascending
//     cumulative mass crosses (1 - top_p) * Z (three passes); the ties at s* (equal masses) are dropped
//     in index order, counted exactly (one more ordered pass only when some but not all ties go);
//   - the draw: target = u * Z over the kept masses in id order; an ordered search (per-warp chunks, 64
//     sub-chunk sums, one block scan, one warp rescans a sub-chunk) finds the first id whose running sum
//     exceeds it (one pass).
// Speed: a pass over a row keeps 8 loads in flight per thread (scan_row), histogram atomics are summed
// per warp and bin first (a flat row would serialize them on one address), and a top-k row whose kept
// set has at most 1024 tokens is compacted into shared memory (one pass, sorted by id), so the top-p
// search and the draw walk those tokens instead of the row: tokens outside weigh 0 in every sum, so the
// integers, hence the choice, are the same either way.
// So the ids equal the reference's except where u, or the top-p cut, lies within the rounding of the
// reference's f32 sums (plus expf's 2 ulp and 2^-q per token) of a cumulative boundary; the contract
// test states and measures that epsilon. Logprobs: lse = max + log(Σ expf(v - max)) with a double
// accumulation (the reference takes exp in double), top-n by n argmax passes (exact ids).
// A sampled row needs a finite logit (-inf entries weigh 0); a row of -inf only has no distribution.
#include <atomic>

#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/row_scan.cuh"
#include "backend/test_hooks.h"

namespace tf::cuda {
namespace {

constexpr int kThreads = 1024, kWarps = kThreads / 32;
constexpr int kBins = 2048;  // radix digits of 11, 11 and 10 bits
constexpr int kSubs = 64;    // ordered search: sub-chunks per warp (kWarps * kSubs == 2 * kThreads)
static_assert(kWarps * kSubs == 2 * kThreads && kBins == 2 * kThreads);

std::atomic<int> g_sample_variant{0};  // test_hooks::set_cuda_sample_variant

using u64 = unsigned long long;

struct Row {
  float temperature, top_p;
  int top_k, n_logprobs;
  uint64_t seed, position;
};

__device__ Row load_row(const int32_t* p) {
  Row r;
  r.temperature = __int_as_float(p[0]);
  r.top_p = __int_as_float(p[1]);
  r.top_k = p[2];
  r.n_logprobs = p[3];
  r.seed = static_cast<uint64_t>(static_cast<uint32_t>(p[4])) |
           static_cast<uint64_t>(static_cast<uint32_t>(p[5])) << 32;
  r.position = static_cast<uint64_t>(static_cast<uint32_t>(p[6])) |
               static_cast<uint64_t>(static_cast<uint32_t>(p[7])) << 32;
  return r;
}

// base/rng.cpp's uniform_at(seed, position, 0): Philox-4x32-10, 53 bits.
__device__ double uniform_at(uint64_t seed, uint64_t position) {
  uint32_t c0 = static_cast<uint32_t>(position), c1 = static_cast<uint32_t>(position >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const uint64_t bits = (static_cast<uint64_t>(c0) << 32 | c1) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

// Order-preserving key of a float (larger value, larger key; -0 keyed as +0, as they compare equal).
__device__ __forceinline__ uint32_t okey(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u << 1) == 0) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_okey(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Histogram adds, one atomic per warp and bin (the lanes with the same bin summed first: a row of equal
// logits would otherwise serialize every atomic on one address): add_count adds 1 per lane, add_mass the
// lane's m. bin 0xffffffff: nothing. Integer sums, so the result does not depend on the grouping. Every
// lane of the warp calls them.
__device__ __forceinline__ void add_count(uint32_t* hist, uint32_t bin) {
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  if (bin != 0xffffffffu && threadIdx.x % 32 == __ffs(peers) - 1)
    atomicAdd(&hist[bin], static_cast<uint32_t>(__popc(peers)));
}
__device__ __forceinline__ void add_mass(unsigned long long* hist, uint32_t bin, unsigned long long m,
                                         unsigned long long* scratch /* [32], this warp's */) {
  const unsigned peers = __match_any_sync(0xffffffffu, bin);
  const int lane = threadIdx.x % 32;
  scratch[lane] = m;
  __syncwarp();
  if (bin != 0xffffffffu && lane == __ffs(peers) - 1) {
    unsigned long long sum = 0;
    for (unsigned rest = peers; rest; rest &= rest - 1) sum += scratch[__ffs(rest) - 1];
    atomicAdd(&hist[bin], sum);
  }
  __syncwarp();
}

struct Shared {
  uint32_t cnt[kBins];        // radix count histogram
  u64 mass[kBins];            // radix mass histogram; the ordered search's sub-chunk sums
  u64 lane_mass[kWarps][32];  // add_mass's per-warp scratch
  u64 cand[kThreads];         // a top-k row's kept tokens, (id << 32 | logit bits), ascending id
  int n_cand;
  u64 warp_u64[kWarps];
  double warp_f64[kWarps];
  Pick warp_pick[kWarps];
  Pick pick;
  int sel, hi_bin;
  u64 sel_base, found_base;
  int64_t found;
};

__device__ double block_sum_f64(double v, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.warp_f64[threadIdx.x / 32] = v;
  __syncthreads();
  double s = 0;
  for (int w = 0; w < kWarps; ++w) s += sh.warp_f64[w];  // the same fixed order in every thread
  return s;
}

// Inclusive prefix sum of v over the block in thread order; *total gets the block's sum.
__device__ u64 block_scan(u64 v, Shared& sh, u64* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 t = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += t;
  }
  __syncthreads();
  if (lane == 31) sh.warp_u64[warp] = v;
  __syncthreads();
  if (warp == 0) {
    u64 x = sh.warp_u64[lane];
    for (int o = 1; o < 32; o <<= 1) {
      const u64 t = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += t;
    }
    sh.warp_u64[lane] = x;
  }
  __syncthreads();
  const u64 before_warp = warp ? sh.warp_u64[warp - 1] : 0;
  *total = sh.warp_u64[kWarps - 1];
  return v + before_warp;
}

// Top-k digit: the bin (of nb, walked from the top) that holds the kk-th largest counted element;
// sh.sel = the bin, sh.sel_base = the count in higher bins.
__device__ void walk_desc(Shared& sh, int nb, u64 kk) {
  const int per = nb / kThreads;
  u64 local = 0;
  for (int j = 0; j < per; ++j) local += sh.cnt[nb - 1 - (threadIdx.x * per + j)];
  u64 total;
  u64 run = block_scan(local, sh, &total) - local;
  for (int j = 0; j < per; ++j) {
    const int bin = nb - 1 - (threadIdx.x * per + j);
    const u64 c = sh.cnt[bin];
    if (run < kk && run + c >= kk) {
      sh.sel = bin;
      sh.sel_base = run;
    }
    run += c;
  }
  __syncthreads();
}

// Top-p digit: the bin (of nb, walked from the bottom) where the cumulative mass first exceeds thr
// (sh.sel; sh.sel_base = the mass below it); where none does, the highest bin with mass.
__device__ void walk_asc(Shared& sh, int nb, u64 thr) {
  const int per = nb / kThreads;
  if (threadIdx.x == 0) sh.sel = -1, sh.hi_bin = -1;
  u64 local = 0;
  for (int j = 0; j < per; ++j) local += sh.mass[threadIdx.x * per + j];
  u64 total;
  u64 run = block_scan(local, sh, &total) - local;  // its syncs order the resets above
  int hi = -1;
  for (int j = 0; j < per; ++j) {
    const int bin = threadIdx.x * per + j;
    const u64 m = sh.mass[bin];
    if (run <= thr && run + m > thr) {
      sh.sel = bin;
      sh.sel_base = run;
    }
    if (m > 0) hi = bin;
    run += m;
  }
  if (hi >= 0) atomicMax(&sh.hi_bin, hi);
  __syncthreads();
  if (threadIdx.x == 0 && sh.sel < 0) {
    sh.sel = sh.hi_bin;
    sh.sel_base = total - sh.mass[sh.hi_bin];
  }
  __syncthreads();
}

// The first index j of [0, V) whose running sum Σ_{i <= j} weight(i) exceeds target_of(total); -1 when
// none does. Warp w owns a contiguous chunk, cut into kSubs sub-chunks whose sums are scanned in order.
template <class W, class Target>
__device__ int64_t ordered_find(int64_t V, Shared& sh, W weight, Target target_of) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t chunk = (V + kWarps * 32 - 1) / (kWarps * 32) * 32;
  const int64_t sub = (chunk + kSubs * 32 - 1) / (kSubs * 32) * 32;
#pragma unroll 8
  for (int s = 0; s < kSubs; ++s) {
    u64 acc = 0;
    for (int64_t e = lane; e < sub; e += 32) {
      const int64_t c = s * sub + e, i = warp * chunk + c;
      if (c < chunk && i < V) acc += weight(i);
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) sh.mass[warp * kSubs + s] = acc;
  }
  __syncthreads();
  if (threadIdx.x == 0) sh.found = -1;
  const u64 local = sh.mass[2 * threadIdx.x] + sh.mass[2 * threadIdx.x + 1];
  u64 total;
  u64 run = block_scan(local, sh, &total) - local;
  const u64 target = target_of(total);
  for (int j = 0; j < 2; ++j) {
    const int e = 2 * threadIdx.x + j;
    const u64 m = sh.mass[e];
    if (run <= target && run + m > target) {
      sh.found = e;
      sh.found_base = run;
    }
    run += m;
  }
  __syncthreads();
  const int64_t entry = sh.found;
  if (entry < 0) return -1;
  __syncthreads();
  if (warp == 0) {
    const int64_t first = (entry / kSubs) * chunk + (entry % kSubs) * sub;
    u64 base = sh.found_base;
    for (int64_t e = 0; e < sub; e += 32) {
      const int64_t c = (entry % kSubs) * sub + e + lane, i = first + e + lane;
      u64 v = (c < chunk && i < V) ? weight(i) : 0;
      for (int o = 1; o < 32; o <<= 1) {
        const u64 t = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += t;
      }
      const unsigned over = __ballot_sync(0xffffffffu, base + v > target);
      if (over) {
        if (lane == 0) sh.found = first + e + __ffs(over) - 1;
        break;
      }
      base += __shfl_sync(0xffffffffu, v, 31);
    }
  }
  __syncthreads();
  return sh.found;
}

// The tokens the top-p search and the draw walk: the whole row, or (cand != nullptr) a top-k row's
// kept tokens compacted in shared memory, ascending id, at most one per thread. Every token outside
// cand weighs 0 in every sum below, so both walks give the same integers, hence the same choice.
struct Source {
  const float* l;
  int64_t V;
  const u64* cand;
  int64_t n;
  __device__ int64_t size() const { return cand ? n : V; }
  __device__ int64_t id(int64_t j) const { return cand ? static_cast<int64_t>(cand[j] >> 32) : j; }
  __device__ float value(int64_t j) const {
    return cand ? __uint_as_float(static_cast<uint32_t>(cand[j])) : l[j];
  }
  // scan_row's contract over the source's tokens (f(id, in, logit), warp-uniform).
  template <class F>
  __device__ void scan(F f) const {
    if (!cand) return scan_row<kThreads>(l, V, f);
    const int64_t j = threadIdx.x;
    const bool in = j < n;
    f(in ? id(j) : 0, in, in ? value(j) : 0.0f);
  }
};

// Compacts the tokens with v / T >= kth into sh.cand (ascending id) when there are at most kThreads
// of them; false (nothing to use) when there are more.
__device__ bool compact_top_k(const float* l, int64_t V, float T, float kth, Shared& sh) {
  if (threadIdx.x == 0) sh.n_cand = 0;
  __syncthreads();
  scan_row<kThreads>(l, V, [&](int64_t i, bool in, float v) {
    if (in && v / T >= kth) {
      const int slot = atomicAdd(&sh.n_cand, 1);
      if (slot < kThreads) sh.cand[slot] = static_cast<u64>(i) << 32 | __float_as_uint(v);
    }
  });
  __syncthreads();
  const int n = sh.n_cand;
  if (n > kThreads) return false;
  if (static_cast<int>(threadIdx.x) >= n) sh.cand[threadIdx.x] = ~0ull;
  __syncthreads();
  for (int k = 2; k <= kThreads; k <<= 1)  // bitonic sort, ascending (by id: the high word)
    for (int j = k >> 1; j > 0; j >>= 1) {
      const int t = threadIdx.x, q = t ^ j;
      if (q > t) {
        const u64 a = sh.cand[t], b = sh.cand[q];
        if ((a > b) == ((t & k) == 0)) sh.cand[t] = b, sh.cand[q] = a;
      }
      __syncthreads();
    }
  return true;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* __restrict__ logits, const int32_t* __restrict__ params,
                  int32_t* __restrict__ out, int64_t V, int64_t w, int variant) {
  __shared__ Shared sh;
  const int64_t r = blockIdx.x;
  const float* l = logits + r * V;
  Row p = load_row(params + r * kSampleRowWords);
  // Planted faults (test_hooks::set_cuda_sample_variant): 1 the next position's RNG counter; 2 row 0's
  // temperature (a row's token then depends on the other rows).
  if (variant == 1) p.position += 1;
  if (variant == 2) p.temperature = __int_as_float(params[0]);
  int32_t* o = out + r * w;
  const int warp = threadIdx.x / 32;
  const float T = p.temperature;
  const bool sampled = T > 0.0f, top_k = sampled && p.top_k > 0 && p.top_k < V;

  // Pass 1: the argmax, and the top-k radix's first digit.
  if (top_k)
    for (int b = threadIdx.x; b < kBins; b += kThreads) sh.cnt[b] = 0;
  __syncthreads();
  Pick best{0.0f, -1};
  scan_row<kThreads>(l, V, [&](int64_t i, bool in, float v) {
    if (in && (best.i < 0 || v > best.v)) best = {v, static_cast<int32_t>(i)};
    if (top_k) add_count(sh.cnt, in ? okey(v) >> 21 : 0xffffffffu);
  });
  const Pick top = block_best(best, sh.warp_pick, &sh.pick);
  int32_t id = top.i;

  if (sampled) {
    const float ms = top.v / T;  // s is monotone in the logit: the max s
    float kth = -INFINITY;
    if (top_k) {
      // k-th largest logit key, digits of 11, 11 and 10 bits; kth = fl(that logit / T).
      uint32_t prefix = 0, mask = 0;
      u64 kk = static_cast<u64>(p.top_k);
      const int shifts[3] = {21, 10, 0}, bits[3] = {11, 11, 10};
      for (int lv = 0; lv < 3; ++lv) {
        const int nb = 1 << bits[lv];
        if (lv > 0) {
          for (int b = threadIdx.x; b < kBins; b += kThreads) sh.cnt[b] = 0;
          __syncthreads();
          scan_row<kThreads>(l, V, [&](int64_t, bool in, float v) {
            const uint32_t k = okey(v);
            add_count(sh.cnt, in && (k & mask) == prefix ? (k >> shifts[lv]) & (nb - 1) : 0xffffffffu);
          });
          __syncthreads();
        }
        walk_desc(sh, nb, kk);
        kk -= sh.sel_base;
        prefix |= static_cast<uint32_t>(sh.sel) << shifts[lv];
        mask |= static_cast<uint32_t>(nb - 1) << shifts[lv];
        __syncthreads();
      }
      kth = from_okey(prefix) / T;
    }
    Source src{l, V, nullptr, 0};
    if (top_k && compact_top_k(l, V, T, kth, sh)) src = Source{l, V, sh.cand, sh.n_cand};
    // Fixed-point masses: floor(expf(s - ms) * 2^q), q = 62 - bits(V).
    int vbits = 0;
    while ((int64_t{1} << vbits) <= V) ++vbits;
    const float scale = ldexpf(1.0f, 62 - vbits);
    auto mass_of = [&](float s) -> u64 { return static_cast<u64>(expf(s - ms) * scale); };

    float s_star = -INFINITY;  // top-p: keep s > s_star, and the ties at s_star from index idx_p on
    int64_t idx_p = 0;
    if (p.top_p < 1.0f) {
      uint32_t prefix = 0, mask = 0;
      u64 base = 0, thr = 0;
      const int shifts[3] = {21, 10, 0}, bits[3] = {11, 11, 10};
      for (int lv = 0; lv < 3; ++lv) {
        const int nb = 1 << bits[lv];
        for (int b = threadIdx.x; b < kBins; b += kThreads) sh.mass[b] = 0;
        __syncthreads();
        src.scan([&](int64_t, bool in, float v) {
          const float s = v / T;
          const uint32_t k = okey(s);
          const u64 m = in && !(s < kth) && (k & mask) == prefix ? mass_of(s) : 0;
          add_mass(sh.mass, m ? (k >> shifts[lv]) & (nb - 1) : 0xffffffffu, m, sh.lane_mass[warp]);
        });
        __syncthreads();
        if (lv == 0) {
          u64 local = sh.mass[2 * threadIdx.x] + sh.mass[2 * threadIdx.x + 1], z;
          block_scan(local, sh, &z);
          thr = static_cast<u64>(static_cast<double>(1.0f - p.top_p) * static_cast<double>(z));
        }
        walk_asc(sh, nb, thr - base);
        base += sh.sel_base;
        prefix |= static_cast<uint32_t>(sh.sel) << shifts[lv];
        mask |= static_cast<uint32_t>(nb - 1) << shifts[lv];
        __syncthreads();
      }
      s_star = from_okey(prefix);
      const u64 e_star = mass_of(s_star), n_ties = sh.mass[sh.sel] / e_star;
      u64 drop = (thr - base) / e_star;  // ties dropped, lowest indices first (the stable sort's order)
      if (drop > n_ties - 1) drop = n_ties - 1;
      __syncthreads();
      if (drop > 0) {
        const float ks = kth, ss = s_star;
        const int64_t j = ordered_find(
            src.size(), sh,
            [=](int64_t c) -> u64 {
              const float s = src.value(c) / T;
              return (s >= ks && s == ss) ? 1 : 0;
            },
            [=](u64) { return drop; });
        idx_p = j < 0 ? -1 : src.id(j);
      }
    }
    const double u = uniform_at(p.seed, p.position);
    const float ks = kth, ss = s_star;
    const int64_t ip = idx_p;
    const int64_t j = ordered_find(
        src.size(), sh,
        [=](int64_t c) -> u64 {
          const float s = src.value(c) / T;
          const bool kept = s >= ks && (s > ss || (s == ss && src.id(c) >= ip));
          return kept ? mass_of(s) : 0;
        },
        [=](u64 z) {
          const u64 t = static_cast<u64>(u * static_cast<double>(z));
          return t < z ? t : z - 1;
        });
    id = static_cast<int32_t>(j < 0 ? -1 : src.id(j));
  }

  // The row's record: the id, then (when asked) logprobs.
  for (int64_t c = threadIdx.x; c < w; c += kThreads) o[c] = 0;
  __syncthreads();
  if (threadIdx.x == 0) o[0] = id;
  if (w == 1 || p.n_logprobs < 0) return;
  double acc = 0;
  scan_row<kThreads>(l, V, [&](int64_t, bool in, float v) {
    if (in) acc += static_cast<double>(expf(v - top.v));
  });
  const float lse = top.v + static_cast<float>(log(block_sum_f64(acc, sh)));
  if (threadIdx.x == 0) o[1] = __float_as_int(l[id] - lse);
  int64_t n_top = (w - 2) / 2;
  if (p.n_logprobs < n_top) n_top = p.n_logprobs;
  Pick prev{0.0f, -1};
  for (int64_t j = 0; j < n_top && j < V; ++j) {
    Pick b{0.0f, -1};
    scan_row<kThreads>(l, V, [&](int64_t i, bool in, float v) {
      const Pick c{v, static_cast<int32_t>(i)};
      if (in && (prev.i < 0 || before(prev, c)) && before(c, b)) b = c;  // not taken already, better
    });
    prev = block_best(b, sh.warp_pick, &sh.pick);
    if (threadIdx.x == 0) {
      o[2 + 2 * j] = prev.i;
      o[3 + 2 * j] = __float_as_int(prev.v - lse);
    }
  }
}

}  // namespace

void launch_sample(cudaStream_t s, const Tensor& logits, const Tensor& params, const Tensor& out) {
  TF_CHECK(logits.rank() == 2 && logits.dtype == DType::F32);
  const int64_t n = logits.dim(0), V = logits.dim(1);
  TF_CHECK(params.dtype == DType::I32 && params.numel() == n * kSampleRowWords);
  TF_CHECK(out.dtype == DType::I32 && out.rank() == 2 && out.dim(0) == n && V > 0 && V < (int64_t{1} << 31));
  const int64_t w = out.dim(1);
  TF_CHECK(w == 1 || (w >= 2 && w % 2 == 0));
  if (n == 0) return;
  sample_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(
      ptr<const float>(logits), ptr<const int32_t>(params), ptr<int32_t>(out), V, w,
      g_sample_variant.load(std::memory_order_relaxed));
  TF_CUDA_LAUNCHED();
}

}  // namespace tf::cuda

namespace tf::test_hooks {
bool set_cuda_sample_variant(int which) {
  TF_CHECK(which >= 0 && which <= 2);
  tf::cuda::g_sample_variant.store(which, std::memory_order_relaxed);
  return true;
}
}  // namespace tf::test_hooks
