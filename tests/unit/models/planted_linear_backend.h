// A planted control for batch-invariance tests: a Backend that delegates every op to another backend,
// except that linear() over more than one row sums each dot product in reverse k order in two halves (f32,
// on the host; the halves rounded to bf16 first when the output is bf16). One row is computed by the real op,
// so a row decoded alone and the same row inside a batch of several get different bits: exactly the defect
// the invariance tests exist to catch. With swap_slots (and plant_linear off) it plants a wrong state-slot
// mapping instead: the *_slots ops of a step with two or more segments see the first two segments' slots
// exchanged.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/ops.h"
#include "tensor/dtype.h"

namespace tf {

class PlantedLinearBackend final : public Backend {
 public:
  explicit PlantedLinearBackend(Backend& inner) : in_(inner) {}
  std::string_view name() const override { return "planted-linear"; }
  DeviceBuffer alloc(DType dtype, const Shape& shape) override { return in_.alloc(dtype, shape); }
  void upload(const Tensor& dst, const void* host) override { in_.upload(dst, host); }
  void download(const Tensor& src, void* host) override { in_.download(src, host); }
  DeviceBuffer import_host(const Tensor& host) override { return in_.import_host(host); }
  void synchronize() override { in_.synchronize(); }
  void free_memory(void* data) override { in_.free_memory(data); }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) override {
    if (!plant_linear || x.dim(0) <= 1) return in_.linear(x, w, bias, out);
    ++n_planted;
    const int64_t n = x.dim(0), k = x.dim(1), m = w.dim(0);
    const std::vector<float> xf = floats(x), wf = floats(w);
    const std::vector<float> bf = bias ? floats(*bias) : std::vector<float>();
    std::vector<float> o(static_cast<size_t>(n * m));  // [n, out_features]
    // bf16 outputs round most f32 reorderings away; there the halves are kept in bf16 (a split-K whose
    // partials are stored in the activation dtype), which shows in the logits of a tiny model on every
    // backend.
    const bool coarse = out.dtype == DType::BF16;
    auto keep = [&](float v) { return coarse ? bf16_to_f32(f32_to_bf16(v)) : v; };
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        float hi = 0, lo = 0;
        for (int64_t t = k - 1; t >= 0; --t)  // the planted defect: k summed backwards, in two halves
          (t >= k / 2 ? hi : lo) += xf[static_cast<size_t>(i * k + t)] * wf[static_cast<size_t>(j * k + t)];
        float s = keep(hi) + keep(lo);
        if (bias) s += bf[static_cast<size_t>(j)];
        o[static_cast<size_t>(i * m + j)] = s;
      }
    if (out.dtype == DType::F32) return in_.upload(out, o.data());
    std::vector<uint16_t> h(o.size());
    for (size_t i = 0; i < o.size(); ++i) h[i] = f32_to_bf16(o[i]);
    in_.upload(out, h.data());
  }

  void rms_norm(const Tensor& x, const Tensor& w, float eps, RmsNormKind kind, const Tensor& out) override {
    in_.rms_norm(x, w, eps, kind, out);
  }
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, const Tensor& out) override {
    in_.layer_norm(x, w, b, eps, out);
  }
  void rope_cos_sin(const Tensor& angles, const Tensor& cos, const Tensor& sin) override {
    in_.rope_cos_sin(angles, cos, sin);
  }
  void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    in_.rope(x, cos, sin, out);
  }
  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& tables,
                       const Tensor& seg_rows, const Tensor& key_ranges, float scale,
                       const Tensor& out) override {
    in_.paged_attention(q, k_pool, v_pool, tables, seg_rows, key_ranges, scale, out);
  }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges, float scale,
                 const Tensor& out) override {
    in_.attention(q, k, v, key_ranges, scale, out);
  }
  void add_rms_norm(const Tensor& h, const Tensor& delta, const Tensor& w, float eps, RmsNormKind kind,
                    const Tensor& out) override {
    in_.add_rms_norm(h, delta, w, eps, kind, out);
  }
  void qkv_prep(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& cos,
                const Tensor& sin, const Tensor* slots, const Tensor& q_out, const Tensor& k_out,
                const Tensor& v_out) override {
    in_.qkv_prep(qkv, q_norm, k_norm, eps, cos, sin, slots, q_out, k_out, v_out);
  }
  void glu(const Tensor& gu, ActKind kind, const Tensor& out) override { in_.glu(gu, kind, out); }
  void act_mul(const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out) override {
    in_.act_mul(gate, up, kind, out);
  }
  void act(const Tensor& x, ActKind kind, const Tensor& out) override { in_.act(x, kind, out); }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override { in_.add(a, b, out); }
  void cast(const Tensor& x, const Tensor& out) override { in_.cast(x, out); }
  void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) override {
    in_.embedding(ids, table, out);
  }
  void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out) override {
    in_.gather_rows(src, rows, out);
  }
  void scatter_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) override {
    in_.scatter_rows(src, rows, dst);
  }
  void copy(const Tensor& src, const Tensor& dst) override { in_.copy(src, dst); }
  void patchify(const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw, const Tensor& out) override {
    in_.patchify(pixels, patch, gh, gw, out);
  }
  void unfold_2x2(const Tensor& x, int64_t gh, int64_t gw, const Tensor& out) override {
    in_.unfold_2x2(x, gh, gw, out);
  }
  void argmax(const Tensor& logits, const Tensor& out) override { in_.argmax(logits, out); }
  void top_k(const Tensor& logits, int64_t k, const Tensor& values, const Tensor& indices) override {
    in_.top_k(logits, k, values, indices);
  }
  void sample(const Tensor& logits, const Tensor& params, const Tensor& out) override {
    in_.sample(logits, params, out);
  }
  void causal_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& out) override {
    in_.causal_conv1d_silu(x, w, state, out);
  }
  void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias,
                 const Tensor& g, const Tensor& beta) override {
    in_.gdn_gates(a, b, A_log, dt_bias, g, beta);
  }
  void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& beta, const Tensor& state, const Tensor& out) override {
    in_.gated_delta_rule_chunked(q, k, v, g, beta, state, out);
  }
  void gated_delta_rule_recurrent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                  const Tensor& beta, const Tensor& state, const Tensor& out) override {
    in_.gated_delta_rule_recurrent(q, k, v, g, beta, state, out);
  }
  void causal_conv1d_silu_slots(const Tensor& x, const Tensor& w, const Tensor& windows, const Tensor& segs,
                                std::span<const Tensor> out, const Tensor* keep) override {
    const DeviceBuffer s = planted_segs(segs);
    in_.causal_conv1d_silu_slots(x, w, windows, s.empty() ? segs : s.tensor(), out, keep);
  }
  void gated_delta_rule_chunked_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                      const Tensor& beta, const Tensor& states, const Tensor& segs,
                                      const Tensor& out, const Tensor* keep) override {
    const DeviceBuffer s = planted_segs(segs);
    in_.gated_delta_rule_chunked_slots(q, k, v, g, beta, states, s.empty() ? segs : s.tensor(), out, keep);
  }
  void gated_delta_rule_recurrent_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                        const Tensor& beta, const Tensor& states, const Tensor& segs,
                                        const Tensor& out, const Tensor* keep) override {
    const DeviceBuffer s = planted_segs(segs);
    in_.gated_delta_rule_recurrent_slots(q, k, v, g, beta, states, s.empty() ? segs : s.tensor(), out, keep);
  }
  void rms_norm_gated(const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                      const Tensor& out) override {
    in_.rms_norm_gated(x, gate, w, eps, out);
  }
  void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out) override {
    in_.sigmoid_mul(x, gate, out);
  }
  void rope_f32(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    in_.rope_f32(x, cos, sin, out);
  }
  void embedding_bag(const Tensor& table, const Tensor& idx, const Tensor& w, const Tensor& out) override {
    in_.embedding_bag(table, idx, w, out);
  }

  int64_t n_planted = 0;     // linear calls that took the planted path
  bool plant_linear = true;  // linear over several rows sums k backwards
  bool swap_slots = false;   // the *_slots ops exchange the first two segments' slots
  int64_t n_swapped = 0;     // *_slots calls that took the planted path

 private:
  // With swap_slots and two or more segments: a copy of segs[n_seg, 6] with rows 0 and 1's slots
  // exchanged; otherwise empty.
  DeviceBuffer planted_segs(const Tensor& segs) {
    if (!swap_slots || segs.dim(0) < 2) return {};
    ++n_swapped;
    std::vector<int32_t> h(static_cast<size_t>(segs.numel()));
    in_.download(segs, h.data());
    std::swap(h[2], h[8]);
    DeviceBuffer d = in_.alloc(DType::I32, segs.shape);
    in_.upload(d, h.data());
    return d;
  }
  // A device tensor (F32 or BF16) as host floats.
  std::vector<float> floats(const Tensor& t) {
    std::vector<float> f(static_cast<size_t>(t.numel()));
    if (t.dtype == DType::F32) {
      in_.download(t, f.data());
      return f;
    }
    std::vector<uint16_t> h(f.size());
    in_.download(t, h.data());
    for (size_t i = 0; i < h.size(); ++i) f[i] = bf16_to_f32(h[i]);
    return f;
  }

  Backend& in_;
};

}  // namespace tf
