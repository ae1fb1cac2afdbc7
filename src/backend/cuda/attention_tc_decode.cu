// The flash attention of attention_tc.cu for calls of few rows per sequence (decode, draft verification):
// blocks of at most 16 rows (one mma row tile) whose W warps (4 or 8, launch_dec's rule) share each key
// tile's work instead of one warp doing it all while three only stage K/V. Per tile:
//   scores:  warp w computes the 8-key column blocks b = 2 (w + W j), +1 of S = Q·Kᵀ (b = w + W j when
//            there are fewer pairs than warps; each block's mma chain over d exactly as attention_tc.cu
//            runs it) and writes them to shared memory, f32;
//   softmax: warp w takes the block's live rows w, w + W, ..: scale and mask (attention_tc.cu's statements),
//            the row's max over the tile (a warp reduction: max is exact in any order), the running max and
//            α (advance_max), P = exp (exp_pack's statement) written over the scores; then every warp reads
//            its fragment's rows back (m, α, P) and adds each row's P in exp_pack's order (a thread's
//            columns in turn, then the quad's), so every warp holds the m, l, α and P fragments that
//            attention_tc.cu's warp computes for the row (dead rows past the block's: zeros, never stored);
//   P · V:   warp w computes the output column blocks a = 2 (w + W j), +1 (each acc[a]'s mma chain over the
//            tile's 16-key steps in order, as attention_tc.cu).
// Key splits (attention_split.cuh) end, fold and are written as in attention_tc.cu, each warp for its column
// blocks (the (m, l) fold is the same in every warp). Every operation of a row is attention_tc.cu's, in its
// order, so a row's bits are those of the same row in prefill (attention_tc.cu, attention_tc_wide.cu): the
// contract's key-split and invariance tests hold the two to equality.
#include <algorithm>
#include <atomic>
#include <climits>
#include <type_traits>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_split.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/pdl.cuh"

