// Few-row flash attention (decode, draft verification) for calls that run their key splits in parallel and
// whose blocks all fit on the SMs at once (one or a few sequences over long contexts, where each block's
// chain of key tiles is the whole latency; attention_tc_decode.cu's rule picks it): attention_tc_decode.cu's
// rows, splits and arithmetic, but a block takes its key tiles in chunks of four and splits the work so that
// only what chains from tile to tile runs tile after tile:
//   phase A (warp w: tile c0 + w of the chunk): S = Q·Kᵀ by attention_tc_decode.cu's mma chains, scaled and
//            masked, the quad's row maxima into shared memory; every thread then advances the running max
//            over the chunk's tiles in order (max is exact in any order: the same m and α per tile as the
//            one-tile-at-a-time loop), and warp w turns its tile into P = 2^((S - m_w) log2 e) (bf16 A
//            fragments) and the row sums (online_softmax's order), both into shared memory;
//   phase B (every warp, the chunk's tiles in order): l = l α + Σ p, acc = acc α, acc += P · V over the
//            warp's output blocks (attention_tc_decode.cu's blocks a = 2 (w + 4 j), +1), the mma chains as
//            there.
// So a tile's scores, mask and exps run once per block (not once per warp) and four tiles' at once. Every
// value comes from the same statements on the same operands as in attention_tc.cu (attention_split.cuh's
// online_softmax parts), so a row's bits are the prefill's; the contract holds them equal.
//
// K and V stream as units K₀ V₀ K₁ V₁ … (unit u: chunk u / 2's K or V tiles, one cp.async group) through
// three banks of four tiles, unit u in bank u % 3: unit u + 2 is issued when unit u starts, once every warp
// is done with unit u - 1. No in-block fold: calls that fold their splits in the block run
// attention_tc_decode.cu.
//
// Shapes: q [n_q, heads, d]; K / V pools [n_k, kv_heads, d] (paged: pg.tables, 64-key blocks); out [n_q,
// heads, d] bf16, or the split's (m, l, acc) into part (attention_merge.cu folds them).
#include <algorithm>
#include <climits>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_split.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/pdl.cuh"

