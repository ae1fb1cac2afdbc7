// The wide-tile variants of the flash attention (attention_tc.cu), for calls with many query rows per
// sequence: the Pixtral tower's per-image attention (thousands of patches, head_dim 64) and long
// prefill chunks. Selected by test_hooks::set_cuda_attention_variant (1 .. 4: listed at the bottom; 5 .. 9:
// the wgmma forms of attention_tc_wgmma_sm90a.cu, head_dim <= 64 (9: also 80 < head_dim <= 128), variant 1
// otherwise); 0 is attention_tc.cu's kernel.
//
// Per row, the same arithmetic as attention_tc.cu's kernel, operation for operation (its top comment):
// the same key tiles (BN wide, from the row's range begin), the same q·k mma chain over d in 16-wide
// steps, the same scale/mask/max/exp2/sum expressions and shuffles in the same order, the same P·V
// chain over the tile's keys, the same final division. So each row's bits equal variant 0's; what
// changes is only how rows and key tiles are staged:
// - a block holds 16 * WARPS * MT query rows (MT m16 tiles per warp share each K/V fragment, halving
//   the shared-memory reads per mma when MT = 2); its rows' q fragments stay in registers for the
//   whole call (read once from shared memory, not once per key tile);
// - K/V tiles come through a STAGES-deep cp.async ring (one barrier per tile, copies two tiles ahead);
// - a tile wholly inside a row's range skips the per-key mask (s * scale, as the masked path computes
//   for a live key), and a warp none of whose rows has a live key in the tile skips the tile: a fully
//   masked tile leaves m, l and acc bit-for-bit unchanged (attention_tc.cu, batch invariance), so
//   skipping it is the same;
// - key splits (attention_split.cuh) are folded in the block as variant 0 folds them (the fold at the
//   first tile of each split and after the pass's last, whether or not the warp skips those tiles).
// head_dim <= 128 (DP 64, 80 or 128 as variant 0, BN 64); d > 128 and calls with few rows per sequence run
// variant 0. Shapes: q [n_q, heads, d], k/v [n_k, kv_heads, d] (paged: the block pool), key_ranges [n_q, 2],
// out [n_q, heads, d], all bf16 but the ranges (i32).
#include <algorithm>
#include <climits>

#include "backend/cuda/attention_split.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"

