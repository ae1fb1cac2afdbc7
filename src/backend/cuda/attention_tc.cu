// attention on tensor cores (bf16, head_dim d % 8 == 0, d <= 256): flash attention with an online
// softmax over key tiles, for prefill, decode, draft verification and block-diagonal vision
// attention alike (backend/ops.h `attention`: q[n_q, heads, d], k/v[n_k, kv_heads, d],
// key_ranges[n_q, 2], out[n_q, heads, d]).
//
// Arithmetic per query row (the CUDA tolerance against the CPU reference: tools/cuda_check/README.md):
//   s_j = fl32(Σ_d q·k (mma chain over d in 16-wide chunks) * scale);
//   per key tile: m' = max(m, max_j s_j), α = exp(m - m'), p_j = exp(s_j - m'),
//   l = l α + Σ_j p_j (f32, unrounded), acc = acc α + Σ_j rnd(p_j) v_j (bf16 P on the tensor core);
//   out = rnd(acc / l).
// The CPU reference takes one global max instead of the running one, so rnd(p_j) can land one bf16
// step apart (the rounding is relative to a different maximum); that is FlashAttention's own
// arithmetic, the one Transformers' flash/SDPA kernels run on the GPU.
//
// Batch invariance: a row's key tiles start at its own range begin b_i and step by the tile width,
// so they depend on the row's range alone; so do its key splits (attention_split.cuh: every 512 keys from
// b_i the running state is folded into the row's result, either in the block as it goes or, for calls of
// few rows per sequence over long caches, by one block per split and attention_merge.cu's fold). A block
// holds 16-64 query rows of one head; it walks the distinct range begins of its rows one pass each, and a row
// outside the current pass (or past its range end) sees fully masked tiles, which leave m, l and acc
// bit-for-bit unchanged (α = 1 exactly, p = 0). So a row's bits do not depend on which rows share its block,
// how many there are, or how its sequence was chunked into calls.
//
// Variants (test_hooks::set_cuda_attention_variant; bench/attention/attention_bench.cpp times them):
// 0 is this file's kernel; 1.. the wide-tile kernels of attention_tc_wide.cu (128 query rows per block,
// q in registers, 3-stage K/V ring, ...) for calls with >= 64 rows per sequence and head_dim <= 128,
// with this kernel's arithmetic per row, operation for operation, so the same bits (contract test
// AttentionVariants).
#include <algorithm>
#include <atomic>
#include <climits>

#include "backend/cuda/attention_split.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"

