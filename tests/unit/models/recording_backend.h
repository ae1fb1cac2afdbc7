// A Backend that records op sequences the way CUDA graphs do, over another backend (the CPU in CI):
// between begin_capture() and end_capture() every op is stored (its tensors as views: the same
// buffers) instead of run, and replay() runs the stored ops again on whatever those buffers hold
// then. So the model code's graph path (models/lighton_ocr/text.cpp decode_graph_step) runs in CI,
// and a step that would be wrong under a real graph (an input not in the recorded buffers, an
// allocation or upload during the capture) is wrong here too: `violations` counts memory calls made
// while recording.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/ops.h"

namespace tf {

class RecordingBackend final : public Backend {
 public:
  explicit RecordingBackend(Backend& inner) : in_(inner) {}
  std::string_view name() const override { return "recording"; }
  DeviceBuffer alloc(DType dtype, const Shape& shape) override {
    watch();
    return in_.alloc(dtype, shape);
  }
  void upload(const Tensor& dst, const void* host) override {
    watch();
    in_.upload(dst, host);
  }
  void download(const Tensor& src, void* host) override {
    watch();
    in_.download(src, host);
  }
  DeviceBuffer import_host(const Tensor& host) override {
    watch();
    return in_.import_host(host);
  }
  void synchronize() override {
    watch();
    in_.synchronize();
  }
  void free_memory(void* data) override { in_.free_memory(data); }