namespace tf::cuda {
namespace {

using namespace mma;

constexpr int kWarps = 4, kThreads = 32 * kWarps, kRows = attn::kDecRows;
constexpr int kChunk = kWarps;  // key tiles per chunk: one per warp in phase A
constexpr int kBanks = 3;       // K/V units resident at once

// DP: head_dim padded to 16; BN: keys per tile (attention_tc.cu's: 64, 32 at head_dim 256).
template <int DP, int BN>
struct ChunkCfg {
  static constexpr int kLd = DP + 8;  // bf16 row stride of the q rows and K/V tiles
  static constexpr int NS = BN / 8, NO = DP / 8;
  static constexpr int kOPairs = (NO / 2 + kWarps - 1) / kWarps;  // output block pairs per warp
  static constexpr int kBank = kChunk * BN * kLd;                 // bf16 per bank
  static constexpr int kPf = kChunk * (NS / 2) * 4 * 32;          // u32 P fragments of a chunk
  // q rows, the banks, P fragments, then the tiles' row maxima and sums (f32 [kChunk][kRows] each).
  static constexpr size_t smem() {
    return (static_cast<size_t>(kRows) * kLd + static_cast<size_t>(kBanks) * kBank) * sizeof(bf16_t) +
           static_cast<size_t>(kPf) * sizeof(uint32_t) +
           static_cast<size_t>(2 * kChunk * kRows) * sizeof(float);
  }
};

template <int DP, int BN>
__global__ void __launch_bounds__(kThreads)
    attention_decode_chunks_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                                   const bf16_t* __restrict__ v, const int32_t* __restrict__ ranges,
                                   float scale, bf16_t* __restrict__ out, int64_t n_q, int64_t n_k, int heads,
                                   int kv_heads, int d, const int32_t* __restrict__ tables, int max_blocks,
                                   const int32_t* __restrict__ seg_rows, int n_seg, int split_tiles,
                                   attn::Partials part, int pack) {
  using C = ChunkCfg<DP, BN>;
  constexpr int LD = C::kLd, NS = C::NS, NO = C::NO, OP = C::kOPairs, BANK = C::kBank;
  extern __shared__ __align__(16) bf16_t smem[];
  bf16_t* qs = smem;                                                  // [kRows][LD]
  bf16_t* banks = qs + kRows * LD;                                    // [kBanks][kChunk * BN][LD]
  uint32_t* ps = reinterpret_cast<uint32_t*>(banks + kBanks * BANK);  // [kChunk][NS / 2][4][32]
  float* tmaxs = reinterpret_cast<float*>(ps + C::kPf);               // [kChunk][kRows]
  float* tsums = tmaxs + kChunk * kRows;                              // [kChunk][kRows]
  __shared__ int rb[kRows], re[kRows], pass_b, pass_e;
  __shared__ int64_t tile_i0;
  __shared__ int tile_rows, tile_seg;
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int h = blockIdx.x, kh = pack > 1 ? h : h / (heads / kv_heads);
  const attn::DecRows R{pack, h, kh};
  const int64_t q_stride = static_cast<int64_t>(heads) * d, kv_stride = static_cast<int64_t>(kv_heads) * d;
  if (threadIdx.x == 0)
    attn::find_piece(blockIdx.y, kRows / pack, n_q, seg_rows, n_seg, tile_i0, tile_rows, tile_seg);
  __syncthreads();
  const int64_t i0 = tile_i0;
  const int n_rows = tile_rows * pack;
  if (n_rows == 0) return;
  const int32_t* table = tables ? tables + static_cast<int64_t>(tile_seg) * max_blocks : nullptr;
  attn::stage_dec_rows<DP, LD, kThreads>(qs, rb, re, R, q, ranges, i0, n_rows, q_stride, d);

  const int r_lo = g, r_hi = g + 8;  // this thread's two rows (every warp: the block's 16 rows)
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float acc[2 * OP][4];  // output blocks a = 2 (warp + 4 j) + {0, 1} for j < OP
#pragma unroll
  for (int a = 0; a < 2 * OP; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[a][c] = 0.0f;
  auto block_of = [&](int la) { return 2 * (warp + kWarps * (la / 2)) + la % 2; };  // local -> global a
  float alpha[kChunk][2];  // the chunk's factors α per tile, from phase A to phase B

  int prev_b = INT_MIN;
  for (;;) {
    __syncthreads();
    if (threadIdx.x == 0) attn::next_pass(rb, re, kRows, prev_b, pass_b, pass_e);
    __syncthreads();
    const int pb = pass_b, pe = pass_e;
    if (pb == INT_MAX) break;
    prev_b = pb;
    const bool in_lo = rb[r_lo] == pb, in_hi = rb[r_hi] == pb;
    const int e_lo = re[r_lo], e_hi = re[r_hi];
    const int n_tiles = (pe - pb + BN - 1) / BN;
    const int t_lo = part.n_split > 0 ? static_cast<int>(blockIdx.z) * split_tiles : 0;
    const int t_hi = part.n_split > 0 ? min(n_tiles, t_lo + split_tiles) : n_tiles;
    if (t_hi <= t_lo) continue;
    const int n_units = 2 * ((t_hi - t_lo + kChunk - 1) / kChunk);
    // The generic loop's copies (below) where every key of the unit's nt tiles from js0 is live and each tile
    // lies in one place (contiguous rows, or one block of the pool: js0 on a block boundary, BN | 64) and
    // rows fill d: thread t's slots are rows r0 + p * kPassRows of each tile, chunk dc, the same bytes to the
    // same places, with one block-table read per tile instead of one per copy. False: nothing issued.
    auto copy_hoisted = [&](const bf16_t* src, bf16_t* dst, int64_t js0, int nt, int pe_) {
      if constexpr (kThreads % (DP / 8) != 0) {
        return false;
      } else {
        constexpr int kPassRows = kThreads / (DP / 8), kPasses = BN / kPassRows;
        static_assert(BN % kPassRows == 0 && kKvBlock % BN == 0);
        if (d != DP || js0 + static_cast<int64_t>(nt) * BN > pe_ || (table && js0 % kKvBlock != 0))
          return false;
        int64_t first[kChunk];
        bool in_pool = true;
#pragma unroll
        for (int jt = 0; jt < kChunk; ++jt) {
          const int64_t js = js0 + static_cast<int64_t>(jt) * BN;
          first[jt] =
              jt < nt && table ? static_cast<int64_t>(table[js / kKvBlock]) * kKvBlock + js % kKvBlock : js;
          in_pool = in_pool && (jt >= nt || first[jt] + BN <= n_k);
        }
        if (!in_pool) return false;
        const int r0 = threadIdx.x / (DP / 8), dc = (threadIdx.x % (DP / 8)) * 8;
#pragma unroll
        for (int jt = 0; jt < kChunk; ++jt) {
          if (jt >= nt) break;
#pragma unroll
          for (int p = 0; p < kPasses; ++p) {
            const int r = r0 + p * kPassRows;
            cp_async16(dst + (jt * BN + r) * LD + dc, src + (first[jt] + r) * kv_stride + dc, true);
          }
        }
        return true;
      }
    };
    auto load_unit = [&](int u) {  // chunk u / 2's K (u even) or V tiles into bank u % 3; one commit group
      const int c0 = t_lo + (u / 2) * kChunk;
      if (u < n_units) {
        const int nt = min(kChunk, t_hi - c0), rows = nt * BN;
        const bf16_t* src = (u % 2 ? v : k) + static_cast<int64_t>(kh) * d;
        bf16_t* dst = banks + (u % kBanks) * BANK;
        if (copy_hoisted(src, dst, pb + static_cast<int64_t>(c0) * BN, nt, pe)) {
          cp_async_commit();
          return;
        }
        for (int c = threadIdx.x; c < rows * (DP / 8); c += kThreads) {
          const int r = c / (DP / 8), dc = (c % (DP / 8)) * 8;
          const int64_t j = pb + static_cast<int64_t>(c0) * BN + r;
          const bool live = j < pe;
          const int64_t row =
              table && live ? static_cast<int64_t>(table[j / kKvBlock]) * kKvBlock + j % kKvBlock : j;
          const bool ok = live && row < n_k && dc < d;
          cp_async16(dst + r * LD + dc, ok ? src + row * kv_stride + dc : src, ok);
        }
      }
      cp_async_commit();
    };
    load_unit(0);
    load_unit(1);
    for (int u = 0; u < n_units; ++u) {
      cp_async_wait<1>();  // unit u (and the q rows) in; unit u + 1 may still be in flight
      __syncthreads();     // ... for every thread; every warp is done with unit u - 1, whose bank u + 2 takes
      load_unit(u + 2);
      const int c0 = t_lo + (u / 2) * kChunk, n = min(kChunk, t_hi - c0);
      const bf16_t* bank = banks + (u % kBanks) * BANK;
      if (u % 2 == 0) {
        // Phase A: this warp's tile's scores (attention_tc_decode.cu's mma chains, block pairs b, b + 1),
        // scaled and masked, and its row maxima.
        float s[NS][4];
        const bool mine = warp < n;
        const int j0 = pb + (c0 + warp) * BN;
        if (mine) {
          const bf16_t* kt = bank + warp * BN * LD;
#pragma unroll
          for (int b = 0; b < NS; b += 2) {
            float s0[4], s1[4];
            attn::score_pair<DP, LD>(qs, kt, b, lane, s0, s1);
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              s[b][c] = s0[c];
              s[b + 1][c] = s1[c];
            }
          }
          float tmax[2] = {-INFINITY, -INFINITY};
          const bool in[2] = {in_lo, in_hi};
          const int e[2] = {e_lo, e_hi};
          attn::scale_mask<NS>(s, false, j0, in, e, scale, t, tmax);  // attention_tc.cu's masked statements
          attn::quad_max(tmax[0]);
          attn::quad_max(tmax[1]);
          if (t == 0) {
            tmaxs[warp * kRows + r_lo] = tmax[0];
            tmaxs[warp * kRows + r_hi] = tmax[1];
          }
        }
        __syncthreads();
        // Every thread: the running max over the chunk's tiles in order, each tile's α; warp w keeps m_w.
        float mw[2] = {0.0f, 0.0f};
#pragma unroll
        for (int jt = 0; jt < kChunk; ++jt)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            if (jt >= n) continue;
            attn::advance_max(m[rr], tmaxs[jt * kRows + (rr ? r_hi : r_lo)], alpha[jt][rr]);
            if (jt == warp) mw[rr] = m[rr];
          }
        if (mine) {
          float tsum[2] = {0.0f, 0.0f};
          uint32_t pf[NS / 2][4];
          attn::exp_pack<NS>(s, mw, tsum, pf);
          attn::quad_sum(tsum[0]);
          attn::quad_sum(tsum[1]);
#pragma unroll
          for (int kk = 0; kk < NS / 2; ++kk)
#pragma unroll
            for (int i = 0; i < 4; ++i) ps[((warp * (NS / 2) + kk) * 4 + i) * 32 + lane] = pf[kk][i];
          if (t == 0) {
            tsums[warp * kRows + r_lo] = tsum[0];
            tsums[warp * kRows + r_hi] = tsum[1];
          }
        }  // read in phase B, after the next unit's barrier
      } else {
        // Phase B: the tiles in order: l, the rescale, acc += P · V over this warp's output blocks.
#pragma unroll
        for (int jt = 0; jt < kChunk; ++jt) {
          if (jt >= n) break;
          attn::advance_sum(l[0], alpha[jt][0], tsums[jt * kRows + r_lo]);
          attn::advance_sum(l[1], alpha[jt][1], tsums[jt * kRows + r_hi]);
          attn::rescale<2 * OP>(acc, alpha[jt]);
          const bf16_t* vt = bank + jt * BN * LD;
#pragma unroll
          for (int kk = 0; kk < NS / 2; ++kk) {
            uint32_t pf[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) pf[i] = ps[((jt * (NS / 2) + kk) * 4 + i) * 32 + lane];
#pragma unroll
            for (int j = 0; j < OP; ++j) {
              const int a = block_of(2 * j);
              if (a >= NO) continue;
              uint32_t bf[4];
              ldmatrix_x4_trans(
                  bf, vt + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * LD + a * 8 + (lane / 16) * 8);
              mma_bf16(acc[2 * j], pf, bf[0], bf[1]);
              mma_bf16(acc[2 * j + 1], pf, bf[2], bf[3]);
            }
          }
        }
      }
    }
  }