namespace tf::cuda {
namespace {

using namespace mma;
using attn::ex2;
using attn::kLog2e;

// DP: head_dim padded to 16; BN: keys per tile; WARPS: 16 query rows each.
template <int DP, int BN>
struct AttnCfg {
  static constexpr int kLd = DP + 8;  // smem row stride (elements): conflict-free ldmatrix
  // Bytes: q rows and two K/V tiles (bf16), then, when the block folds key splits, each thread's running
  // O (its NO * 4 accumulator values, f32).
  static size_t smem(int warps, bool fold) {
    return static_cast<size_t>(16 * warps + 4 * BN) * kLd * sizeof(bf16_t) +
           (fold ? static_cast<size_t>(32 * warps) * (DP / 8) * 4 * sizeof(float) : 0);
  }
};

template <int DP, int BN>
__global__ void __launch_bounds__(128)
    attention_tc_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                        const bf16_t* __restrict__ v, const int32_t* __restrict__ ranges, float scale,
                        bf16_t* __restrict__ out, int64_t n_q, int64_t n_k, int heads, int kv_heads, int d,
                        const int32_t* __restrict__ tables, int max_blocks,
                        const int32_t* __restrict__ seg_rows, int n_seg, int split_tiles, bool folding,
                        attn::Partials part, int pack) {
  // Three forms (attention_split.cuh): split_tiles >= every pass's tile count (no row has more than one
  // split: the result straight from acc / l); folding (splits folded in the block, the running O in
  // shared memory after the K/V tiles); part.n_split > 0 (block z runs split z of every pass and writes
  // its rows' (m, l, acc) to the workspace for attention_merge.cu).
  // pack > 1 (= heads / kv_heads; calls of few rows per sequence): the block serves one kv head, its rows
  // being (query row, head of the group) pairs, row r = query row r / pack, head kv_head * pack + r % pack,
  // so the group's heads share each K/V tile. A row's arithmetic is the same in either layout (the mma
  // rows are independent), so its bits are too.
  constexpr int LD = AttnCfg<DP, BN>::kLd, NS = BN / 8, NO = DP / 8;
  extern __shared__ __align__(16) bf16_t smem[];
  const int warps = blockDim.x / 32, bm = 16 * warps;
  bf16_t* qs = smem;              // [bm][LD]
  bf16_t* ks = qs + bm * LD;      // [2][BN][LD]
  bf16_t* vs = ks + 2 * BN * LD;  // [2][BN][LD]
  // folding: [NO * 4][128] (launched with 4 warps), this thread's column
  float* os = reinterpret_cast<float*>(vs + 2 * BN * LD) + threadIdx.x;
  __shared__ int rb[64], re[64], pass_b, pass_e;
  __shared__ int64_t tile_i0;
  __shared__ int tile_rows, tile_seg;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // Heads along x (pack > 1: kv heads). Block row r's query row (within the piece) and head:
  const int h = blockIdx.x, kh = pack > 1 ? h : h / (heads / kv_heads);
  auto row_q = [&](int r) { return r / pack; };
  auto row_head = [&](int r) { return pack > 1 ? kh * pack + r % pack : h; };
  const int bq = bm / pack;  // query rows per block
  const int64_t q_stride = static_cast<int64_t>(heads) * d, kv_stride = static_cast<int64_t>(kv_heads) * d;
  // This block's query rows: bq consecutive rows, or (paged) up to bq rows of ONE segment: tile y
  // is the y-th bq-row piece when every segment is cut into pieces of bq from its first row.
  if (threadIdx.x == 0) attn::find_piece(blockIdx.y, bq, n_q, seg_rows, n_seg, tile_i0, tile_rows, tile_seg);
  __syncthreads();
  const int64_t i0 = tile_i0;
  const int n_rows = tile_rows * pack;  // live block rows
  if (n_rows == 0) return;              // the whole block: a grid bound past the last piece
  const int32_t* table = tables ? tables + static_cast<int64_t>(tile_seg) * max_blocks : nullptr;

  // Query tile (zero rows past n_q, zero columns past d) and the rows' ranges.
  for (int c = threadIdx.x; c < bm * (DP / 8); c += blockDim.x) {
    const int r = c / (DP / 8), dc = (c % (DP / 8)) * 8;
    const bool ok = r < n_rows && dc < d;
    cp_async16(qs + r * LD + dc, ok ? q + (i0 + row_q(r)) * q_stride + row_head(r) * d + dc : q, ok);
  }
  cp_async_commit();
  for (int r = threadIdx.x; r < bm; r += blockDim.x) {
    const bool ok = r < n_rows;
    rb[r] = ok ? ranges[2 * (i0 + row_q(r))] : INT_MAX;
    re[r] = ok ? ranges[2 * (i0 + row_q(r)) + 1] : INT_MIN;
  }

  const int r_lo = warp * 16 + g, r_hi = r_lo + 8;  // this thread's two rows (block-local)
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float acc[NO][4];
#pragma unroll
  for (int a = 0; a < NO; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[a][c] = 0.0f;
  const bool partial = part.n_split > 0;
  float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.0f, 0.0f};  // folding: the rows' running result
  // Folds the split just ended into (M, L, O) and starts the next one from a fresh state.
  auto fold = [&] { attn::fold_fragment<NO>(M, L, m, l, acc, os, 128); };

  auto load_kv = [&](int buf, int64_t j0, int64_t e) {
    bf16_t* kd = ks + buf * BN * LD;
    bf16_t* vd = vs + buf * BN * LD;
    for (int c = threadIdx.x; c < BN * (DP / 8); c += blockDim.x) {
      const int r = c / (DP / 8), dc = (c % (DP / 8)) * 8;
      const int64_t j = j0 + r;  // logical key; its row in k/v (through the block table when paged)
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
    if (threadIdx.x == 0) attn::next_pass(rb, re, bm, prev_b, pass_b, pass_e);
    __syncthreads();
    const int pb = pass_b, pe = pass_e;
    if (pb == INT_MAX) break;
    prev_b = pb;
    const bool in_lo = rb[r_lo] == pb, in_hi = rb[r_hi] == pb;
    // A warp with no row in this pass would see only fully masked tiles, which change nothing: it
    // skips the math and only helps stage K/V (decode: one live warp, four loading).
    const bool warp_live = __any_sync(0xffffffffu, in_lo || in_hi);
    const int e_lo = re[r_lo], e_hi = re[r_hi];
    const int n_tiles = (pe - pb + BN - 1) / BN;
    // This block's tiles of the pass: all of them, or (split-parallel) those of split blockIdx.z.
    const int t_lo = partial ? static_cast<int>(blockIdx.z) * split_tiles : 0;
    const int t_hi = partial ? min(n_tiles, t_lo + split_tiles) : n_tiles;
    if (t_hi <= t_lo) continue;
    load_kv(0, pb + static_cast<int64_t>(t_lo) * BN, pe);
    for (int ti = t_lo; ti < t_hi; ++ti) {
      const int64_t j0 = pb + static_cast<int64_t>(ti) * BN;
      const int buf = (ti - t_lo) % 2;
      cp_async_wait<0>();
      __syncthreads();
      if (ti + 1 < t_hi) load_kv(buf ^ 1, j0 + BN, pe);
      if (!warp_live) continue;
      if (folding && ti > 0 && ti % split_tiles == 0) fold();  // a split ends before this tile
      const bf16_t* kt = ks + buf * BN * LD;
      const bf16_t* vt = vs + buf * BN * LD;

      float s[NS][4];
#pragma unroll
      for (int b = 0; b < NS; ++b)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[b][c] = 0.0f;
#pragma unroll
      for (int kd = 0; kd < DP; kd += 16) {
        uint32_t af[4];
        ldmatrix_x4(af, qs + (warp * 16 + lane % 16) * LD + kd + (lane / 16) * 8);
#pragma unroll
        for (int b = 0; b < NS; b += 2) {
          uint32_t bf[4];
          ldmatrix_x4(bf, kt + (b * 8 + (lane % 8) + (lane / 16) * 8) * LD + kd + ((lane / 8) % 2) * 8);
          mma_bf16(s[b], af, bf[0], bf[1]);
          mma_bf16(s[b + 1], af, bf[2], bf[3]);
        }
      }
      // Scale, mask, running max per row (the 4 threads of a quad share a row).
      float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int b = 0; b < NS; ++b)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int64_t j = j0 + b * 8 + 2 * t + c % 2;
          const bool hi = c >= 2;
          const bool ok = hi ? (in_hi && j < e_hi) : (in_lo && j < e_lo);
          s[b][c] = ok ? s[b][c] * scale : -INFINITY;
          tmax[hi] = fmaxf(tmax[hi], s[b][c]);
        }
      float alpha[2];
      uint32_t pf[NS / 2][4];  // P as A fragments, one per 16 keys
      attn::online_softmax<NS>(s, tmax, m, l, alpha, pf);
      attn::rescale<NO>(acc, alpha);
      // acc += P · V: A = P (keys as k), B = V tile [keys][d] read transposed.
#pragma unroll
      for (int kk = 0; kk < NS / 2; ++kk)
#pragma unroll
        for (int a = 0; a < NO; a += 2) {
          uint32_t bf[4];
          ldmatrix_x4_trans(
              bf, vt + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * LD + a * 8 + (lane / 16) * 8);
          mma_bf16(acc[a], pf[kk], bf[0], bf[1]);
          mma_bf16(acc[a + 1], pf[kk], bf[2], bf[3]);
        }
    }
    if (folding && warp_live) fold();  // the pass's last split
  }

