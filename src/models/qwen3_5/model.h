// Qwen3.5 family (Qwen3_5ForConditionalGeneration, 5.17): Qwen vision tower (patch embed,
// resampled learned position table, 2D rotary, LayerNorm blocks, 2×2 merger) -> hybrid decoder
// (Gated DeltaNet layers + gated full attention with interleaved M-RoPE). vision.cpp, text.cpp
// and gdn.cpp hold the parts; model.cpp the M-RoPE position plan (rope_index, HF's get_rope_index).
#pragma once
#include <array>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "io/hf_config.h"
#include "io/weight_map.h"
#include "models/layers/kv_pool.h"
#include "models/layers/state_pool.h"
#include "models/layers/step_rows.h"
#include "models/model.h"
#include "models/qwen3_5/config.h"
#include "models/qwen3_5/weights.h"

namespace tf::qwen3_5 {

// get_rope_index for one sequence (no padding): M-RoPE (T, H, W) per token and the rope delta.
// A run of image_token_id tokens takes the next grid (t, gh, gw in patches, t must be 1):
// token k of the run gets (cur, cur + k / (gw/m), cur + k % (gw/m)), then cur += max(gh, gw) / m.
// Text tokens get cur on all axes, cur += 1. rope_delta = max position + 1 - n_tokens.
struct RopeIndex {
  std::vector<int32_t> thw;  // [n_tokens][3]
  int64_t rope_delta = 0;
};
Expected<RopeIndex> rope_index(const std::vector<int32_t>& token_ids, int64_t image_token_id,
                               const std::vector<std::array<int64_t, 3>>& grids, int64_t spatial_merge_size);

// Per-sequence state. Rows must be fed in order: a forward continues at position n_past().
class Qwen35Cache final : public SequenceCache {
 public:
  Qwen35Cache(std::shared_ptr<KvPool> pool, std::shared_ptr<StatePool> states)
      : table(std::move(pool)), slot(std::move(states)) {}
  int64_t capacity() const override { return capacity_; }
  int64_t n_past() const { return n_past_; }
  // M-RoPE plan for the prompt: rows [0, thw.size()/3) take these (T, H, W); later rows take
  // position + rope_delta on all three axes. Without a plan every axis is the position (text only).
  void set_rope_index(RopeIndex r) { rope_ = std::move(r); }
  const RopeIndex& rope() const { return rope_; }

  int64_t capacity_ = 0;
  int64_t n_past_ = 0;
  RopeIndex rope_;
  // Full-attention K/V: a block table into the model's paged pool, which holds k and v of
  // [n_blocks * kKvBlock, Hkv, D] for the full-attention layers only; layer l's are pool layer
  // kv_layer[l] (-1 for a linear layer).
  BlockTable table;
  std::vector<int32_t> kv_layer;
  // Linear layers: a slot of the model's state pool (the same index in every layer), taken when the
  // cache is made or, when the pool was exhausted then, when positions are reserved. Prompt-cache
  // snapshots of it are other slots of the same pool (snapshot(), CacheBlock::state). Layer l's are
  // pool layer state_layer[l] (-1 for a full-attention layer).
  StateSlot slot;
  std::vector<int32_t> state_layer;
  // Views of this sequence's slot (empty until it holds one, and for full-attention layers):
  std::vector<DeviceBuffer> conv;   // per layer (linear only): [conv_dim, K-1] act, raw pre-conv inputs
  std::vector<DeviceBuffer> state;  // per layer (linear only): [Hv, Dk, Dv] F32 delta-rule state

