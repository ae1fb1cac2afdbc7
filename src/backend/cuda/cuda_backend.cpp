#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"

namespace tf {
namespace cuda {

void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: CUDA error in %s: %s (%s)\n", file, line, what, cudaGetErrorString(e),
               cudaGetErrorName(e));
  std::abort();
}

}  // namespace cuda

namespace {

struct CudaGraph final : Backend::Graph {
  cudaGraphExec_t exec = nullptr;
  ~CudaGraph() override {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

// Allocations are stream-ordered (cudaMallocAsync on the backend's stream, from a pool that keeps
// freed memory), so the per-op temporaries of a forward pass cost no device synchronisation.
class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, cudaStream_t stream) : device_(device), s_(stream) {}
  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(s_);
    cudaStreamDestroy(s_);
  }
  std::string_view name() const override { return "cuda"; }

  DeviceBuffer alloc(DType dtype, const Shape& shape) override {
    Tensor t{nullptr, dtype, shape};
    const size_t bytes = std::max<size_t>(256, (t.nbytes() + 255) / 256 * 256);
    bind_thread();  // memory calls may come from a thread other than the engine's (loading, teardown)
    TF_CUDA_CHECK(cudaMallocAsync(&t.data, bytes, s_));
    TF_CUDA_CHECK(cudaMemsetAsync(t.data, 0, bytes, s_));
    return DeviceBuffer(this, t);
  }
  void upload(const Tensor& dst, const void* host) override {
    if (dst.nbytes())
      TF_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, dst.nbytes(), cudaMemcpyHostToDevice, s_));
    // Pageable host memory: the call returns once the bytes are staged, so `host` may be freed.
  }
  void download(const Tensor& src, void* host) override {
    if (!src.nbytes()) return;
    TF_CUDA_CHECK(cudaMemcpyAsync(host, src.data, src.nbytes(), cudaMemcpyDeviceToHost, s_));
    TF_CUDA_CHECK(cudaStreamSynchronize(s_));
  }
  DeviceBuffer import_host(const Tensor& host) override {
    DeviceBuffer d = alloc(host.dtype, host.shape);
    upload(d.tensor(), host.data);
    return d;
  }
  void synchronize() override { TF_CUDA_CHECK(cudaStreamSynchronize(s_)); }
  void free_memory(void* data) override {
    bind_thread();
    TF_CUDA_CHECK(cudaFreeAsync(data, s_));
  }
  size_t free_device_memory() override {
    bind_thread();
    TF_CUDA_CHECK(cudaStreamSynchronize(s_));
    size_t free = 0, total = 0;
    TF_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return free;
  }

  void bind_thread() override { TF_CUDA_CHECK(cudaSetDevice(device_)); }
  bool can_capture() const override { return true; }
  void begin_capture() override {
    // Thread-local: only this thread's unsafe calls are refused meanwhile (a server thread may query
    // free memory).
    TF_CUDA_CHECK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
  }
  std::unique_ptr<Graph> end_capture() override {
    cudaGraph_t g = nullptr;
    TF_CUDA_CHECK(cudaStreamEndCapture(s_, &g));
    auto out = std::make_unique<CudaGraph>();
    TF_CUDA_CHECK(cudaGraphInstantiate(&out->exec, g, 0));
    TF_CUDA_CHECK(cudaGraphDestroy(g));
    return out;
  }
  void replay(Graph& g) override { TF_CUDA_CHECK(cudaGraphLaunch(static_cast<CudaGraph&>(g).exec, s_)); }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) override {
    cuda::launch_linear(s_, x, w, bias, out);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, RmsNormKind kind, const Tensor& out) override {
    cuda::launch_rms_norm(s_, x, w, eps, kind, out);
  }
  void add_rms_norm(const Tensor& h, const Tensor& delta, const Tensor& w, float eps, RmsNormKind kind,
                    const Tensor& out) override {
    cuda::launch_add_rms_norm(s_, h, delta, w, eps, kind, out);
  }
  void qkv_prep(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& cos,
                const Tensor& sin, const Tensor* slots, const Tensor& q_out, const Tensor& k_out,
                const Tensor& v_out) override {
    cuda::launch_qkv_prep(s_, qkv, q_norm, k_norm, eps, cos, sin, slots, q_out, k_out, v_out);
  }
  void glu(const Tensor& gu, ActKind kind, const Tensor& out) override {
    cuda::launch_glu(s_, gu, kind, out);
  }
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, const Tensor& out) override {
    cuda::launch_layer_norm(s_, x, w, b, eps, out);
  }
  void rope_cos_sin(const Tensor& angles, const Tensor& cos, const Tensor& sin) override {
    cuda::launch_rope_cos_sin(s_, angles, cos, sin);
  }
  void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    cuda::launch_rope(s_, x, cos, sin, out);
  }
  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& tables,
                       const Tensor& seg_rows, const Tensor& key_ranges, float scale,
                       const Tensor& out) override {
    cuda::launch_paged_attention(s_, q, k_pool, v_pool, tables, seg_rows, key_ranges, scale, out);
  }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges, float scale,
                 const Tensor& out) override {
    cuda::launch_attention(s_, q, k, v, key_ranges, scale, out);
  }
  void act_mul(const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out) override {
    cuda::launch_act_mul(s_, gate, up, kind, out);
  }
  void act(const Tensor& x, ActKind kind, const Tensor& out) override { cuda::launch_act(s_, x, kind, out); }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override { cuda::launch_add(s_, a, b, out); }
  void cast(const Tensor& x, const Tensor& out) override { cuda::launch_cast(s_, x, out); }
  void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) override {
    cuda::launch_embedding(s_, ids, table, out);
  }
  void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out) override {
    cuda::launch_gather_rows(s_, src, rows, out);
  }
  void scatter_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) override {
    cuda::launch_scatter_rows(s_, src, rows, dst);
  }
  void copy(const Tensor& src, const Tensor& dst) override {
    TF_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel());
    const size_t n = src.nbytes();
    if (n == 0) return;
    const char *a = static_cast<const char*>(src.data), *b = static_cast<const char*>(dst.data);
    TF_CHECK(a + n <= b || b + n <= a);  // overlapping ranges are a caller bug
    TF_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, n, cudaMemcpyDeviceToDevice, s_));
  }
  void patchify(const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw, const Tensor& out) override {
    cuda::launch_patchify(s_, pixels, patch, gh, gw, out);
  }
  void unfold_2x2(const Tensor& x, int64_t gh, int64_t gw, const Tensor& out) override {
    cuda::launch_unfold_2x2(s_, x, gh, gw, out);
  }
  void argmax(const Tensor& logits, const Tensor& out) override { cuda::launch_argmax(s_, logits, out); }
  void top_k(const Tensor& logits, int64_t k, const Tensor& values, const Tensor& indices) override {
    cuda::launch_top_k(s_, logits, k, values, indices);
  }

  void causal_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& out) override {
    cuda::launch_causal_conv1d_silu(s_, x, w, state, out);
  }
  void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias,
                 const Tensor& g, const Tensor& beta) override {
    cuda::launch_gdn_gates(s_, a, b, A_log, dt_bias, g, beta);
  }
  void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& beta, const Tensor& state, const Tensor& out) override {
    cuda::launch_gated_delta_rule(s_, q, k, v, g, beta, state, out, /*chunked=*/true);
  }
  void gated_delta_rule_recurrent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                  const Tensor& beta, const Tensor& state, const Tensor& out) override {
    cuda::launch_gated_delta_rule(s_, q, k, v, g, beta, state, out, /*chunked=*/false);
  }
  void causal_conv1d_silu_slots(const Tensor& x, const Tensor& w, const Tensor& windows, const Tensor& segs,
                                const Tensor& out, const Tensor* keep) override {
    cuda::launch_causal_conv1d_silu_slots(s_, x, w, windows, segs, out, keep);
  }
  void gated_delta_rule_chunked_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                      const Tensor& beta, const Tensor& states, const Tensor& segs,
                                      const Tensor& out, const Tensor* keep) override {
    cuda::launch_gated_delta_rule_slots(s_, q, k, v, g, beta, states, segs, out, keep, /*chunked=*/true);
  }
  void gated_delta_rule_recurrent_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                        const Tensor& beta, const Tensor& states, const Tensor& segs,
                                        const Tensor& out, const Tensor* keep) override {
    cuda::launch_gated_delta_rule_slots(s_, q, k, v, g, beta, states, segs, out, keep, /*chunked=*/false);
  }
  void rms_norm_gated(const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                      const Tensor& out) override {
    cuda::launch_rms_norm_gated(s_, x, gate, w, eps, out);
  }
  void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out) override {
    cuda::launch_sigmoid_mul(s_, x, gate, out);
  }
  void rope_f32(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    cuda::launch_rope_f32(s_, x, cos, sin, out);
  }
  void embedding_bag(const Tensor& table, const Tensor& idx, const Tensor& w, const Tensor& out) override {
    cuda::launch_embedding_bag(s_, table, idx, w, out);
  }

 private:
  int device_;
  cudaStream_t s_;
};

}  // namespace

