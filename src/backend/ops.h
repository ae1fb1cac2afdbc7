// The op contract. Model code computes through a `Backend&` only and never names an
// implementation; backend/cpu is the numerical reference, backend/cuda implements the same
// contract. Each op states its shapes (PyTorch order, contiguous row-major), dtypes and the
// points where it rounds, which are the points where Transformers 5.17 rounds.
//
// Conventions shared by every op:
// - "act" is the activation dtype: the checkpoint dtype, BF16 or F32. With F32 nothing is rounded
//   beyond ordinary f32 arithmetic; with BF16, rnd() below means round-to-nearest-even to bf16,
//   exactly where the HF module materialises a bf16 tensor.
// - Arithmetic is f32 (PyTorch's "opmath" for bf16 elementwise kernels). Reductions accumulate in
//   f32 in a FIXED order per output element that depends only on the reduced length, never on the
//   number of rows in the call, chunking or the thread count (docs/design.md, invariant 2). A row computed
//   alone or inside a batch of any size gives identical bits.
// - Tensors passed to ops are device-resident (allocated by, or imported into, the same Backend).
//   `out` may alias an input only where the op says so.
// - Shape/dtype violations are programming errors (TF_CHECK), never user input.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "backend/sampling.h"
#include "base/status.h"
#include "tensor/tensor.h"

namespace tf {

class Backend;

// Positions per block of the paged K/V pool (Backend::paged_attention) and of the prompt cache:
// Qwen3.5's delta-rule chunk, so block ends are where chunked prefill keeps its recurrent states.
inline constexpr int64_t kKvBlock = 64;

// Owning handle to backend memory (device memory on CUDA, host memory on CPU). Move-only; freed
// through its backend. A buffer made by Backend::import_host may alias host memory it does not own
// (zero-copy weights on the CPU backend); then destruction frees nothing.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* owner, Tensor t) : owner_(owner), t_(std::move(t)) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), t_(std::move(o.t_)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  void reset();
  const Tensor& tensor() const { return t_; }
  operator const Tensor&() const { return t_; }  // NOLINT(google-explicit-constructor)
  bool empty() const { return t_.data == nullptr; }

 private:
  Backend* owner_ = nullptr;  // null: not owned (alias) or empty
  Tensor t_;
};

enum class RmsNormKind {
  // HF LlamaRMSNorm family (Qwen3RMSNorm, PixtralRMSNorm, LightOnOcrRMSNorm, Mistral3RMSNorm):
  //   y = rnd(x_f32 * rsqrt(mean(x_f32^2) + eps));  out = rnd(w * y)   [w and y in act dtype]
  // Two roundings for bf16: after the normalisation and after the weight multiply.
  kWeight,
  // HF Qwen3_5RMSNorm (Gemma style): out = rnd(x_f32 * rsqrt(mean(x_f32^2) + eps) * (1 + w_f32)),
  // one rounding, the weight multiply done in f32.
  kOnePlusWeight,
};

