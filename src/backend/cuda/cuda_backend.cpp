#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/op_profile.h"
#include "backend/device_error.h"

namespace tf {
namespace cuda {

void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::string where = file;
  if (const size_t at = where.rfind("src/"); at != std::string::npos) where.erase(0, at);
  throw DeviceError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e) + " (" +
                    cudaGetErrorName(e) + ") at " + where + ":" + std::to_string(line));
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
  CudaBackend(int device, cudaStream_t stream, unsigned* barrier)
      : device_(device), s_(stream), barrier_(barrier) {}
  ~CudaBackend() override {
    cudaSetDevice(device_);
    profile_.reset();  // writes its report while the stream lives
    cudaStreamSynchronize(s_);
    cudaStreamDestroy(s_);
    cudaFree(barrier_);
  }
  std::string_view name() const override { return "cuda"; }
  DeviceFailure& device_failure() { return failure_; }

  DeviceBuffer alloc(DType dtype, const Shape& shape) override {
    return guard(
        [&] {
          Tensor t{nullptr, dtype, shape};
          const size_t bytes = std::max<size_t>(256, (t.nbytes() + 255) / 256 * 256);
          bind_device();  // memory calls may come from a thread other than the engine's (loading, teardown)
          TF_CUDA_CHECK(cudaMallocAsync(&t.data, bytes, s_));
          TF_CUDA_CHECK(cudaMemsetAsync(t.data, 0, bytes, s_));
          return DeviceBuffer(this, t);
        },
        /*counted=*/false);
  }
  void upload(const Tensor& dst, const void* host) override {
    guard([&] {
      if (dst.nbytes())
        TF_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, dst.nbytes(), cudaMemcpyHostToDevice, s_));
      // Pageable host memory: the call returns once the bytes are staged, so `host` may be freed.
    });
  }
  void download(const Tensor& src, void* host) override {
    guard([&] {
      if (!src.nbytes()) return;
      TF_CUDA_CHECK(cudaMemcpyAsync(host, src.data, src.nbytes(), cudaMemcpyDeviceToHost, s_));
      TF_CUDA_CHECK(cudaStreamSynchronize(s_));
    });
  }
  DeviceBuffer import_host(const Tensor& host) override {
    DeviceBuffer d = alloc(host.dtype, host.shape);
    upload(d.tensor(), host.data);
    return d;
  }
  void synchronize() override {
    guard([&] { TF_CUDA_CHECK(cudaStreamSynchronize(s_)); });
  }
  void free_memory(void* data) override {
    // Never throws (DeviceBuffer destructors): on a failed device the memory is as good as gone anyway.
    cudaError_t e = cudaSetDevice(device_);
    if (e == cudaSuccess) e = cudaFreeAsync(data, s_);
    if (e != cudaSuccess)
      failure_.record(std::string("CUDA error in cudaFreeAsync: ") + cudaGetErrorString(e));
  }
  size_t free_device_memory() override {
    return guard(
        [&] {
          bind_device();
          TF_CUDA_CHECK(cudaStreamSynchronize(s_));
          size_t free = 0, total = 0;
          TF_CUDA_CHECK(cudaMemGetInfo(&free, &total));
          return free;
        },
        /*counted=*/false);
  }

  void bind_thread() override {
    guard([&] { bind_device(); }, /*counted=*/false);
  }
  bool records_graphs() const override { return true; }
  void begin_capture() override {
    // Thread-local: only this thread's unsafe calls are refused meanwhile (a server thread may query
    // free memory).
    guard([&] { TF_CUDA_CHECK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal)); });
  }
  std::unique_ptr<Graph> end_capture() override {
    return guard([&] {
      cudaGraph_t g = nullptr;
      TF_CUDA_CHECK(cudaStreamEndCapture(s_, &g));
      auto out = std::make_unique<CudaGraph>();
      const cudaError_t e = cudaGraphInstantiate(&out->exec, g, 0);
      cudaGraphDestroy(g);
      TF_CUDA_CHECK(e);
      return std::unique_ptr<Graph>(std::move(out));
    });
  }
  void replay(Graph& g) override {
    op("replay", nullptr, nullptr,
       [&] { TF_CUDA_CHECK(cudaGraphLaunch(static_cast<CudaGraph&>(g).exec, s_)); });
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) override {
    op("linear", &x, &out, [&] { cuda::launch_linear(s_, x, w, bias, out); });
  }
  void linear_many(const Tensor& x, std::span<const Tensor> w, std::span<const Tensor> out) override {
    op("linear_many", &x, out.empty() ? nullptr : &out[0], [&] { cuda::launch_linear_many(s_, x, w, out); });
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, RmsNormKind kind, const Tensor& out) override {
    op("rms_norm", &x, &out, [&] { cuda::launch_rms_norm(s_, x, w, eps, kind, out); });
  }
  void add_rms_norm(const Tensor& h, const Tensor& delta, const Tensor& w, float eps, RmsNormKind kind,
                    const Tensor& out) override {
    op("add_rms_norm", &h, &out, [&] { cuda::launch_add_rms_norm(s_, h, delta, w, eps, kind, out); });
  }
  void rms_norm_linear(const Tensor& x, const Tensor& norm_w, float eps, RmsNormKind kind, const Tensor& xn,
                       std::span<const Tensor> w, std::span<const Tensor> out) override {
    op("rms_norm_linear", &x, out.empty() ? nullptr : &out[0], [&] {
      const cuda::SmallFused f{&norm_w, eps, kind};
      if (cuda::launch_linear_fused(s_, f, x, w, nullptr, out)) return;
      cuda::launch_rms_norm(s_, x, norm_w, eps, kind, xn);
      cuda::launch_linear_many(s_, xn, w, out);
    });
  }
  void rms_norm_linear_glu(const Tensor& x, const Tensor& norm_w, float eps, RmsNormKind kind,
                           const Tensor& xn, const Tensor& gate_up, const Tensor& gu, ActKind act,
                           const Tensor& out) override {
    op("rms_norm_linear_glu", &x, &out, [&] {
      const cuda::SmallFused f{&norm_w, eps, kind, /*glu=*/true, /*add=*/false, act};
      if (cuda::launch_linear_fused(s_, f, x, std::span<const Tensor>(&gate_up, 1), nullptr,
                                    std::span<const Tensor>(&out, 1)))
        return;
      cuda::launch_rms_norm(s_, x, norm_w, eps, kind, xn);
      if (act == ActKind::kSilu &&
          cuda::launch_linear_large_fused(s_, /*glu=*/true, xn, gate_up, nullptr, out))
        return;
      cuda::launch_linear(s_, xn, gate_up, nullptr, gu);
      cuda::launch_glu(s_, gu, act, out);
    });
  }
  void linear_add(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                  const Tensor& h) override {
    op("linear_add", &x, &h, [&] {
      const cuda::SmallFused f{nullptr, 0.0f, RmsNormKind::kWeight, /*glu=*/false, /*add=*/true};
      if (cuda::launch_linear_fused(s_, f, x, std::span<const Tensor>(&w, 1), bias,
                                    std::span<const Tensor>(&h, 1)))
        return;
      if (cuda::launch_linear_large_fused(s_, /*glu=*/false, x, w, bias, h)) return;
      cuda::launch_linear(s_, x, w, bias, y);
      cuda::launch_add(s_, h, y, h);
    });
  }
  void linear_qkv_prep(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& qkv,
                       const Tensor& cos, const Tensor& sin, const Tensor& q_out, const Tensor& k_out,
                       const Tensor& v_out) override {
    op("linear_qkv_prep", &x, &q_out, [&] {
      if (cuda::launch_linear_large_qkv(s_, x, w, bias, cos, sin, q_out, k_out, v_out)) return;
      cuda::launch_linear(s_, x, w, bias, qkv);
      cuda::launch_qkv_prep(s_, qkv, nullptr, nullptr, 0.0f, cos, sin, nullptr, q_out, k_out, v_out);
    });
  }
  void layer_tail(const Tensor& x, const TailWeights& t, const TailScratch& sc, const Tensor& h) override {
    bool fused = false;
    if (cuda::layer_tail_on())  // (off by default: no empty op per layer then)
      op("layer_tail", &x, &h, [&] { fused = cuda::launch_layer_tail_fused(s_, barrier_, x, t, sc.mid, h); });
    if (fused) return;
    if (x.dim(0) > 16 && !cuda::large_fused_on()) {
      // Many rows without the fused stores: o_proj, then the residual add and the norm as one kernel
      // (add_rms_norm: add then rms_norm, bit for bit), the MLP, down_proj into the stream.
      linear(x, t.o_w, t.o_bias, sc.y);
      add_rms_norm(h, sc.y, t.norm_w, t.eps, t.kind, sc.xn);
      linear(sc.xn, t.gate_up, nullptr, sc.gu);
      glu(sc.gu, t.act, sc.mid);
      linear_add(sc.mid, t.down, nullptr, sc.y, h);
      return;
    }
    Backend::layer_tail(x, t, sc, h);  // the three chains, each its own op
  }
  void qkv_prep(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& cos,
                const Tensor& sin, const Tensor* slots, const Tensor& q_out, const Tensor& k_out,
                const Tensor& v_out) override {
    op("qkv_prep", &qkv, &q_out,
       [&] { cuda::launch_qkv_prep(s_, qkv, q_norm, k_norm, eps, cos, sin, slots, q_out, k_out, v_out); });
  }
  void glu(const Tensor& gu, ActKind kind, const Tensor& out) override {
    op("glu", &gu, &out, [&] { cuda::launch_glu(s_, gu, kind, out); });
  }
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, const Tensor& out) override {
    op("layer_norm", &x, &out, [&] { cuda::launch_layer_norm(s_, x, w, b, eps, out); });
  }
  void rope_cos_sin(const Tensor& angles, const Tensor& cos, const Tensor& sin) override {
    op("rope_cos_sin", &angles, &cos, [&] { cuda::launch_rope_cos_sin(s_, angles, cos, sin); });
  }
  void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    op("rope", &x, &out, [&] { cuda::launch_rope(s_, x, cos, sin, out); });
  }
  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& tables,
                       const Tensor& seg_rows, const Tensor& key_ranges, float scale,
                       const Tensor& out) override {
    op("paged_attention", &q, &out, [&] {
      cuda::launch_paged_attention(s_, q, k_pool, v_pool, tables, seg_rows, key_ranges, scale, out);
    });
  }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges, float scale,
                 const Tensor& out) override {
    op("attention", &q, &out, [&] { cuda::launch_attention(s_, q, k, v, key_ranges, scale, out); });
  }
  void act_mul(const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out) override {
    op("act_mul", &gate, &out, [&] { cuda::launch_act_mul(s_, gate, up, kind, out); });
  }
  void act(const Tensor& x, ActKind kind, const Tensor& out) override {
    op("act", &x, &out, [&] { cuda::launch_act(s_, x, kind, out); });
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    op("add", &a, &out, [&] { cuda::launch_add(s_, a, b, out); });
  }
  void cast(const Tensor& x, const Tensor& out) override {
    op("cast", &x, &out, [&] { cuda::launch_cast(s_, x, out); });
  }
  void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) override {
    op("embedding", &ids, &out, [&] { cuda::launch_embedding(s_, ids, table, out); });
  }
  void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out) override {
    op("gather_rows", &src, &out, [&] { cuda::launch_gather_rows(s_, src, rows, out); });
  }
  void scatter_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) override {
    op("scatter_rows", &src, &dst, [&] { cuda::launch_scatter_rows(s_, src, rows, dst); });
  }
  void copy(const Tensor& src, const Tensor& dst) override {
    op("copy", &src, &dst, [&] {
      TF_CHECK(src.dtype == dst.dtype && src.numel() == dst.numel());
      const size_t n = src.nbytes();
      if (n == 0) return;
      const char *a = static_cast<const char*>(src.data), *b = static_cast<const char*>(dst.data);
      TF_CHECK(a + n <= b || b + n <= a);  // overlapping ranges are a caller bug
      TF_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, n, cudaMemcpyDeviceToDevice, s_));
    });
  }
  void patchify(const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw, const Tensor& out) override {
    op("patchify", &pixels, &out, [&] { cuda::launch_patchify(s_, pixels, patch, gh, gw, out); });
  }
  void unfold_2x2(const Tensor& x, int64_t gh, int64_t gw, const Tensor& out) override {
    op("unfold_2x2", &x, &out, [&] { cuda::launch_unfold_2x2(s_, x, gh, gw, out); });
  }
  void argmax(const Tensor& logits, const Tensor& out) override {
    op("argmax", &logits, &out, [&] { cuda::launch_argmax(s_, logits, out); });
  }
  void top_k(const Tensor& logits, int64_t k, const Tensor& values, const Tensor& indices) override {
    op("top_k", &logits, &values, [&] { cuda::launch_top_k(s_, logits, k, values, indices); });
  }
  void sample(const Tensor& logits, const Tensor& params, const Tensor& out) override {
    op("sample", &logits, &out, [&] { cuda::launch_sample(s_, logits, params, out); });
  }

  void causal_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& out) override {
    op("causal_conv1d_silu", &x, &out, [&] { cuda::launch_causal_conv1d_silu(s_, x, w, state, out); });
  }
  void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias,
                 const Tensor& g, const Tensor& beta) override {
    op("gdn_gates", &a, &g, [&] { cuda::launch_gdn_gates(s_, a, b, A_log, dt_bias, g, beta); });
  }
  void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& beta, const Tensor& state, const Tensor& out) override {
    op("gated_delta_rule_chunked", &q, &out,
       [&] { cuda::launch_gated_delta_rule(s_, q, k, v, g, beta, state, out, /*chunked=*/true); });
  }
  void gated_delta_rule_recurrent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                  const Tensor& beta, const Tensor& state, const Tensor& out) override {
    op("gated_delta_rule_recurrent", &q, &out,
       [&] { cuda::launch_gated_delta_rule(s_, q, k, v, g, beta, state, out, /*chunked=*/false); });
  }
  void causal_conv1d_silu_slots(const Tensor& x, const Tensor& w, const Tensor& windows, const Tensor& segs,
                                std::span<const Tensor> out, const Tensor* keep) override {
    op("causal_conv1d_silu_slots", &x, out.empty() ? nullptr : &out[0],
       [&] { cuda::launch_causal_conv1d_silu_slots(s_, x, w, windows, segs, out, keep); });
  }
  void gated_delta_rule_chunked_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                      const Tensor& beta, const Tensor& states, const Tensor& segs,
                                      const Tensor& out, const Tensor* keep) override {
    op("gated_delta_rule_chunked_slots", &q, &out, [&] {
      cuda::launch_gated_delta_rule_slots(s_, q, k, v, g, beta, states, segs, out, keep, /*chunked=*/true);
    });
  }
  void gated_delta_rule_recurrent_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                        const Tensor& beta, const Tensor& states, const Tensor& segs,
                                        const Tensor& out, const Tensor* keep) override {
    op("gated_delta_rule_recurrent_slots", &q, &out, [&] {
      cuda::launch_gated_delta_rule_slots(s_, q, k, v, g, beta, states, segs, out, keep, /*chunked=*/false);
    });
  }
  void rms_norm_gated(const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                      const Tensor& out) override {
    op("rms_norm_gated", &x, &out, [&] { cuda::launch_rms_norm_gated(s_, x, gate, w, eps, out); });
  }
  void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out) override {
    op("sigmoid_mul", &x, &out, [&] { cuda::launch_sigmoid_mul(s_, x, gate, out); });
  }
  void rope_f32(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    op("rope_f32", &x, &out, [&] { cuda::launch_rope_f32(s_, x, cos, sin, out); });
  }
  void embedding_bag(const Tensor& table, const Tensor& idx, const Tensor& w, const Tensor& out) override {
    op("embedding_bag", &idx, &out, [&] { cuda::launch_embedding_bag(s_, table, idx, w, out); });
  }

 private:
  void bind_device() { TF_CUDA_CHECK(cudaSetDevice(device_)); }
  // Runs one call: refused once the backend has failed; a CUDA error it hits fails the backend for good
  // (sticky errors such as an illegal address poison the context anyway) and is rethrown to the engine.
  template <class F>
  auto guard(F&& f, bool counted = true) -> decltype(f()) {
    failure_.begin_call("cuda", counted);
    try {
      return f();
    } catch (const DeviceError& e) {
      failure_.record(e.what());
      throw;
    }
  }

  // A compute op: guard() with its GPU time recorded when TF_CUDA_OP_PROFILE asks (op_profile.h).
  template <class F>
  void op(const char* name, const Tensor* a, const Tensor* out, F&& f) {
    if (!profile_) return guard(std::forward<F>(f));
    const int token = guard([&] { return profile_->begin(name, a, out); }, /*counted=*/false);
    guard(std::forward<F>(f));
    guard([&] { profile_->end(token); }, /*counted=*/false);
  }

  DeviceFailure failure_;

  int device_;
  cudaStream_t s_;
  unsigned* barrier_;  // layer_tail.cu's grid-barrier state: two unsigned, zero between launches
  std::unique_ptr<cuda::OpProfile> profile_ = cuda::OpProfile::from_env(s_);
};

}  // namespace

DeviceFailure* cuda_device_failure(Backend& b) {
  auto* cuda = dynamic_cast<CudaBackend*>(&b);
  return cuda ? &cuda->device_failure() : nullptr;
}

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
  uint64_t keep = UINT64_MAX;
  cudaStream_t s;
  e = cudaDeviceGetDefaultMemPool(&pool, device);
  if (e == cudaSuccess) e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  void* barrier = nullptr;
  if (e == cudaSuccess) e = cudaMalloc(&barrier, 256);
  if (e == cudaSuccess) e = cudaMemset(barrier, 0, 256);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    cudaFree(barrier);
    return make_error("the cuda backend could not set up GPU " + std::to_string(device) + ": " +
                      cudaGetErrorString(e));
  }
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(device, s, static_cast<unsigned*>(barrier)));
}

}  // namespace tf
