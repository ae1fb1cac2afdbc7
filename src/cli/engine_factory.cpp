#include "cli/engine_factory.h"

#include "runtime/engine.h"

namespace tf::cli {

EngineFactory engine_factory() {
  return [](const ServeOptions& o) -> Expected<std::unique_ptr<EngineApi>> {
    EngineOptions e;
    e.checkpoint = o.checkpoint;
    e.backend = o.backend;
    e.require_vision = o.vision;
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
    TF_ASSIGN(std::unique_ptr<Engine> engine, Engine::create(e));
    return std::unique_ptr<EngineApi>(std::move(engine));
  };
}

}  // namespace tf::cli