Expected<std::unique_ptr<Backend>> make_cuda_backend(std::string* description, int index) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return make_error(std::string("the cuda backend found no usable GPU: ") + cudaGetErrorString(e));
  if (n == 0) return make_error("the cuda backend found no GPU (cudaGetDeviceCount = 0)");
  if (index < 0 || index >= n)
    return make_error("the cuda backend has no GPU " + std::to_string(index) + ": " + std::to_string(n) +
                      " visible (0.." + std::to_string(n - 1) + ")");
  const int device = index;
  // A device that is listed but cannot be initialised (busy in exclusive mode, lost, driver
  // mismatch) is a refusal with its reason, not an abort: `--backend auto` then falls back.
  e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaFree(nullptr);  // creates the context
  if (e != cudaSuccess)
    return make_error("the cuda backend found no usable GPU: device " + std::to_string(device) +
                      " could not be initialised: " + cudaGetErrorString(e));
  if (description) {
    cudaDeviceProp prop{};
    std::string name = cudaGetDeviceProperties(&prop, device) == cudaSuccess ? prop.name : "unknown";
    *description = "GPU " + std::to_string(device) + " of " + std::to_string(n) + " is usable: " + name;
  }
  // Freed blocks stay in the default pool instead of going back to the driver at each sync.
  cudaMemPool_t pool;
  TF_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t keep = UINT64_MAX;
  TF_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  cudaStream_t s;
  TF_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device, s));
}

}  // namespace tf
