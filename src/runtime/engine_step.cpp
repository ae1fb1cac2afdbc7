// The batched step (runtime/engine.h): the engine thread's loop, and one step = one forward over
// the rows of every running sequence. Decode rows (with drafts) go first, then prefill chunks while
// the token budget lasts. Chunks end on multiples of 64 from position 0 (or at the prompt's end), so
// a prompt's rows are the same whether it was prefilled in one pass or in budget-cut chunks; and the
// forward computes each segment's rows independently of the others (Model::forward_step), so a
// request's output never depends on what shared its steps.
#include <algorithm>

#include "backend/sampling.h"
#include "base/log.h"
#include "runtime/engine_sequence.h"

namespace tf {

bool Engine::plan_prefill(Sequence& s, int64_t max_rows, Work& w) {
  const int64_t n_prompt = static_cast<int64_t>(s.prompt.ids.size()), B = 64;
  const int64_t begin = s.n_prefilled;
  int64_t end = std::min({n_prompt, begin + opts_.prefill_chunk, begin + max_rows});
  if (end < n_prompt) end = end / B * B;  // chunk ends stay on multiples of 64 from position 0
  if (end <= begin) return false;
  const int32_t image_token = static_cast<int32_t>(pipe_->info().image_token_id);
  ForwardBatch& b = w.batch;
  int64_t n_img = 0;
  for (int64_t i = begin; i < end; ++i) {
    b.token_ids.push_back(s.prompt.ids[static_cast<size_t>(i)]);
    b.positions.push_back(static_cast<int32_t>(i));
    n_img += s.prompt.ids[static_cast<size_t>(i)] == image_token && !s.image_embeds.empty();
  }
  w.image_rows_after = s.image_rows_done;
  if (n_img > 0) {
    w.image_slice = s.image_embeds.tensor().slice_rows(s.image_rows_done, s.image_rows_done + n_img);
    w.image_rows_after += n_img;
  }
  // The prompt's last row starts the output (unless the output exists: a preempted sequence).
  if (end == n_prompt && s.output.empty()) b.logit_rows = {static_cast<int32_t>(end - begin - 1)};
  b.keep_block_states = cache_ != nullptr;
  w.s = &s;
  w.prefill = true;
  return true;
}

bool Engine::plan_replay(Sequence& s, int64_t max_rows, Work& w) {
  const int64_t n_prompt = static_cast<int64_t>(s.prompt.ids.size());
  const int64_t last = static_cast<int64_t>(s.output.size()) - 1;  // output[last] is the next input
  const int64_t begin = s.n_replayed, end = std::min({last, begin + opts_.prefill_chunk, begin + max_rows});
  if (end <= begin) return false;
  for (int64_t i = begin; i < end; ++i) {
    w.batch.token_ids.push_back(s.output[static_cast<size_t>(i)]);
    w.batch.positions.push_back(static_cast<int32_t>(n_prompt + i));
  }
  // Computed as decoding computed them (recurrent families: the one-token rule, row by row).
  w.batch.decode_rows = true;
  w.s = &s;
  w.replay = true;
  return true;
}

void Engine::plan_decodes(std::vector<std::unique_ptr<Sequence>>& active, std::vector<Work>& work) {
  Model& m = pipe_->model();
  std::vector<Sequence*> seqs;  // the decoding sequences
  std::vector<int> ks;          // their draft budgets
  std::vector<Model::MtpRequest> mtp;
  std::vector<size_t> mtp_of;  // mtp[j] is seqs[mtp_of[j]]'s
  for (auto& sp : active) {
    if (!sp || sp->phase != Sequence::Phase::Decode) continue;
    Sequence& s = *sp;
    int k = 0;
    if (s.drafter) {
      int64_t left = s.max_tokens - static_cast<int64_t>(s.output.size());
      // No draft past what the whole pool holds: alone there, the sequence would end at the draft
      // rows' blocks instead of at its last position (drafts never change the output otherwise).
      if (const Model::KvPoolStats ps = m.kv_pool_stats(); ps.block_bytes > 0) {
        const int64_t pos = static_cast<int64_t>(s.prompt.ids.size() + s.output.size()) - 1;
        left = std::min(left, ps.blocks * kKvBlock - pos);
      }
      k = s.drafter->draft_budget(*s.cache, s.prompt.ids, s.output, left);
      if (k > 0 && s.drafter->mode() == DraftMode::kMtp) {
        mtp.push_back({s.cache.get(), s.output.back(), k});
        mtp_of.push_back(seqs.size());
      }
    }
    seqs.push_back(&s);
    ks.push_back(k);
  }
  std::vector<std::vector<int32_t>> proposals(seqs.size());
  std::vector<std::string> failed(seqs.size());
  if (!mtp.empty()) {
    auto all = m.propose_mtp_batch(mtp);
    for (size_t j = 0; j < mtp.size(); ++j) {
      if (all.ok()) {
        proposals[mtp_of[j]] = std::move((*all)[j]);
        continue;
      }
      // The call checks every request before it runs any: find the bad ones alone.
      auto one = m.propose_mtp(*mtp[j].cache, mtp[j].next_token, mtp[j].k);
      if (one.ok())
        proposals[mtp_of[j]] = std::move(one).value();
      else
        failed[mtp_of[j]] = one.error().message;
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    Work w;
    w.s = &s;
    w.prefill = false;
    if (s.drafter && failed[i].empty()) {
      auto p = s.drafter->plan_with(s.prompt.ids, s.output, ks[i], std::move(proposals[i]));
      if (p.ok()) {
        w.batch = p->batch;
        w.plan = std::move(p).value();
      } else {
        failed[i] = p.error().message;
      }
    } else if (!s.drafter) {
      const int64_t n_prompt = static_cast<int64_t>(s.prompt.ids.size());
      w.batch.token_ids = {s.output.back()};
      w.batch.positions = {static_cast<int32_t>(n_prompt + static_cast<int64_t>(s.output.size()) - 1)};
      w.batch.logit_rows = {0};
    }
    if (!failed[i].empty()) {
      s.channel->push(error_event(500, failed[i]));
      finish(s, "error");
      for (auto& sp : active)
        if (sp.get() == &s) sp.reset();
      continue;
    }
    work.push_back(std::move(w));
  }
}

bool Engine::finish_work(Work& w, const int32_t* records, int64_t width) {
  Sequence& s = *w.s;
  // Row r's record: the token the device sampled there (sample_token's choice from the row's logits),
  // then its logprobs.
  auto row_of = [&](size_t r) { return records + static_cast<int64_t>(r) * width; };
  if (w.replay) {
    s.n_replayed = w.batch.positions.back() + 1 - static_cast<int64_t>(s.prompt.ids.size());
    if (s.n_replayed + 1 == static_cast<int64_t>(s.output.size())) s.phase = Sequence::Phase::Decode;
    return true;
  }
  if (w.prefill) {
    s.n_prefilled = w.batch.positions.back() + 1;
    s.image_rows_done = w.image_rows_after;
    cache_prompt_blocks(s.block_keys, *s.cache, w.batch.positions.front(), s.n_prefilled);
    if (s.n_prefilled == static_cast<int64_t>(s.prompt.ids.size()) && !s.output.empty()) {
      s.phase = s.output.size() > 1 ? Sequence::Phase::Replay : Sequence::Phase::Decode;
      return true;
    }
    if (w.batch.logit_rows.empty()) return true;  // more prefill to do
    s.phase = Sequence::Phase::Decode;
    return take_token(s, row_of(0));
  }
  if (w.plan) {
    // Row i's token is the draw at output position out_pos + i (its sampling row says so): exactly the
    // acceptance rule of accept_drafts, without the logits.
    std::vector<int32_t> ids(w.batch.logit_rows.size());
    for (size_t r = 0; r < ids.size(); ++r) ids[r] = row_of(r)[0];
    Expected<Drafter::Step> st = s.drafter->complete_greedy(*s.cache, *w.plan, ids);
    if (!st.ok()) {
      s.channel->push(error_event(500, st.error().message));
      finish(s, "error");
      return false;
    }
    // Tokens one at a time through the same stop checks as plain decoding, so a stop cuts exactly
    // where it would have cut there.
    for (size_t i = 0; i < st->tokens.size(); ++i) {
      if (static_cast<int>(i) < st->accepted) s.drafter->count_accepted(1);  // before finish() reads it
      if (!take_token(s, row_of(i))) return false;                           // row_of(i)[0] == st->tokens[i]
    }
    return true;
  }
  return take_token(s, row_of(0));
}

void Engine::run_step(std::vector<std::unique_ptr<Sequence>>& active) {
  // Clients that left, and the vision phase (the encoder runs before the sequence's first chunk): the
  // images of the sequences that start in this step go through the encoder in one call, bounded by
  // the step's token budget (at least one sequence's), so a burst of new pages does not stall the
  // sequences that are decoding.
  int64_t vision_rows = 0;
  std::vector<std::unique_ptr<Sequence>*> starting;
  for (auto& sp : active) {
    Sequence& s = *sp;
    if (s.req.cancelled->load()) {
      finish(s, "client-left");
      sp.reset();
      continue;
    }
    if (s.phase != Sequence::Phase::Vision || (vision_rows > 0 && vision_rows >= max_batch_tokens_)) continue;
    for (const auto& im : s.prompt.images) vision_rows += im.n_tokens;
    starting.push_back(&sp);
  }
  if (!starting.empty()) {
    std::vector<Sequence*> seqs;
    for (auto* sp : starting) seqs.push_back(sp->get());
    std::vector<bool> ok;
    run_vision(seqs, ok);
    for (size_t i = 0; i < starting.size(); ++i)
      if (!ok[i]) starting[i]->reset();
  }
  std::erase_if(active, [](const auto& s) { return !s; });

  // Decode rows first, then prefill chunks within the budget (admission order inside each).
  std::vector<Work> work;
  work.reserve(active.size());
  int64_t budget = max_batch_tokens_;
  plan_decodes(active, work);
  for (const Work& w : work) budget -= static_cast<int64_t>(w.batch.token_ids.size());
  for (auto& sp : active) {
    if (!sp || (sp->phase != Sequence::Phase::Prefill && sp->phase != Sequence::Phase::Replay)) continue;
    const bool first =
        std::none_of(work.begin(), work.end(), [](const Work& w) { return w.prefill || w.replay; });
    Work w;
    // A step always makes progress on some prefill: the first chunk may exceed what is left.
    const int64_t rows = first ? std::max<int64_t>(budget, 64) : budget;
    if (sp->phase == Sequence::Phase::Replay ? !plan_replay(*sp, rows, w) : !plan_prefill(*sp, rows, w))
      continue;
    budget -= static_cast<int64_t>(w.batch.token_ids.size());
    work.push_back(std::move(w));
  }
  std::erase_if(active, [](const auto& s) { return !s; });
  reserve_blocks(work, active);
  if (work.empty()) return;

  Model& m = pipe_->model();
  std::vector<Segment> segs;
  int64_t n_rows = 0;
  for (Work& w : work) {
    if (w.image_slice.data) w.batch.image_embeds = &w.image_slice;  // now that w stays put
    // Each logit row is sampled on the device (only ids and asked-for logprobs come back): row i of the
    // work yields output position out_pos + i (drafts: the verified rows in turn).
    const Sequence& s = *w.s;
    const uint64_t out_pos = w.plan ? w.plan->out_pos : static_cast<uint64_t>(s.output.size());
    const int32_t n_logprobs = s.req.logprobs ? s.req.top_logprobs : -1;
    w.batch.sample.clear();
    for (size_t i = 0; i < w.batch.logit_rows.size(); ++i)
      w.batch.sample.push_back(sample_row(s.req.sampling, out_pos + i, n_logprobs));
    segs.push_back({&w.batch, w.s->cache.get()});
    n_rows += static_cast<int64_t>(w.batch.token_ids.size());
  }
  metrics_.step_rows(n_rows, static_cast<int64_t>(work.size()));
  // Every row's token (and logprobs) is chosen on the device, so the step's logits never cross to the
  // host: greedy rows take torch.argmax, the others sample_token's draw (Backend::sample; the CPU op is
  // sample_token itself).
  const StepOutput mode = StepOutput::kSampled;
  auto logits = m.forward_step(segs, mode);
  std::vector<Buffer> alone(work.size());  // per-work logits when the step had to be split
  std::vector<const Sequence*> done;       // finished in this step
  if (!logits.ok()) {
    // The step checks every segment before it runs anything: find the bad ones by running each
    // alone (rows do not depend on the step they run in, so the good ones lose nothing).
    log_warn("step of " + std::to_string(work.size()) + " sequences refused (" + logits.error().message +
             "); running them one by one");
    for (size_t i = 0; i < work.size(); ++i) {
      const Segment seg{&work[i].batch, work[i].s->cache.get()};
      auto one = m.forward_step(std::span<const Segment>(&seg, 1), mode);
      if (one.ok()) {
        alone[i] = std::move(one).value();
        continue;
      }
      work[i].s->channel->push(error_event(400, one.error().message));
      finish(*work[i].s, "error");
      done.push_back(work[i].s);
      work[i].s = nullptr;
    }
  }
  int64_t at = 0;  // the work's first row in the step's output
  for (size_t i = 0; i < work.size(); ++i) {
    Work& w = work[i];
    const int64_t rows = static_cast<int64_t>(w.batch.logit_rows.size());
    const Buffer& out = logits.ok() ? *logits : alone[i];
    const int64_t first = logits.ok() ? at : 0;
    at += rows;
    if (!w.s) continue;
    const int64_t width = out.shape()[1];
    if (!finish_work(w, out.as<int32_t>() + first * width, width)) done.push_back(w.s);
  }
  std::erase_if(active,
                [&](const auto& s) { return std::find(done.begin(), done.end(), s.get()) != done.end(); });
  const Model::KvPoolStats ps = m.kv_pool_stats();
  metrics_.set_kv_blocks(ps.blocks, ps.free, cache_ ? static_cast<int64_t>(cache_->n_shared_blocks()) : 0);
  metrics_.set_state_slots(ps.state_slots, ps.state_slots_free,
                           cache_ ? static_cast<int64_t>(cache_->n_state_slots()) : 0);
}

void Engine::reserve_blocks(std::vector<Work>& work, std::vector<std::unique_ptr<Sequence>>& active) {
  Model& m = pipe_->model();
  for (;;) {
    Work* short_of = nullptr;
    for (Work& w : work)
      if (!m.reserve(*w.s->cache, w.batch.positions.back() + 1)) {
        short_of = &w;
        break;
      }
    if (!short_of) break;
    if (cache_ && cache_->evict_lru_shared()) continue;  // cached prompt blocks go first
    if (active.size() <= 1) {
      // Alone and out of blocks: the pool is this sequence's context limit.
      Sequence& s = *short_of->s;
      if (s.phase == Sequence::Phase::Decode) {
        finish_length(s);
      } else {
        s.channel->push(error_event(400, "the K/V pool (--kv-cache-mb) cannot hold this sequence"));
        finish(s, "error");
      }
      work.clear();
      active.clear();
      return;
    }
    // Preempt the most recently admitted sequence (maybe the one that is short).
    auto victim = std::max_element(active.begin(), active.end(), [](const auto& a, const auto& b) {
      return a->admit_order < b->admit_order;
    });
    const Sequence* v = victim->get();
    std::erase_if(work, [&](const Work& w) { return w.s == v; });
    preempt(*victim);
    std::erase_if(active, [](const auto& s) { return !s; });
  }
  metrics_.set_kv_blocks(m.kv_pool_stats().blocks, m.kv_pool_stats().free,
                         cache_ ? static_cast<int64_t>(cache_->n_shared_blocks()) : 0);
}

void Engine::preempt(std::unique_ptr<Sequence>& sp) {
  Sequence& s = *sp;
  log_info(s.req.id + " preempted (K/V pool full) after " + std::to_string(s.output.size()) +
           " tokens; it is recomputed when blocks free up");
  metrics_.preempted();
  s.cache.reset();
  s.image_embeds.reset();
  s.preempted = true;
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_front(std::move(sp));
}

int64_t Engine::blocks_to_start(const Sequence& s) const {
  const int64_t n = static_cast<int64_t>(s.prompt.ids.size() + s.output.size()) + 1;
  return (n + kKvBlock - 1) / kKvBlock;
}

void Engine::hold_admission(bool hold) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = hold;
  }
  cv_.notify_all();
}