  bool records_graphs() const override { return true; }
  void begin_capture() override {
    if (recording_) ++violations;
    recording_ = true;
    tape_.clear();
  }
  std::unique_ptr<Graph> end_capture() override {
    recording_ = false;
    ++captures;
    auto t = std::make_unique<Tape>();
    t->ops = std::move(tape_);
    tape_.clear();
    return t;
  }
  void replay(Graph& g) override {
    ++replays;
    for (const auto& f : static_cast<Tape&>(g).ops) f();
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) override {
    const std::optional<Tensor> b = bias ? std::optional<Tensor>(*bias) : std::nullopt;
    op([=, this] { in_.linear(x, w, b ? &*b : nullptr, out); });
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, RmsNormKind kind, const Tensor& out) override {
    op([=, this] { in_.rms_norm(x, w, eps, kind, out); });
  }
  void add_rms_norm(const Tensor& h, const Tensor& delta, const Tensor& w, float eps, RmsNormKind kind,
                    const Tensor& out) override {
    op([=, this] { in_.add_rms_norm(h, delta, w, eps, kind, out); });
  }
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, const Tensor& out) override {
    op([=, this] { in_.layer_norm(x, w, b, eps, out); });
  }
  void rope_cos_sin(const Tensor& angles, const Tensor& cos, const Tensor& sin) override {
    op([=, this] { in_.rope_cos_sin(angles, cos, sin); });
  }
  void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    op([=, this] { in_.rope(x, cos, sin, out); });
  }
  void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges, float scale,
                 const Tensor& out) override {
    op([=, this] { in_.attention(q, k, v, key_ranges, scale, out); });
  }
  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& tables,
                       const Tensor& seg_rows, const Tensor& key_ranges, float scale,
                       const Tensor& out) override {
    op([=, this] { in_.paged_attention(q, k_pool, v_pool, tables, seg_rows, key_ranges, scale, out); });
  }
  void qkv_prep(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& cos,
                const Tensor& sin, const Tensor* slots, const Tensor& q_out, const Tensor& k_out,
                const Tensor& v_out) override {
    auto opt = [](const Tensor* t) { return t ? std::optional<Tensor>(*t) : std::nullopt; };
    const std::optional<Tensor> qn = opt(q_norm), kn = opt(k_norm), sl = opt(slots);
    op([=, this] {
      in_.qkv_prep(qkv, qn ? &*qn : nullptr, kn ? &*kn : nullptr, eps, cos, sin, sl ? &*sl : nullptr, q_out,
                   k_out, v_out);
    });
  }
  void act_mul(const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out) override {
    op([=, this] { in_.act_mul(gate, up, kind, out); });
  }
  void glu(const Tensor& gu, ActKind kind, const Tensor& out) override {
    op([=, this] { in_.glu(gu, kind, out); });
  }
  void act(const Tensor& x, ActKind kind, const Tensor& out) override {
    op([=, this] { in_.act(x, kind, out); });
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override {
    op([=, this] { in_.add(a, b, out); });
  }
  void cast(const Tensor& x, const Tensor& out) override {
    op([=, this] { in_.cast(x, out); });
  }
  void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) override {
    op([=, this] { in_.embedding(ids, table, out); });
  }
  void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out) override {
    op([=, this] { in_.gather_rows(src, rows, out); });
  }
  void scatter_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) override {
    op([=, this] { in_.scatter_rows(src, rows, dst); });
  }
  void copy(const Tensor& src, const Tensor& dst) override {
    op([=, this] { in_.copy(src, dst); });
  }
  void patchify(const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw, const Tensor& out) override {
    op([=, this] { in_.patchify(pixels, patch, gh, gw, out); });
  }
  void unfold_2x2(const Tensor& x, int64_t gh, int64_t gw, const Tensor& out) override {
    op([=, this] { in_.unfold_2x2(x, gh, gw, out); });
  }
  void argmax(const Tensor& logits, const Tensor& out) override {
    op([=, this] { in_.argmax(logits, out); });
  }
  void top_k(const Tensor& logits, int64_t k, const Tensor& values, const Tensor& indices) override {
    op([=, this] { in_.top_k(logits, k, values, indices); });
  }
  void sample(const Tensor& logits, const Tensor& params, const Tensor& out) override {
    op([=, this] { in_.sample(logits, params, out); });
  }
  void causal_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& state, const Tensor& out) override {
    op([=, this] { in_.causal_conv1d_silu(x, w, state, out); });
  }
  void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias,
                 const Tensor& g, const Tensor& beta) override {
    op([=, this] { in_.gdn_gates(a, b, A_log, dt_bias, g, beta); });
  }
  void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                const Tensor& beta, const Tensor& state, const Tensor& out) override {
    op([=, this] { in_.gated_delta_rule_chunked(q, k, v, g, beta, state, out); });
  }
  void gated_delta_rule_recurrent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                  const Tensor& beta, const Tensor& state, const Tensor& out) override {
    op([=, this] { in_.gated_delta_rule_recurrent(q, k, v, g, beta, state, out); });
  }
  void causal_conv1d_silu_slots(const Tensor& x, const Tensor& w, const Tensor& windows, const Tensor& segs,
                                std::span<const Tensor> out, const Tensor* keep) override {
    const std::optional<Tensor> kp = keep ? std::optional<Tensor>(*keep) : std::nullopt;
    op([=, this, parts = std::vector<Tensor>(out.begin(), out.end())] {
      in_.causal_conv1d_silu_slots(x, w, windows, segs, parts, kp ? &*kp : nullptr);
    });
  }
  void gated_delta_rule_chunked_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                      const Tensor& beta, const Tensor& states, const Tensor& segs,
                                      const Tensor& out, const Tensor* keep) override {
    const std::optional<Tensor> kp = keep ? std::optional<Tensor>(*keep) : std::nullopt;
    op([=, this] {
      in_.gated_delta_rule_chunked_slots(q, k, v, g, beta, states, segs, out, kp ? &*kp : nullptr);
    });
  }
  void gated_delta_rule_recurrent_slots(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                        const Tensor& beta, const Tensor& states, const Tensor& segs,
                                        const Tensor& out, const Tensor* keep) override {
    const std::optional<Tensor> kp = keep ? std::optional<Tensor>(*keep) : std::nullopt;
    op([=, this] {
      in_.gated_delta_rule_recurrent_slots(q, k, v, g, beta, states, segs, out, kp ? &*kp : nullptr);
    });
  }
  void rms_norm_gated(const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                      const Tensor& out) override {
    op([=, this] { in_.rms_norm_gated(x, gate, w, eps, out); });
  }
  void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out) override {
    op([=, this] { in_.sigmoid_mul(x, gate, out); });
  }
  void rope_f32(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) override {
    op([=, this] { in_.rope_f32(x, cos, sin, out); });
  }
  void embedding_bag(const Tensor& table, const Tensor& idx, const Tensor& w, const Tensor& out) override {
    op([=, this] { in_.embedding_bag(table, idx, w, out); });
  }

  int64_t captures = 0, replays = 0, violations = 0;

 private:
  struct Tape final : Graph {
    std::vector<std::function<void()>> ops;
  };
  void op(std::function<void()> f) {
    if (recording_)
      tape_.push_back(std::move(f));
    else
      f();
  }
  void watch() {
    if (recording_) ++violations;
  }

  Backend& in_;
  bool recording_ = false;
  std::vector<std::function<void()>> tape_;
};

}  // namespace tf
