// Variants 5 .. 8 of the flash attention (test_hooks::set_cuda_attention_variant; attention_tc_wide.cu
// lists the others): the wide kernel's rows and statements with one or both matrix products on Hopper's
// warpgroup instruction (wgmma.mma_async, sm_90a), for head_dim <= 64 (the vision towers' per-image attention
// over thousands of patches). Variant 5: S on mma.sync, P · V on wgmma; variant 6: S on wgmma, P · V on
// mma.sync. Both give variant 0's bits on the H200 (CudaContract.AttentionVariants); one 9,350-patch image,
// 16 heads: variant 1 1,725 us, 5 1,637 us, 6 1,633 us (H200, bench/attention, BENCHMARKS.md).
// Variant 7 (the default there since the twenty-sixth session): both on wgmma, S with q read from shared
// memory by descriptor (q staged in the 128-byte swizzle, the wgmma linear's A operand:
// linear_tc_wgmma_sm90a.cu) instead of from registers, P · V as variant 5. Variant 0's bits on the H100
// (CudaContract.AttentionVariants, attention_bench); 1,476 us against variant 5's 1,598 there, and on the
// H200 (where the register form below went wrong) exact too: 1,484 against 1,638 us. Variant 8 (twenty-sixth
// session): variant 7 with the next key tile's S issued before this tile's softmax, so the tensor cores
// compute it while the softmax runs on the CUDA cores (FlashAttention-3's overlap within a warpgroup); one
// stage more in the K / V ring, one block of 215 registers per SM. Exact, and slower: 1,952 us (H100) / 1,983
// (H200) against variant 7's 1,482 / 1,484; two blocks per SM already overlap one block's softmax with the
// other's products (BENCHMARKS.md, twenty-seventh session).
// Variant 9 (twenty-seventh session; the default since, attention_tc.cu): variant 7 for head_dim <= 64, and
// its statements over d padded to 128 for 80 < head_dim <= 128 (the decoders' prefill, where variant 1 ran),
// q rows and K / V tiles kept as two 64-wide halves of d, each in the same 128-byte swizzle, S's eight k16
// steps taken over the halves in turn, P · V one n64 product per half; one block of 158 registers per SM (q
// 32 KB, the K / V ring 96 KB, the fold's partials 64 KB). Variant 0's bits on the H100 (AttentionVariants at
// head_dim 128, causal and paged, folded splits); 2,333 causal rows x 16 heads of 128: 190.0 us against
// variant 1's 198.5 (117 TFLOP/s: the same ~25 % of the tensor cores as at head_dim 64). Not yet run on an
// H200.
// The tile loop of FORMs 2 and 4 (twenty-eighth session; ncu on the H100 had the vision tower's attention
// issue-bound, ~700 instructions per warp per key tile): a tile whose keys are all live and contiguous (or
// one block of the pool) copies with the addresses hoisted out of the loop (~210 instructions of index
// arithmetic before); exp_pack without its -inf test where every row of the warp has a finite running max;
// the rescale skipped where every alpha of the warp is 1; S's first k16 step with scale_d 0 instead of a
// zeroed s. Each leaves every value as it was (the reasons at each), so the bits are variant 0's as before.
//
// Per row, the arithmetic of variant 0 operation for operation (attention_tc.cu, top; attention_tc_wide.cu):
// - S = q · k over d in 16-wide steps from zero. wgmma (variant 6): m64n64k16, A = the warp's q fragments in
//   registers (the mma.m16n8k16 A layout, loaded once by ldmatrix as the wide kernel does), B = the K tile
//   read by descriptor; the accumulators' layout is mma.sync's C layout (s[b][c]: keys 8b + 2t + c % 2, rows
//   g, g + 8 of the warp's 16), so the scale / mask / online-softmax statements are the wide kernel's.
// - acc += P · V over the tile's keys in increasing 16s. wgmma (variant 5): m64n64k16, A = P as registers
//   (the pf fragments online_softmax packs, mma.sync's A layout), B = the V tile read by descriptor,
//   transposed (keys are B's k, stored as rows of d: the MN-major form).
// - the other product: mma.sync from the same swizzled tiles (ldmatrix at the swizzled addresses).
// wgmma's k16 step rounds as mma.sync's (16 products and the running f32 sum per element): the contract shows
// it here and for the wgmma linear (linear_tc_wgmma_sm90a.cu).
// NOT SOLVED: both products on wgmma in one kernel with q in registers (variant 6's S with variant 5's P · V)
// gave wrong values on the H200 (max |diff| 1.6 against the CPU) with each half exact alone, also at one
// block per SM (so not a register-allocation limit); the PTX orders every accumulator and A-fragment access
// between the fence_operand / wgmma.fence / wait statements. Left for a session with a disassembler.
// Differences from variant 1 (128 rows, 8 warps = 2 warpgroups, 3 stages) in the staging only:
// - K/V tiles unpadded, 64 bf16 (128 bytes) per key, in the 128-byte swizzle wgmma's descriptors read
//   (16-byte chunk c of key row r at chunk c ^ (r % 8), tiles 1024-byte aligned);
// - no warp skips a tile (the instruction is the warpgroup's): a tile with no live key for a row leaves its
//   m, l and acc bit for bit unchanged (s = -inf, alpha = 1, p = 0), which is what skipping gives.
// Shapes: q [n_q, heads, d], k/v [n_k, kv_heads, d] (paged: the block pool), key_ranges [n_q, 2], out
// [n_q, heads, d], bf16 but the ranges (i32); d <= 64, padded to 64 with zeros (variant 9: 80 < d <= 128,
// padded to 128).
#include <algorithm>
#include <climits>

