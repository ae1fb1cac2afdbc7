#include "runtime/drafts.h"

#include <algorithm>

namespace tf {

Expected<DraftMode> parse_draft_mode(std::string_view s) {
  if (s == "auto") return DraftMode::kAuto;
  if (s == "copy") return DraftMode::kCopy;
  if (s == "mtp") return DraftMode::kMtp;
  if (s == "off") return DraftMode::kOff;
  return make_error("--drafts takes auto, copy, mtp or off, not '" + std::string(s) + "'");
}

const char* draft_mode_name(DraftMode m) {
  switch (m) {
    case DraftMode::kOff:
      return "off";
    case DraftMode::kCopy:
      return "copy";
    case DraftMode::kMtp:
      return "mtp";
    case DraftMode::kAuto:
      return "auto";
  }
  return "?";
}

Expected<DraftMode> resolve_draft_mode(DraftMode m, const Model& model) {
  if (m == DraftMode::kAuto) return model.n_mtp_layers() > 0 ? DraftMode::kMtp : DraftMode::kCopy;
  if (m == DraftMode::kMtp && model.n_mtp_layers() == 0)
    return make_error("--drafts mtp: the " + model.info().model_type + " checkpoint has no MTP layers");
  return m;
}

std::vector<int32_t> propose_copy(std::span<const int32_t> prompt, std::span<const int32_t> output, int k,
                                  int max_ngram, int min_ngram, int32_t image_token_id) {
  std::vector<int32_t> drafts;
  const int64_t np = static_cast<int64_t>(prompt.size()), len = np + static_cast<int64_t>(output.size());
  if (k <= 0 || len < 2) return drafts;
  auto at = [&](int64_t i) {
    return i < np ? prompt[static_cast<size_t>(i)] : output[static_cast<size_t>(i - np)];
  };
  // Tokens that follow position `from` (up to k, stopping at the end or an image placeholder).
  auto follow = [&](int64_t from) {
    int64_t m = 0;
    while (from + m < len && m < k && at(from + m) != image_token_id) ++m;
    return m;
  };
  for (int64_t n = std::min<int64_t>(max_ngram, len - 1); n >= std::max(1, min_ngram); --n) {
    // Earlier occurrences of the last n tokens (start i, i + n < len), most recent first. Take the
    // first with k tokens after it; else the one with the most (the suffix of a repeated run
    // overlaps itself, so its most recent occurrence may be followed by a single token).
    int64_t best = -1, best_m = 0;
    for (int64_t i = len - n - 1; i >= 0 && best_m < k; --i) {
      bool match = true;
      for (int64_t j = 0; j < n && match; ++j) match = at(i + j) == at(len - n + j);
      if (!match) continue;
      const int64_t m = follow(i + n);
      if (m > best_m) {
        best = i;
        best_m = m;
      }
    }
    if (best_m > 0) {
      for (int64_t j = 0; j < best_m; ++j) drafts.push_back(at(best + n + j));
      return drafts;
    }
  }
  return drafts;
}

std::vector<int32_t> accept_drafts(const Buffer& logits, std::span<const int32_t> drafts,
                                   const SamplingParams& sampling, uint64_t out_pos) {
  const size_t vocab = static_cast<size_t>(logits.shape()[1]);
  const size_t rows = std::min(static_cast<size_t>(logits.shape()[0]), drafts.size() + 1);
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < rows; ++i) {
    std::span<const float> row(logits.as<float>() + i * vocab, vocab);
    const int32_t t = sample_token(row, sampling, out_pos + i);
    tokens.push_back(t);
    if (i >= drafts.size() || t != drafts[i]) break;
  }
  return tokens;
}

Status Drafter::begin(SequenceCache& cache) {
  if (mode_ == DraftMode::kMtp) return model_.enable_mtp(cache);
  return {};
}

int Drafter::draft_budget(const SequenceCache& cache, std::span<const int32_t> prompt,
                          std::span<const int32_t> output, int64_t max_new) {
  if (output.empty()) return 0;
  const int64_t pos = static_cast<int64_t>(prompt.size() + output.size()) - 1;
  // k drafts yield up to k + 1 tokens and write positions pos .. pos + k.
  const int64_t room = std::min<int64_t>(max_new - 1, cache.capacity() - 1 - pos);
  const int k = static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(opts_.k, room), 0, opts_.k));
  if (skip_ > 0) {
    --skip_;
    return 0;
  }
  return k;
}