  if (part.n_split > 0) {  // this split's (m, l, acc) of every row, for the merge
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
      const int col = a * 8 + 2 * t + c % 2;
      if (r >= n_rows || a >= NO || col >= d) continue;
      out[((i0 + R.q(r)) * heads + R.head(r)) * d + col] = f2bf(l[rr] > 0.0f ? acc[la][c] / l[rr] : 0.0f);
    }
}

template <int DP, int BN>
void launch_chunks(cudaStream_t s, dim3 grid, const bf16_t* q, const bf16_t* k, const bf16_t* v,
                   const int32_t* ranges, float scale, bf16_t* out, int64_t n_q, int64_t n_k, int heads,
                   int kv_heads, int d, const AttentionPaging& pg, int split_tiles,
                   const attn::Partials& part, int pack) {
  auto kernel = attention_decode_chunks_kernel<DP, BN>;
  static OncePerDevice attr;
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(ChunkCfg<DP, BN>::smem())));
  });
  launch_pdl(s, grid, dim3(kThreads), ChunkCfg<DP, BN>::smem(), kernel, q, k, v, ranges, scale, out, n_q, n_k,
             heads, kv_heads, d, pg.tables, pg.max_blocks, pg.seg_rows, pg.n_seg, split_tiles, part, pack);
}

}  // namespace

void launch_attention_tc_decode_chunks(int dp, cudaStream_t s, dim3 grid, const bf16_t* q, const bf16_t* k,
                                       const bf16_t* v, const int32_t* ranges, float scale, bf16_t* out,
                                       int64_t n_q, int64_t n_k, int heads, int kv_heads, int d,
                                       const AttentionPaging& pg, int split_tiles, const attn::Partials& part,
                                       int pack) {
  attn::with_dec_dims(dp, [&](auto dp_c, auto bn_c) {
    launch_chunks<decltype(dp_c)::value, decltype(bn_c)::value>(
        s, grid, q, k, v, ranges, scale, out, n_q, n_k, heads, kv_heads, d, pg, split_tiles, part, pack);
  });
}

}  // namespace tf::cuda
