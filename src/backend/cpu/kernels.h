// CPU reference ops, one per file in this folder; semantics are those of backend/ops.h.
#pragma once
#include "backend/ops.h"
#include "base/thread_pool.h"

namespace tf::cpu {
void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out);
void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, float eps, RmsNormKind kind,
              const Tensor& out);
void add_rms_norm(ThreadPool& pool, const Tensor& h, const Tensor& delta, const Tensor& w, float eps,
                  RmsNormKind kind, const Tensor& out);
void qkv_prep(ThreadPool& pool, const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps,
              const Tensor& cos, const Tensor& sin, const Tensor* slots, const Tensor& q_out,
              const Tensor& k_out, const Tensor& v_out);
void glu(ThreadPool& pool, const Tensor& gu, ActKind kind, const Tensor& out);
void layer_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                const Tensor& out);
void rope_cos_sin(const Tensor& angles, const Tensor& cos, const Tensor& sin);
void rope(ThreadPool& pool, const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out);
void paged_attention(ThreadPool& pool, const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                     const Tensor& tables, const Tensor& seg_rows, const Tensor& key_ranges, float scale,
                     const Tensor& out);
void attention(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges,
               float scale, const Tensor& out);
void act_mul(ThreadPool& pool, const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out);
void act(ThreadPool& pool, const Tensor& x, ActKind kind, const Tensor& out);
void add(ThreadPool& pool, const Tensor& a, const Tensor& b, const Tensor& out);
void cast(const Tensor& x, const Tensor& out);
void embedding(const Tensor& ids, const Tensor& table, const Tensor& out);
void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out);
void scatter_rows(const Tensor& src, const Tensor& rows, const Tensor& dst);
void copy(const Tensor& src, const Tensor& dst);
void patchify(const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw, const Tensor& out);
void unfold_2x2(const Tensor& x, int64_t gh, int64_t gw, const Tensor& out);
void argmax(ThreadPool& pool, const Tensor& logits, const Tensor& out);
void top_k(ThreadPool& pool, const Tensor& logits, int64_t k, const Tensor& values, const Tensor& indices);
void sample(ThreadPool& pool, const Tensor& logits, const Tensor& params, const Tensor& out);
// ---- Qwen3.5 ops ----
void causal_conv1d_silu(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& state,
                        const Tensor& out);
void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias, const Tensor& g,
               const Tensor& beta);
void gated_delta_rule_chunked(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out);
void gated_delta_rule_recurrent(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& g, const Tensor& beta, const Tensor& state, const Tensor& out);
// gdn_slots.cpp: the three above over every segment of a step, on a pool of slots (ops.h).
void causal_conv1d_silu_slots(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& windows,
                              const Tensor& segs, std::span<const Tensor> out, const Tensor* keep);
void gated_delta_rule_chunked_slots(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& g, const Tensor& beta, const Tensor& states,
                                    const Tensor& segs, const Tensor& out, const Tensor* keep);
void gated_delta_rule_recurrent_slots(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& g, const Tensor& beta, const Tensor& states,
                                      const Tensor& segs, const Tensor& out, const Tensor* keep);
void rms_norm_gated(ThreadPool& pool, const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                    const Tensor& out);
void sigmoid_mul(ThreadPool& pool, const Tensor& x, const Tensor& gate, const Tensor& out);
void rope_f32(ThreadPool& pool, const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out);
void embedding_bag(const Tensor& table, const Tensor& idx, const Tensor& w, const Tensor& out);
}  // namespace tf::cpu
