// Gated delta rule over every segment of a step on a pool of state slots (ops.h
// gated_delta_rule_{chunked,recurrent}_slots): the recurrent form in one launch, one block per (value
// head, segment), running gated_delta_rule.cu's per-head code (gated_delta_rule.cuh) on its segment's
// rows and its slot's state in place; the chunked form as gated_delta_rule_chunks.cu's two launches. A
// segment's bits are those of the one-sequence kernel over its rows (the CPU's, bit for bit), whatever the
// other segments, their number or their order. Kept states (draft verification rows, prompt-cache multiples
// of 64) are written from the same threads that update S. With test_hooks::set_cuda_delta_rule_variant(1) the
// segments run one by one through gated_delta_rule_seq.cu's kernel (host loop; that variant is a test path).
#include <algorithm>
#include <atomic>

#include "backend/cuda/common.cuh"
#include "backend/cuda/gated_delta_rule.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/pdl.cuh"
#include "backend/op_checks.h"

namespace tf::cuda {

extern std::atomic<int> g_delta_rule_variant;  // gated_delta_rule.cu

namespace {

using Dims = gdr::Dims;

// grid (hv, n_seg, dv / recurrent_cols), dynamic smem recurrent_smem(d). div: the recurrent rule's query
// divisor.
template <class T>
__global__ void __launch_bounds__(gdr::kRecThreads)
    slots_kernel(Dims d, const T* q, const T* k, const T* v, const float* g, const T* beta, float* states,
                 const int32_t* segs, T* out, float* keep, float div) {
  extern __shared__ float sm[];
  pdl_wait();  // pdl.cuh
  pdl_trigger();
  const int64_t h = blockIdx.x, s = blockIdx.y, hs = d.hv * d.dk * d.dv;
  const int64_t c0 = static_cast<int64_t>(blockIdx.z) * gdr::recurrent_cols(d);
  const gdr::SegRow sg = gdr::read_seg_row(segs, s, 0);
  if (sg.n <= 0) return;
  Dims ds = d;
  ds.n = sg.n;
  const T *qr = q + sg.r0 * d.hk * d.dk, *kr = k + sg.r0 * d.hk * d.dk, *vr = v + sg.r0 * d.hv * d.dv;
  gdr::recurrent_head(ds, h, c0, qr, kr, vr, g + sg.r0 * d.hv, beta + sg.r0 * d.hv,
                      states + sg.slot * hs + h * d.dk * d.dv, out + sg.r0 * d.hv * d.dv, sm, div,
                      gdr::keep_plan(sg, keep, hs));
}

Tensor slot_of(const Tensor& pool, int64_t i) {
  Shape rest(pool.shape.begin() + 1, pool.shape.end());
  return pool.slice_rows(i, i + 1).reshaped(std::move(rest));
}

// The per-token variant: segments one by one, cut after each kept row, kept states copied out.
void seq_variant(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                 const Tensor& beta, const Tensor& states, const Tensor& segs, const Tensor& out,
                 const Tensor* keep, bool chunked) {
  Buffer host(DType::I32, segs.shape);
  TF_CUDA_CHECK(cudaMemcpyAsync(host.as<int32_t>(), segs.data, segs.nbytes(), cudaMemcpyDeviceToHost, s));
  TF_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto all = opcheck::slot_segments(host.view(), q.dim(0), states.dim(0), keep ? keep->dim(0) : 0,
                                          chunked ? gdr::kChunk : 1);
  for (const opcheck::SlotSeg& sg : all) {
    const Tensor S = slot_of(states, sg.slot);
    int64_t j = 0;
    for (int64_t a = 0; a < sg.n();) {
      int64_t b = sg.n();
      if (sg.keep0 >= 0) b = std::min(b, a + sg.keep_step - (sg.pos0 + a) % sg.keep_step);
      const int64_t r0 = sg.r0 + a, r1 = sg.r0 + b;
      launch_gated_delta_rule_seq(s, q.slice_rows(r0, r1), k.slice_rows(r0, r1), v.slice_rows(r0, r1),
                                  g.slice_rows(r0, r1), beta.slice_rows(r0, r1), S, out.slice_rows(r0, r1),
                                  chunked);
      if (sg.keep0 >= 0 && (sg.pos0 + b) % sg.keep_step == 0) {
        const Tensor dst = slot_of(*keep, sg.keep0 + j++);
        TF_CUDA_CHECK(cudaMemcpyAsync(dst.data, S.data, S.nbytes(), cudaMemcpyDeviceToDevice, s));
      }
      a = b;
    }
  }
}

}  // namespace

void launch_gated_delta_rule_slots(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& g, const Tensor& beta, const Tensor& states,
                                   const Tensor& segs, const Tensor& out, const Tensor* keep, bool chunked) {
  TF_CHECK(states.rank() == 4);
  const Dims d = opcheck::delta_rule(q, k, v, g, beta, slot_of(states, 0), out);
  opcheck::slot_segs_shape(segs);
  TF_CHECK(!keep || (keep->rank() == 4 && keep->dtype == DType::F32 && keep->dim(1) == d.hv &&
                     keep->dim(2) == d.dk && keep->dim(3) == d.dv));
  const int64_t n_seg = segs.dim(0);
  if (n_seg == 0 || d.n == 0 || d.hv == 0) return;
  TF_CHECK(n_seg <= 65535);
  if (g_delta_rule_variant.load(std::memory_order_relaxed) == 1)
    return seq_variant(s, q, k, v, g, beta, states, segs, out, keep, chunked);
  // chunk: query * (1 / dk**0.5); recurrent: query / dk**0.5 (Python doubles, f32 tensor op).
  const float mul = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  const float div = static_cast<float>(std::sqrt(static_cast<double>(d.dk)));
  float* kp = keep ? ptr<float>(*keep) : nullptr;
  if (chunked)
    return gdr::launch_chunked_rule(s, d, q, k, v, g, beta, ptr<float>(states), ptr<const int32_t>(segs),
                                    n_seg, out, kp, mul);
  const dim3 grid(static_cast<unsigned>(d.hv), static_cast<unsigned>(n_seg),
                  static_cast<unsigned>(blocks_for(d.dv, gdr::recurrent_cols(d))));
  TF_DISPATCH_ACT(q.dtype, T, {
    launch_pdl(s, grid, dim3(gdr::kRecThreads), gdr::recurrent_smem(d), slots_kernel<T>, d, ptr<const T>(q),
               ptr<const T>(k), ptr<const T>(v), ptr<const float>(g), ptr<const T>(beta), ptr<float>(states),
               ptr<const int32_t>(segs), ptr<T>(out), kp, div);
  });
}

}  // namespace tf::cuda
