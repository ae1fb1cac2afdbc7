#include "backend/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "backend/cpu/fmath.h"
#include "backend/cpu/kernels.h"
#include "backend/device_error.h"

namespace tf {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(ThreadPool* pool) : pool_(pool ? *pool : global_pool()) {}
  std::string_view name() const override { return "cpu"; }
  DeviceFailure& device_failure() { return failure_; }

  DeviceBuffer alloc(DType dtype, const Shape& shape) override { return allocate(dtype, shape, Fill::kZero); }
  DeviceBuffer alloc_uninit(DType dtype, const Shape& shape) override {
    return allocate(dtype, shape, Fill::kNone);
  }
  DeviceBuffer alloc_pool(DType dtype, const Shape& shape) override {
    return allocate(dtype, shape, Fill::kMap);
  }
  void upload(const Tensor& dst, const void* host) override {
    begin_call();
    if (dst.nbytes() && dst.data != host) std::memcpy(dst.data, host, dst.nbytes());
  }
  void download(const Tensor& src, void* host) override {
    begin_call();
    if (src.nbytes() && src.data != host) std::memcpy(host, src.data, src.nbytes());
  }
  DeviceBuffer import_host(const Tensor& host) override {
    begin_call(/*counted=*/false);
    return DeviceBuffer(nullptr, host);
  }
  void synchronize() override { begin_call(); }
  void free_memory(void* data) override {
    {
      std::lock_guard<std::mutex> lock(map_mu_);
      if (auto it = mapped_.find(data); it != mapped_.end()) {
        ::munmap(data, it->second);
        mapped_.erase(it);
        return;
      }
    }
    std::free(data);
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) override {
    begin_call();
    cpu::linear(pool_, x, w, bias, out);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, RmsNormKind kind, const Tensor& out) override {
    begin_call();
    cpu::rms_norm(pool_, x, w, eps, kind, out);
  }
  void add_rms_norm(const Tensor& h, const Tensor& delta, const Tensor& w, float eps, RmsNormKind kind,
                    const Tensor& out) override {
    begin_call();
    cpu::add_rms_norm(pool_, h, delta, w, eps, kind, out);
  }
  void qkv_prep(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& cos,
                const Tensor& sin, const Tensor* slots, const Tensor& q_out, const Tensor& k_out,
                const Tensor& v_out) override {
    begin_call();
    cpu::qkv_prep(pool_, qkv, q_norm, k_norm, eps, cos, sin, slots, q_out, k_out, v_out);
  }
  void glu(const Tensor& gu, ActKind kind, const Tensor& out) override {
    begin_call();
    cpu::glu(pool_, gu, kind, out);
  }
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, const Tensor& out) override {
    begin_call();
    cpu::layer_norm(pool_, x, w, b, eps, out);
  }
  void rope_cos_sin(const Tensor& angles, const Tensor& cos, const Tensor& sin) override {
    begin_call();
    cpu::rope_cos_sin(angles, cos, sin);
  }
  void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    begin_call();
    cpu::rope(pool_, x, cos, sin, out);
  }
  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& tables,
                       const Tensor& seg_rows, const Tensor& key_ranges, float scale,
                       const Tensor& out) override {
    begin_call();
    cpu::paged_attention(pool_, q, k_pool, v_pool, tables, seg_rows, key_ranges, scale, out);
  }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges, float scale,
                 const Tensor& out) override {
    begin_call();
    cpu::attention(pool_, q, k, v, key_ranges, scale, out);
  }
  void act_mul(const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out) override {
    begin_call();
    cpu::act_mul(pool_, gate, up, kind, out);
  }
  void act(const Tensor& x, ActKind kind, const Tensor& out) override {
    begin_call();
    cpu::act(pool_, x, kind, out);
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    begin_call();
    cpu::add(pool_, a, b, out);
  }
  void cast(const Tensor& x, const Tensor& out) override {
    begin_call();
    cpu::cast(x, out);
  }
  void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) override {
    begin_call();
    cpu::embedding(ids, table, out);
  }
  void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out) override {
    begin_call();
    cpu::gather_rows(src, rows, out);
  }
  void scatter_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) override {
    begin_call();
    cpu::scatter_rows(src, rows, dst);
  }
  void copy(const Tensor& src, const Tensor& dst) override {
    begin_call();
    cpu::copy(src, dst);
  }
  void patchify(const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw, const Tensor& out) override {
    begin_call();
    cpu::patchify(pixels, patch, gh, gw, out);
  }
  void unfold_2x2(const Tensor& x, int64_t gh, int64_t gw, const Tensor& out) override {
    begin_call();
    cpu::unfold_2x2(x, gh, gw, out);
  }
  void argmax(const Tensor& logits, const Tensor& out) override {
    begin_call();
    cpu::argmax(pool_, logits, out);
  }
  void top_k(const Tensor& logits, int64_t k, const Tensor& values, const Tensor& indices) override {
    begin_call();
    cpu::top_k(pool_, logits, k, values, indices);
  }
  void sample(const Tensor& logits, const Tensor& params, const Tensor& out) override {
    begin_call();
    cpu::sample(pool_, logits, params, out);
  }

  // ---- Qwen3.5 ops ----
  void causal_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& out) override {
    begin_call();
    cpu::causal_conv1d_silu(pool_, x, w, state, out);
  }
  void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias,
                 const Tensor& g, const Tensor& beta) override {
    begin_call();
    cpu::gdn_gates(a, b, A_log, dt_bias, g, beta);
  }
  void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& beta, const Tensor& state, const Tensor& out) override {
    begin_call();
    cpu::gated_delta_rule_chunked(pool_, q, k, v, g, beta, state, out);
  }
  void gated_delta_rule_recurrent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                  const Tensor& beta, const Tensor& state, const Tensor& out) override {
    begin_call();
    cpu::gated_delta_rule_recurrent(pool_, q, k, v, g, beta, state, out);
  }
  void causal_conv1d_silu_slots(const Tensor& x, const Tensor& w, const Tensor& windows, const Tensor& segs,
                                std::span<const Tensor> out, const Tensor* keep) override {
    cpu::causal_conv1d_silu_slots(pool_, x, w, windows, segs, out, keep);
  }
  void gated_delta_rule_chunked_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                      const Tensor& beta, const Tensor& states, const Tensor& segs,
                                      const Tensor& out, const Tensor* keep) override {
    cpu::gated_delta_rule_chunked_slots(pool_, q, k, v, g, beta, states, segs, out, keep);
  }
  void gated_delta_rule_recurrent_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                        const Tensor& beta, const Tensor& states, const Tensor& segs,
                                        const Tensor& out, const Tensor* keep) override {
    cpu::gated_delta_rule_recurrent_slots(pool_, q, k, v, g, beta, states, segs, out, keep);
  }
  void rms_norm_gated(const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                      const Tensor& out) override {
    begin_call();
    cpu::rms_norm_gated(pool_, x, gate, w, eps, out);
  }
  void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out) override {
    begin_call();
    cpu::sigmoid_mul(pool_, x, gate, out);
  }
  void rope_f32(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    begin_call();
    cpu::rope_f32(pool_, x, cos, sin, out);
  }
  void embedding_bag(const Tensor& table, const Tensor& idx, const Tensor& w, const Tensor& out) override {
    begin_call();
    cpu::embedding_bag(table, idx, w, out);
  }

 private:
  void begin_call(bool counted = true) { failure_.begin_call("cpu", counted); }

  // kZero: zero-filled; kNone: contents undefined; kMap: mapped (zero pages, backed only once written).
  enum class Fill { kZero, kNone, kMap };
  DeviceBuffer allocate(DType dtype, const Shape& shape, Fill fill) {
    begin_call(/*counted=*/false);
    Tensor t{nullptr, dtype, shape};
    size_t n = t.nbytes();
    size_t bytes = (n + 63) / 64 * 64;
    if (bytes == 0) bytes = 64;
    void* p = nullptr;
    if (bytes >= kMapBytes || fill == Fill::kMap) {
      // Large buffers are mapped: zero pages cost nothing until written, so a pool sized for the worst
      // case takes memory only as sequences fill it.
      p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      TF_CHECK(p != MAP_FAILED);
      if (fill != Fill::kMap) huge_pages(p, bytes);
      std::lock_guard<std::mutex> lock(map_mu_);
      mapped_[p] = bytes;
    } else {
      p = std::aligned_alloc(64, bytes);
      TF_CHECK(p != nullptr);
      huge_pages(p, bytes);
      if (fill == Fill::kZero) std::memset(p, 0, bytes);
    }
    t.data = p;
    return DeviceBuffer(this, t);
  }
  // Buffers of several MiB (stacked weights, a page's activations) in 2 MiB pages where the kernel offers
  // them on request (transparent huge pages, "madvise"): one fault instead of 512 when first written.
  static void huge_pages(void* p, size_t bytes) {
    constexpr uintptr_t kHuge = uintptr_t{2} << 20;
    if (bytes < 2 * kHuge) return;
    const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
    if (e > b) (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);  // a hint: failure is fine
  }

  DeviceFailure failure_;  // only test_hooks::fail_backend_op makes the CPU fail
  static constexpr size_t kMapBytes = size_t{64} << 20;
  ThreadPool& pool_;
  std::mutex map_mu_;
  std::unordered_map<void*, size_t> mapped_;
};

}  // namespace

void set_cpu_transcendentals(CpuTranscendentals mode) {
  fm::set_mode(mode == CpuTranscendentals::kDouble ? fm::Mode::kDouble : fm::Mode::kLibm);
}

DeviceFailure* cpu_device_failure(Backend& b) {
  auto* cpu = dynamic_cast<CpuBackend*>(&b);
  return cpu ? &cpu->device_failure() : nullptr;
}

std::unique_ptr<Backend> make_cpu_backend(ThreadPool* pool) { return std::make_unique<CpuBackend>(pool); }

}  // namespace tf