void Engine::run_loop(std::vector<std::unique_ptr<Sequence>>& active,
                      std::vector<std::unique_ptr<Sequence>>& incoming) {
  for (;;) {
    incoming.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || (!held_ && !queue_.empty()) || !active.empty(); });
      if (stop_) return;
      while (!held_ && !queue_.empty() &&
             static_cast<int>(active.size() + incoming.size()) < opts_.parallel) {
        // A preempted sequence comes back once the pool can hold what it had (others keep going).
        const Sequence& f = *queue_.front();
        if (f.preempted && !active.empty()) {
          const Model::KvPoolStats ps = pipe_->model().kv_pool_stats();
          const int64_t spare = ps.free + (cache_ ? static_cast<int64_t>(cache_->n_shared_blocks()) : 0);
          const int64_t spare_slots =
              ps.state_slots_free + (cache_ ? static_cast<int64_t>(cache_->n_state_slots()) : 0);
          if (spare < blocks_to_start(f) || (ps.state_slots > 0 && spare_slots == 0)) break;
        }
        incoming.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      metrics_.set_queue_depth(static_cast<int64_t>(queue_.size()));
    }
    for (auto& s : incoming) {
      if (s->req.cancelled->load()) {
        finish(*s, "client-left");
        continue;
      }
      if (s->preempted) {
        s->preempted = false;
        if (Status st = start_cache(*s); !st.ok()) {
          s->channel->push(error_event(500, st.error().message));
          finish(*s, "error");
          continue;
        }
      } else {
        admit(s);
      }
      if (!s) continue;
      s->admit_order = ++admitted_;
      active.push_back(std::move(s));
    }
    auto t0 = Clock::now();
    run_step(active);
    metrics_.set_active(static_cast<int64_t>(active.size()));
    metrics_.step_seconds(std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

}  // namespace tf