namespace tf::cuda {

// Variants 5 .. 9 (attention_tc_wgmma_sm90a.cu, its only caller is here; form = variant - 5): false
// (nothing queued) where they do not apply (head_dim > 64, for 9 outside 80 < head_dim <= 128; few rows per
// sequence; a device other than compute capability 9.0).
bool launch_attention_tc_wgmma(int form, cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& key_ranges, float scale, const Tensor& out,
                               const AttentionPaging& pg, int split);

namespace {

using namespace mma;
using attn::ex2;
using attn::kLog2e;

template <int DP_, int WARPS_, int MT_, int STAGES_, int MINB_>
struct WideCfg {
  static constexpr int DP = DP_, BN = 64, WARPS = WARPS_, MT = MT_, STAGES = STAGES_, MINB = MINB_;
  static constexpr int kThreads = 32 * WARPS, kRows = 16 * WARPS * MT;  // query rows per block
  static constexpr int kLd = DP + 8;  // smem row stride (elements): conflict-free ldmatrix
  static constexpr size_t kSmem = (static_cast<size_t>(kRows) + 2 * STAGES * BN) * kLd * sizeof(bf16_t);
  // + each thread's running O (MT * DP / 8 * 4 f32) when the block folds key splits
  static constexpr size_t kFoldSmem =
      kSmem + static_cast<size_t>(kThreads) * MT * (DP / 8) * 4 * sizeof(float);
  static_assert(DP % 16 == 0 && DP <= 128 && STAGES >= 2);
};

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::MINB)
    attention_tc_wide_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                             const bf16_t* __restrict__ v, const int32_t* __restrict__ ranges, float scale,
                             bf16_t* __restrict__ out, int64_t n_q, int64_t n_k, int heads, int kv_heads,
                             int d, const int32_t* __restrict__ tables, int max_blocks,
                             const int32_t* __restrict__ seg_rows, int n_seg, int split_tiles, bool folding) {
  constexpr int DP = C::DP, BN = C::BN, MT = C::MT, STAGES = C::STAGES, LD = C::kLd, BM = C::kRows;
  constexpr int NS = BN / 8, NO = DP / 8, KD = DP / 16;
  extern __shared__ __align__(16) bf16_t smem[];
  bf16_t* qs = smem;                                            // [BM][LD]
  bf16_t* ks = qs + BM * LD;                                    // [STAGES][BN][LD]
  bf16_t* vs = ks + STAGES * BN * LD;                           // [STAGES][BN][LD]
  float* os = reinterpret_cast<float*>(vs + STAGES * BN * LD);  // folding: [MT][NO][4][kThreads]
  __shared__ int rb[BM], re[BM], pass_b, pass_e;
  __shared__ int64_t tile_i0;
  __shared__ int tile_rows, tile_seg;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int h = blockIdx.y, kh = h / (heads / kv_heads);
  const int64_t q_stride = static_cast<int64_t>(heads) * d, kv_stride = static_cast<int64_t>(kv_heads) * d;
  // This block's query rows, as attention_tc.cu: BM consecutive rows, or (paged) up to BM rows of ONE
  // segment, tile x being the x-th BM-row piece when every segment is cut into pieces of BM.
  if (threadIdx.x == 0) attn::find_piece(blockIdx.x, BM, n_q, seg_rows, n_seg, tile_i0, tile_rows, tile_seg);
  __syncthreads();
  const int64_t i0 = tile_i0;
  const int n_rows = tile_rows;
  if (n_rows == 0) return;  // the whole block: a grid bound past the last piece
  const int32_t* table = tables ? tables + static_cast<int64_t>(tile_seg) * max_blocks : nullptr;

  attn::stage_queries<BM, DP, LD, C::kThreads>(qs, rb, re, q, ranges, i0, n_rows, q_stride, h, d);
  // The warp's q fragments (m16 tile mt: block rows warp * 16 * MT + mt * 16 ..), for the whole call.
  uint32_t qf[MT][KD][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int kd = 0; kd < KD; ++kd)
      ldmatrix_x4(qf[mt][kd], qs + ((warp * MT + mt) * 16 + lane % 16) * LD + kd * 16 + (lane / 16) * 8);

  // This thread's rows: (mt, 0) = block row (warp * MT + mt) * 16 + g, (mt, 1) = that + 8.
  float m[MT][2], l[MT][2], acc[MT][NO][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
#pragma unroll
    for (int a = 0; a < NO; ++a)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mt][a][c] = 0.0f;
  }
  float M[MT][2], L[MT][2];  // folding: the rows' running result
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    M[mt][0] = M[mt][1] = -INFINITY;
    L[mt][0] = L[mt][1] = 0.0f;
  }
  // Folds the split just ended into (M, L, O) and starts the next one from a fresh state.
  auto fold = [&] {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      attn::fold_fragment<NO>(M[mt], L[mt], m[mt], l[mt], acc[mt],
                              os + mt * NO * 4 * C::kThreads + threadIdx.x, C::kThreads);
  };

  auto load_kv = [&](int buf, int64_t j0, int64_t e) {
    bf16_t* kd = ks + buf * BN * LD;
    bf16_t* vd = vs + buf * BN * LD;
    for (int c = threadIdx.x; c < BN * (DP / 8); c += C::kThreads) {
      const int r = c / (DP / 8), dc = (c % (DP / 8)) * 8;
      const int64_t j = j0 + r;  // logical key; its row in k/v (through the block table when paged)
      const int64_t row =
          table && j < e ? static_cast<int64_t>(table[j / kKvBlock]) * kKvBlock + j % kKvBlock : j;
      const bool ok = j < e && row < n_k && dc < d;
      const int64_t off = row * kv_stride + static_cast<int64_t>(kh) * d + dc;
      cp_async16(kd + r * LD + dc, ok ? k + off : k, ok);
      cp_async16(vd + r * LD + dc, ok ? v + off : v, ok);
    }
  };

  int prev_b = INT_MIN;
  for (;;) {
    __syncthreads();  // every warp is done with the previous pass's tiles (and rb/re are written)
    if (threadIdx.x == 0) attn::next_pass(rb, re, BM, prev_b, pass_b, pass_e);
    __syncthreads();
    const int pb = pass_b, pe = pass_e;
    if (pb == INT_MAX) break;
    prev_b = pb;
    bool in[MT][2];
    int e[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int r = (warp * MT + mt) * 16 + g + rr * 8;
        in[mt][rr] = rb[r] == pb;
        e[mt][rr] = re[r];
      }
    const int n_tiles = (pe - pb + BN - 1) / BN;
    if (n_tiles <= 0) continue;
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      if (st < n_tiles) load_kv(st, pb + static_cast<int64_t>(st) * BN, pe);
      cp_async_commit();
    }
    for (int ti = 0; ti < n_tiles; ++ti) {
      const int64_t j0 = pb + static_cast<int64_t>(ti) * BN;
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // tile ti landed for every thread; slot (ti - 1) % STAGES is no longer read
      {
        const int nx = ti + STAGES - 1;
        if (nx < n_tiles) load_kv(nx % STAGES, pb + static_cast<int64_t>(nx) * BN, pe);
        cp_async_commit();
      }
      if (folding && ti > 0 && ti % split_tiles == 0) fold();  // a split ends before this tile
      // Does any row of this warp see a live key in the tile? (Else the tile changes nothing.)
      bool live = false, full = true;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          live = live || (in[mt][rr] && j0 < e[mt][rr]);
          full = full && in[mt][rr] && j0 + BN <= e[mt][rr];
        }
      if (!__any_sync(0xffffffffu, live)) continue;
      const bf16_t* kt = ks + (ti % STAGES) * BN * LD;
      const bf16_t* vt = vs + (ti % STAGES) * BN * LD;

      float s[MT][NS][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int b = 0; b < NS; ++b)
