// CUDA ops, one per .cu file in this folder; semantics are those of backend/ops.h. Most results equal
// the CPU reference's bit for bit (transcendental ops: see common.cuh); the tensor-core linear and
// attention (and the optional per-token delta rule) are held to it by a stated tolerance instead
// (tools/cuda_check/README.md), and every op is exactly invariant within CUDA (a row's bits do not
// depend on the call's other rows or on how a sequence was split into calls). Each launch_<op>
// checks shapes on the host like its CPU twin and queues its kernels on `s`. Plain C++ header.
#pragma once
#include <cuda_runtime_api.h>

#include <span>

#include "backend/ops.h"

namespace tf::cuda {
void launch_linear(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out);
// Backend::linear_many: out[i] = linear(x, w[i]) (no bias), bit for bit the separate calls.
void launch_linear_many(cudaStream_t s, const Tensor& x, std::span<const Tensor> w,
                        std::span<const Tensor> out);
// The tensor-core forms (linear_tc.cu, attention_tc.cu): bf16 operands; launch_linear and
// launch_attention route to them where they apply.
bool linear_tc_applies(const Tensor& x, const Tensor& w);
void launch_linear_tc(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias,
                      const Tensor& out);
// The large-row candidates of linear_tc_large.cu, configs [linear_tc_large_first(), linear_tc_large_end())
// of test_hooks::set_cuda_linear_large_config; false (nothing queued) where they do not apply (in_f % 8,
// alignment): the caller then runs config 0, which has the same bits.
int linear_tc_large_first();
int linear_tc_large_end();
const char* linear_tc_large_name(int which);
bool launch_linear_tc_large(cudaStream_t s, int which, const Tensor& x, const Tensor& w, const Tensor* bias,
                            const Tensor& out);
// The small-row candidates of linear_tc_small.cu (<= 64 rows), configs 1 .. linear_tc_small_variants() of
// test_hooks::set_cuda_linear_small_config, k chunks of kc; false (nothing queued) where they do not apply
// (in_f % 8, alignment, > 64 rows): the caller then runs linear_tc.cu's chunks kernel, which has the same
// bits.
int linear_tc_small_variants();
const char* linear_tc_small_name(int which);
// Several weights sharing x (up to 4; bias[i] may be null) in one launch: out[i] = x · w[i]ᵀ (+ bias[i]),
// each column's arithmetic that of a single call.
bool launch_linear_tc_small(cudaStream_t s, int which, const Tensor& x, std::span<const Tensor> w,
                            std::span<const Tensor* const> bias, std::span<const Tensor> out, int kc);
// The fused forms of linear_tc_small.cuh, <= 16 rows, bf16 throughout: x is normalised first (norm_w set:
// rms_norm's statements; w may be several weights, as linear_many), and/or the epilogue is glu over a
// gate | up weight (glu: out[0] is [n, w[0].dim(0) / 2]) or the residual add out[0] = rnd(out[0] + rnd(y))
// (add). False (nothing queued) where a form does not apply; the caller then runs the ops it fuses.
struct SmallFused {
  const Tensor* norm_w = nullptr;
  float eps = 0.0f;
  RmsNormKind kind = RmsNormKind::kWeight;
  bool glu = false, add = false;
  ActKind act = ActKind::kSilu;
};
bool launch_linear_tc_small_fused(cudaStream_t s, int which, const SmallFused& f, const Tensor& x,
                                  std::span<const Tensor> w, const Tensor* bias, std::span<const Tensor> out,
                                  int kc);
// Backend::rms_norm_linear, rms_norm_linear_glu and linear_add (linear_tc.cu): the fused form where it
// applies (the small-row configurations on, <= 16 rows), else false and nothing queued.
bool launch_linear_fused(cudaStream_t s, const SmallFused& f, const Tensor& x, std::span<const Tensor> w,
                         const Tensor* bias, std::span<const Tensor> out);
// Backend::linear_add (glu false: out is h) and the linear and glu of Backend::rms_norm_linear_glu (glu true:
// x is the normed xn, w gate_up, out [n, d]) as one wgmma kernel with a fused store, for calls of >= 17 rows
// that the plain call would run on the wgmma blocks (linear_tc.cu; TF_CUDA_FUSED_LINEAR bit 16): false,
// nothing queued, elsewhere.
bool large_fused_on();
// Their gate (linear_tc.cu, for linear_fused_large.cu): the wgmma configuration (10 or 11) a plain linear(x
// [n, in_f], w [w_rows, in_f]) would run with bit 16 on, else 0 (bit 16 off, fewer than 17 rows, the split
// form, another configuration, not bf16, no 16-byte copies, indices past int); whether the contract's control
// is planted; and the count test_hooks::cuda_linear_large_fused_calls reports.
int large_fused_config(const Tensor& x, const Tensor& w);
bool large_fused_planted();
void large_fused_launched();
bool launch_linear_large_fused(cudaStream_t s, bool glu, const Tensor& x, const Tensor& w, const Tensor* bias,
                               const Tensor& out);
// Backend::linear_qkv_prep as one wgmma kernel with the q/k/v store (head_dim 64 rotated whole, x's rows the
// K/V rows; the same conditions): false, nothing queued, elsewhere.
bool launch_linear_large_qkv(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor* bias,
                             const Tensor& cos, const Tensor& sin, const Tensor& q, const Tensor& k,
                             const Tensor& v);
// Backend::layer_tail as one kernel (layer_tail.cu) for <= 4 rows of the shapes it takes, k in chunks of kc
// (the contract's 256; a planted control's other length); bar: the backend's grid-barrier state (two zeroed
// unsigned); grid_cap > 0: fewer blocks than SMs, -1: test_hooks::set_cuda_linear_small_grid_cap's. False
// (nothing queued) where it does not apply.
bool launch_layer_tail(cudaStream_t s, unsigned* bar, const Tensor& x, const Backend::TailWeights& w,
                       const Tensor& mid, const Tensor& h, int kc, int grid_cap);
// Whether the fused form is on (TF_CUDA_FUSED_LINEAR bit 8, the small-row configurations on; linear_tc.cu),
// and launch_layer_tail there (false, nothing queued, where it is off or does not apply).
bool layer_tail_on();
bool launch_layer_tail_fused(cudaStream_t s, unsigned* bar, const Tensor& x, const Backend::TailWeights& w,
                             const Tensor& mid, const Tensor& h);
// linear_many's tensor-core form (linear_tc.cu): one launch of linear_tc_small.cu for calls of <= 64 rows;
// false (nothing queued) where it does not apply.
bool launch_linear_tc_many(cudaStream_t s, const Tensor& x, std::span<const Tensor> w,
                           std::span<const Tensor> out);
bool attention_tc_applies(const Tensor& q, int64_t head_dim);
void launch_attention_tc(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& key_ranges, float scale, const Tensor& out);
// The paged form's extras (attention_tc.cu): null tables: k/v are the keys themselves.
struct AttentionPaging {
  const int32_t* tables = nullptr;  // [n_seg, max_blocks]
  int max_blocks = 0;
  const int32_t* seg_rows = nullptr;  // [n_seg + 1]
  int n_seg = 0;
};
// The wide-tile variants 1 .. attention_tc_wide_variants() of attention_tc_wide.cu (same bits per row as
// variant 0); false (nothing queued) where they do not apply (head_dim > 128, few rows per sequence).
int attention_tc_wide_variants();
// split > 0: the rows' keys are folded every `split` keys (attention_split.cuh); 0: no row has more.
bool launch_attention_tc_wide(int which, cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& key_ranges, float scale, const Tensor& out,
                              const AttentionPaging& pg, int split);
void launch_paged_attention_tc(cudaStream_t s, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                               const Tensor& tables, const Tensor& seg_rows, const Tensor& key_ranges,
                               float scale, const Tensor& out);
void launch_rms_norm(cudaStream_t s, const Tensor& x, const Tensor& w, float eps, RmsNormKind kind,
                     const Tensor& out);
void launch_add_rms_norm(cudaStream_t s, const Tensor& h, const Tensor& delta, const Tensor& w, float eps,
                         RmsNormKind kind, const Tensor& out);
void launch_qkv_prep(cudaStream_t s, const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps,
                     const Tensor& cos, const Tensor& sin, const Tensor* slots, const Tensor& q_out,
                     const Tensor& k_out, const Tensor& v_out);
void launch_glu(cudaStream_t s, const Tensor& gu, ActKind kind, const Tensor& out);
void launch_layer_norm(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                       const Tensor& out);
void launch_rope_cos_sin(cudaStream_t s, const Tensor& angles, const Tensor& cos, const Tensor& sin);
void launch_rope(cudaStream_t s, const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out);
void launch_attention(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& key_ranges, float scale, const Tensor& out);
void launch_paged_attention(cudaStream_t s, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                            const Tensor& tables, const Tensor& seg_rows, const Tensor& key_ranges,
                            float scale, const Tensor& out);
void launch_act_mul(cudaStream_t s, const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out);
void launch_act(cudaStream_t s, const Tensor& x, ActKind kind, const Tensor& out);
void launch_add(cudaStream_t s, const Tensor& a, const Tensor& b, const Tensor& out);
void launch_cast(cudaStream_t s, const Tensor& x, const Tensor& out);
void launch_embedding(cudaStream_t s, const Tensor& ids, const Tensor& table, const Tensor& out);
void launch_gather_rows(cudaStream_t s, const Tensor& src, const Tensor& rows, const Tensor& out);
void launch_scatter_rows(cudaStream_t s, const Tensor& src, const Tensor& rows, const Tensor& dst);
void launch_patchify(cudaStream_t s, const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw,
                     const Tensor& out);
void launch_unfold_2x2(cudaStream_t s, const Tensor& x, int64_t gh, int64_t gw, const Tensor& out);
void launch_argmax(cudaStream_t s, const Tensor& logits, const Tensor& out);
void launch_top_k(cudaStream_t s, const Tensor& logits, int64_t k, const Tensor& values,
                  const Tensor& indices);
void launch_sample(cudaStream_t s, const Tensor& logits, const Tensor& params, const Tensor& out);
// ---- Qwen3.5 ops ----
void launch_causal_conv1d_silu(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor& state,
                               const Tensor& out);
void launch_gdn_gates(cudaStream_t s, const Tensor& a, const Tensor& b, const Tensor& A_log,
                      const Tensor& dt_bias, const Tensor& g, const Tensor& beta);
// The CPU's recurrent arithmetic bit for bit (gated_delta_rule.cu) and the chunked form as two launches
// on tensor cores (gated_delta_rule_chunks_tc.cu, held to the CPU by a tolerance; the CPU's arithmetic
// in gated_delta_rule_chunks.cu for head dims it does not take), or with
// test_hooks::set_cuda_delta_rule_variant(1) one
// per-token recurrence for both entry points (gated_delta_rule_seq.cu: held to the CPU by a tolerance,
// exactly split-invariant).
void launch_gated_delta_rule_seq(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out,
                                 bool chunked);
void launch_gated_delta_rule(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out,
                             bool chunked);
// Every segment of a step on a pool of slots (ops.h *_slots): causal_conv1d_slots.cu and
// gated_delta_rule_slots.cu, each segment the arithmetic of the one-sequence kernel above.
void launch_causal_conv1d_silu_slots(cudaStream_t s, const Tensor& x, const Tensor& w, const Tensor& windows,
                                     const Tensor& segs, std::span<const Tensor> out, const Tensor* keep);
void launch_gated_delta_rule_slots(cudaStream_t s, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& g, const Tensor& beta, const Tensor& states,
                                   const Tensor& segs, const Tensor& out, const Tensor* keep, bool chunked);
void launch_rms_norm_gated(cudaStream_t s, const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                           const Tensor& out);
void launch_sigmoid_mul(cudaStream_t s, const Tensor& x, const Tensor& gate, const Tensor& out);
void launch_rope_f32(cudaStream_t s, const Tensor& x, const Tensor& cos, const Tensor& sin,
                     const Tensor& out);
void launch_embedding_bag(cudaStream_t s, const Tensor& table, const Tensor& idx, const Tensor& w,
                          const Tensor& out);
}  // namespace tf::cuda