namespace tf::cuda {
namespace {

using namespace mma;
using attn::ex2;
using attn::kLog2e;

constexpr int kRows = attn::kDecRows;
// When a call runs its key splits in parallel and its blocks fit on the SMs at once,
// attention_tc_decode_chunks.cu runs them: -1 that rule (production), 0 never, 1 whenever they do not fold;
// the same bits. Measured on the H200 (BENCHMARKS.md, thirteenth session): the 1B's page decode (2,333 keys:
// two chunks per split) 604-611 -> 638-650 tok/s; within noise on a short context (one chunk per block), so
// the ring keeps those. TF_CUDA_ATTENTION_CHUNKS sets it for whole-run A/B,
// test_hooks::set_cuda_attention_decode_chunks for tests.
std::atomic<int> g_chunks{env_choice("TF_CUDA_ATTENTION_CHUNKS", -1, 1, -1)};
// Warps per block of the tile ring: 4 or 8, else the production rule (below, launch_dec); the same bits.
// TF_CUDA_ATTENTION_DEC_WARPS for whole-run A/B, test_hooks::set_cuda_attention_decode_warps for tests.
std::atomic<int> g_warps{env_choice("TF_CUDA_ATTENTION_DEC_WARPS", 0, 8, 0)};

// DP: head_dim padded to 16; BN: keys per tile; ST: K/V tiles in a ring, the loads of the next ST - 1 in
// flight while one is computed (a block walks at most a split's tiles, each a dependent block-table read and
// a DRAM round trip): 4 when the call's blocks fit on the SMs at once (one sequence: latency is all), 2 when
// they queue (many sequences: blocks per SM matter more; 2 stages take half the shared memory).
template <int DP, int BN, int ST, int W>
struct DecCfg {
  static constexpr int kThreads = 32 * W;
  static constexpr int kLd = DP + 8;                    // bf16 row stride of q / K / V tiles
  static constexpr int kSld = BN + 4;                   // f32 row stride of the score tile
  static constexpr int NS = BN / 8, NO = DP / 8;        // 8-wide key / output column blocks
  static constexpr int kOPairs = (NO / 2 + W - 1) / W;  // output block pairs per warp
  static constexpr bool kSPairs = NS >= 2 * W;          // score blocks by pairs (else one each)
  // q rows, ST K/V tiles (bf16), the score tile (f32), then (folding) each thread's running O.
  static size_t smem(bool fold) {
    return static_cast<size_t>(kRows + 2 * ST * BN) * kLd * sizeof(bf16_t) +
           static_cast<size_t>(kRows) * kSld * sizeof(float) +
           (fold ? static_cast<size_t>(kThreads) * kOPairs * 2 * 4 * sizeof(float) : 0);
  }
};

template <int DP, int BN, int ST, int W>
__global__ void __launch_bounds__(32 * W)
    attention_decode_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                            const bf16_t* __restrict__ v, const int32_t* __restrict__ ranges, float scale,
                            bf16_t* __restrict__ out, int64_t n_q, int64_t n_k, int heads, int kv_heads,
                            int d, const int32_t* __restrict__ tables, int max_blocks,
                            const int32_t* __restrict__ seg_rows, int n_seg, int split_tiles, bool folding,
                            attn::Partials part, int pack) {
  using C = DecCfg<DP, BN, ST, W>;
  constexpr int kStages = ST, kWarps = W, kThreads = C::kThreads;
  constexpr int LD = C::kLd, SLD = C::kSld, NS = C::NS, NO = C::NO, OP = C::kOPairs;
  extern __shared__ __align__(16) bf16_t smem[];
  bf16_t* qs = smem;                                             // [kRows][LD]
  bf16_t* ks = qs + kRows * LD;                                  // [kStages][BN][LD]
  bf16_t* vs = ks + kStages * BN * LD;                           // [kStages][BN][LD]
  float* sb = reinterpret_cast<float*>(vs + kStages * BN * LD);  // [kRows][SLD] raw scores of the tile
  float* os = sb + kRows * SLD + threadIdx.x;                    // folding: [OP * 2 * 4][kThreads]
  __shared__ int rb[kRows], re[kRows], pass_b, pass_e;
  __shared__ float row_m[kRows], row_a[kRows];  // each row's running max after the tile, and its α
  __shared__ int64_t tile_i0;
  __shared__ int tile_rows, tile_seg;
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int h = blockIdx.x, kh = pack > 1 ? h : h / (heads / kv_heads);
  const attn::DecRows R{pack, h, kh};
  const int bq = kRows / pack;  // query rows per block
  const int64_t q_stride = static_cast<int64_t>(heads) * d, kv_stride = static_cast<int64_t>(kv_heads) * d;
  if (threadIdx.x == 0) attn::find_piece(blockIdx.y, bq, n_q, seg_rows, n_seg, tile_i0, tile_rows, tile_seg);
  __syncthreads();
  const int64_t i0 = tile_i0;
  const int n_rows = tile_rows * pack;
  if (n_rows == 0) return;
  const int32_t* table = tables ? tables + static_cast<int64_t>(tile_seg) * max_blocks : nullptr;

  attn::stage_dec_rows<DP, LD, kThreads>(qs, rb, re, R, q, ranges, i0, n_rows, q_stride, d);
  for (int r = threadIdx.x; r < kRows; r += kThreads) {
    row_m[r] = -INFINITY;
    row_a[r] = 1.0f;
  }

  const int r_lo = g, r_hi = g + 8;  // this thread's two rows (every warp: the block's 16 rows)
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float acc[2 * OP][4];  // output blocks a = 2 (warp + 4 j) + {0, 1} for j < OP
#pragma unroll
  for (int a = 0; a < 2 * OP; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[a][c] = 0.0f;
  auto block_of = [&](int la) { return 2 * (warp + kWarps * (la / 2)) + la % 2; };  // local -> global a
  const bool partial = part.n_split > 0;
  float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.0f, 0.0f};
  // attn::fold_fragment's statements over this warp's output blocks.
  auto fold = [&] {
    attn::FoldOp op[2];
    float cr[2] = {0.0f, 0.0f}, cs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      op[rr] = attn::fold_ml(M[rr], L[rr], m[rr], l[rr], cr[rr], cs[rr]);
      m[rr] = -INFINITY;
      l[rr] = 0.0f;
    }
#pragma unroll
    for (int la = 0; la < 2 * OP; ++la)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int rr = c / 2;
        float& oc = os[(la * 4 + c) * kThreads];
        if (op[rr] == attn::FoldOp::kCopy) oc = acc[la][c];
        if (op[rr] == attn::FoldOp::kFold) oc = attn::fold_o(oc, acc[la][c], cr[rr], cs[rr]);
        acc[la][c] = 0.0f;
      }
    // The rows' running max starts again too (read by the softmax after the next barrier).
    for (int r = threadIdx.x; r < kRows; r += kThreads) row_m[r] = -INFINITY;
  };

  auto load_kv = [&](int buf, int64_t j0, int64_t e) {  // one commit group per call
    bf16_t* kd = ks + buf * BN * LD;
    bf16_t* vd = vs + buf * BN * LD;
    for (int c = threadIdx.x; c < BN * (DP / 8); c += kThreads) {
      const int r = c / (DP / 8), dc = (c % (DP / 8)) * 8;
      const int64_t j = j0 + r;
      const int64_t row =
          table && j < e ? static_cast<int64_t>(table[j / kKvBlock]) * kKvBlock + j % kKvBlock : j;
      const bool ok = j < e && row < n_k && dc < d;
      const int64_t off = row * kv_stride + static_cast<int64_t>(kh) * d + dc;
      cp_async16(kd + r * LD + dc, ok ? k + off : k, ok);
      cp_async16(vd + r * LD + dc, ok ? v + off : v, ok);
    }
    cp_async_commit();
  };

  int prev_b = INT_MIN;
  for (;;) {
    __syncthreads();
    if (threadIdx.x == 0) attn::next_pass(rb, re, kRows, prev_b, pass_b, pass_e);
    __syncthreads();
    const int pb = pass_b, pe = pass_e;
    if (pb == INT_MAX) break;
    prev_b = pb;
    const int n_tiles = (pe - pb + BN - 1) / BN;
    const int t_lo = partial ? static_cast<int>(blockIdx.z) * split_tiles : 0;
    const int t_hi = partial ? min(n_tiles, t_lo + split_tiles) : n_tiles;
    if (t_hi <= t_lo) continue;
    // Tiles t_lo .. t_lo + kStages - 2 in flight (one commit group each, empty past t_hi), then one more per
    // tile computed: when tile ti is computed, kStages - 2 later groups may still be outstanding.
    for (int st = 0; st < kStages - 1; ++st) {
      if (t_lo + st < t_hi)
        load_kv(st, pb + static_cast<int64_t>(t_lo + st) * BN, pe);
      else
        cp_async_commit();
    }
    for (int ti = t_lo; ti < t_hi; ++ti) {
      const int64_t j0 = pb + static_cast<int64_t>(ti) * BN;
      const int buf = (ti - t_lo) % kStages;
      cp_async_wait<kStages - 2>();
      __syncthreads();  // tile ti is in; every warp is done with tile ti - 1, whose buffer is refilled next
      if (ti + kStages - 1 < t_hi)
        load_kv((ti - t_lo + kStages - 1) % kStages, j0 + static_cast<int64_t>(kStages - 1) * BN, pe);
      else
        cp_async_commit();
      if (folding && ti > 0 && ti % split_tiles == 0) fold();  // a split ends before this tile
      const bf16_t* kt = ks + buf * BN * LD;
      const bf16_t* vt = vs + buf * BN * LD;

      // This warp's score blocks into sb: b, b + 1 for b = 2 (warp + W j) (kSPairs), else b = warp + W j
      // (eight warps: one block each); every block's chain over d is the same either way.
      if constexpr (C::kSPairs) {
#pragma unroll
        for (int b = 2 * warp; b < NS; b += 2 * kWarps) {
          float s0[4], s1[4];
          attn::score_pair<DP, LD>(qs, kt, b, lane, s0, s1);
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            sb[(c < 2 ? r_lo : r_hi) * SLD + b * 8 + 2 * t + c % 2] = s0[c];
            sb[(c < 2 ? r_lo : r_hi) * SLD + (b + 1) * 8 + 2 * t + c % 2] = s1[c];
          }
        }
      } else {
#pragma unroll
        for (int b = warp; b < NS; b += kWarps) {
          float s0[4];
          attn::score_one<DP, LD>(qs, kt, b, lane, s0);
#pragma unroll
          for (int c = 0; c < 4; ++c) sb[(c < 2 ? r_lo : r_hi) * SLD + b * 8 + 2 * t + c % 2] = s0[c];
        }
      }
      __syncthreads();
      // The softmax, attention_tc.cu's statements spread over the block instead of repeated in every warp:
      // warp w takes rows w, w + W, .. of the block's live rows, a lane BN / 32 of the row's scores: scale
      // and mask, the row's max (max is exact in any order), the running max and α (advance_max), P
      // (exp_pack's statement) written over the scores.
      for (int r = warp; r < n_rows; r += kWarps) {
        constexpr int kPer = BN / 32;
        const bool in = rb[r] == pb;
        const int e = re[r];
        float sv[kPer], tmax = -INFINITY;
#pragma unroll
        for (int u = 0; u < kPer; ++u) {
          const int64_t j = j0 + lane + 32 * u;
          sv[u] = in && j < e ? sb[r * SLD + lane + 32 * u] * scale : -INFINITY;
          tmax = fmaxf(tmax, sv[u]);
        }
#pragma unroll
        for (int o = 16; o > 0; o /= 2) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o));
        float mr = row_m[r], alpha;
        attn::advance_max(mr, tmax, alpha);