  if (partial) {  // this split's (m, l, acc) of every row, for the merge
#pragma unroll
    for (int a = 0; a < NO; ++a)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int rr = c / 2;
        const int r = rr ? r_hi : r_lo;
        const int col = a * 8 + 2 * t + c % 2;
        if (r >= n_rows) continue;
        const int64_t at = (static_cast<int64_t>(blockIdx.z) * n_q + i0 + row_q(r)) * heads + row_head(r);
        if (a == 0 && c % 2 == 0 && t == 0) {
          part.ml[2 * at] = m[rr];
          part.ml[2 * at + 1] = l[rr];
        }
        if (col < d) part.acc[at * d + col] = acc[a][c];
      }
    return;
  }
  // out = rnd(acc / l) (folding: rnd(O / L)), the columns below d of rows below n_q.
#pragma unroll
  for (int a = 0; a < NO; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int rr = c / 2;
      const int r = rr ? r_hi : r_lo;
      const int64_t i = i0 + row_q(r);
      const int col = a * 8 + 2 * t + c % 2;
      if (r >= n_rows || col >= d) continue;
      float val;
      if (folding)
        val = L[rr] > 0.0f ? os[(a * 4 + c) * 128] / L[rr] : 0.0f;
      else
        val = l[rr] > 0.0f ? acc[a][c] / l[rr] : 0.0f;
      out[(i * heads + row_head(r)) * d + col] = f2bf(val);
    }
}

