// EngineGroup (runtime/engine_group.h): routing and failure handling over several engines, on the CPU.
// - With fake engines: new pages go to the engine with the fewest outstanding tokens and come back to it
//   (cache affinity); a busy holder lets the least loaded engine take its page; a failed engine takes
//   nothing new while its own requests are answered 503 by it and the other engine's requests finish
//   untouched; with no engine ready the group answers 503 with Retry-After; metrics carry an engine label.
// - With two real CPU engines on a tiny checkpoint: the same request gives the same ids on either engine,
//   and through the group.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../test_backend.h"
#include "runtime/engine.h"
#include "runtime/engine_group.h"

namespace tf {
namespace {

// An engine that answers each request with one token (its index) and a finish, or keeps it open
// (hold), and can fail: not ready any more, every open request answered 503.
class FakeEngine final : public EngineApi {
 public:
  explicit FakeEngine(int32_t index) : index_(index) {}
  EngineInfo info() const override { return {"fake", "fake", 4096, true, 0}; }
  bool ready() const override { return !failed_; }
  std::shared_ptr<RequestChannel> submit(GenerationRequest) override {
    auto ch = std::make_shared<RequestChannel>();
    std::lock_guard<std::mutex> lock(mu_);
    ++submitted;
    if (hold) {
      open_.push_back(ch);
      return ch;
    }
    answer(*ch);
    return ch;
  }
  Expected<std::vector<int32_t>> tokenize(const GenerationRequest&) override {
    return std::vector<int32_t>{index_};
  }
  Expected<std::string> detokenize(const std::vector<int32_t>&) override { return std::string("x"); }
  std::string metrics_text() const override {
    return "# TYPE fake_total counter\nfake_total " + std::to_string(submitted) +
           "\nfake_kv{state=\"free\"} 3\n";
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& ch : open_) answer(*ch);
    open_.clear();
  }
  void fail() {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = true;
    for (auto& ch : open_) {
      EngineEvent e;
      e.kind = EngineEvent::Kind::Error;
      e.http_status = 503;
      e.message = "engine failed";
      ch->push(std::move(e));
    }
    open_.clear();
  }
  bool hold = false;
  int submitted = 0;

