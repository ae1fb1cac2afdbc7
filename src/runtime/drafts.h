// Draft (speculative) decoding whose output equals plain decoding, token for token.
//
// A decode step feeds the last sampled token plus up to k draft tokens in one forward of k + 1
// rows (ForwardBatch::decode_rows: each row computed exactly as one-token decoding computes it).
// Row i's logits are the ones plain decoding would have at that output position, so the step
// draws t_i = sample_token(row i, sampling, output position + i) — the same counter-based draw
// plain decoding makes there — and keeps drawing while t_i equals draft i + 1. The first draw that
// differs (or the draw after the last draft) is the bonus token. Every emitted token is therefore
// the token plain decoding emits, for greedy and seeded sampling alike; drafts only decide how
// many of them one forward yields. The cache is then rolled back to the last accepted row.
//
// Draft sources:
//  - copy (prompt lookup): the longest n-gram (n = max_ngram down to min_ngram) ending the
//    context (prompt + output) that occurred before; the tokens that followed its most recent
//    earlier occurrence with k tokens after it (else the occurrence with the most) are the drafts
//    (up to k; never image placeholders).
//  - mtp: the checkpoint's multi-token-prediction layer (Qwen3.5 mtp.*), chained k times.
// DraftMode::kAuto picks mtp when the model has MTP layers, else copy.
// Back-off: a step whose drafts were all rejected makes the sequence decode plainly for the next
// 1, 2, 4, .. 16 steps (doubling while drafts keep failing, reset by any accepted draft), so a
// draft source that does not fit the text costs little. Output never depends on it.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "models/model.h"
#include "runtime/sampler.h"

namespace tf {

enum class DraftMode { kOff, kCopy, kMtp, kAuto };

// "auto" | "copy" | "mtp" | "off" (the --drafts flag).
Expected<DraftMode> parse_draft_mode(std::string_view s);
const char* draft_mode_name(DraftMode m);
// kAuto -> kMtp when the model can draft with MTP, else kCopy. kMtp on a model without MTP
// layers is an error (the --drafts mtp flag names a checkpoint that cannot do it).
Expected<DraftMode> resolve_draft_mode(DraftMode m, const Model& model);

struct DraftOptions {
  DraftMode mode = DraftMode::kAuto;
  int k = 4;          // most drafts per step
  int max_ngram = 3;  // copy drafts: longest suffix n-gram tried first ...
  int min_ngram = 1;  // ... down to this one
};

// Prompt lookup over context = prompt + output (output's last token is the newest). Returns up to
// k tokens (never image_token_id: proposals stop before one).
std::vector<int32_t> propose_copy(std::span<const int32_t> prompt, std::span<const int32_t> output, int k,
                                  int max_ngram, int min_ngram, int32_t image_token_id = -1);

// The acceptance rule over verification logits [n_rows, vocab] (row 0: the last token, row i:
// draft i): tokens[i] is sample_token(row i, sampling, out_pos + i); it stops after the first
// token that differs from drafts[i] or after row n_rows - 1. Returns the tokens (accepted drafts,
// then the bonus token); accepted = tokens.size() - 1.
std::vector<int32_t> accept_drafts(const Buffer& logits, std::span<const int32_t> drafts,
                                   const SamplingParams& sampling, uint64_t out_pos);

// Decoding one sequence with drafts. Owns nothing but counters; the caller owns the cache.
class Drafter {
 public:
  // mode must be resolved (not kAuto). Call begin() after new_cache/begin_prompt and before the
  // first forward (it switches the MTP module on for mode kMtp).
  Drafter(Model& model, DraftMode mode, const DraftOptions& opts) : model_(model), mode_(mode), opts_(opts) {}
  Status begin(SequenceCache& cache);

  struct Step {
    std::vector<int32_t> tokens;  // 1 .. k + 1 tokens, in output order
    Buffer logits;                // complete(): [tokens.size() or more, vocab], tokens[i] drawn from row i
                                  // (empty after step() and complete_greedy(): drawn on the device)
    int proposed = 0, accepted = 0;
  };
  // One decode step after the prompt: output is non-empty and its last token is not forwarded
  // yet (it goes to position prompt.size() + output.size() - 1). At most max_new tokens are
  // returned (>= 1). Afterwards the cache holds every position up to the last returned token's
  // predecessor, as plain decoding would.
  Expected<Step> step(SequenceCache& cache, std::span<const int32_t> prompt, std::span<const int32_t> output,
                      const SamplingParams& sampling, int64_t max_new);
  // step() in two halves, for a batched engine that puts the verification rows into a shared
  // forward (Model::forward_step): plan() proposes the drafts and builds the rows (the last token,
  // then the drafts; decode_rows when there are drafts), complete() takes their logits, accepts and
  // rolls the cache back. Between them exactly one forward of plan.batch on this cache.
  struct Plan {
    ForwardBatch batch;
    std::vector<int32_t> drafts;
    uint64_t out_pos = 0;  // output position of the first verified row
  };
  Expected<Plan> plan(SequenceCache& cache, std::span<const int32_t> prompt, std::span<const int32_t> output,
                      int64_t max_new);
  // plan() in two halves, for an engine that proposes the MTP drafts of all its sequences in one call
  // (Model::propose_mtp_batch): draft_budget() says how many drafts this step may take (0 while backing
  // off; call it once per step, it counts the back-off down); plan_with() builds the rows for that budget
  // k, with the copy drafts it proposes itself or (mode kMtp) the MTP proposals made for k. plan() is
  // draft_budget(), propose_mtp when it applies, then plan_with().
  int draft_budget(const SequenceCache& cache, std::span<const int32_t> prompt,
                   std::span<const int32_t> output, int64_t max_new);
  Expected<Plan> plan_with(std::span<const int32_t> prompt, std::span<const int32_t> output, int k,
                           std::vector<int32_t> mtp_drafts = {});
  Expected<Step> complete(SequenceCache& cache, const Plan& plan, Buffer logits,
                          const SamplingParams& sampling);
  // complete() from each verified row's token as the device chose it (ids[i] for row i: the argmax, or
  // the draw sample_token makes at out_pos + i, Backend::sample): the same acceptance, without the
  // logits (Step::logits stays empty).
  Expected<Step> complete_greedy(SequenceCache& cache, const Plan& plan, std::span<const int32_t> ids);

  DraftMode mode() const { return mode_; }
  int64_t proposed() const { return proposed_; }
  int64_t accepted() const { return accepted_; }
  // The caller counts accepted drafts as it emits them (a stop condition may cut a step short, and
  // drafts past it were never output).
  void count_accepted(int n) { accepted_ += n; }

 private:
  Model& model_;
  DraftMode mode_;
  DraftOptions opts_;
  int64_t proposed_ = 0, accepted_ = 0;
  int skip_ = 0, backoff_ = 0;  // plain steps left before drafting again; the last back-off
  // After the verification: counts, rolls the cache back to the last accepted row, sets the back-off.
  Status settle(SequenceCache& cache, const Plan& p, Step& s);
};

}  // namespace tf