using Paging = AttentionPaging;

// 0: the kernel above; 1..: attention_tc_wide.cu's (test_hooks::set_cuda_attention_variant).
// The default: variant 9 (attention_tc_wgmma_sm90a.cu: both products on wgmma, q staged in shared memory; d
// padded to 64, or to 128 for 80 < head_dim <= 128) on compute capability 9.0, variant 1 (128 query rows per
// block, 8 warps, 3 stages) where 9 does not apply up to head_dim 128 (variant 0 above), the fastest on the
// vision and prefill shapes (bench/attention, H100, 2026-12-06: 9,350-patch image, 16 heads of 64: variant 0
// 2,395 us, 1 1,710, 5 1,598, 7 1,476 (= 9's kernel there); 2,333 causal rows, 16 heads of 128: variant 1
// 198.5 us, 9 190.0; the 1B page's prefill 21.4 -> 19.6 ms in whole runs); calls with few rows per sequence
// (decode) run variant 0 either way. Same bits per row in every variant.
constexpr int kDefaultVariant = 9;
// TF_CUDA_ATTENTION_VARIANT=N runs variant N (benchmarks of a candidate in whole runs; the same bits
// whichever runs, as the contract checks); unset, empty or out of range: the default.
std::atomic<int> g_variant{
    env_choice("TF_CUDA_ATTENTION_VARIANT", 0, attention_tc_wide_variants(), kDefaultVariant)};