#include "backend/cuda/attention_split.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma.cuh"
#include "backend/cuda/once_per_device.h"
#include "backend/cuda/wgmma.cuh"

namespace tf::cuda {
namespace {

using namespace mma;
using wgmma::desc_sw128;
using wgmma::fence_async_shared;

constexpr int BN = 64, WARPS = 8, STAGES = 3, kThreads = 32 * WARPS, BM = 16 * WARPS, NS = BN / 8;
constexpr int kAtom = 64 * 64;  // bf16 of one 128-byte-swizzle atom of 64 rows (8 KB)
constexpr uint32_t kAtomBytes = kAtom * sizeof(bf16_t);
// head_dim padded: 64, or 128 for FORM 4 (variant 9), whose q rows and K / V tiles sit as two 64-wide halves
// of d, each half a run of swizzle atoms (tile: half h at h * kAtom; q: half h at h * BM * 64).
__host__ __device__ constexpr int dp_of(int form) { return form == 4 ? 128 : 64; }
constexpr int kQLd = 64 + 8;                                // FORMs 0, 1: q rows padded (ldmatrix, once)
__host__ __device__ constexpr size_t kv_offset(int form) {  // K, V rings from a 1024-byte boundary
  return (size_t{BM} * (dp_of(form) == 64 ? kQLd : dp_of(form)) * sizeof(bf16_t) + 1023) / 1024 * 1024;
}
// K / V ring depth: FORM 3 issues the next tile's S before this tile's softmax, so it needs tile ti + 1
// landed at tile ti and keeps one stage more in flight.
__host__ __device__ constexpr int stages_of(int form) { return form == 3 ? STAGES + 1 : STAGES; }
__host__ __device__ constexpr size_t kv_bytes(int form) {  // one K or V tile: BN keys x dp_of(form)
  return size_t{2} * stages_of(form) * BN * dp_of(form) * sizeof(bf16_t);
}
constexpr size_t smem_of(int form, bool folding) {  // + 1024 alignment slack; + the fold's partials
  return kv_offset(form) + kv_bytes(form) + 1024 +
         (folding ? size_t{kThreads} * (dp_of(form) / 8) * 4 * sizeof(float) : 0);
}

// d[8][4] += A (the warpgroup's 64 x 16, each warp's 16 rows in registers a) · B (16 x 64 by descriptor b;
// TRANS_B 0: B stored as its 64 n rows, k contiguous (K-major: the K tile); 1: as its 16 k rows, n contiguous
// (MN-major: the V tile)).
template <int TRANS_B>
__device__ __forceinline__ void wgmma_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31 "
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),
        "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),
        "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),
        "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1), "n"(TRANS_B));
#else
  __trap();  // built for sm_90a only (the caller checks the device)
#endif
}

