// act and act_mul: the hidden_act activations with Transformers' rounding points (backend/ops.h,
// ActKind), f32 math in the CPU reference's operation order; act_mul rounds a(gate), then the product.
#include <algorithm>

#include "backend/cuda/act.cuh"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/vec8.cuh"

namespace tf::cuda {
namespace {

// glu by columns: thread x of the grid's x takes columns [V x, V x + V) of rows y, y + gridDim.y, ...;
// act_mul's statement per element (the same bits), with no per-element index division (the grid-stride form
// before it divided by d in 64 bits). V = 8 (calls of >= kRowFormMinRows rows, d % 8 == 0, 16-byte aligned
// rows): one 16-byte access per half (a [9350, 8192] call: ~214 us before, ~109 us here, the bytes ~57 us); V
// = 1 for a decode step's few rows.
template <ActKind K, class T, int V>
__global__ void glu_cols_kernel(const T* __restrict__ g, T* __restrict__ o, int64_t rows, int d) {
  pdl_wait();
  pdl_trigger();
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x) * V;
  if (c >= d) return;
  for (int64_t i = blockIdx.y; i < rows; i += gridDim.y) {
    if constexpr (V == 8) {
      float a[8], b[8], y[8];
      load8(g + 2 * d * i + c, a);
      load8(g + 2 * d * i + d + c, b);
#pragma unroll
      for (int k = 0; k < 8; ++k) y[k] = act_one<K, T>(a[k]) * b[k];
      store8(o + d * i + c, y);
    } else {
      o[d * i + c] = from_f<T>(act_one<K, T>(to_f(g[2 * d * i + c])) * to_f(g[2 * d * i + d + c]));
    }
  }
}

}  // namespace

// Outside the unnamed namespace: nvcc wants the function enclosing an extended lambda to have a
// name it can reach from the host stub.
namespace act_detail {

// out[i] = a(gate[i]) (up == nullptr) or rnd(a(gate[i]) * up[i]).
template <ActKind K>
void launch_kind(cudaStream_t s, const Tensor& gate, const Tensor* up, const Tensor& out) {
  TF_DISPATCH_ACT(gate.dtype, T, {
    const T* g = ptr<const T>(gate);
    const T* u = up ? ptr<const T>(*up) : nullptr;
    T* o = ptr<T>(out);
    if (u) {
      launch_elementwise(s, gate.numel(), [=] __device__(int64_t i) {
        o[i] = from_f<T>(act_one<K, T>(to_f(g[i])) * to_f(u[i]));
      });
    } else {
      launch_elementwise(s, gate.numel(),
                         [=] __device__(int64_t i) { o[i] = from_f<T>(act_one<K, T>(to_f(g[i]))); });
    }
  });
}

// glu: out[i, j] = rnd(a(gu[i, j]) * gu[i, d + j]), gu[n, 2d] (act_mul over the two halves).
template <ActKind K>
void launch_glu_kind(cudaStream_t s, const Tensor& gu, const Tensor& out) {
  const int64_t d = out.dim(1), rows = out.dim(0);
  TF_DISPATCH_ACT(gu.dtype, T, {
    const T* g = ptr<const T>(gu);
    T* o = ptr<T>(out);
    if (rows == 0) return;
    TF_CHECK(d < (int64_t{1} << 30));  // column indices are int
    const unsigned gy = static_cast<unsigned>(std::min<int64_t>(rows, 65535));
    if (rows >= kRowFormMinRows && d % 8 == 0 && aligned16(g) && aligned16(o))
      launch_pdl(s, dim3(blocks_for(d / 8, 256), gy), dim3(256), 0, glu_cols_kernel<K, T, 8>, g, o, rows,
                 static_cast<int>(d));
    else
      launch_pdl(s, dim3(blocks_for(d, 256), gy), dim3(256), 0, glu_cols_kernel<K, T, 1>, g, o, rows,
                 static_cast<int>(d));
  });
}

}  // namespace act_detail

namespace {

void dispatch(cudaStream_t s, const Tensor& gate, const Tensor* up, ActKind kind, const Tensor& out) {
  switch (kind) {
    case ActKind::kSilu:
      return act_detail::launch_kind<ActKind::kSilu>(s, gate, up, out);
    case ActKind::kGelu:
      return act_detail::launch_kind<ActKind::kGelu>(s, gate, up, out);
    case ActKind::kGeluTanh:
      return act_detail::launch_kind<ActKind::kGeluTanh>(s, gate, up, out);
    case ActKind::kGeluNew:
      return act_detail::launch_kind<ActKind::kGeluNew>(s, gate, up, out);
    case ActKind::kQuickGelu:
      return act_detail::launch_kind<ActKind::kQuickGelu>(s, gate, up, out);
    case ActKind::kRelu:
      return act_detail::launch_kind<ActKind::kRelu>(s, gate, up, out);
  }
  TF_CHECK(false && "unknown ActKind");
}

}  // namespace

void launch_act_mul(cudaStream_t s, const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out) {
  TF_CHECK(gate.numel() == up.numel() && out.numel() == gate.numel());
  TF_CHECK(gate.dtype == up.dtype && out.dtype == gate.dtype && is_float_act(gate.dtype));
  dispatch(s, gate, &up, kind, out);
}

void launch_act(cudaStream_t s, const Tensor& x, ActKind kind, const Tensor& out) {
  TF_CHECK(out.numel() == x.numel() && out.dtype == x.dtype && is_float_act(x.dtype));
  dispatch(s, x, nullptr, kind, out);
}

void launch_glu(cudaStream_t s, const Tensor& gu, ActKind kind, const Tensor& out) {
  TF_CHECK(gu.rank() == 2 && gu.dim(1) % 2 == 0 && out.rank() == 2 && out.dim(0) == gu.dim(0) &&
           out.dim(1) * 2 == gu.dim(1) && out.dtype == gu.dtype && is_float_act(gu.dtype));
  switch (kind) {
    case ActKind::kSilu:
      return act_detail::launch_glu_kind<ActKind::kSilu>(s, gu, out);
    case ActKind::kGelu:
      return act_detail::launch_glu_kind<ActKind::kGelu>(s, gu, out);
    case ActKind::kGeluTanh:
      return act_detail::launch_glu_kind<ActKind::kGeluTanh>(s, gu, out);
    case ActKind::kGeluNew:
      return act_detail::launch_glu_kind<ActKind::kGeluNew>(s, gu, out);
    case ActKind::kQuickGelu:
      return act_detail::launch_glu_kind<ActKind::kQuickGelu>(s, gu, out);
    case ActKind::kRelu:
      return act_detail::launch_glu_kind<ActKind::kRelu>(s, gu, out);
  }
  TF_CHECK(false && "unknown ActKind");
}

}  // namespace tf::cuda
