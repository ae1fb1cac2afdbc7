#include "cli/engine_factory.h"

#include "base/log.h"
#include "runtime/engine.h"
#include "runtime/engine_group.h"

namespace tf::cli {

EngineFactory engine_factory() {
  return [](const ServeOptions& o) -> Expected<std::unique_ptr<EngineApi>> {
    EngineOptions e;
    e.checkpoint = o.checkpoint;
    e.backend = o.backend;
    e.require_vision = o.vision;
    e.enforce_eager = o.enforce_eager;
    e.context = o.context;
    e.parallel = o.parallel;
    e.no_thinking = o.no_thinking;
    e.name = o.served_name();
    e.temperature = o.temperature;
    e.max_tokens = o.max_tokens;
    e.image_limits.max_pixels = o.max_image_pixels;
    e.cache_mb = o.cache_mb;
    e.max_batch_tokens = o.max_batch_tokens;
    e.max_queue = o.max_queue;
    e.kv_cache_mb = static_cast<double>(o.kv_cache_mb);
    TF_ASSIGN(e.drafts.mode, parse_draft_mode(o.no_drafts ? "off" : o.drafts));
    // --devices: one engine per GPU; --replicas: N engines on the backend; several go behind a router.
    std::vector<std::string> backends;
    for (int d : o.devices) backends.push_back("cuda:" + std::to_string(d));
    if (backends.empty()) backends.assign(static_cast<size_t>(o.replicas), o.backend);
    if (backends.size() == 1) {
      e.backend = backends[0];
      TF_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(e));
      return std::unique_ptr<EngineApi>(std::move(engine));
    }
    std::vector<std::shared_ptr<EngineApi>> engines;
    for (size_t i = 0; i < backends.size(); ++i) {
      e.backend = backends[i];
      auto made = Engine::create(e);
      if (!made.ok())
        return make_error("engine " + std::to_string(i) + " (" + backends[i] + "): " + made.error().message);
      engines.push_back(std::shared_ptr<EngineApi>(std::move(made).value()));
      log_info("engine " + std::to_string(i) + " of " + std::to_string(backends.size()) + " on " +
               backends[i]);
    }
    return std::unique_ptr<EngineApi>(std::make_unique<EngineGroup>(std::move(engines)));
  };
}

}  // namespace tf::cli