// The activations of Transformers' ACT2FN that the supported families name in hidden_act, as HF
// computes them on an act-dtype tensor: each torch op runs in f32 ("opmath") and rounds its own
// output to act; Python float constants stay f32 (PyTorch keeps a scalar operand's original value).
// a(x) is act_fn(x) as HF materialises it:
enum class ActKind {
  kSilu,       // "silu" (F.silu, one op): a = rnd(x / (1 + expf(-x)))
  kGelu,       // "gelu" (F.gelu, one op): a = rnd(x*0.5*(1 + erff(x*(1/√2))))
  kGeluTanh,   // "gelu_pytorch_tanh" (F.gelu approximate="tanh", one op):
               //   a = rnd(0.5*x*(1 + tanhf(√(2/π)*(x + 0.044715*x*x*x))))
  kGeluNew,    // "gelu_new" (NewGELUActivation: the same formula as seven torch ops, each rounded):
               //   c = rnd(rnd(x*x)*x) (pow(x, 3) = x*x*x in act); d = rnd(0.044715*c); e = rnd(x + d);
               //   f = rnd(√(2/π)*e); t = rnd(tanhf(f)); h = rnd(1 + t); a = rnd(rnd(0.5*x)*h)
  kQuickGelu,  // "quick_gelu" (QuickGELUActivation, x * sigmoid(1.702x), three ops):
               //   a = rnd(x * rnd(1 / (1 + expf(-rnd(1.702*x)))))
  kRelu,       // "relu": a = max(x, 0), exact (NaN stays NaN, -0 stays -0)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // ---- memory -------------------------------------------------------------------------------
  // Zero-filled buffer of `shape` and `dtype`.
  virtual DeviceBuffer alloc(DType dtype, const Shape& shape) = 0;
  // A buffer the caller writes whole before any op reads it (weights stacked at load, concat_rows): its
  // contents are undefined, which spares the CPU a pass of zeroing. The default zero-fills, as alloc.
  virtual DeviceBuffer alloc_uninit(DType dtype, const Shape& shape) { return alloc(dtype, shape); }
  // A large, long-lived zero-filled buffer of which much may stay unused for long (the K/V pool, the
  // recurrent state slots): the CPU maps it, so a page costs memory and time only once written. The
  // default is alloc.
  virtual DeviceBuffer alloc_pool(DType dtype, const Shape& shape) { return alloc(dtype, shape); }
  // Copy host bytes (dst.nbytes() of them) into device tensor `dst`.
  virtual void upload(const Tensor& dst, const void* host) = 0;
  // Copy device tensor `src` into host memory (src.nbytes() bytes).
  virtual void download(const Tensor& src, void* host) = 0;
  // Make a host tensor usable by ops. The CPU backend aliases it (the caller keeps the host memory
  // alive, e.g. the mmap'd checkpoint); a device backend copies it.
  virtual DeviceBuffer import_host(const Tensor& host) = 0;
  // Wait for queued work (no-op on CPU).
  virtual void synchronize() = 0;
  // Device memory not in use (a GPU's free memory; 0 on the CPU, whose memory is the host's).
  virtual size_t free_device_memory() { return 0; }
  virtual void free_memory(void* data) = 0;  // used by DeviceBuffer
  // Makes the calling thread's work go to this backend's device (a thread that did not create the
  // backend calls it once before its first op: the engine thread; CUDA: cudaSetDevice). No-op on CPU.
  virtual void bind_thread() {}

  // ---- recorded op sequences (optional) -------------------------------------------------------
  // A backend that can record ops and replay them (CUDA graphs) says so in records_graphs(); the models
  // ask can_capture(), which disable_capture() turns off for the backend's life (--enforce-eager: every
  // step op by op, as vLLM's flag of that name; a row's bits are the same either way). Between
  // begin_capture() and end_capture() the ops are recorded, not run, and nothing else may be called
  // (no alloc, upload, download, synchronize). replay(g) runs the recorded ops again on the same
  // buffers, with whatever they hold then: a decode step's launches at the cost of one.
  class Graph {
   public:
    virtual ~Graph() = default;
  };
  bool can_capture() const { return !capture_disabled_ && records_graphs(); }
  void disable_capture() { capture_disabled_ = true; }
  virtual bool records_graphs() const { return false; }
  virtual void begin_capture() { TF_CHECK(false && "this backend records no graphs"); }
  virtual std::unique_ptr<Graph> end_capture() {
    TF_CHECK(false && "this backend records no graphs");
    return nullptr;
  }
  virtual void replay(Graph& g) {
    (void)g;
    TF_CHECK(false && "this backend records no graphs");
  }

