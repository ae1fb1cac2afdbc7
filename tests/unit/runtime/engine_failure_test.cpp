// Device failure (runtime/engine.h, backend/device_error.h), on the CPU: test_hooks::fail_backend_op makes
// a backend call throw DeviceError as a CUDA error does on the CUDA backend.
// - The backend: the armed call fails, every later call fails too (the device state is unknown), frees
//   still work; a disarmed fault never fires.
// - One engine: a fault in the first step answers the request 503 (no token, no success); the engine is
//   not ready, health() says "failed" with the error, and later requests get 503 at once.
// - Two real engines behind an EngineGroup, one failing mid-decode with requests in flight (two running,
//   one queued): each of its requests ends with a 503 (tokens sent before it are the solo run's prefix,
//   none ends as a success); the other engine's requests finish with their solo ids; afterwards every
//   request, also the pages the failed engine held, is served by the healthy engine with the same ids;
//   /metrics shows which engine failed and how many requests it answered 503.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../test_backend.h"
#include "backend/device_error.h"
#include "backend/test_hooks.h"
#include "runtime/engine.h"
#include "runtime/engine_group.h"

namespace tf {
namespace {

const std::string kTiny = std::string(TF_SOURCE_DIR) + "/tests/golden/ckpt/lighton_ocr-tiny-bf16";

TEST(DeviceFailure, TheArmedCallFailsAndEveryLaterCallToo) {
  auto made = create_backend("cpu");
  ASSERT_TRUE(made.ok());
  Backend& b = **made;
  Buffer host(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) host.as<float>()[i] = static_cast<float>(i);
  DeviceBuffer x = upload_new(b, host), y = b.alloc(DType::F32, {2, 3});
  test_hooks::fail_backend_op(b, 3);
  b.add(x, x, y);
  b.add(x, x, y);
  try {
    b.add(x, x, y);
    ADD_FAILURE() << "the third call must fail";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("injected device fault"), std::string::npos) << e.what();
  }
  EXPECT_THROW(b.add(x, x, y), DeviceError);
  EXPECT_THROW(b.download(y, host.data()), DeviceError);
  EXPECT_THROW(b.alloc(DType::F32, {4}), DeviceError);
  EXPECT_THROW(b.synchronize(), DeviceError);
  x.reset();  // frees never throw, also on a failed backend
  y.reset();