#pragma unroll
        for (int u = 0; u < kPer; ++u)
          sb[r * SLD + lane + 32 * u] = sv[u] == -INFINITY ? 0.0f : ex2((sv[u] - mr) * kLog2e);
        __syncwarp();
        if (lane == 0) {
          row_m[r] = mr;
          row_a[r] = alpha;
        }
      }
      __syncthreads();
      // Every warp: its rows' m and α, the row sums as exp_pack adds them (a thread's columns in order, then
      // the quad's), l, and the P fragments (rows past n_rows: the raw scores of zero q rows, never stored;
      // with eight warps, when every live row is among the first 8, the fragments' upper rows are all dead
      // and skipped: P = 0, α = 1. Measured: 1B one sequence over 200 keys 10.9 -> 10.4 us; with four warps
      // the same skip measured slower, 1B 128 x 2,800 keys 474 -> 497 us).
      float alpha[2] = {1.0f, 1.0f};
      uint32_t pf[NS / 2][4];
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int r = rr ? r_hi : r_lo;
        if (kWarps == 8 && rr == 1 && n_rows <= 8) {  // the same for the whole block
#pragma unroll
          for (int kk = 0; kk < NS / 2; ++kk) pf[kk][1] = pf[kk][3] = 0u;
          continue;
        }
        m[rr] = row_m[r];
        alpha[rr] = row_a[r];
        float tsum = 0.0f;
