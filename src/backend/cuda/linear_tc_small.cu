// linear on tensor cores for calls of <= 64 rows (decode, draft verification, small batches): the
// weight stream at memory speed, with the bits of every other configuration of linear_tc.cu.
//
// Arithmetic (the contract at the top of linear_tc.cu, unchanged): k cut into chunks of kc = 256, each
// chunk's partial an f32 chain of mma.sync m16n8k16 over its k in increasing 16-wide steps from zero (x
// the A operand, w the B operand, loaded by the same ldmatrix forms; a last 16-step that reaches past
// in_f is zero-filled, steps wholly past it are skipped), the partials added in f32 in chunk order
// (total = p_0, then total += p_c), + bias in f32, one rounding. So a row's bits equal those of the
// chunks kernel and the tiled kernels whatever the row count (the contract test checks it for every
// configuration here).
//
// Where the time goes at decode sizes (H200, bench/linear/linear_bench.cpp; BENCHMARKS.md "Decode GEMV"): the
// per-layer matrices are 4-12 MB, 1-3 us of stream, and a call that moves almost nothing (1 x 8 -> 8) costs 2
// us inside a CUDA graph, so the fixed cost per call (launch, first-byte latency, the block's fold and exit)
// is half of every call; the bytes in flight were never short. linear_tc.cu's chunks kernel (configuration 0
// of test_hooks::set_cuda_linear_small_config) added to that: a generic staging loop per 16-byte copy
// (runtime trip counts, 64-bit index arithmetic, divisions) that made each warp's prologue long (its launch
// floor is 3.2 us against 2.0 here), 12 chunks in two rounds of 8 warps, and 8-column blocks (qkv 512 blocks,
// lm_head 19,000) where 16-column ones stream faster.
//
// The kernel (linear_tc_small.cuh, with the fused forms this file also launches:
// launch_linear_tc_small_fused): a block owns BN = 8 * NT output columns over all of k; its nw warps (nw =
// min(chunks, a cap), a launch parameter) take chunks w, w + nw, ... Each lane computes its copy addresses
// once; a sub-tile's copies are then kWVec + kXVec unrolled cp.async with fixed offsets. A warp streams its
// sub-tiles (SUB of k, x rows then w rows) through its own S-deep ring: the first S - 1 (a whole
// 256-chunk at SUB 64, S 5) are in flight before any math. The partials meet in shared memory and are
// added in chunk order once per round of nw chunks (one round up to 16 chunks). With programmatic
// dependent launch (launch attribute; `griddepcontrol`), the weights of the first S - 1 sub-tiles are
// requested before the kernel waits for the previous one (weights never depend on it), x after. Calls with
// more tiles than fit on the SMs at once (lm_head; the 4B's 2560-wide rows, whose 10 warps a block leave one
// block per SM: gate|up 1,152 tiles in ~9 waves) launch only the resident blocks, each walking tiles
// blockIdx.x + m gridDim.x with one continuous stream per warp, so the next tile's weights load while the
// current tile folds and stores (a column's arithmetic is the same whichever block computes it).
//
// This file: the candidate configurations (kVariants) and the entry points.
// Shapes: x [n, in_f] bf16 (n <= 16 * MT); per weight (up to kMaxSegs, linear_many) w [out_f, in_f] bf16,
// bias [out_f] bf16 or null, out [n, out_f] bf16/f32; in_f % 8 == 0 and 16-byte aligned x and w (else the
// caller runs linear_tc.cu).
#include <span>
#include <type_traits>

#include "backend/cuda/kernels.h"
#include "backend/cuda/linear_tc_small.cuh"
#include "backend/cuda/vec8.cuh"
#include "backend/test_hooks.h"