#pragma unroll
          for (int c = 0; c < 4; ++c) s[mt][b][c] = 0.0f;
#pragma unroll
      for (int kd = 0; kd < KD; ++kd)
#pragma unroll
        for (int b = 0; b < NS; b += 2) {
          uint32_t bf[4];
          ldmatrix_x4(bf, kt + (b * 8 + (lane % 8) + (lane / 16) * 8) * LD + kd * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(s[mt][b], qf[mt][kd], bf[0], bf[1]);
            mma_bf16(s[mt][b + 1], qf[mt][kd], bf[2], bf[3]);
          }
        }
      uint32_t pf[MT][NS / 2][4];  // P as A fragments, one per 16 keys
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // Scale, mask, running max per row (the 4 threads of a quad share a row).
        float tmax[2] = {-INFINITY, -INFINITY};
        attn::scale_mask<NS>(s[mt], full, static_cast<int>(j0), in[mt], e[mt], scale, t, tmax);
        float alpha[2];
        attn::online_softmax<NS>(s[mt], tmax, m[mt], l[mt], alpha, pf[mt]);
        attn::rescale<NO>(acc[mt], alpha);
      }
      // acc += P · V: A = P (keys as k), B = V tile [keys][d] read transposed; keys in increasing 16s.
#pragma unroll
      for (int kk = 0; kk < NS / 2; ++kk)
#pragma unroll
        for (int a = 0; a < NO; a += 2) {
          uint32_t bf[4];
          ldmatrix_x4_trans(
              bf, vt + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * LD + a * 8 + (lane / 16) * 8);
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_bf16(acc[mt][a], pf[mt][kk], bf[0], bf[1]);
            mma_bf16(acc[mt][a + 1], pf[mt][kk], bf[2], bf[3]);
          }
        }
    }
    if (folding) fold();  // the pass's last split
  }
  cp_async_wait<0>();

  // out = rnd(acc / l), the columns below d of rows below n_q.
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int a = 0; a < NO; ++a)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int rr = c / 2;
        const int r = (warp * MT + mt) * 16 + g + rr * 8;
        const int64_t i = i0 + r;
        const int col = a * 8 + 2 * t + c % 2;
        if (r >= n_rows || col >= d) continue;
        float val;
        if (folding)
          val = L[mt][rr] > 0.0f ? os[((mt * NO + a) * 4 + c) * C::kThreads + threadIdx.x] / L[mt][rr] : 0.0f;
        else
          val = l[mt][rr] > 0.0f ? acc[mt][a][c] / l[mt][rr] : 0.0f;
        out[(i * heads + h) * d + col] = f2bf(val);
      }
}

template <class C>
void launch_wide(cudaStream_t s, const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* ranges,
                 float scale, bf16_t* out, int64_t n_q, int64_t n_k, int heads, int kv_heads, int d,
                 const AttentionPaging& pg, int split) {
  auto kernel = attention_tc_wide_kernel<C>;
  static OncePerDevice attr;  // the limit is per device
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(C::kFoldSmem)));
  });
  const bool folding = split > 0;
  // Paged: Σ_s ceil(n_s / BM) <= n_seg + n_q / BM pieces; blocks past the last piece exit at once.
  const int64_t tiles = blocks_for(n_q, C::kRows) + (pg.seg_rows ? pg.n_seg : 0);
  TF_CHECK(tiles < (int64_t{1} << 31) && heads <= 65535);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(heads));
  kernel<<<grid, C::kThreads, folding ? C::kFoldSmem : C::kSmem, s>>>(
      q, k, v, ranges, scale, out, n_q, n_k, heads, kv_heads, d, pg.tables, pg.max_blocks, pg.seg_rows,
      pg.n_seg, folding ? split / C::BN : INT_MAX, folding);
  TF_CUDA_LAUNCHED();
}