#pragma unroll
        for (int b = 0; b < NS; ++b) {
          const float2 p = *reinterpret_cast<const float2*>(sb + r * SLD + b * 8 + 2 * t);
          tsum += p.x;
          tsum += p.y;
          pf[b / 2][(b % 2) * 2 + rr] = mma::pack_bf16(p.x, p.y);
        }
        attn::quad_sum(tsum);
        attn::advance_sum(l[rr], alpha[rr], tsum);
      }
      attn::rescale<2 * OP>(acc, alpha);
      // acc += P · V over this warp's output blocks.
#pragma unroll
      for (int kk = 0; kk < NS / 2; ++kk)
#pragma unroll
        for (int j = 0; j < OP; ++j) {
          const int a = block_of(2 * j);
          if (a >= NO) continue;
          uint32_t bf[4];
          ldmatrix_x4_trans(
              bf, vt + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * LD + a * 8 + (lane / 16) * 8);
          mma_bf16(acc[2 * j], pf[kk], bf[0], bf[1]);
          mma_bf16(acc[2 * j + 1], pf[kk], bf[2], bf[3]);
        }
    }
    if (folding) fold();  // the pass's last split
  }

  if (partial) {  // this split's (m, l, acc) of every row, for the merge
    attn::store_dec_partial<2 * OP, NO>(part, R, m, l, acc, block_of, i0, n_rows, n_q, heads, d, r_lo, r_hi,
                                        warp == 0);
    if (part.done) attn::merge_if_last<kThreads>(part, R, i0, n_rows, n_q, heads, d, out);
    return;
  }
#pragma unroll
  for (int la = 0; la < 2 * OP; ++la)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int rr = c / 2, a = block_of(la);
      const int r = rr ? r_hi : r_lo;
      const int64_t i = i0 + R.q(r);
      const int col = a * 8 + 2 * t + c % 2;
      if (r >= n_rows || a >= NO || col >= d) continue;
      float val;
      if (folding)
        val = L[rr] > 0.0f ? os[(la * 4 + c) * kThreads] / L[rr] : 0.0f;
      else
        val = l[rr] > 0.0f ? acc[la][c] / l[rr] : 0.0f;
      out[(i * heads + R.head(r)) * d + col] = f2bf(val);
    }
}