  // Draft verification (ForwardBatch::decode_rows): the state after each row of the last such
  // forward, over positions [rows_pos0, rows_pos0 + n_rows), for rollback().
  struct KeptRows {
    int64_t pos0 = -1, n = 0;
    std::vector<DeviceBuffer> conv;   // per layer (linear only): [n_max, conv_dim, K-1] act
    std::vector<DeviceBuffer> state;  // per layer (linear only): [n_max, Hv, Dk, Dv] F32
    DeviceBuffer hidden;              // [n_max, hidden] act: final-norm output of each row (MTP input)
  } kept;
  // Prompt cache (ForwardBatch::keep_block_states): for each multiple of 64 reached inside the last
  // forward, the conv window and delta-rule state of every linear layer there, for snapshot() to copy
  // into a snapshot slot (step scratch: dropped by the next forward or when snapshot() takes it).
  struct BlockState {
    int64_t pos = 0;
    std::vector<DeviceBuffer> conv, state;  // per layer (linear only), shapes as above
  };
  bool keep_block_states = false;
  std::vector<BlockState> block_states;
  // Multi-token prediction (Model::enable_mtp): the MTP layers' own K/V, kept in step with forward.
  // They stay per-sequence and contiguous, outside the pool: drafting is per sequence, they are
  // never shared with the prompt cache, and one layer of them is small next to the target's.
  // MTP position p reads the target's final hidden state at p and the embedding of token p + 1.
  struct Mtp {
    bool on = false;
    std::vector<DeviceBuffer> k, v;  // per MTP layer: [capacity, Hkv, D] act
    DeviceBuffer hidden;             // [1, hidden] act: target final hidden at position n_past - 1
    int64_t n_done = 0;              // MTP positions [0, n_done) hold K/V of the real tokens
  } mtp;
};

// One segment inside a step (or inside an MTP pass): its rows [r0, r1) of the step's matrix are its
// positions pos0 .. pos0 + (r1 - r0) - 1, continuing `cache`.
struct SegRows {
  int64_t r0 = 0, r1 = 0;
  Qwen35Cache* cache = nullptr;
  int64_t pos0 = 0;
  const ForwardBatch* batch = nullptr;  // null inside an MTP pass
  bool decode_rows() const { return batch && batch->decode_rows; }
  int64_t n() const { return r1 - r0; }
};

// One step's segments as the *_slots ops take them (gdn.cpp): segs [n_seg, 6] I32 rows
// {r0, r1, slot, pos0, keep0, keep_step} of every segment (the conv), and of those that run the
// chunked and the recurrent rule; the windows/states they keep land in n_keep rows of a buffer per
// layer, and `keeps` says whose they are.
struct GdnStep {
  DeviceBuffer all, chunked, recurrent;
  int64_t n_keep = 0;
  struct Keep {
    size_t seg;        // index into the step's segments
    int64_t keep0, n;  // keep rows [keep0, keep0 + n)
    bool rows;         // each row's (draft verification: cache.kept) or each multiple of 64's (block_states)
  };
  std::vector<Keep> keeps;
};

// The mixers' activations for n rows, allocated once per call (a step, an MTP pass) and reused by every
// layer: full attention's ([n, heads * 2 head_dim] q_proj output, q/gate/attn [n, heads * head_dim],
// k/v [n, kv_heads * head_dim]) and the Gated DeltaNet's (qkv [n, conv_dim], z/core/normed
// [n, hv * dv], b/a/beta [n, hv], g [n, hv] F32, q/k [n, hk, dk], v [n, hv, dv], the kept windows and
// states [n_keep, ...]). A part the call does not use stays empty.
struct MixerScratch {
  DeviceBuffer qg, q, gate, k, v, attn;
  DeviceBuffer qkv, z, bb, aa, lq, lk, lv, g, beta, core, normed, keep_conv, keep_state;
};

// Where a mixer reads and writes around the residual stream: x its input [n_rows, hidden] (norm set: x is
// the residual stream and the input projections read rms_norm(x, *norm), kOnePlusWeight, with xn their
// scratch: Backend::rms_norm_linear), out its output (residual set: out is scratch and the output projection
// adds into *residual: Backend::linear_add).
struct MixerIo {
  const Tensor& x;
  const Tensor& out;
  const Tensor* norm = nullptr;
  const Tensor* xn = nullptr;
  const Tensor* residual = nullptr;
};

// gather_rows indices that split q_proj's output [n, heads * (query | gate)], viewed as [2 n heads,
// head_dim], into its query rows and its gate rows: made once per call, shared by the call's full-attention
// layers.
struct QGateRows {
  DeviceBuffer q, gate;
};

// Where one segment's rows put and read K/V in the MTP layer: k, v [capacity, Hkv, D] act.
struct AttnKv {
  int64_t r0 = 0, r1 = 0;
  const Tensor* k = nullptr;
  const Tensor* v = nullptr;
};

// Where a target full-attention layer puts and reads K/V: the step's pool layer, one paged_attention
// over all segments (tables[n_seg, max_blocks] and seg_rows[n_seg + 1] I32, as Backend documents).
struct PagedKv {
  const Tensor* k = nullptr;
  const Tensor* v = nullptr;
  const Tensor* tables = nullptr;
  const Tensor* seg_rows = nullptr;
  PagedCut cut = {};  // the few-row / longer segments' cut (kv_pool.h), where there is one
};

// The device inputs of one step's decoder layers (text.cpp text_layers) over its n rows: M-RoPE cos/sin
// [n, rotary_dim]; the full-attention layers' pool slots [n], key ranges [n, 2], block tables
// [n_seg, width] and seg_rows [n_seg + 1]; the Gated DeltaNet plan; the q/gate split and the mixers'
// scratch; and the buffers of each layer's outputs, xn and o [n, hidden], the MLP's gu [n, 2 intermediate]
// and mid [n, intermediate].
struct TextStep {
  const Tensor &cos, &sin, &slots, &ranges, &tables, &seg_rows;
  const GdnStep& gdn;
  const QGateRows& qg;
  const MixerScratch& mix;
  const Tensor &xn, &o, &gu, &mid;
  PagedCut cut = {};  // PagedKv's
};

// The recorded decode steps of n one-row segments (decode_graph.cpp): every buffer such a step reads or
// writes apart from the pools, and per block-table width its input arena and graphs (greedy: with the
// argmax; sampled: with the sample op; logits: neither).
struct DecodeGraph {
  DeviceBuffer h, cos, sin, xn, o, gu, mid, lg, lf, am, sampled, no_rows;
  QGateRows qg;
  MixerScratch mix;
  struct Recorded {
    DeviceBuffer in;
    std::unique_ptr<Backend::Graph> greedy, sampled, logits;
  };
  std::map<int64_t, Recorded> by_width;
};

// HF's decode path for a segment: one token on a cached state past the prompt, or draft-verification rows
// (the recurrent rule). Prompt rows (a one-row prefill chunk included) take the chunked rule.
inline bool recurrent_rows(const SegRows& s) {
  const int64_t prompt_len = static_cast<int64_t>(s.cache->rope().thw.size() / 3);
  return s.decode_rows() || (s.n() == 1 && s.pos0 > 0 && s.pos0 >= prompt_len);
}

class Qwen35Model final : public Model {
 public:
  Qwen35Model(Config cfg, WeightMap wm, Weights w, Backend& backend, ModelInfo info)
      : cfg_(std::move(cfg)),
        wm_(std::move(wm)),
        w_(std::move(w)),
        backend_(backend),
        info_(std::move(info)) {
    for (int64_t i = 0; i < cfg_.text.num_hidden_layers; ++i)
      n_attn_layers_ += cfg_.text.full_attention[static_cast<size_t>(i)] ? 1 : 0;
  }
  const ModelInfo& info() const override { return info_; }
  Backend& backend() override { return backend_; }
  int64_t n_image_tokens(int64_t height, int64_t width) const override;
  // images[i].pixel_values: the processor's F32 [gh*gw, C*T*p*p] patches (Qwen2VLImageProcessor
  // order) or F32 [C, H, W] normalised pixels (patchified here); height/width in pixels.
  // Returns [Σ n_image_tokens, hidden] in the model dtype. Error when the checkpoint has no tower.
  Expected<DeviceBuffer> encode_images(const std::vector<ImageInput>& images) override;
  std::unique_ptr<SequenceCache> new_cache(int64_t capacity) override;
  // The paged K/V pool of the full-attention layers (model.cpp), as LightOnOCR's.
  Status set_kv_pool_blocks(int64_t n_blocks) override;
  // The state pool (models/layers/state_pool.h): a slot per live sequence and per prompt-cache
  // snapshot, allocated here. Without it the first new_cache makes 64 slots (as the K/V pool's
  // default holds 64 sequences).
  Status set_state_slots(int64_t n_slots) override;
  size_t kv_block_bytes() const override;
  KvPoolStats kv_pool_stats() const override;
  // K/V blocks for the positions and, when the cache holds none yet, a state slot.
  bool reserve(SequenceCache& cache, int64_t n_positions) override;
  // Each segment's positions must be n_past .. n_past + n - 1 of its cache. A segment of several
  // rows runs the chunked delta rule with chunk boundaries at multiples of 64 counted from position
  // 0; a single token on a non-empty cache past the prompt, and decode_rows, the recurrent rule
  // (HF's decode path). Linears and norms run once over all segments' rows.
  Expected<Buffer> forward_step(std::span<const Segment> segments, StepOutput out) override;
  void set_capture(CaptureFn fn) override { capture_ = std::move(fn); }
  // Plans M-RoPE positions (get_rope_index) for the prompt.
  Status begin_prompt(SequenceCache& cache, const std::vector<int32_t>& prompt_ids,
                      const std::vector<std::vector<int64_t>>& image_grids) override;
  const Config& config() const { return cfg_; }
  const Weights& weights() const { return w_; }
  // Conv windows, delta-rule states and (with MTP) the pending hidden state come from the kept row;
  // attention K/V need only the length (positions past it are rewritten before they are read).
  Status rollback(SequenceCache& cache, int64_t n_positions) override;
  // mtp.cpp: usable when mtp.fc and every tensor of the first MTP layer are present.
  int64_t n_mtp_layers() const override;
  Status enable_mtp(SequenceCache& cache) override;
  // cache_blocks.cpp: the pool blocks holding the full-attention K/V of rows [begin, end) (begin a
  // multiple of kKvBlock), shared (CacheBlock::shared); a free slot of the state pool holding a copy
  // of every linear layer's conv window and delta-rule state at `end` (CacheBlock::state; error when
  // no slot is free). restore appends the shared blocks to a fresh cache's table (copy-on-write when
  // it later writes into one) and copies the last block's snapshot slot into the cache's own slot.
  Expected<CacheBlock> snapshot(SequenceCache& cache, int64_t begin, int64_t end) override;
  Status restore(SequenceCache& cache, const std::vector<const CacheBlock*>& blocks) override;