// The variants, at head_dim padded as variant 0 pads it (DP 64, 80 or 128: the same q·k chain length).
// Shared memory per block: the q rows + 2 * STAGES * 64 keys, rows of DP + 8 elements. At DP 64:
//   1: 128 rows per block, 8 warps of 16 rows, 3 stages, <= 128 registers: 73 KB, 2 blocks (16 warps) per SM
//   2:  64 rows per block, 4 warps of 16 rows, 2 stages, <= 128 registers: 46 KB, 4 blocks (16 warps) per SM
//      (variant 0's tiling: isolates q in registers, the unmasked path and the tile skip)
//   3: 128 rows per block, 4 warps of 32 rows (two m16 tiles share each K/V fragment), 3 stages: 73 KB,
//      2 blocks (8 warps) per SM
//   4:  64 rows per block, 4 warps of 16 rows, 3 stages, <= 168 registers: 64 KB, 3 blocks (12 warps) per SM
// At DP 80 and 128 (more registers): 1 and 3 run 8 warps, 1 block per SM; 2 and 4 run 4 warps, 2 per SM.
template <int DP>
void run_variant(int which, cudaStream_t s, const bf16_t* q, const bf16_t* k, const bf16_t* v,
                 const int32_t* ranges, float scale, bf16_t* out, int64_t n_q, int64_t n_k, int heads,
                 int kv_heads, int d, const AttentionPaging& pg, int split) {
  constexpr bool kSmall = DP <= 64;
  switch (which) {
    case 2:
      return launch_wide<WideCfg<DP, 4, 1, 2, kSmall ? 4 : 2>>(s, q, k, v, ranges, scale, out, n_q, n_k,
                                                               heads, kv_heads, d, pg, split);
    case 3:
      if constexpr (kSmall)
        return launch_wide<WideCfg<DP, 4, 2, 3, 2>>(s, q, k, v, ranges, scale, out, n_q, n_k, heads, kv_heads,
                                                    d, pg, split);
      break;
    case 4:
      return launch_wide<WideCfg<DP, 4, 1, 3, kSmall ? 3 : 2>>(s, q, k, v, ranges, scale, out, n_q, n_k,
                                                               heads, kv_heads, d, pg, split);
    default:
      break;
  }
  launch_wide<WideCfg<DP, 8, 1, 3, kSmall ? 2 : 1>>(s, q, k, v, ranges, scale, out, n_q, n_k, heads, kv_heads,
                                                    d, pg, split);
}

}  // namespace

int attention_tc_wide_variants() { return 9; }

bool launch_attention_tc_wide(int which, cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& key_ranges, float scale, const Tensor& out,
                              const AttentionPaging& pg, int split) {
  const int64_t n_q = q.dim(0), heads = q.dim(1), d = q.dim(2), n_k = k.dim(0), kv_heads = k.dim(1);
  if (which < 1 || which > attention_tc_wide_variants() || d > 128) return false;
  if (which >= 5) {  // variant 1 where the wgmma forms do not apply
    if (launch_attention_tc_wgmma(which - 5, s, q, k, v, key_ranges, scale, out, pg, split)) return true;
    which = 1;
  }
  // Rows per sequence (paged: per segment) must fill the wide blocks; decode-like calls run variant 0.
  const int64_t per = pg.seg_rows ? n_q / pg.n_seg : n_q;
  if (per < 64) return false;
  const auto* qp = ptr<const bf16_t>(q);
  const auto* kp = ptr<const bf16_t>(k);
  const auto* vp = ptr<const bf16_t>(v);
  const auto* rp = ptr<const int32_t>(key_ranges);
  auto* op = ptr<bf16_t>(out);
  const int H = static_cast<int>(heads), KVH = static_cast<int>(kv_heads), D = static_cast<int>(d);
  if (d <= 64)
    run_variant<64>(which, s, qp, kp, vp, rp, scale, op, n_q, n_k, H, KVH, D, pg, split);
  else if (d <= 80)
    run_variant<80>(which, s, qp, kp, vp, rp, scale, op, n_q, n_k, H, KVH, D, pg, split);
  else
    run_variant<128>(which, s, qp, kp, vp, rp, scale, op, n_q, n_k, H, KVH, D, pg, split);
  return true;
}

}  // namespace tf::cuda