template <int DP, int BN, int ST, int W>
void launch_ring(cudaStream_t s, dim3 grid, bool folding, const bf16_t* q, const bf16_t* k, const bf16_t* v,
                 const int32_t* ranges, float scale, bf16_t* out, int64_t n_q, int64_t n_k, int heads,
                 int kv_heads, int d, const AttentionPaging& pg, int split_tiles, const attn::Partials& part,
                 int pack) {
  using C = DecCfg<DP, BN, ST, W>;
  auto kernel = attention_decode_kernel<DP, BN, ST, W>;
  static OncePerDevice attr;
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(C::smem(true))));
  });
  launch_pdl(s, grid, dim3(C::kThreads), C::smem(folding), kernel, q, k, v, ranges, scale, out, n_q, n_k,
             heads, kv_heads, d, pg.tables, pg.max_blocks, pg.seg_rows, pg.n_seg, split_tiles, folding, part,
             pack);
}

template <int DP, int BN>
void launch_dec(cudaStream_t s, const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* ranges,
                float scale, bf16_t* out, int64_t n_q, int64_t n_k, int heads, int kv_heads, int d,
                const AttentionPaging& pg, int split_tiles, bool folding, const attn::Partials& part,
                int pack) {
  const int bq = kRows / pack;
  const int64_t tiles = blocks_for(n_q, bq) + (pg.seg_rows ? pg.n_seg : 0);
  TF_CHECK(tiles <= 65535);
  const dim3 grid(static_cast<unsigned>(pack > 1 ? kv_heads : heads), static_cast<unsigned>(tiles),
                  static_cast<unsigned>(std::max(part.n_split, 1)));
  const int sms = sm_count();
  // Blocks with rows: one piece per segment when the segments are short (decode), else the grid's tiles.
  const int64_t pieces = pg.seg_rows ? std::min<int64_t>(tiles, pg.n_seg + n_q / bq) : tiles;
  const int64_t live = static_cast<int64_t>(grid.x) * pieces * grid.z;
  const int chunks = g_chunks.load(std::memory_order_relaxed);
  if (!folding && (chunks == 1 || (chunks < 0 && live <= sms && part.n_split > 0))) {
    launch_attention_tc_decode_chunks(DP, s, grid, q, k, v, ranges, scale, out, n_q, n_k, heads, kv_heads, d,
                                      pg, split_tiles, part, pack);
    return;
  }
  // Eight warps while the call's blocks fit on the SMs at once (few sequences: each tile's chain is the
  // time, and eight warps cut it: one 1B sequence over 200 keys 12.6 -> 10.9 us), four when they queue (many
  // sequences: two blocks per SM either way, and four warps repeat less per tile: the 1B at 128 sequences
  // over 2,800 keys 474 us against 516); BENCHMARKS.md, seventeenth session.
  const int wanted = g_warps.load(std::memory_order_relaxed);
  const bool eight = wanted == 8 || (wanted != 4 && live <= sms);
  auto ring = [&](auto st, auto w) {
    launch_ring<DP, BN, decltype(st)::value, decltype(w)::value>(s, grid, folding, q, k, v, ranges, scale,
                                                                 out, n_q, n_k, heads, kv_heads, d, pg,
                                                                 split_tiles, part, pack);
  };
  using I2 = std::integral_constant<int, 2>;
  using I4 = std::integral_constant<int, 4>;
  using I8 = std::integral_constant<int, 8>;
  if (live <= sms)
    eight ? ring(I4{}, I8{}) : ring(I4{}, I4{});
  else
    eight ? ring(I2{}, I8{}) : ring(I2{}, I4{});
}

}  // namespace

void launch_attention_tc_decode(int dp, cudaStream_t s, const bf16_t* q, const bf16_t* k, const bf16_t* v,
                                const int32_t* ranges, float scale, bf16_t* out, int64_t n_q, int64_t n_k,
                                int heads, int kv_heads, int d, const AttentionPaging& pg, int split_tiles,
                                bool folding, const attn::Partials& part, int pack) {
  TF_CHECK(pack >= 1 && pack <= kRows);
  attn::with_dec_dims(dp, [&](auto dp_c, auto bn_c) {
    launch_dec<decltype(dp_c)::value, decltype(bn_c)::value>(
        s, q, k, v, ranges, scale, out, n_q, n_k, heads, kv_heads, d, pg, split_tiles, folding, part, pack);
  });
}

}  // namespace tf::cuda

namespace tf::test_hooks {
bool set_cuda_attention_decode_chunks(int mode) {
  TF_CHECK(mode >= -1 && mode <= 1);
  tf::cuda::g_chunks.store(mode, std::memory_order_relaxed);
  return true;
}
bool set_cuda_attention_decode_warps(int warps) {
  TF_CHECK(warps == 0 || warps == 4 || warps == 8);
  tf::cuda::g_warps.store(warps, std::memory_order_relaxed);
  return true;
}
}  // namespace tf::test_hooks