  Expected<std::vector<std::vector<int32_t>>> propose_mtp_batch(std::span<const MtpRequest> reqs) override;

 private:
  // model.cpp: allocates the state pool (set_state_slots, or the first new_cache)
  void make_state_pool(int64_t n_slots);
  // model.cpp: one slot of it over every linear layer (window and state)
  size_t state_slot_bytes() const;
  // model.cpp: takes a state slot for the cache when it holds none and points its conv/state views
  // at it. False when the pool is exhausted.
  bool ensure_slot(Qwen35Cache& c);
  // text.cpp: Qwen3.5's own checks of a segment past the common ones (collect_step_rows): positions
  // continue its cache, decode_rows rows continue a non-empty cache and hold no image tokens
  Status check_segment(const SegRows& seg) const;
  // vision.cpp
  DeviceBuffer vision_tower(const std::vector<Tensor>& patches,
                            const std::vector<std::pair<int64_t, int64_t>>& grids);
  // gdn.cpp: the step's segments for the *_slots ops (once per step; every cache holds a slot).
  GdnStep plan_gdn(std::span<const SegRows> segs);
  // text.cpp: the decoder layers over h [n, hidden] (the embedded rows; the residual stream), ending with
  // the final norm's output in in.xn. forward_step's op-by-op steps and the recorded decode steps run it.
  void text_layers(std::span<const SegRows> parts, const TextStep& in, const Tensor& h);
  // decode_graph.cpp: whether a step (checked, its caches prepared) can run as a recorded decode step:
  // n <= 64 one-row segments, each a recurrent decode without MTP or kept states, no images, a logit row
  // each, on a backend that records graphs, no capture hook.
  bool decode_graph_fits(std::span<const SegRows> parts, const StepRows& rows, StepOutput out) const;
  // decode_graph.cpp: the step through the recorded graph of its row count n (recorded at the first such
  // step of each (n, table width, output)); the same ops on the same shapes as op by op, so the same bits.
  Expected<Buffer> decode_graph_step(std::span<const SegRows> parts, const StepRows& rows,
                                     const PagedStep& pg, StepOutput out);
  // gdn.cpp: one Gated DeltaNet mixer over x[n_rows, hidden] -> out[n_rows, hidden]: the conv and
  // delta rule of all segments in one call each, in place on their state slots; decode_rows segments
  // keep each row's conv window and state in cache.kept, prompt-cache segments each multiple of 64's
  // in cache.block_states.
  void gated_deltanet(size_t layer, const MixerIo& io, std::span<const SegRows> segs, const GdnStep& plan,
                      const MixerScratch& m);
  // text.cpp: one gated full-attention mixer over x[n_rows, hidden]. With paged, every row scatters
  // its K/V into the pool at slots[n_rows] (I32) and one paged_attention reads them; otherwise
  // segment s scatters its rows into kv[s]'s contiguous K/V at slots and attends to it.
  // ranges[n_rows, 2] I32: each row's keys in logical positions.
  void full_attention(const FullAttnWeights& A, const MixerIo& io, const Tensor& cos, const Tensor& sin,
                      const Tensor& slots, const Tensor& ranges, const PagedKv* paged,
                      std::span<const AttnKv> kv, const QGateRows& split, const MixerScratch& m);
  // text.cpp: a mixer's input projections of io.x (normalised first where io.norm is set) and its output
  // projection of a into io.out or, with io.residual, added into the residual stream.
  void mixer_in(const MixerIo& io, std::span<const Tensor> w, std::span<const Tensor> out);
  void mixer_out(const MixerIo& io, const Tensor& a, const Tensor& w);
  // text.cpp: MixerScratch for n rows: attention's parts when attn, the Gated DeltaNet's (with n_keep kept
  // rows) when gdn.
  MixerScratch mixer_scratch(int64_t n, bool attn, bool gdn, int64_t n_keep);
  // text.cpp: the QGateRows of n rows.
  QGateRows q_gate_rows(int64_t n);
  // text.cpp: M-RoPE cos/sin [Σ n, rotary_dim] act, segments in order, each from its own cache's plan
  void mrope_cos_sin(std::span<const SegRows> segs, DeviceBuffer& cos, DeviceBuffer& sin);
  // text.cpp: their angles [Σ n, rotary_dim / 2] F32 (host), the input of rope_cos_sin.
  Buffer mrope_angles(std::span<const SegRows> segs) const;
  // cache_blocks.cpp: drops the states kept by the previous forward; with keep, allocates one slot
  // per multiple of 64 in (pos0, pos0 + n] for gated_deltanet to fill.
  void prepare_block_states(Qwen35Cache& cache, int64_t pos0, int64_t n, bool keep);
  // mtp.cpp: grows cache.kept to hold n rows (decode_rows forwards)
  void keep_rows_capacity(Qwen35Cache& cache, int64_t n);
  // mtp.cpp: the MTP module over rows of several segments (segs[s]: rows [r0, r1) at MTP positions
  // pos0.. of its cache) with target hidden states hidden[n, hidden] and next-token ids[n]; returns
  // its final-norm output [n, hidden] (K/V written to each cache's mtp).
  DeviceBuffer mtp_rows(std::span<const SegRows> segs, const Tensor& hidden, const std::vector<int32_t>& ids);
  // mtp.cpp: after the target forward of a step with final-norm output xn[n_rows, hidden], for each
  // segment whose cache has MTP on: bring its MTP K/V up to position pos0 + n - 2 and keep its last
  // row as the pending hidden state. One MTP pass over all of them.
  void mtp_follow(std::span<const SegRows> segs, const Tensor& xn);

  Config cfg_;
  WeightMap wm_;  // keeps the mapped weights alive (CPU weights alias them)
  Weights w_;
  Backend& backend_;
  ModelInfo info_;
  CaptureFn capture_;
  std::shared_ptr<KvPool> pool_;  // made by set_kv_pool_blocks or the first new_cache
  int64_t pool_blocks_ = 0;
  std::shared_ptr<StatePool> states_;  // made by the first new_cache
  int64_t state_slots_ = 0;
  int64_t n_attn_layers_ = 0;                               // full-attention layers: the pool's layers
  std::map<int64_t, std::unique_ptr<DecodeGraph>> graphs_;  // by row count n
};

// Registry entry for "qwen3_5".
Expected<std::unique_ptr<Model>> load(const JsonConfig& config, WeightMap weights, Backend& backend);

}  // namespace tf::qwen3_5