// acc += P · V(tile at vt): keys in increasing 16s (16 key rows of the V tile = 2048 bytes per step), P as
// the A fragments online_softmax packs, one n64 product per 64-wide half of d (acc blocks 8 h ..); waited for
// (every group of the warpgroup) and pinned on return.
template <int NO>
__device__ __forceinline__ void pv_wgmma(float (&acc)[NO][4], uint32_t (&pf)[NS / 2][4], uint32_t vt) {
  wgmma::fence_operand(acc);
  wgmma::fence_operand(pf);
  wgmma::fence();
#pragma unroll
  for (int h = 0; h < NO / 8; ++h)
#pragma unroll
    for (int kk = 0; kk < NS / 2; ++kk)
      wgmma_rs<1>(reinterpret_cast<float(&)[8][4]>(acc[8 * h]), pf[kk],
                  desc_sw128<true>(vt + h * kAtomBytes + kk * 2048));
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operand(acc);
  wgmma::fence_operand(pf);
}

// Variants 7 and 9's q staging: stage_queries' copies into the 128-byte swizzle (in each 64-wide half of d,
// row r's 16-byte chunk c at c ^ (r % 8), 128 bytes a row; d past the head zero-filled), made visible to the
// async proxy before the barrier.
template <int DP>
__device__ __forceinline__ void stage_queries_sw128(bf16_t* qs, int* rb, int* re,
                                                    const bf16_t* __restrict__ q,
                                                    const int32_t* __restrict__ ranges, int64_t i0,
                                                    int n_rows, int64_t q_stride, int h, int d) {
  for (int c = threadIdx.x; c < BM * (DP / 8); c += kThreads) {
    const int r = c / (DP / 8), ch = c % (DP / 8), dc = ch * 8;
    const bool ok = r < n_rows && dc < d;
    cp_async16(qs + (ch / 8) * BM * 64 + r * 64 + ((ch % 8) ^ (r % 8)) * 8,
               ok ? q + (i0 + r) * q_stride + h * d + dc : q, ok);
  }
  cp_async_commit();
  for (int r = threadIdx.x; r < BM; r += kThreads) {
    const bool ok = r < n_rows;
    rb[r] = ok ? ranges[2 * (i0 + r)] : INT_MAX;
    re[r] = ok ? ranges[2 * (i0 + r) + 1] : INT_MIN;
  }
  cp_async_wait<0>();
  fence_async_shared();
  __syncthreads();
}