  auto other = create_backend("cpu");
  ASSERT_TRUE(other.ok());
  Backend& c = **other;
  DeviceBuffer z = upload_new(c, host), w = c.alloc(DType::F32, {2, 3});
  test_hooks::fail_backend_op(c, 2);
  test_hooks::fail_backend_op(c, 0);  // disarmed before it fired
  for (int i = 0; i < 5; ++i) EXPECT_NO_THROW(c.add(z, z, w));
  EXPECT_EQ(download_new(c, w).as<float>()[5], 10.0f);
}

struct Outcome {
  std::vector<int32_t> ids;
  bool finished = false;  // ended with Finished
  EngineEvent error;      // the Error event, http_status 0 when none
  bool timed_out = false;
};

// Reads events until the channel's last one. `pre`: events already read.
Outcome drain(RequestChannel& ch, Outcome o = {}) {
  for (;;) {
    auto e = ch.pop(60000);
    if (!e) {
      o.timed_out = true;
      return o;
    }
    if (e->kind == EngineEvent::Kind::Token && e->token >= 0) o.ids.push_back(e->token);
    if (e->kind == EngineEvent::Kind::Finished) {
      o.finished = true;
      return o;
    }
    if (e->kind == EngineEvent::Kind::Error) {
      o.error = *e;
      return o;
    }
  }
}

GenerationRequest request(int32_t tag, int64_t max_tokens) {
  GenerationRequest r;
  r.prompt_ids = std::vector<int32_t>{1, 2, 3, tag, 5, 6, 7};
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.sampling_given.temperature = true;
  return r;
}

std::shared_ptr<Engine> make_engine(int parallel) {
  EngineOptions o;
  o.backend = test_backend_name();
  o.checkpoint = kTiny;
  o.parallel = parallel;
  auto e = Engine::create(o);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::shared_ptr<Engine>(std::move(e).value()) : nullptr;
}

void expect_failed_503(const Outcome& o, const std::string& what) {
  EXPECT_FALSE(o.timed_out) << what;
  EXPECT_FALSE(o.finished) << what << ": a failed engine's request must never end as a success";
  EXPECT_EQ(o.error.http_status, 503) << what;
  EXPECT_EQ(o.error.code, "engine_failed") << what;
  EXPECT_GT(o.error.retry_after_s, 0) << what;
  EXPECT_NE(o.error.message.find("the engine on " + test_backend_name() + " failed"), std::string::npos)
      << what << ": " << o.error.message;
  EXPECT_NE(o.error.message.find("injected device fault"), std::string::npos) << what;
}

TEST(EngineFailure, AFaultInTheFirstStepAnswers503AndTheEngineTakesNoMore) {
  auto e = make_engine(2);
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->ready());
  ASSERT_EQ(e->health().size(), 1u);
  EXPECT_EQ(e->health()[0].status, "ok");
  test_hooks::fail_backend_op(e->backend(), 1);
  const Outcome o = drain(*e->submit(request(9, 8)));
  expect_failed_503(o, "the request in the failing step");
  EXPECT_TRUE(o.ids.empty());
  EXPECT_FALSE(e->ready());
  ASSERT_EQ(e->health().size(), 1u);
  EXPECT_EQ(e->health()[0].status, "failed");
  EXPECT_NE(e->health()[0].error.find("injected device fault"), std::string::npos);
  expect_failed_503(drain(*e->submit(request(10, 8))), "a request after the failure");
  const std::string m = e->metrics_text();
  EXPECT_NE(m.find("\ntensorfold_engine_failed 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\ntensorfold_engine_failed_requests_total 2\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tensorfold_requests_finished_total{reason=\"engine_failed\"} 2\n"), std::string::npos);
  EXPECT_NE(m.find("\ntensorfold_active_sequences 0\n"), std::string::npos) << m;
}

