// Pieces every decoder forward shares: the SwiGLU MLP and the logits of selected rows.
#pragma once
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "base/status.h"
#include "models/layers/util.h"
#include "models/model.h"

namespace tf {

// out = down_proj(act(gate_proj(x)) * up_proj(x)) (SwiGLU with kSilu), gate_up_proj [2 intermediate, hidden]
// the two projections stacked at load (one linear: each output element is the same dot product), gu
// [n, 2 intermediate] and mid [n, intermediate] scratch (glu is act_mul over gu's halves, bit for bit).
inline void gated_mlp(Backend& b, const Tensor& x, const Tensor& gate_up_proj, const Tensor& down_proj,
                      ActKind act, const Tensor& gu, const Tensor& mid, const Tensor& out) {
  b.linear(x, gate_up_proj, nullptr, gu);
  b.glu(gu, act, mid);
  b.linear(mid, down_proj, nullptr, out);
}

// Backend's chains of small ops (rms_norm_linear, rms_norm_linear_glu, linear_add, layer_tail; one kernel
// each on a fusing backend), or, while a forward captures its stages, Backend's own definitions of them: the
// ops they chain, in turn (the same bits), so the intermediate tensors the captures read are written.
struct Chains {
  Backend& b;
  bool fuse;
  void rms_norm_linear(const Tensor& x, const Tensor& norm_w, float eps, RmsNormKind kind, const Tensor& xn,
                       std::span<const Tensor> w, std::span<const Tensor> out) const {
    fuse ? b.rms_norm_linear(x, norm_w, eps, kind, xn, w, out)
         : b.Backend::rms_norm_linear(x, norm_w, eps, kind, xn, w, out);
  }
  void rms_norm_linear_glu(const Tensor& x, const Tensor& norm_w, float eps, RmsNormKind kind,
                           const Tensor& xn, const Tensor& gate_up, const Tensor& gu, ActKind act,
                           const Tensor& out) const {
    fuse ? b.rms_norm_linear_glu(x, norm_w, eps, kind, xn, gate_up, gu, act, out)
         : b.Backend::rms_norm_linear_glu(x, norm_w, eps, kind, xn, gate_up, gu, act, out);
  }
  void linear_add(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                  const Tensor& h) const {
    fuse ? b.linear_add(x, w, bias, y, h) : b.Backend::linear_add(x, w, bias, y, h);
  }
  void layer_tail(const Tensor& x, const Backend::TailWeights& t, const Backend::TailScratch& s,
                  const Tensor& h) const {
    fuse ? b.layer_tail(x, t, s, h) : b.Backend::layer_tail(x, t, s, h);
  }
};

// Recorded decode steps (lighton_ocr/text.cpp, qwen3_5/decode_graph.cpp): the sampled graph's output records
// hold OpenAI's most top_logprobs (20) per row.
constexpr int64_t kGraphSampleWidth = 2 + 2 * 20;
inline int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}
// Replays `graph`, or on first use runs `record` op by op (kernel attributes and lazy setup happen outside
// the capture) and records it into `graph`.
template <class Record>
void replay_or_record(Backend& b, std::unique_ptr<Backend::Graph>& graph, Record&& record) {
  if (graph) {
    b.replay(*graph);
    return;
  }
  record();
  b.begin_capture();
  record();
  graph = b.end_capture();
}

// Width of Backend::sample's output for these rows: 1 (ids) unless some row asks for logprobs.
inline int64_t sample_width(const std::vector<SampleRow>& rows) {
  int64_t n = -1;
  for (const SampleRow& r : rows) n = std::max<int64_t>(n, r.n_logprobs);
  return n < 0 ? 1 : 2 + 2 * n;
}

// Logits [rows.size(), vocab] in f32 of the final-norm hidden states' selected rows: lm_head in the
// activation dtype (captured as "lm_head"), then widened, as HF's logits.float(). kArgmax: only each
// row's argmax of those f32 logits, I32 [rows.size()], taken on the device. kSampled: only each row's
// Backend::sample record with parameters sample[i], I32 [rows.size(), sample_width(sample)].
inline Buffer lm_head_logits(Backend& b, const Tensor& hidden, const std::vector<int32_t>& rows,
                             const Tensor& lm_head, const CaptureFn& cap,
                             StepOutput out = StepOutput::kLogits,
                             const std::vector<SampleRow>& sample = {}) {
  const int64_t m = static_cast<int64_t>(rows.size()), vocab = lm_head.dim(0);
  TF_CHECK(out != StepOutput::kSampled || static_cast<int64_t>(sample.size()) == m);
  Buffer result = out == StepOutput::kArgmax    ? Buffer(DType::I32, {m})
                  : out == StepOutput::kSampled ? Buffer(DType::I32, {m, sample_width(sample)})
                                                : Buffer(DType::F32, {m, vocab});
  if (m == 0) return result;
  DeviceBuffer sel = b.alloc(hidden.dtype, {m, hidden.dim(1)});
  b.gather_rows(hidden, upload_i32(b, rows), sel);
  DeviceBuffer lg = b.alloc(hidden.dtype, {m, vocab});
  b.linear(sel, lm_head, nullptr, lg);
  capture(cap, b, "lm_head", lg);
  DeviceBuffer lf = b.alloc(DType::F32, {m, vocab});  // [n_logit_rows, vocab]
  b.cast(lg, lf);
  if (out == StepOutput::kArgmax) {
    DeviceBuffer am = b.alloc(DType::I32, {m});
    b.argmax(lf, am);
    b.download(am, result.data());
  } else if (out == StepOutput::kSampled) {
    DeviceBuffer params = b.alloc(DType::I32, {m, kSampleRowWords});
    b.upload(params, sample.data());
    DeviceBuffer ids = b.alloc(DType::I32, result.shape());
    b.sample(lf, params, ids);
    b.download(ids, result.data());
  } else {
    b.download(lf, result.data());
  }
  return result;
}

}  // namespace tf