// Keys per split (attention_split.cuh): 0, the default, is attn::split_keys(head_dim);
// TF_CUDA_ATTENTION_SPLIT=N (a multiple of 64) sets N for every head_dim, for whole-run A/B of another split
// size (a row's bits change with it, consistently in every form); test_hooks::set_cuda_attention_split for
// tests.
int split_env() {
  const int keys = env_choice("TF_CUDA_ATTENTION_SPLIT", 0, 1 << 20, 0);
  return keys % 64 == 0 ? keys : 0;
}
std::atomic<int> g_split{split_env()};
int split_of(int64_t d) {
  const int keys = g_split.load(std::memory_order_relaxed);
  return keys > 0 ? keys : attn::split_keys(d);
}
// Split-parallel few-row calls fold their splits in a merge launch (0, the default) or in their last block
// (1: attention_decode.cuh, merge_if_last); the same bits. Measured on the H200 (BENCHMARKS.md,
// twenty-seventh session) the last block's fold is slower: one Qwen3.5 sequence over 2,333 keys 27.5 -> 43.9
// us, the 1B's page decode 675 -> 644 tok/s (each thread folds several columns, each a chain of L2 loads over
// the splits, where the merge launch spreads them over a block per row and head).
// TF_CUDA_ATTENTION_FUSED_MERGE for whole-run A/B, test_hooks::set_cuda_attention_fused_merge for tests.
std::atomic<int> g_fused_merge{env_choice("TF_CUDA_ATTENTION_FUSED_MERGE", 0, 1, 0)};
std::atomic<bool> g_partials{true};     // may few-row calls run split-parallel (test hook)
std::atomic<int> g_pack{-1};            // pack kv-head groups: -1 by the grid size, 0 never, 1 always
std::atomic<bool> g_decode_form{true};  // few-row calls in attention_tc_decode.cu's blocks (test hook)
// Packed blocks are fewer (heads / kv_heads times): in the 64-row form, below about one wave of them a
// one-sequence decode is faster unpacked (H200: 1B 23.9 against 29.6 µs, Qwen3.5 39 against 56 at one
// sequence over 2,333 keys), above it packed (64 sequences: 1B 476 -> 315 µs, Qwen3.5 381 -> 175). The decode
// form (attention_tc_decode.cu) packs always: one sequence the same within noise, 8 Qwen3.5 sequences over
// 2,333 keys 86.6 -> 35.5 µs (BENCHMARKS.md). Either way the same bits.
constexpr int64_t kPackMinBlocks = 128;
// Few-row calls run split-parallel only while the decode form's unsplit grid has fewer blocks than this
// (about two per SM on the H200's 132).
constexpr int64_t kSplitMaxBlocks = 256;