namespace tf::cuda {
namespace {

using namespace small;

// Candidates (test_hooks::set_cuda_linear_small_config 1..): n8 tiles per block for calls of <= 4 and
// 5..16 rows (0: the occupancy rule of plan_nt below; 17..64 rows: 64 x 16 blocks always), the warp cap, and
// programmatic dependent launch (0 off, 1 wait for the previous kernel after the weight prologue, 2 also let
// the next kernel launch early), and the ring of the <= 16-row calls (linear_tc_small.cuh's Shape: 0 64-wide
// sub-tiles 5 deep, 1 128 x 4, 2 256 x 3, 3 64 x 8). Measured on the H200 (bench/linear/linear_bench.cpp,
// BENCHMARKS.md).
struct Variant {
  int nt_small, nt_mid, nw_cap, pdl;
  const char* name;
  int ring = 0;
};
constexpr Variant kVariants[] = {
    {1, 2, 16, 0, "gemv 8/16 cols (<=4/<=16 rows), <=16 warps"},
    {1, 1, 16, 0, "gemv 8/8 cols, <=16 warps"},
    {2, 4, 16, 0, "gemv 16/32 cols, <=16 warps"},
    {1, 2, 8, 0, "gemv 8/16 cols, <=8 warps"},
    {1, 2, 16, 1, "gemv 8/16 cols, <=16 warps, PDL wait"},
    {1, 2, 16, 2, "gemv 8/16 cols, <=16 warps, PDL wait + early trigger"},
    {2, 2, 16, 0, "gemv 16 cols, <=16 warps"},
    {0, 0, 16, 0, "gemv cols by occupancy (8/16/32), <=16 warps"},
    {0, 0, 16, 1, "gemv cols by occupancy, <=16 warps, PDL wait"},
    {0, 0, 16, 2, "gemv cols by occupancy, <=16 warps, PDL wait + early trigger"},
    {2, 2, 16, 0, "gemv 16 cols, <=16 warps, k sub-tiles 128 x 4 deep", 1},
    {2, 2, 16, 0, "gemv 16 cols, <=16 warps, k sub-tiles 256 x 3 deep", 2},
    {2, 2, 16, 0, "gemv 16 cols, <=16 warps, k sub-tiles 64 x 8 deep", 3},
    {0, 0, 16, 0, "gemv cols by occupancy, <=16 warps, k sub-tiles 128 x 4 deep", 1},
    {0, 0, 16, 0, "gemv cols by occupancy, <=16 warps, k sub-tiles 256 x 3 deep", 2},
};
constexpr int kNumVariants = static_cast<int>(sizeof(kVariants) / sizeof(kVariants[0]));
// A ring's sub-tile width (Shape<1, NT, ring>::SUB): k chunks must be multiples of it.
constexpr int ring_sub(int ring) { return ring == 1 ? 128 : ring == 2 ? 256 : 64; }

template <class TO, Pro P, Epi E, int R>
void run_small_ring(const Variant& v, cudaStream_t s, const bf16_t* x, const Segs<TO>& sg, int n, int in_f,
                    int out_f, int kc, const Fusion& fu) {
  int nt = n <= 4 ? v.nt_small : v.nt_mid;
  if (nt == 0 && n <= 16) nt = plan_nt<TO, P, E, R>(n, in_f, out_f, kc, v.nw_cap);
  // With programmatic dependent launch on (pdl.cuh), every configuration waits after its weight prologue and
  // lets the next kernel start early.
  const int pdl = pdl_enabled() ? 2 : v.pdl;
  auto go = [&](auto mt, auto ntc) {
    constexpr int M = decltype(mt)::value;
    launch_small<M, decltype(ntc)::value, TO, P, E, M == 1 ? R : 0>(s, x, sg, n, in_f, out_f, kc, v.nw_cap,
                                                                    pdl, fu);
  };
  using I1 = std::integral_constant<int, 1>;
  using I2 = std::integral_constant<int, 2>;
  using I4 = std::integral_constant<int, 4>;
  if (n <= 16) {
    if (nt == 1)
      go(I1{}, I1{});
    else if (nt == 2)
      go(I1{}, I2{});
    else
      go(I1{}, I4{});
  } else if constexpr (P == Pro::kNone && E == Epi::kStore) {
    go(I4{}, I2{});  // 64 x 16 per block (64 x 32 would need 64 accumulators and 64 running sums per thread)
  } else {
    TF_CHECK(false && "the fused forms take <= 16 rows");
  }
}

template <class TO, Pro P = Pro::kNone, Epi E = Epi::kStore>
void run_small(const Variant& v, cudaStream_t s, const bf16_t* x, const Segs<TO>& sg, int n, int in_f,
               int out_f, int kc, const Fusion& fu = {}) {
  switch (n <= 16 ? v.ring : 0) {
    case 1:
      return run_small_ring<TO, P, E, 1>(v, s, x, sg, n, in_f, out_f, kc, fu);
    case 2:
      return run_small_ring<TO, P, E, 2>(v, s, x, sg, n, in_f, out_f, kc, fu);
    case 3:
      return run_small_ring<TO, P, E, 3>(v, s, x, sg, n, in_f, out_f, kc, fu);
    default:
      return run_small_ring<TO, P, E, 0>(v, s, x, sg, n, in_f, out_f, kc, fu);
  }
}

}  // namespace

int linear_tc_small_variants() { return kNumVariants; }
const char* linear_tc_small_name(int which) {
  return which >= 1 && which <= kNumVariants ? kVariants[which - 1].name : "?";
}

bool launch_linear_tc_small(cudaStream_t s, int which, const Tensor& x, std::span<const Tensor> w,
                            std::span<const Tensor* const> bias, std::span<const Tensor> out, int kc) {
  const size_t count = w.size();
  if (which < 1 || which > kNumVariants || count < 1 || count > kMaxSegs) return false;
  TF_CHECK(out.size() == count && bias.size() == count);
  const int64_t n = x.dim(0), in_f = x.dim(1);
  const auto* xp = ptr<const bf16_t>(x);
  int64_t out_f = 0;
  bool ok = in_f % 8 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0;
  for (size_t i = 0; i < count; ++i) {
    ok = ok && reinterpret_cast<uintptr_t>(w[i].data) % 16 == 0 && w[i].dim(1) == in_f &&
         out[i].dtype == out[0].dtype;
    out_f += w[i].dim(0);
  }
  if (!ok || n < 1 || n > 64 || in_f > (int64_t{1} << 30) || out_f > (int64_t{1} << 30)) return false;
  const Variant& v = kVariants[which - 1];
  if (kc % (n <= 16 ? ring_sub(v.ring) : 32) != 0) return false;
  const int ni = static_cast<int>(n), ii = static_cast<int>(in_f), oi = static_cast<int>(out_f);
  auto go = [&](auto* tag) {
    using TO = std::remove_pointer_t<decltype(tag)>;
    Segs<TO> sg{};
    sg.count = static_cast<int>(count);
    for (size_t i = 0; i < count; ++i) {
      sg.w[i] = ptr<const bf16_t>(w[i]);
      sg.bias[i] = bias[i] ? ptr<const bf16_t>(*bias[i]) : nullptr;
      sg.out[i] = ptr<TO>(out[i]);
      sg.out_f[i] = static_cast<int>(w[i].dim(0));
    }
    run_small<TO>(v, s, xp, sg, ni, ii, oi, kc);
  };
  if (out[0].dtype == DType::BF16)
    go(static_cast<bf16_t*>(nullptr));
  else
    go(static_cast<float*>(nullptr));
  return true;
}

bool launch_linear_tc_small_fused(cudaStream_t s, int which, const SmallFused& f, const Tensor& x,
                                  std::span<const Tensor> w, const Tensor* bias, std::span<const Tensor> out,
                                  int kc) {
  const size_t count = w.size();
  if (which < 1 || which > kNumVariants || count < 1 || count > kMaxSegs || out.size() != count) return false;
  if ((f.glu || f.add) && count != 1) return false;
  const int64_t n = x.dim(0), in_f = x.dim(1);
  if (n < 1 || n > 16 || in_f % 8 != 0 || in_f > (int64_t{1} << 30) ||
      kc % ring_sub(kVariants[which - 1].ring))
    return false;
  bool ok = x.dtype == DType::BF16 && aligned16(x.data) && (!bias || (!f.glu && bias->dtype == DType::BF16));
  int64_t out_f = 0;
  for (size_t i = 0; i < count; ++i) {
    ok = ok && w[i].dtype == DType::BF16 && out[i].dtype == DType::BF16 && aligned16(w[i].data) &&
         w[i].dim(1) == in_f;
    out_f += w[i].dim(0);
  }
  if (f.norm_w)
    ok = ok && f.norm_w->dtype == DType::BF16 && f.norm_w->numel() == in_f && aligned16(f.norm_w->data);
  if (f.glu) ok = ok && f.act == ActKind::kSilu && w[0].dim(0) % 2 == 0 && out[0].dim(1) * 2 == w[0].dim(0);
  if (!ok || out_f > (int64_t{1} << 30)) return false;
  Segs<bf16_t> sg{};
  sg.count = static_cast<int>(count);
  for (size_t i = 0; i < count; ++i) {
    sg.w[i] = ptr<const bf16_t>(w[i]);
    sg.bias[i] = i == 0 && bias ? ptr<const bf16_t>(*bias) : nullptr;
    sg.out[i] = ptr<bf16_t>(out[i]);
    sg.out_f[i] = static_cast<int>(f.glu ? w[i].dim(0) / 2 : w[i].dim(0));
  }
  Fusion fu;
  if (f.norm_w) {
    fu.norm_w = ptr<const bf16_t>(*f.norm_w);
    fu.eps = f.eps;
    fu.one_plus = f.kind == RmsNormKind::kOnePlusWeight;
  }
  const Variant& v = kVariants[which - 1];
  const int ni = static_cast<int>(n), ii = static_cast<int>(in_f), oi = static_cast<int>(out_f);
  const auto* xp = ptr<const bf16_t>(x);
  if (f.norm_w && f.glu)
    run_small<bf16_t, Pro::kNorm, Epi::kGlu>(v, s, xp, sg, ni, ii, oi, kc, fu);
  else if (f.norm_w && !f.add)
    run_small<bf16_t, Pro::kNorm, Epi::kStore>(v, s, xp, sg, ni, ii, oi, kc, fu);
  else if (!f.norm_w && f.add && !f.glu)
    run_small<bf16_t, Pro::kNone, Epi::kAdd>(v, s, xp, sg, ni, ii, oi, kc, fu);
  else
    return false;  // (no other combination is used)
  return true;
}

}  // namespace tf::cuda

namespace tf::test_hooks {
bool set_cuda_linear_small_grid_cap(int blocks) {
  TF_CHECK(blocks >= 0);
  tf::cuda::small::g_grid_cap.store(blocks, std::memory_order_relaxed);
  return true;
}
}  // namespace tf::test_hooks
