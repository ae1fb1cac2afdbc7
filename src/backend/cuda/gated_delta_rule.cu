// Gated delta rule of one sequence: the recurrent (decode) form, one block per value head, and the
// chunked (prefill) form as gated_delta_rule_chunks.cu's two launches over the call as one segment. The
// arithmetic is the CPU reference's statement by statement (backend/cpu/gated_delta_rule.cpp): every
// sum runs in the same order, so the outputs and the f32 state are bit-identical to it. Within a
// head, threads split the independent output elements; the token order stays sequential.
#include <atomic>

#include "backend/cuda/common.cuh"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/gated_delta_rule.cuh"
#include "backend/cuda/kernels.h"
#include "backend/op_checks.h"
#include "backend/test_hooks.h"

namespace tf::cuda {

namespace {

using gdr::KeepPlan;
using gdr::recurrent_head;
using Dims = gdr::Dims;

// state[hv, dk, dv] f32. grid (hv, 1, dv / recurrent_cols), dynamic smem recurrent_smem(d).
template <class T>
__global__ void __launch_bounds__(gdr::kRecThreads)
    recurrent_kernel(Dims d, const T* q, const T* k, const T* v, const float* g, const T* beta, float* state,
                     T* out, float div) {
  extern __shared__ float sm[];
  const int64_t h = blockIdx.x, c0 = static_cast<int64_t>(blockIdx.z) * gdr::recurrent_cols(d);
  recurrent_head(d, h, c0, q, k, v, g, beta, state + h * d.dk * d.dv, out, sm, div, KeepPlan{});
}

}  // namespace

// 0: the kernels above and, for the chunked form, gated_delta_rule_chunks_tc.cu where it applies (the
// default); 1: gated_delta_rule_seq.cu's per-token recurrence; 2: as 0 with the chunked form always the
// CPU-exact kernels of gated_delta_rule_chunks.cu. TF_CUDA_DELTA_RULE sets it for whole-run A/B (2 against
// 0: the tensor-core chunked form against the CPU's arithmetic), test_hooks::set_cuda_delta_rule_variant for
// tests.
std::atomic<int> g_delta_rule_variant{env_choice("TF_CUDA_DELTA_RULE", 0, 2, 0)};

void launch_gated_delta_rule(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out,
                             bool chunked) {
  if (g_delta_rule_variant.load(std::memory_order_relaxed) == 1)
    return launch_gated_delta_rule_seq(s, q, k, v, g, beta, state, out, chunked);
  const Dims d = opcheck::delta_rule(q, k, v, g, beta, state, out);
  if (d.n == 0 || d.hv == 0) return;
  // chunk: query * (1 / dk**0.5); recurrent: query / dk**0.5 (Python doubles, f32 tensor op).
  const float mul = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  const float div = static_cast<float>(std::sqrt(static_cast<double>(d.dk)));
  if (chunked)
    return gdr::launch_chunked_rule(s, d, q, k, v, g, beta, ptr<float>(state), nullptr, 1, out, nullptr, mul);
  const dim3 grid(static_cast<unsigned>(d.hv), 1,
                  static_cast<unsigned>(blocks_for(d.dv, gdr::recurrent_cols(d))));
  TF_DISPATCH_ACT(q.dtype, T, {
    recurrent_kernel<T><<<grid, gdr::kRecThreads, gdr::recurrent_smem(d), s>>>(
        d, ptr<const T>(q), ptr<const T>(k), ptr<const T>(v), ptr<const float>(g), ptr<const T>(beta),
        ptr<float>(state), ptr<T>(out), div);
    TF_CUDA_LAUNCHED();
  });
}

}  // namespace tf::cuda

namespace tf::test_hooks {
bool set_cuda_delta_rule_variant(int which) {
  TF_CHECK(which >= 0 && which <= 2);
  tf::cuda::g_delta_rule_variant.store(which, std::memory_order_relaxed);
  return true;
}
}  // namespace tf::test_hooks