template <int DP, int BN>
void launch_dp(cudaStream_t s, const bf16_t* q, const bf16_t* k, const bf16_t* v, const int32_t* ranges,
               float scale, bf16_t* out, int64_t n_q, int64_t n_k, int heads, int kv_heads, int d,
               const Paging& pg, int64_t max_keys) {
  // Query rows per block: 64 (4 warps). Few-row calls (decode, verification) go to attention_tc_decode.cu's
  // 16-row blocks below unless its test hook turns that off; then one warp here holds the segment's rows and
  // the others help stage the K/V tiles (a row's arithmetic is the same for every block size).
  const int warps = 4;  // the kernel's folding layout assumes 128 threads
  auto kernel = attention_tc_kernel<DP, BN>;
  static OncePerDevice attr;  // the limit is per device
  attr.run([&](int) {
    TF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(AttnCfg<DP, BN>::smem(warps, true))));
  });
  // The key splits (attention_split.cuh) by the longest range the call can hold: none needed; one block
  // per split when the sequences have few rows each (decode, draft verification) and the workspace holds
  // the partials; else folded in the block. The three give the same bits.
  const int split = split_of(d);
  int split_tiles = INT_MAX;
  bool folding = false;
  attn::Partials part;
  if (max_keys > split) {
    split_tiles = split / BN;
    const int64_t n_split = (max_keys + split - 1) / split;
    const bool few_rows = pg.seg_rows && n_q <= 16 * static_cast<int64_t>(pg.n_seg);
    // Split-parallel pays while the unsplit grid (one packed block per sequence and kv head in the decode
    // form) leaves SMs idle; once it fills them, the partials' round trip and the merge launch cost more than
    // the parallelism gains (H200: 64 sequences × 2,333 keys, 1B 277 split against 227 µs folded; Qwen3.5, 2
    // kv heads, still 133 against 202). The same bits either way.
    const bool grid_full = g_decode_form.load(std::memory_order_relaxed) &&
                           static_cast<int64_t>(pg.n_seg) * kv_heads >= kSplitMaxBlocks;
    float* ws = few_rows && !grid_full && n_split <= 65535 && g_partials.load(std::memory_order_relaxed)
                    ? attention_partials(s, n_split * n_q * heads * (d + 2))
                    : nullptr;
    if (ws) {
      part.ml = ws;
      part.acc = ws + 2 * n_split * n_q * heads;
      part.n_split = static_cast<int>(n_split);
    } else {
      folding = true;
    }
  }
  // Few rows per sequence: blocks of <= 16 rows whose four warps share each tile (attention_tc_decode.cu).
  const bool decode_form = pg.seg_rows && n_q <= 16 * static_cast<int64_t>(pg.n_seg) &&
                           g_decode_form.load(std::memory_order_relaxed);
  // The decode form and the split-parallel form pack each kv head's query heads into one block (their rows
  // share its K/V tiles): the decode form always (its four warps keep a packed block busy), the 64-row form
  // when the packed grid is large enough.
  const int group = heads / kv_heads;
  const int64_t packed_blocks = static_cast<int64_t>(pg.n_seg) * kv_heads * part.n_split;
  const int want = g_pack.load(std::memory_order_relaxed);
  const bool packs = group > 1 && (decode_form ? group <= 16 : part.n_split > 0 && group <= 16 * warps) &&
                     (want == 1 || (want < 0 && (decode_form || packed_blocks >= kPackMinBlocks)));
  const int pack = packs ? group : 1;
  if (decode_form) {
    // The counters: one per block column of the decode forms' grid (heads x pieces at most).
    if (part.n_split > 0 && g_fused_merge.load(std::memory_order_relaxed) == 1)
      part.done = attention_merge_counters(s, static_cast<int64_t>(heads) * (n_q + pg.n_seg));
    launch_attention_tc_decode(DP, s, q, k, v, ranges, scale, out, n_q, n_k, heads, kv_heads, d, pg,
                               split_tiles, folding, part, pack);
    if (part.n_split > 0 && !part.done) launch_attention_merge(s, part, n_q, heads, d, out);
    return;
  }
  const int bq = 16 * warps / pack;
  // Paged: Σ_s ceil(n_s / bq) <= n_seg + n_q / bq pieces; blocks past the last piece exit at once.
  const int64_t tiles = blocks_for(n_q, bq) + (pg.seg_rows ? pg.n_seg : 0);
  TF_CHECK(tiles <= 65535);
  const dim3 grid(static_cast<unsigned>(pack > 1 ? kv_heads : heads), static_cast<unsigned>(tiles),
                  static_cast<unsigned>(std::max(part.n_split, 1)));
  kernel<<<grid, 32 * warps, AttnCfg<DP, BN>::smem(warps, folding), s>>>(
      q, k, v, ranges, scale, out, n_q, n_k, heads, kv_heads, d, pg.tables, pg.max_blocks, pg.seg_rows,
      pg.n_seg, split_tiles, folding, part, pack);
  TF_CUDA_LAUNCHED();
  if (part.n_split > 0) launch_attention_merge(s, part, n_q, heads, d, out);
}

}  // namespace

bool attention_tc_applies(const Tensor& q, int64_t head_dim) {
  return q.dtype == DType::BF16 && head_dim % 8 == 0 && head_dim <= 256;
}