Expected<Drafter::Plan> Drafter::plan(SequenceCache& cache, std::span<const int32_t> prompt,
                                      std::span<const int32_t> output, int64_t max_new) {
  if (output.empty()) return make_error("drafts: decoding needs a sampled token to continue from");
  const int k = draft_budget(cache, prompt, output, max_new);
  std::vector<int32_t> mtp;
  if (k > 0 && mode_ == DraftMode::kMtp) {
    TF_ASSIGN(mtp, model_.propose_mtp(cache, output.back(), k));
  }
  return plan_with(prompt, output, k, std::move(mtp));
}

Expected<Drafter::Plan> Drafter::plan_with(std::span<const int32_t> prompt, std::span<const int32_t> output,
                                           int k, std::vector<int32_t> mtp_drafts) {
  if (output.empty()) return make_error("drafts: decoding needs a sampled token to continue from");
  std::vector<int32_t> drafts;
  if (k > 0 && mode_ == DraftMode::kCopy)
    drafts = propose_copy(prompt, output, k, opts_.max_ngram, opts_.min_ngram,
                          static_cast<int32_t>(model_.info().image_token_id));
  if (k > 0 && mode_ == DraftMode::kMtp) drafts = std::move(mtp_drafts);
  const int64_t pos = static_cast<int64_t>(prompt.size() + output.size()) - 1;
  Plan p;
  p.drafts = std::move(drafts);
  if (static_cast<int>(p.drafts.size()) > k) p.drafts.resize(static_cast<size_t>(std::max(k, 0)));
  // An image placeholder is never a draft: a row holding one would need image embeddings.
  const auto img =
      std::find(p.drafts.begin(), p.drafts.end(), static_cast<int32_t>(model_.info().image_token_id));
  p.drafts.erase(img, p.drafts.end());
  ForwardBatch& b = p.batch;
  b.token_ids.push_back(output.back());
  b.token_ids.insert(b.token_ids.end(), p.drafts.begin(), p.drafts.end());
  for (size_t i = 0; i < b.token_ids.size(); ++i) {
    b.positions.push_back(static_cast<int32_t>(pos + static_cast<int64_t>(i)));
    b.logit_rows.push_back(static_cast<int32_t>(i));
  }
  b.decode_rows = !p.drafts.empty();
  p.out_pos = static_cast<uint64_t>(output.size());
  return p;
}

Status Drafter::settle(SequenceCache& cache, const Plan& p, Step& s) {
  s.proposed = static_cast<int>(p.drafts.size());
  s.accepted = static_cast<int>(s.tokens.size()) - 1;
  if (!p.drafts.empty()) {
    TF_TRY(model_.rollback(cache, p.batch.positions.front() + 1 + s.accepted));
    backoff_ = s.accepted > 0 ? 0 : std::min(16, std::max(1, 2 * backoff_));
    skip_ = backoff_;
  }
  proposed_ += s.proposed;
  return {};
}

Expected<Drafter::Step> Drafter::complete(SequenceCache& cache, const Plan& p, Buffer logits,
                                          const SamplingParams& sampling) {
  Step s;
  s.logits = std::move(logits);
  s.tokens = accept_drafts(s.logits, p.drafts, sampling, p.out_pos);
  TF_TRY(settle(cache, p, s));
  return s;
}

Expected<Drafter::Step> Drafter::complete_greedy(SequenceCache& cache, const Plan& p,
                                                 std::span<const int32_t> ids) {
  Step s;
  for (size_t i = 0; i < ids.size() && i <= p.drafts.size(); ++i) {
    s.tokens.push_back(ids[i]);
    if (i >= p.drafts.size() || ids[i] != p.drafts[i]) break;
  }
  TF_TRY(settle(cache, p, s));
  return s;
}

Expected<Drafter::Step> Drafter::step(SequenceCache& cache, std::span<const int32_t> prompt,
                                      std::span<const int32_t> output, const SamplingParams& sampling,
                                      int64_t max_new) {
  TF_ASSIGN(Plan p, plan(cache, prompt, output, max_new));
  // Row i's token drawn on the device (Backend::sample) at output position out_pos + i, as the engine's
  // steps draw it: only the ids come back.
  for (size_t i = 0; i < p.batch.logit_rows.size(); ++i)
    p.batch.sample.push_back(sample_row(sampling, p.out_pos + i));
  const Segment seg{&p.batch, &cache};
  TF_ASSIGN(Buffer rec, model_.forward_step(std::span<const Segment>(&seg, 1), StepOutput::kSampled));
  std::vector<int32_t> ids(p.batch.logit_rows.size());
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = rec.as<int32_t>()[static_cast<int64_t>(i) * rec.shape()[1]];
  return complete_greedy(cache, p, ids);
}

}  // namespace tf