// FORM 0 (variant 5): S on mma.sync, P · V on wgmma; 1 (variant 6): S on wgmma with q in registers, P · V on
// mma.sync; 2 (variant 7): S on wgmma with q in shared memory, P · V on wgmma; 3 (variant 8): FORM 2 with the
// next tile's S issued before this tile's softmax (the same statements per row in the same order; only when
// they run changes), one block per SM (215 registers); 4 (variant 9's head_dim 65 .. 128): FORM 2 over d
// padded to 128 (S's eight k16 steps over the two halves in turn, P · V one n64 product per half), one block
// per SM.
template <int FORM>
__global__ void __launch_bounds__(kThreads, FORM == 3 || FORM == 4 ? 1 : 2)
    attention_wgmma_kernel(const bf16_t* __restrict__ q, const bf16_t* __restrict__ k,
                           const bf16_t* __restrict__ v, const int32_t* __restrict__ ranges, float scale,
                           bf16_t* __restrict__ out, int64_t n_q, int64_t n_k, int heads, int kv_heads, int d,
                           const int32_t* __restrict__ tables, int max_blocks,
                           const int32_t* __restrict__ seg_rows, int n_seg, int split_tiles, bool folding) {
  constexpr int DP = dp_of(FORM), NO = DP / 8, KD = DP / 16, kTileElems = BN * DP;
  constexpr size_t kKvOffset = kv_offset(FORM);
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  unsigned char* base = smem_raw + ((1024 - raw % 1024) % 1024);  // 1024-byte aligned shared address
  bf16_t* qs = reinterpret_cast<bf16_t*>(base);                   // [BM][kQLd], swizzled: [DP / 64][BM][64]
  constexpr int ST = stages_of(FORM);
  bf16_t* ks = reinterpret_cast<bf16_t*>(base + kKvOffset);                 // [ST][DP / 64][BN][64] swizzled
  bf16_t* vs = ks + ST * kTileElems;                                        // [ST][DP / 64][BN][64] swizzled
  float* os = reinterpret_cast<float*>(base + kKvOffset + kv_bytes(FORM));  // folding: [NO][4][kThreads]
  __shared__ int rb[BM], re[BM], pass_b, pass_e;
  __shared__ int64_t tile_i0;
  __shared__ int tile_rows, tile_seg;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int h = blockIdx.y, kh = h / (heads / kv_heads);
  const int64_t q_stride = static_cast<int64_t>(heads) * d, kv_stride = static_cast<int64_t>(kv_heads) * d;
  if (threadIdx.x == 0) attn::find_piece(blockIdx.x, BM, n_q, seg_rows, n_seg, tile_i0, tile_rows, tile_seg);
  __syncthreads();
  const int64_t i0 = tile_i0;
  const int n_rows = tile_rows;
  if (n_rows == 0) return;  // the whole block: a grid bound past the last piece
  const int32_t* table = tables ? tables + static_cast<int64_t>(tile_seg) * max_blocks : nullptr;

  constexpr bool WS = FORM >= 1, WPV = FORM != 1;  // S, P · V on wgmma
  uint32_t qf[KD][4];  // FORM 0, 1: the warp's rows warp * 16 .. + 15 (the warpgroup's rows 16 (warp % 4) ..)
  if constexpr (FORM >= 2) {
    stage_queries_sw128<DP>(qs, rb, re, q, ranges, i0, n_rows, q_stride, h, d);
  } else {
    attn::stage_queries<BM, DP, kQLd, kThreads>(qs, rb, re, q, ranges, i0, n_rows, q_stride, h, d);
#pragma unroll
    for (int kd = 0; kd < KD; ++kd)
      ldmatrix_x4(qf[kd], qs + (warp * 16 + lane % 16) * kQLd + kd * 16 + (lane / 16) * 8);
  }
  // FORMs 2 .. 4: the warpgroup's 64 q rows, 128 bytes each (half h of d at + h * kQHalf).
  const uint32_t q_addr = smem_addr(qs) + static_cast<uint32_t>((warp / 4) * 64 * 64 * sizeof(bf16_t));
  constexpr uint32_t kQHalf = BM * 64 * sizeof(bf16_t);

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, acc[NO][4];
#pragma unroll
  for (int a = 0; a < NO; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[a][c] = 0.0f;
  float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.0f, 0.0f};  // folding: the rows' running result
  auto fold = [&] { attn::fold_fragment<NO>(M, L, m, l, acc, os + threadIdx.x, kThreads); };

  // This thread's 16-byte slots of a K / V tile (the generic loop's c = threadIdx.x + i * kThreads): key rows
  // r0 + i * kLoadRows, chunk ch0 of d, at dst0 + i * kLoadRows * 64 in the swizzle (kLoadRows % 8 == 0).
  constexpr int kRowChunks = DP / 8, kLoadRows = kThreads / kRowChunks, kLoads = BN / kLoadRows;
  static_assert(kThreads % kRowChunks == 0 && kLoadRows % 8 == 0 && BN % kLoadRows == 0 && BN == kKvBlock);
  const int r0 = threadIdx.x / kRowChunks, ch0 = threadIdx.x % kRowChunks;
  const int dst0 = (ch0 / 8) * kAtom + r0 * 64 + ((ch0 % 8) ^ (r0 % 8)) * 8;
  const int64_t src0 = r0 * kv_stride + static_cast<int64_t>(kh) * d + ch0 * 8;
  const int64_t load_stride = kLoadRows * kv_stride;
  auto load_kv = [&](int buf, int64_t j0, int64_t e) {
    bf16_t* kd = ks + buf * kTileElems;
    bf16_t* vd = vs + buf * kTileElems;
    // A tile whose keys are all live and in one place (contiguous rows j0 .., or one block of the pool) and
    // whose rows fill d: the generic loop's copies (ok everywhere) with the addresses hoisted.
    if (d == DP && j0 + BN <= e && (!table || j0 % kKvBlock == 0)) {
      const int64_t first = table ? static_cast<int64_t>(table[j0 / kKvBlock]) * kKvBlock : j0;
      if (first + BN <= n_k) {
        const int64_t off = first * kv_stride + src0;
#pragma unroll
        for (int i = 0; i < kLoads; ++i) {
          cp_async16(kd + dst0 + i * kLoadRows * 64, k + off + i * load_stride, true);
          cp_async16(vd + dst0 + i * kLoadRows * 64, v + off + i * load_stride, true);
        }
        return;
      }
    }
    for (int c = threadIdx.x; c < BN * (DP / 8); c += kThreads) {
      const int r = c / (DP / 8), ch = c % (DP / 8), dc = ch * 8;
      const int64_t j = j0 + r;  // logical key; its row in k/v (through the block table when paged)
      const int64_t row =
          table && j < e ? static_cast<int64_t>(table[j / kKvBlock]) * kKvBlock + j % kKvBlock : j;
      const bool ok = j < e && row < n_k && dc < d;
      const int64_t off = row * kv_stride + static_cast<int64_t>(kh) * d + dc;
      const int dst = (ch / 8) * kAtom + r * 64 + ((ch % 8) ^ (r % 8)) * 8;  // the 128-byte swizzle, per half
      cp_async16(kd + dst, ok ? k + off : k, ok);
      cp_async16(vd + dst, ok ? v + off : v, ok);
    }
  };
  const uint32_t ks_addr = smem_addr(ks), vs_addr = smem_addr(vs);

  int prev_b = INT_MIN;
  for (;;) {
    __syncthreads();  // every warp is done with the previous pass's tiles (and rb/re are written)
    if (threadIdx.x == 0) attn::next_pass(rb, re, BM, prev_b, pass_b, pass_e);
    __syncthreads();
    const int pb = pass_b, pe = pass_e;
    if (pb == INT_MAX) break;
    prev_b = pb;
    bool in[2];
    int e[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int r = warp * 16 + g + rr * 8;
      in[rr] = rb[r] == pb;
      e[rr] = re[r];
    }
    const int n_tiles = (pe - pb + BN - 1) / BN;
    if (n_tiles <= 0) continue;
#pragma unroll
    for (int st = 0; st < ST - 1; ++st) {
      if (st < n_tiles) load_kv(st, pb + static_cast<int64_t>(st) * BN, pe);
      cp_async_commit();
    }
    if constexpr (FORM == 3) {
      // Tile ti's K or V slot in its ring (a shared address).
      auto slot = [&](uint32_t ring, int ti) {
        return ring + static_cast<uint32_t>((ti % ST) * kTileElems * sizeof(bf16_t));
      };
      // s = q · K(ti), committed, not waited for. The first step writes s without reading it (scale_d 0: 0 +
      // x = x, the same sums as FORM 2's zeroed s), so no other instruction writes an accumulator while a
      // wgmma is in flight (ptxas would serialise them: C7515).
      auto issue_s = [&](float(&s)[NS][4], int ti) {
        wgmma::fence_operand(s);
        wgmma::fence();
#pragma unroll
        for (int kd = 0; kd < KD; ++kd)
          wgmma::m64n64k16_ss(reinterpret_cast<float(&)[NS * 4]>(s), desc_sw128<false>(q_addr + kd * 32),
                              desc_sw128<false>(slot(ks_addr, ti) + kd * 32), kd > 0);
        wgmma::commit();
        wgmma::fence_operand(s);
      };
      // One tile: S(ti + 1) issued into nxt, tile ti's softmax from cur meanwhile, then acc = acc * alpha +
      // P · V(ti) once no wgmma is in flight (rescale writes acc). cur / nxt alternate between sa and sb.
      auto step = [&](int ti, const float(&cur)[NS][4], float(&nxt)[NS][4]) {
        // Tiles 0 .. ti + ST - 2 committed: all but the last ST - 3 landed (tiles ti and ti + 1 resident for
        // every thread), then tile ti + ST - 1 into the slot of tile ti - 1, which no warp reads any more.
        cp_async_wait<ST - 3>();
        fence_async_shared();  // the copies (generic proxy) before wgmma reads them (async proxy)
        __syncthreads();
        {
          const int nx = ti + ST - 1;
          if (nx < n_tiles) load_kv(nx % ST, pb + static_cast<int64_t>(nx) * BN, pe);
          cp_async_commit();
        }
        if (folding && ti > 0 && ti % split_tiles == 0) fold();  // a split ends before this tile
        const bool more = ti + 1 < n_tiles;
        if (more) issue_s(nxt, ti + 1);
        const int64_t j0 = pb + static_cast<int64_t>(ti) * BN;
        bool full = true;
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) full = full && in[rr] && j0 + BN <= e[rr];
        // On a copy of cur: scale_mask works in place, and writing registers that a wgmma accumulates into
        // (cur is nxt's partner) while another is in flight makes ptxas serialise them.
        float sc[NS][4];
#pragma unroll
        for (int b = 0; b < NS; ++b)
#pragma unroll
          for (int c = 0; c < 4; ++c) sc[b][c] = cur[b][c];
        uint32_t pf[NS / 2][4];  // P as A fragments, one per 16 keys
        float tmax[2] = {-INFINITY, -INFINITY};
        attn::scale_mask<NS>(sc, full, static_cast<int>(j0), in, e, scale, t, tmax);
        float alpha[2];
        attn::online_softmax<NS>(sc, tmax, m, l, alpha, pf);
        if (more) {
          wgmma::wait<0>();
          wgmma::fence_operand(nxt);
        }
        attn::rescale<NO>(acc, alpha);
        pv_wgmma(acc, pf, slot(vs_addr, ti));
      };
      float sa[NS][4], sb[NS][4];
      cp_async_wait<ST - 2>();  // tile 0
      fence_async_shared();
      __syncthreads();
      issue_s(sa, 0);
      wgmma::wait<0>();
      wgmma::fence_operand(sa);
      for (int ti = 0; ti < n_tiles; ti += 2) {
        step(ti, sa, sb);
        if (ti + 1 < n_tiles) step(ti + 1, sb, sa);
      }
    } else {
      for (int ti = 0; ti < n_tiles; ++ti) {
        const int64_t j0 = pb + static_cast<int64_t>(ti) * BN;
        cp_async_wait<STAGES - 2>();
        fence_async_shared();  // the copies (generic proxy) before wgmma reads them (async proxy)
        __syncthreads();       // tile ti landed for every thread; slot (ti - 1) % STAGES is no longer read
        {
          const int nx = ti + STAGES - 1;
          if (nx < n_tiles) load_kv(nx % STAGES, pb + static_cast<int64_t>(nx) * BN, pe);
          cp_async_commit();
        }
        if (folding && ti > 0 && ti % split_tiles == 0) fold();  // a split ends before this tile
        bool full = true;
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) full = full && in[rr] && j0 + BN <= e[rr];
        const uint32_t kt = ks_addr + (ti % STAGES) * kTileElems * sizeof(bf16_t);
        const uint32_t vt = vs_addr + (ti % STAGES) * kTileElems * sizeof(bf16_t);

        float s[NS][4];
        if constexpr (FORM != 2 && FORM != 4) {
#pragma unroll
          for (int b = 0; b < NS; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) s[b][c] = 0.0f;
        }
        if constexpr (FORM == 2 || FORM == 4) {
          // The first step writes s without reading it (scale_d 0: FORM 3's issue_s, the sums of a zeroed s).
          wgmma::fence_operand(s);
          wgmma::fence();
#pragma unroll
          for (int kd = 0; kd < KD; ++kd)  // d's 16-wide steps in turn: step kd in half kd / 4
            wgmma::m64n64k16_ss(reinterpret_cast<float(&)[NS * 4]>(s),
                                desc_sw128<false>(q_addr + (kd / 4) * kQHalf + (kd % 4) * 32),
                                desc_sw128<false>(kt + (kd / 4) * kAtomBytes + (kd % 4) * 32), kd > 0);
          wgmma::commit();
          wgmma::wait<0>();
          wgmma::fence_operand(s);
        } else if constexpr (WS) {
          wgmma::fence_operand(s);
          wgmma::fence_operand(qf);
          wgmma::fence();
#pragma unroll
          for (int kd = 0; kd < KD; ++kd) wgmma_rs<0>(s, qf[kd], desc_sw128<false>(kt + kd * 32));
          wgmma::commit();
          wgmma::wait<0>();
          wgmma::fence_operand(s);
          wgmma::fence_operand(qf);
        } else {
          const bf16_t* kg = ks + (ti % STAGES) * kTileElems;
#pragma unroll
          for (int kd = 0; kd < KD; ++kd)
#pragma unroll
            for (int b = 0; b < NS; b += 2) {
              uint32_t bf[4];
              const int row = b * 8 + (lane % 8) + (lane / 16) * 8, ch = kd * 2 + (lane / 8) % 2;
              ldmatrix_x4(bf, kg + row * DP + (ch ^ (row % 8)) * 8);
              mma_bf16(s[b], qf[kd], bf[0], bf[1]);
              mma_bf16(s[b + 1], qf[kd], bf[2], bf[3]);
            }
        }

        uint32_t pf[NS / 2][4];  // P as A fragments, one per 16 keys
        float tmax[2] = {-INFINITY, -INFINITY};
        attn::scale_mask<NS>(s, full, static_cast<int>(j0), in, e, scale, t, tmax);
        float alpha[2];
        constexpr bool kLean = FORM == 2 || FORM == 4;  // the default forms: fewer instructions, same values
        attn::online_softmax<NS, kLean>(s, tmax, m, l, alpha, pf);
        // acc · α: skipped where every α of the warp is 1 (x · 1 = x; a NaN's payload ends at the final
        // division).
        if (!kLean || __any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f))
          attn::rescale<NO>(acc, alpha);
        // acc += P · V: keys in increasing 16s.
        if constexpr (WPV) {
          pv_wgmma(acc, pf, vt);
        } else {
          const bf16_t* vg = vs + (ti % STAGES) * kTileElems;
#pragma unroll
          for (int kk = 0; kk < NS / 2; ++kk)
#pragma unroll
            for (int a = 0; a < NO; a += 2) {
              uint32_t bf[4];
              const int row = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8, ch = a + lane / 16;
              ldmatrix_x4_trans(bf, vg + row * DP + (ch ^ (row % 8)) * 8);
              mma_bf16(acc[a], pf[kk], bf[0], bf[1]);
              mma_bf16(acc[a + 1], pf[kk], bf[2], bf[3]);
            }
        }
      }
    }
    if (folding) fold();  // the pass's last split
  }
  cp_async_wait<0>();

  // out = rnd(acc / l), the columns below d of rows below n_q.