 private:
  void answer(RequestChannel& ch) {
    EngineEvent t;
    t.kind = EngineEvent::Kind::Token;
    t.token = index_;
    ch.push(t);
    EngineEvent f;
    f.kind = EngineEvent::Kind::Finished;
    f.finish_reason = "stop";
    ch.push(f);
  }
  int32_t index_;
  bool failed_ = false;
  std::mutex mu_;
  std::vector<std::shared_ptr<RequestChannel>> open_;
};

GenerationRequest page(int i) {
  GenerationRequest r;
  r.messages = ordered_json::array();
  r.images.push_back(std::vector<uint8_t>(1000, static_cast<uint8_t>(i)));
  r.images.back()[7] = static_cast<uint8_t>(i * 31 + 5);
  return r;
}

struct Result {
  std::vector<int32_t> ids;
  int status = 0;  // of an error
  int retry_after = 0;
};

Result drain(RequestChannel& ch) {
  Result r;
  for (;;) {
    auto e = ch.pop(60000);
    if (!e) return {{}, -1, 0};
    if (e->kind == EngineEvent::Kind::Token && e->token >= 0) r.ids.push_back(e->token);
    if (e->kind == EngineEvent::Kind::Finished) return r;
    if (e->kind == EngineEvent::Kind::Error) {
      r.status = e->http_status;
      r.retry_after = e->retry_after_s;
      return r;
    }
  }
}

struct Fakes {
  std::shared_ptr<FakeEngine> a = std::make_shared<FakeEngine>(0), b = std::make_shared<FakeEngine>(1);
  EngineGroup group{{a, b}};
};

TEST(EngineGroup, NewPagesGoToTheLeastLoadedAndComeBackToTheirEngine) {
  Fakes f;
  // 40 new pages, each kept in flight by its client: the least loaded engine takes each one, so they
  // alternate; asked again (after the first answers are read), each page goes back to its engine.
  std::vector<std::shared_ptr<RequestChannel>> first;
  std::vector<size_t> where;
  for (int i = 0; i < 40; ++i) {
    first.push_back(f.group.submit(page(i)));
    ASSERT_TRUE(f.group.holder(page(i)));
    where.push_back(*f.group.holder(page(i)));
    EXPECT_EQ(where.back(), static_cast<size_t>(i % 2)) << "page " << i << ": not the least loaded engine";
  }
  for (int i = 0; i < 40; ++i) {
    const Result r = drain(*first[static_cast<size_t>(i)]);
    ASSERT_EQ(r.ids.size(), 1u);
    EXPECT_EQ(static_cast<size_t>(r.ids[0]), where[static_cast<size_t>(i)]);
  }
  first.clear();
  for (int k = 0; k < 2; ++k)
    for (int i = 39; i >= 0; --i) {  // a different order, nothing in flight: affinity alone decides
      const Result r = drain(*f.group.submit(page(i)));
      ASSERT_EQ(r.ids.size(), 1u);
      EXPECT_EQ(static_cast<size_t>(r.ids[0]), where[static_cast<size_t>(i)]) << "page " << i << " moved";
    }
  EXPECT_EQ(f.a->submitted, 60);
  EXPECT_EQ(f.b->submitted, 60);
  EXPECT_NE(f.group.metrics_text().find("tensorfold_router_spilled_total 0\n"), std::string::npos);
}

TEST(EngineGroup, ALoadedEngineSpillsToTheLeastLoaded) {
  Fakes f;
  drain(*f.group.submit(page(0)));  // page 0 lives on engine a (both idle: the lowest index)
  ASSERT_EQ(f.group.holder(page(0)), std::optional<size_t>(0));
  f.a->hold = true;
  std::vector<std::shared_ptr<RequestChannel>> held;
  GenerationRequest big = page(0);
  big.max_tokens = 3000;
  for (int k = 0; k < 3; ++k) held.push_back(f.group.submit(page(0)));  // 3 x 1024 default tokens
  EXPECT_EQ(f.group.outstanding_tokens(0), 3 * EngineGroup::kDefaultTokens);
  held.push_back(f.group.submit(big));
  held.push_back(f.group.submit(big));  // 3 x 1024 + 2 x 3000 = 9072 > the slack above engine b's 0
  EXPECT_EQ(f.a->submitted, 6);
  const Result spilled = drain(*f.group.submit(page(0)));
  ASSERT_EQ(spilled.ids.size(), 1u);
  EXPECT_EQ(spilled.ids[0], 1) << "a busy holder must let the least loaded engine take the page";
  EXPECT_EQ(f.group.holder(page(0)), std::optional<size_t>(1)) << "the page's newest blocks are on b now";
  f.a->hold = false;
  f.a->release_all();
  for (auto& ch : held) EXPECT_EQ(drain(*ch).ids, std::vector<int32_t>{0});
  held.clear();
  EXPECT_EQ(f.group.outstanding_tokens(0), 0);
  EXPECT_EQ(drain(*f.group.submit(page(0))).ids, std::vector<int32_t>{1});
  EXPECT_NE(f.group.metrics_text().find("tensorfold_router_spilled_total 1\n"), std::string::npos);
}

TEST(EngineGroup, AFailedEngineTakesNothingNewAndTheOtherIsUnaffected) {
  Fakes f;
  f.a->hold = f.b->hold = true;
  std::vector<std::shared_ptr<RequestChannel>> on_a, on_b;
  for (int i = 0; i < 30; ++i) {
    auto ch = f.group.submit(page(i));
    (*f.group.holder(page(i)) == 0 ? on_a : on_b).push_back(ch);
  }
  ASSERT_EQ(on_a.size(), 15u);
  ASSERT_EQ(on_b.size(), 15u);
  f.a->fail();
  for (auto& ch : on_a) EXPECT_EQ(drain(*ch).status, 503) << "a failed engine's requests are answered 503";
  // New requests, whatever engine served their page, go to b; b's earlier requests finish normally.
  f.b->hold = false;
  for (int i = 0; i < 30; ++i) EXPECT_EQ(drain(*f.group.submit(page(i))).ids, std::vector<int32_t>{1});
  f.b->release_all();
  for (auto& ch : on_b) EXPECT_EQ(drain(*ch).ids, std::vector<int32_t>{1});
  EXPECT_TRUE(f.group.ready());
  // With both failed: 503 with Retry-After from the group itself.
  f.b->fail();
  EXPECT_FALSE(f.group.ready());
  const Result none = drain(*f.group.submit(page(3)));
  EXPECT_EQ(none.status, 503);
  EXPECT_GT(none.retry_after, 0);
  EXPECT_FALSE(f.group.tokenize(page(3)).ok());
}

TEST(EngineGroup, MetricsCarryTheEngineLabel) {
  Fakes f;
  drain(*f.group.submit(page(1)));
  const std::string m = f.group.metrics_text();
  EXPECT_NE(m.find("fake_total{engine=\"0\"} "), std::string::npos) << m;
  EXPECT_NE(m.find("fake_kv{engine=\"1\",state=\"free\"} 3"), std::string::npos) << m;
  EXPECT_NE(m.find("tensorfold_router_requests_total{engine=\""), std::string::npos) << m;
  EXPECT_EQ(label_metrics("# HELP x y\nx 1\n", "engine=\"2\""), "# HELP x y\nx{engine=\"2\"} 1\n");
}

// Two real engines (CPU or the test backend) on a tiny checkpoint: the same request, the same ids on
// either engine and through the group.
TEST(EngineGroup, TwoRealEnginesGiveTheSameIds) {
  auto make = [] {
    EngineOptions o;
    o.backend = test_backend_name();
    o.checkpoint = std::string(TF_SOURCE_DIR) + "/tests/golden/ckpt/lighton_ocr-tiny-bf16";
    o.parallel = 4;
    auto e = Engine::create(o);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    return e.ok() ? std::shared_ptr<EngineApi>(std::move(e).value()) : nullptr;
  };
  auto e0 = make(), e1 = make();
  ASSERT_TRUE(e0 && e1);
  EngineGroup group({e0, e1});
  for (int i = 0; i < 4; ++i) {
    GenerationRequest r;
    r.prompt_ids = std::vector<int32_t>{1, 2, 3, 4 + i, 5, 6, 7};
    r.max_tokens = 12;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    r.sampling_given.temperature = true;
    const Result a = drain(*e0->submit(r)), b = drain(*e1->submit(r)), g = drain(*group.submit(r));
    ASSERT_EQ(a.status, 0);
    EXPECT_EQ(a.ids.size(), 12u);
    EXPECT_EQ(a.ids, b.ids) << "request " << i;
    EXPECT_EQ(a.ids, g.ids) << "request " << i;
  }
}

}  // namespace
}  // namespace tf