namespace {
void launch_any(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges,
                float scale, const Tensor& out, const Paging& pg) {
  const int64_t n_q = q.dim(0), heads = q.dim(1), d = q.dim(2), n_k = k.dim(0), kv_heads = k.dim(1);
  TF_CHECK(attention_tc_applies(q, d) && heads % kv_heads == 0);
  TF_CHECK(reinterpret_cast<uintptr_t>(q.data) % 16 == 0 && reinterpret_cast<uintptr_t>(k.data) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(v.data) % 16 == 0);
  // The longest key range a row of the call can have: its sequence's table (paged), else all keys.
  const int64_t max_keys = pg.seg_rows ? static_cast<int64_t>(pg.max_blocks) * kKvBlock : n_k;
  const int variant = g_variant.load(std::memory_order_relaxed);
  const int split = split_of(d);
  if (variant != 0 &&
      launch_attention_tc_wide(variant, s, q, k, v, key_ranges, scale, out, pg, max_keys > split ? split : 0))
    return;
  const auto* qp = ptr<const bf16_t>(q);
  const auto* kp = ptr<const bf16_t>(k);
  const auto* vp = ptr<const bf16_t>(v);
  const auto* rp = ptr<const int32_t>(key_ranges);
  auto* op = ptr<bf16_t>(out);
  const int H = static_cast<int>(heads), KVH = static_cast<int>(kv_heads), D = static_cast<int>(d);
  if (d <= 64)
    launch_dp<64, 64>(s, qp, kp, vp, rp, scale, op, n_q, n_k, H, KVH, D, pg, max_keys);
  else if (d <= 80)
    launch_dp<80, 64>(s, qp, kp, vp, rp, scale, op, n_q, n_k, H, KVH, D, pg, max_keys);
  else if (d <= 128)
    launch_dp<128, 64>(s, qp, kp, vp, rp, scale, op, n_q, n_k, H, KVH, D, pg, max_keys);
  else
    launch_dp<256, 32>(s, qp, kp, vp, rp, scale, op, n_q, n_k, H, KVH, D, pg, max_keys);
}
}  // namespace

void launch_attention_tc(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& key_ranges, float scale, const Tensor& out) {
  launch_any(s, q, k, v, key_ranges, scale, out, Paging{});
}

void launch_paged_attention_tc(cudaStream_t s, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                               const Tensor& tables, const Tensor& seg_rows, const Tensor& key_ranges,
                               float scale, const Tensor& out) {
  Paging pg;
  pg.tables = ptr<const int32_t>(tables);
  pg.max_blocks = static_cast<int>(tables.dim(1));
  pg.seg_rows = ptr<const int32_t>(seg_rows);
  pg.n_seg = static_cast<int>(tables.dim(0));
  launch_any(s, q, k_pool, v_pool, key_ranges, scale, out, pg);
}

}  // namespace tf::cuda

namespace tf::test_hooks {
bool set_cuda_attention_variant(int which) {
  TF_CHECK(which >= 0 && which <= tf::cuda::attention_tc_wide_variants());
  tf::cuda::g_variant.store(which, std::memory_order_relaxed);
  return true;
}
int cuda_attention_variants() { return 1 + tf::cuda::attention_tc_wide_variants(); }
int cuda_attention_default() { return tf::cuda::kDefaultVariant; }
bool set_cuda_attention_split(int keys) {
  TF_CHECK(keys >= 0 && keys % 64 == 0);
  tf::cuda::g_split.store(keys == 0 ? tf::cuda::split_env() : keys, std::memory_order_relaxed);
  return true;
}
bool set_cuda_attention_fused_merge(int mode) {
  TF_CHECK(mode == 0 || mode == 1);
  tf::cuda::g_fused_merge.store(mode, std::memory_order_relaxed);
  return true;
}
bool set_cuda_attention_partials(bool on) {
  tf::cuda::g_partials.store(on, std::memory_order_relaxed);
  return true;
}
bool set_cuda_attention_decode_form(bool on) {
  tf::cuda::g_decode_form.store(on, std::memory_order_relaxed);
  return true;
}
bool set_cuda_attention_pack(int mode) {
  TF_CHECK(mode >= -1 && mode <= 1);
  tf::cuda::g_pack.store(mode, std::memory_order_relaxed);
  return true;
}
}  // namespace tf::test_hooks