#pragma unroll
  for (int a = 0; a < NO; ++a)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int rr = c / 2;
      const int r = warp * 16 + g + rr * 8;
      const int64_t i = i0 + r;
      const int col = a * 8 + 2 * t + c % 2;
      if (r >= n_rows || col >= d) continue;
      float val;
      if (folding)
        val = L[rr] > 0.0f ? os[(a * 4 + c) * kThreads + threadIdx.x] / L[rr] : 0.0f;
      else
        val = l[rr] > 0.0f ? acc[a][c] / l[rr] : 0.0f;
      out[(i * heads + h) * d + col] = f2bf(val);
    }
}

}  // namespace

bool launch_attention_tc_wgmma(int form, cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& key_ranges, float scale, const Tensor& out,
                               const AttentionPaging& pg, int split) {
  const int64_t n_q = q.dim(0), heads = q.dim(1), d = q.dim(2), n_k = k.dim(0), kv_heads = k.dim(1);
  const int64_t per = pg.seg_rows ? n_q / pg.n_seg : n_q;  // rows per sequence must fill the blocks
  TF_CHECK(form >= 0 && form < 5);
  // FORM 4 takes variant 0's head_dim-128 rows (80 < d <= 128: the same 16-wide steps over d, 128 padded) and
  // leaves d <= 64 to FORM 2; the others d <= 64.
  if (form == 4 && d <= 64) form = 2;
  const bool fits = form == 4 ? d > 80 && d <= 128 : d <= 64;
  if (!fits || per < 64 || !wgmma::device_is_sm90()) return false;
  constexpr decltype(&attention_wgmma_kernel<0>) kForms[] = {
      attention_wgmma_kernel<0>, attention_wgmma_kernel<1>, attention_wgmma_kernel<2>,
      attention_wgmma_kernel<3>, attention_wgmma_kernel<4>};
  auto kernel = kForms[form];
  static OncePerDevice attr;  // the limit is per device
  attr.run([&](int) {
    for (int f = 0; f < 5; ++f)
      TF_CUDA_CHECK(cudaFuncSetAttribute(kForms[f], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem_of(f, true))));
  });
  const bool folding = split > 0;
  const int64_t tiles = blocks_for(n_q, BM) + (pg.seg_rows ? pg.n_seg : 0);
  TF_CHECK(tiles < (int64_t{1} << 31) && heads <= 65535);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(heads));
  kernel<<<grid, kThreads, smem_of(form, folding), s>>>(
      ptr<const bf16_t>(q), ptr<const bf16_t>(k), ptr<const bf16_t>(v), ptr<const int32_t>(key_ranges), scale,
      ptr<bf16_t>(out), n_q, n_k, static_cast<int>(heads), static_cast<int>(kv_heads), static_cast<int>(d),
      pg.tables, pg.max_blocks, pg.seg_rows, pg.n_seg, folding ? split / BN : INT_MAX, folding);
  TF_CUDA_LAUNCHED();
  return true;
}

}  // namespace tf::cuda