TEST(EngineFailure, AFailingEnginesRequestsGet503AndTheOtherEngineKeepsServing) {
  auto e0 = make_engine(2), e1 = make_engine(2);
  ASSERT_TRUE(e0 && e1);
  EngineGroup group({e0, e1});
  constexpr int kPages = 3;
  constexpr int64_t kShort = 8, kOther = 40, kLong = 400;
  // Solo runs. Pages A: through the group one at a time (both idle: engine 0, which then holds them).
  // Requests B: on engine 1 alone, outside the group.
  std::vector<std::vector<int32_t>> solo_a, solo_b;
  for (int i = 0; i < kPages; ++i) {
    const Outcome a = drain(*group.submit(request(10 + i, kShort)));
    ASSERT_TRUE(a.finished);
    ASSERT_EQ(a.ids.size(), static_cast<size_t>(kShort));
    solo_a.push_back(a.ids);
    ASSERT_EQ(group.holder(request(10 + i, kShort)), std::optional<size_t>(0));
    const Outcome b = drain(*e1->submit(request(20 + i, kOther)));
    ASSERT_TRUE(b.finished);
    solo_b.push_back(b.ids);
  }
  // In flight: the pages A, long, back on engine 0 (cache affinity; 2 run, 1 waits in its queue); the new
  // requests B on the least loaded engine, 1.
  std::vector<std::shared_ptr<RequestChannel>> on_a, on_b;
  for (int i = 0; i < kPages; ++i) {
    on_a.push_back(group.submit(request(10 + i, kLong)));
    EXPECT_EQ(group.holder(request(10 + i, kLong)), std::optional<size_t>(0)) << "page " << i << " moved";
  }
  for (int i = 0; i < kPages; ++i) {
    on_b.push_back(group.submit(request(20 + i, kOther)));
    EXPECT_EQ(group.holder(request(20 + i, kOther)), std::optional<size_t>(1));
  }
  // Engine 0 fails mid-decode: at its next call once the first page has a token.
  Outcome first;
  while (first.ids.empty()) {
    auto ev = on_a[0]->pop(60000);
    ASSERT_TRUE(ev) << "no token from engine 0";
    ASSERT_NE(ev->kind, EngineEvent::Kind::Finished);
    ASSERT_NE(ev->kind, EngineEvent::Kind::Error);
    if (ev->kind == EngineEvent::Kind::Token && ev->token >= 0) first.ids.push_back(ev->token);
  }
  test_hooks::fail_backend_op(e0->backend(), 1);
  for (int i = 0; i < kPages; ++i) {
    const Outcome a = drain(*on_a[static_cast<size_t>(i)], i == 0 ? first : Outcome{});
    expect_failed_503(a, "page " + std::to_string(i) + " on the failed engine");
    EXPECT_LT(a.ids.size(), static_cast<size_t>(kLong)) << "page " << i;
    // What was sent before the failure is right: the solo run's ids.
    const size_t n = std::min(a.ids.size(), solo_a[static_cast<size_t>(i)].size());
    EXPECT_EQ(std::vector<int32_t>(a.ids.begin(), a.ids.begin() + static_cast<long>(n)),
              std::vector<int32_t>(solo_a[static_cast<size_t>(i)].begin(),
                                   solo_a[static_cast<size_t>(i)].begin() + static_cast<long>(n)))
        << "page " << i;
    if (i == 0) {
      EXPECT_GE(a.ids.size(), 1u);
    }
    if (i == kPages - 1) {
      EXPECT_TRUE(a.ids.empty()) << "the queued page never ran";
    }
  }
  for (int i = 0; i < kPages; ++i) {
    const Outcome b = drain(*on_b[static_cast<size_t>(i)]);
    ASSERT_TRUE(b.finished) << "request " << i << " on the healthy engine: " << b.error.message;
    EXPECT_EQ(b.ids, solo_b[static_cast<size_t>(i)]) << "request " << i;
  }
  on_a.clear();
  on_b.clear();

  EXPECT_FALSE(e0->ready());
  EXPECT_TRUE(e1->ready());
  EXPECT_TRUE(group.ready());
  const std::vector<EngineHealth> h = group.health();
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].status, "failed");
  EXPECT_NE(h[0].error.find("injected device fault"), std::string::npos) << h[0].error;
  EXPECT_EQ(h[1].status, "ok");
  EXPECT_TRUE(h[1].error.empty());
  // Later requests: the pages engine 0 held and new ones all go to engine 1, with the solo ids.
  for (int i = 0; i < kPages; ++i) {
    EXPECT_EQ(group.route(request(10 + i, kShort)), std::optional<size_t>(1));
    const Outcome a = drain(*group.submit(request(10 + i, kShort)));
    ASSERT_TRUE(a.finished) << a.error.message;
    EXPECT_EQ(a.ids, solo_a[static_cast<size_t>(i)]) << "page " << i << " on the healthy engine";
    EXPECT_EQ(group.holder(request(10 + i, kShort)), std::optional<size_t>(1));
  }
  EXPECT_TRUE(drain(*group.submit(request(30, kShort))).finished);
  expect_failed_503(drain(*e0->submit(request(31, kShort))), "submitted to the failed engine itself");

  const std::string m = group.metrics_text();
  EXPECT_NE(m.find("\ntensorfold_engine_failed{engine=\"0\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\ntensorfold_engine_failed{engine=\"1\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\ntensorfold_engine_failed_requests_total{engine=\"0\"} 4\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\ntensorfold_engine_failed_requests_total{engine=\"1\"} 0\n"), std::string::npos) << m;
  EXPECT_NE(m.find("tensorfold_requests_finished_total{engine=\"0\",reason=\"engine_failed\"} 4\n"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("\ntensorfold_router_spilled_total 3\n"), std::string::npos) << m;
}

}  // namespace
}  // namespace tf