  // ---- ops ----------------------------------------------------------------------------------
  // linear: out[n, out_f] = x[n, in_f] · w[out_f, in_f]^T (+ bias[out_f]).
  // x, out: act. w: BF16 or F32 (converted exactly to f32). bias: null or [out_f] of w's dtype.
  // Each output element: f32 dot product over in_f (fixed order), + bias in f32, then ONE rnd()
  // (cuBLAS bf16 GEMM with f32 accumulation and bias epilogue). Also the patch conv (as a GEMM
  // after patchify) and lm_head.
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out) = 0;

  // linear_many: out[i] = linear(x, w[i], no bias) for several weights sharing x (a layer's projections of
  // one input), bit for bit the separate calls; a backend may run them as one launch (CUDA: up to 4, calls
  // of <= 64 rows). w.size() == out.size().
  virtual void linear_many(const Tensor& x, std::span<const Tensor> w, std::span<const Tensor> out) {
    TF_CHECK(w.size() == out.size());
    for (size_t i = 0; i < w.size(); ++i) linear(x, w[i], nullptr, out[i]);
  }

  // rms_norm over the last dim d: x[n, d] act, w[d] (act dtype for kWeight; any float dtype for
  // kOnePlusWeight), out[n, d] act. Rounding per RmsNormKind. mean(x²) is an f32 sum in fixed order
  // divided by d; rsqrt as 1/sqrtf. Per-head q/k norms pass x viewed as [n*heads, head_dim].
  // out may alias x.
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, RmsNormKind kind, const Tensor& out) = 0;

  // add_rms_norm: the residual add and the next norm in one pass: h = rnd(h + delta) (`add`, in
  // place), then out = rms_norm(h, w, eps, kind) (`rms_norm`), bit for bit the two ops in turn.
  // h, delta, out [n, d] act; out must not alias h or delta.
  virtual void add_rms_norm(const Tensor& h, const Tensor& delta, const Tensor& w, float eps,
                            RmsNormKind kind, const Tensor& out) = 0;

  // The decode step's chains of small ops, as one op each so a backend can run them as one kernel (CUDA:
  // calls of <= 16 rows, backend/cuda/linear_tc_small.cuh); each is bit for bit the ops it names, in turn:
  // rms_norm_linear: rms_norm(x, norm_w, eps, kind) into xn, then linear_many(xn, w, out) (a layer's norm
  // and the projections that read it). xn [n, in_f] act is scratch (a fused backend leaves it unwritten);
  // x must alias neither xn nor an output.
  virtual void rms_norm_linear(const Tensor& x, const Tensor& norm_w, float eps, RmsNormKind kind,
                               const Tensor& xn, std::span<const Tensor> w, std::span<const Tensor> out) {
    rms_norm(x, norm_w, eps, kind, xn);
    linear_many(xn, w, out);
  }
  // rms_norm_linear_glu: the gated MLP up to its down projection: rms_norm(x) into xn, linear(xn,
  // gate_up) into gu [n, 2d], glu(gu, act) into out [n, d]. xn and gu are scratch.
  virtual void rms_norm_linear_glu(const Tensor& x, const Tensor& norm_w, float eps, RmsNormKind kind,
                                   const Tensor& xn, const Tensor& gate_up, const Tensor& gu, ActKind act,
                                   const Tensor& out) {
    rms_norm(x, norm_w, eps, kind, xn);
    linear(xn, gate_up, nullptr, gu);
    glu(gu, act, out);
  }
  // linear_add: a projection into the residual stream: linear(x, w, bias) into y, then add(h, y, h).
  // y [n, out_f] act is scratch; h [n, out_f] act.
  virtual void linear_add(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y,
                          const Tensor& h) {
    linear(x, w, bias, y);
    add(h, y, h);
  }

  // linear_qkv_prep: a vision tower's fused q/k/v projection and its RoPE (no q/k norms, contiguous K/V):
  // linear(x, w, bias) into qkv, then qkv_prep(qkv, null, null, 0, cos, sin, null, q_out, k_out, v_out).
  // qkv [n, (heads + 2 kv_heads) d] act is scratch (a fused backend may leave it unwritten; CUDA: calls of
  // >= 17 rows with d = 64 = r, TF_CUDA_FUSED_LINEAR bit 16).
  virtual void linear_qkv_prep(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& qkv,
                               const Tensor& cos, const Tensor& sin, const Tensor& q_out, const Tensor& k_out,
                               const Tensor& v_out) {
    linear(x, w, bias, qkv);
    qkv_prep(qkv, nullptr, nullptr, 0.0f, cos, sin, nullptr, q_out, k_out, v_out);
  }

  // layer_tail: a decoder layer after its attention, the three chains above in turn:
  // linear_add(x, o_w, o_bias, y, h), rms_norm_linear_glu(h, norm_w, eps, kind, xn, gate_up, gu, act, mid),
  // linear_add(mid, down, nullptr, y, h). x [n, o_in] act (the attention's output); h [n, d] act, the
  // residual stream, updated in place; y [n, d], xn [n, d], gu [n, 2 i] and mid [n, i] are scratch (a fused
  // backend may leave y, xn and gu unwritten). CUDA can run calls of <= 4 rows as one kernel
  // (backend/cuda/layer_tail.cu; TF_CUDA_FUSED_LINEAR=15: measured slower than the three chains' kernels, so
  // not by default).
  struct TailWeights {
    const Tensor& o_w;
    const Tensor* o_bias;
    const Tensor& norm_w;
    float eps;
    RmsNormKind kind;
    const Tensor& gate_up;
    ActKind act;
    const Tensor& down;
  };
  struct TailScratch {
    const Tensor &y, &xn, &gu, &mid;
  };
  virtual void layer_tail(const Tensor& x, const TailWeights& t, const TailScratch& s, const Tensor& h) {
    linear_add(x, t.o_w, t.o_bias, s.y, h);
    rms_norm_linear_glu(h, t.norm_w, t.eps, t.kind, s.xn, t.gate_up, s.gu, t.act, s.mid);
    linear_add(s.mid, t.down, nullptr, s.y, h);
  }

  // layer_norm over the last dim (nn.LayerNorm): x[n, d] act, w[d], b[d] (act or F32), out[n, d].
  // mean and biased variance in f32 (two passes, fixed order); out = rnd((x-mean)*rstd*w + b) with
  // the affine part in f32: one rounding (PyTorch's layer_norm kernel computes in opmath).
  virtual void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                          const Tensor& out) = 0;

  // rope_cos_sin: angles[n, r/2] F32 -> cos, sin [n, r] act, with emb = cat(angles, angles):
  //   cos = rnd(cosf(emb)), sin = rnd(sinf(emb)).  HF computes the table in f32 (autocast off)
  // and casts it to the activation dtype. The angles themselves are built by the model
  // (fl32(position * inv_freq[k]) for 1D; per-axis products for Pixtral's 2D table).
  virtual void rope_cos_sin(const Tensor& angles, const Tensor& cos, const Tensor& sin) = 0;

  // rope: x[n, heads, d] act, cos/sin[n, r] act (r even, r <= d); out[n, heads, d] act.
  // HF apply_rotary_pos_emb on the first r dims (rotate_half pairs i with i + r/2), elementwise in
  // act with three roundings for bf16:
  //   i <  r/2: out = rnd(rnd(x[i]*cos[i]) + rnd(-x[i+r/2]*sin[i]))
  //   i >= r/2: out = rnd(rnd(x[i]*cos[i]) + rnd( x[i-r/2]*sin[i]))
  //   i >= r (partial rotary): out = x[i].  out may alias x.
  virtual void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) = 0;

  // attention: q[n_q, heads, d], k/v[n_k, kv_heads, d] act; out[n_q, heads, d] act.
  // key_ranges[n_q, 2] I32: query row i attends keys [begin_i, end_i) (causal decoding over a KV
  // cache: [0, pos_i + 1); block-diagonal vision attention: the row's image span). GQA: query head
  // h reads kv head h / (heads / kv_heads) (repeat_kv = repeat_interleave).
  // Semantics of PyTorch's flash SDPA (the CPU kernel the oracle runs, and the CUDA flash kernels):
  //   s_j = fl32(dot_f32(q, k_j) * scale); m = max_j s_j; p_j = expf(s_j - m); l = Σ_j p_j (f32, unrounded);
  //   out = rnd(Σ_j rnd(p_j) · v_j / l)
  // i.e. the unnormalised probabilities are rounded to act before P·V (bf16 GEMM with f32
  // accumulation), the row sum is not. Keys are visited in increasing j with one global max per row,
  // so the result does not depend on tiling, chunking or batch. (PyTorch's CPU kernel tiles keys by
  // 512 with a running max; for rows with more than 512 keys its rounding of p_j can differ by an
  // ulp from this. The eager path differs further: it rounds QK^T to bf16.)
  virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ranges,
                         float scale, const Tensor& out) = 0;

  // paged_attention: attention over K/V kept in a pool of kKvBlock-row blocks shared by many
  // sequences (the batched engine's KV cache). k_pool/v_pool[n_blocks * kKvBlock, kv_heads, d] act;
  // tables[n_seg, max_blocks] I32: each segment's block ids in position order (entries past a
  // segment's blocks are ignored); seg_rows[n_seg + 1] I32: the query rows of segment s are
  // [seg_rows[s], seg_rows[s + 1]) (varlen, like flash-attn's cu_seqlens; seg_rows[0] = 0,
  // seg_rows[n_seg] = n_q); key_ranges[n_q, 2] in the row's logical positions: logical key j of segment s is
  // pool row tables[s][j / kKvBlock] * kKvBlock + j % kKvBlock. Each row's result is bit for bit what
  // attention() gives over its keys laid out contiguously, so it depends on neither the pool layout
  // nor the other segments.
  virtual void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                               const Tensor& tables, const Tensor& seg_rows, const Tensor& key_ranges,
                               float scale, const Tensor& out) = 0;

  // qkv_prep: q, k and v of one attention layer from its fused projection, bit for bit the ops
  // `rms_norm` (per head, kWeight, when the norm weights are given), `rope` (q and k) and
  // `scatter_rows` (k and v) in turn.
  //   qkv[n, (heads + 2 kv_heads) * d] act: each row is [q heads | k heads | v heads] (q_proj, k_proj,
  //   v_proj concatenated along out_f); q_norm, k_norm: [d] act or null (no q/k RMSNorm, e.g. Pixtral);
  //   cos/sin[n, r] act as for `rope`; q_out[n, heads, d] act; k_out, v_out[m, kv_heads, d] act.
  //   slots null: row i of k/v goes to row i (m = n, a contiguous K/V); else slots[n] I32: row i goes to
  //   row slots[i] (the K/V pool's slots), or nowhere where slots[i] < 0 (a padding row).
  virtual void qkv_prep(const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps,
                        const Tensor& cos, const Tensor& sin, const Tensor* slots, const Tensor& q_out,
                        const Tensor& k_out, const Tensor& v_out) = 0;

  // act_mul: the gated MLP's act_fn(gate_proj(x)) * up_proj(x): out = rnd(a(gate) * up), a(gate)
  // as ActKind states (materialised in act, then the product rounded: two roundings for kSilu).
  // gate, up, out [n, d] act (any shape, same numel). out may alias gate.
  virtual void act_mul(const Tensor& gate, const Tensor& up, ActKind kind, const Tensor& out) = 0;

  // glu: the fused gate_up projection's activation: gu[n, 2d] act holds rows [gate | up] (gate_proj
  // and up_proj concatenated along out_f), out[n, d] act = act_mul(gu[:, :d], gu[:, d:]) bit for bit.
  virtual void glu(const Tensor& gu, ActKind kind, const Tensor& out) = 0;

  // act: out = a(x) as ActKind states (an ungated MLP's act_fn; the projector's GELU). Any shape,
  // act dtype. out may alias x.
  virtual void act(const Tensor& x, ActKind kind, const Tensor& out) = 0;

  // add: out = rnd(a + b), same shape, act (the bf16 residual stream). out may alias a or b.
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;

  // cast: elementwise dtype conversion between F32/BF16 (RNE), same numel. (logits -> f32)
  virtual void cast(const Tensor& x, const Tensor& out) = 0;

  // embedding: out[n, d] = table[ids[i]] (ids[n] I32 in [0, vocab), table[vocab, d]); converted to
  // out's dtype (exact when dtypes match).
  virtual void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) = 0;

  // gather_rows: out[m, ...] = src[rows[i]]; scatter_rows: dst[rows[i]] = src[i]. Same dtype;
  // rows[m] I32. (Image embeddings into placeholder rows, K/V into cache slots, logit rows.)
  virtual void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out) = 0;
  virtual void scatter_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) = 0;

  // copy: dst = src byte for byte (device to device). Same dtype and element count; the shapes may
  // differ (a row slice of a cache into a prompt-cache block and back). src and dst must not
  // overlap. (Prompt-cache snapshot/restore, recurrent-state checkpoints: cudaMemcpyAsync D2D.)
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;

  // patchify (Conv2d(k=s=p) as a GEMM): pixels[C, H, W] F32 -> out[gh*gw, C*p*p] act with
  //   out[i*gw + j][c*p*p + ky*p + kx] = rnd(pixels[c][i*p + ky][j*p + kx])
  // (the f32 -> weight-dtype cast HF does before patch_conv; columns in the weight's (c,kh,kw)
  // order; patches row-major like flatten(1).T). Takes the top-left gh×gw patches (the crop to
  // image_size // p that drops batch padding).
  virtual void patchify(const Tensor& pixels, int64_t patch, int64_t gh, int64_t gw, const Tensor& out) = 0;

  // unfold_2x2: x[gh*gw, c] (row-major patch grid) -> out[(gh/2)*(gw/2), 4c] as
  // F.unfold(kernel 2, stride 2) over the [c, gh, gw] grid, transposed: channel-major,
  //   out[bi*(gw/2) + bj][ch*4 + ki*2 + kj] = x[(2bi+ki)*gw + 2bj+kj][ch]
  // A trailing odd row/column is dropped, as unfold drops it. Exact copy.
  virtual void unfold_2x2(const Tensor& x, int64_t gh, int64_t gw, const Tensor& out) = 0;

  // argmax: logits[n, V] F32 -> out[n] I32, the first index of the maximum (torch.argmax).
  virtual void argmax(const Tensor& logits, const Tensor& out) = 0;

  // top_k: logits[n, V] F32 -> values[n, k] F32 and indices[n, k] I32, sorted by value
  // descending, ties by lower index first.
  virtual void top_k(const Tensor& logits, int64_t k, const Tensor& values, const Tensor& indices) = 0;

  // sample: one token per logit row, chosen with the row's own parameters (the step's sampler, so only
  // ids and logprobs leave the device). logits[n, V] F32; params[n, kSampleRowWords] I32, row r a
  // SampleRow (backend/sampling.h); out[n, w] I32 with w = 1 (ids only) or w = 2 + 2 m:
  //   out[r][0]          the token sampling::draw(row r, params[r]) picks;
  //   out[r][1]          (w > 1, n_logprobs >= 0) its logprob's f32 bits, sampling::logprobs;
  //   out[r][2 + 2j], [3 + 2j]  (j < min(n_logprobs, m, V)) the j-th most likely token and its logprob
  //                      bits; every other column of the row is 0.
  // A row's result depends on its logits and parameters only (not on the other rows, n or w). The CPU
  // op is the reference itself; CUDA (backend/cuda/sample.cu) holds ids to it except where the draw u
  // or the top-p cut lies within a stated epsilon of a cumulative boundary, logprobs within 1e-5.
  virtual void sample(const Tensor& logits, const Tensor& params, const Tensor& out) = 0;

  // ---- Qwen3.5 ops (Gated DeltaNet, gated attention, Qwen vision) ------------------------------
  // HF: models/qwen3_5/modeling_qwen3_5.py (torch paths; fla / causal-conv1d not installed).

  // causal_conv1d_silu: depthwise causal conv1d without bias + SiLU over n new tokens, continuing
  // from a carried window (causal_conv1d_fn on a fresh cache, causal_conv1d_update in decode, and
  // the cached-window concatenation of a multi-token continuation all compute this).
  //   x[n, C] act (token-major), w[C, K] act, state[C, K-1] act in/out (the previous K-1 raw
  //   inputs of each channel, oldest first; zeros at sequence start), out[n, C] act.
  //   With xx = [state | x] along time: out[t, c] = rnd(silu(rnd(Σ_{j<K} w[c, j] * xx[c, t + j])))
  //   (f32 products summed in increasing j; F.conv1d rounds its output, SiLU rounds again).
  //   Afterwards state = the last K-1 columns of xx. One call over n tokens gives the same bits
  //   as n one-token calls. out must not alias x.
  virtual void causal_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& state,
                                  const Tensor& out) = 0;

  // gdn_gates: a, b[n, h] act; A_log, dt_bias[h] (F32 or BF16, converted exactly) ->
  //   g[n, h] F32    = fl32(-expf(A_log)) * softplus(a + dt_bias)   (all f32; softplus(x) = x for
  //                    x > 20, else log1p(expf(x)), torch's threshold)
  //   beta[n, h] act = rnd(sigmoid(b))                              (b.sigmoid() in act)
  virtual void gdn_gates(const Tensor& a, const Tensor& b, const Tensor& A_log, const Tensor& dt_bias,
                         const Tensor& g, const Tensor& beta) = 0;

  // Gated delta rule, both forms: q, k[n, hk, dk] act, v[n, hv, dv] act, g[n, hv] F32 (log decay),
  // beta[n, hv] act, state[hv, dk, dv] F32 in/out (zeros at sequence start), out[n, hv, dv] act.
  // hv % hk == 0; value head h reads key head h / (hv / hk) (repeat_interleave). Everything is f32:
  // q and k are l2-normalised per head, x * (1 / sqrtf(Σ x² + 1e-6)), then q is scaled by dk^-0.5.
  // Math per token t (S = state of head h):  S = exp(g_t) S;  S += k_t ⊗ β_t (v_t - Sᵀ k_t);
  // o_t = Sᵀ q_t;  out = rnd(o). The final state stays f32.
  //
  // chunked (torch_chunk_gated_delta_rule, chunk 64): rows are cut into chunks of 64 counted from
  // the first row of the call (the last one shorter: HF's zero padding contributes nothing). Per
  // chunk, with c = cumsum(g) (accumulated in double, each prefix rounded to f32, as torch's CPU
  // cumsum does), P[i][j] = expf(c_i - c_j) for j <= i:
  //   A[i][j] = (kβ_i · k_j) P[i][j] (j < i); [U_v | U_k] = (I + A)^-1 [vβ | kβ ∘ expf(c)] by forward
  //   substitution (u_i = b_i - Σ_{j<i} A[i][j] u_j, increasing j); v' = U_v - U_k S;
  //   o_i = (q_i expf(c_i)) S + Σ_{j<=i} (q_i · k_j) P[i][j] v'_j;
  //   S = S expf(c_last) + Σ_i (k_i expf(c_last - c_i)) ⊗ v'_i.
  // Deterministic and independent of the thread count; a call over rows [0, 64m + r) equals calls
  // over [0, 64m) and [64m, 64m + r) with the state carried, bit for bit. (The CUDA backend runs this
  // rule on tensor cores, held to the CPU by a tolerance and with the same split invariance, or for other
  // head dims this arithmetic bit for bit; its optional per-token kernel,
  // test_hooks::set_cuda_delta_rule_variant, runs both forms as one recurrence held to the CPU by a
  // tolerance.)
  virtual void gated_delta_rule_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                        const Tensor& beta, const Tensor& state, const Tensor& out) = 0;
  // recurrent (torch_recurrent_gated_delta_rule): the per-token loop above, one token after the
  // other (q scaled as q / sqrtf(dk)); HF uses it for one-token decode on a cached state.
  virtual void gated_delta_rule_recurrent(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                          const Tensor& beta, const Tensor& state, const Tensor& out) = 0;

  // ---- the same three ops over every segment of a step, on a pool of state slots (issue 15/17) ---
  // segs[n_seg, kSlotSegCols] I32, one row per segment: {r0, r1, slot, pos0, keep0, keep_step}.
  // Segment s is rows [r0, r1) of the step's matrices, the positions pos0 .. pos0 + (r1 - r0) - 1 of
  // the sequence whose window / state is slot `slot` of the pool (in/out, read and written in
  // place). Each segment computes exactly what the op above computes over its rows with that slot
  // as the state (the CPU runs that op per segment: the same bits). With keep0 >= 0, after each row
  // at a position p with (p + 1) % keep_step == 0 the window / state is also written to
  // keep[keep0 + j], j = 0, 1, ... in row order (draft verification keeps every row: keep_step 1;
  // the prompt cache every multiple of 64: keep_step 64). Segments have distinct slots and disjoint
  // rows; rows outside every segment are not written. keep may be null when no segment keeps.
  static constexpr int64_t kSlotSegCols = 6;
  //   causal_conv1d_silu_slots: x[n, C] act, w[C, K] act, windows[n_slots, C, K-1] act,
  //   out: one [n, C] act, or up to three [n, C_i] act taking consecutive column ranges (Σ C_i = C: a Gated
  //   DeltaNet layer's q | k | v split by the op's own stores, no gathers after it), keep[n_keep, C, K-1]
  //   act.
  virtual void causal_conv1d_silu_slots(const Tensor& x, const Tensor& w, const Tensor& windows,
                                        const Tensor& segs, std::span<const Tensor> out,
                                        const Tensor* keep) = 0;
  //   gated_delta_rule_*_slots: q, k[n, hk, dk] act, v[n, hv, dv] act, g[n, hv] F32, beta[n, hv] act,
  //   states[n_slots, hv, dk, dv] F32, out[n, hv, dv] act, keep[n_keep, hv, dk, dv] F32.
  // chunked: a segment's chunks of 64 are counted from position 0 (its first chunk ends at the next
  // multiple of 64 after pos0), which is how a prefill split at such multiples reproduces one pass;
  // keep_step must be a multiple of 64 (states exist only at chunk ends). recurrent: token by token
  // (decode: one row per segment; draft verification: 1 + k rows, keep_step 1).
  virtual void gated_delta_rule_chunked_slots(const Tensor& q, const Tensor& k, const Tensor& v,
                                              const Tensor& g, const Tensor& beta, const Tensor& states,
                                              const Tensor& segs, const Tensor& out, const Tensor* keep) = 0;
  virtual void gated_delta_rule_recurrent_slots(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const Tensor& g, const Tensor& beta, const Tensor& states,
                                                const Tensor& segs, const Tensor& out,
                                                const Tensor* keep) = 0;

  // rms_norm_gated (Qwen3_5RMSNormGated): x, gate[n, d] act, w[d] act, out[n, d] act:
  //   y = rnd(x * 1/sqrtf(mean(x²) + eps));  y = rnd(w * y);  out = rnd(y * silu(gate))
  // with silu(z) = z / (1 + expf(-z)) in f32 (the product is f32: bf16 * f32 promotes).
  virtual void rms_norm_gated(const Tensor& x, const Tensor& gate, const Tensor& w, float eps,
                              const Tensor& out) = 0;

  // sigmoid_mul: out = rnd(x * rnd(sigmoid(gate))), all [n, d] act (gated attention output,
  // attn_output * torch.sigmoid(gate)). out may alias x.
  virtual void sigmoid_mul(const Tensor& x, const Tensor& gate, const Tensor& out) = 0;

  // rope_f32 (apply_rotary_pos_emb_vision): x[n, heads, d] act, cos/sin[n, d] F32, out like x:
  //   out[i] = rnd(fl32(x[i]*cos[i]) + fl32(rot[i]*sin[i])), rot = rotate_half over all d dims,
  // computed in f32 with one rounding. out may alias x.
  virtual void rope_f32(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& out) = 0;

  // embedding_bag: table[V, d] (F32/BF16), idx[n, taps] I32, w[n, taps] F32 -> out[n, d] act:
  //   out[i] = rnd(Σ_t fl32(table[idx[i][t]] * w[i][t])), summed in increasing t starting from the
  // first term ((pos_embed(idx) * weights[:, :, None]).sum(1), the vision position-table resampling).
  virtual void embedding_bag(const Tensor& table, const Tensor& idx, const Tensor& w, const Tensor& out) = 0;

 private:
  bool capture_disabled_ = false;
};

// Creates a backend by name: "cpu"; "cuda" (GPU 0) or "cuda:N" where built; "auto": cuda when this build has
// it and a GPU can be initialised, else cpu, logging one line with the choice and its reason. Error if
// unknown, or "cuda" not built or without a usable GPU.
Expected<std::unique_ptr<Backend>> create_backend(std::string_view name);

// "silu", "gelu", ... (the ACT2FN key of each kind).
const char* act_kind_name(ActKind kind);

// Convenience: allocate and upload host data.
DeviceBuffer upload_new(Backend& b, const Tensor& host);
// Convenience: download a device tensor into a new host buffer.
Buffer download_new(Backend& b, const Tensor& dev);

}  // namespace tf
