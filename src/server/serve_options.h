// Flags of `tensorfold serve`, parsed into one struct that the HTTP layer and the engine factory
// both read. Parsing never exits: it returns an error line (the CLI prints it and exits 2).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace tf {

struct ServeOptions {
  std::string checkpoint;  // CKPT: a checkpoint directory or an HF cache snapshot id
  std::string backend = "auto";
  bool vision = false;
  int64_t context = 0;  // 0: the model's max_position_embeddings
  int parallel = 32;
  bool no_thinking = false;
  std::string name;  // served model name; empty: derived from the checkpoint (served_name())
  std::string host = "127.0.0.1";
  int port = 8080;
  // Request defaults applied where a request is silent (they beat generation_config.json).
  std::optional<float> temperature;
  std::optional<int64_t> max_tokens;
  std::string api_key;  // empty: no authentication
  int64_t max_body_mb = 64;
  int64_t max_image_pixels = 89'478'485;  // PIL's MAX_IMAGE_PIXELS
  std::string allowed_media_dir;          // empty: file:// image URLs are refused
  int64_t cache_mb = 1024;                // prompt-cache budget
  int64_t max_batch_tokens = 0;           // rows per engine step; 0: the backend's default
  int64_t max_queue = 1024;               // waiting requests before 503
  int64_t kv_cache_mb = 0;                // paged K/V pool; 0: from the memory there is
  bool no_drafts = false;
  bool enforce_eager = false;   // every step op by op, no recorded (CUDA graph) decode steps
  std::string drafts = "auto";  // auto | copy | mtp | off (runtime/drafts.h); --no-drafts = off
  // Several engines behind one server (runtime/engine_group.h): one per listed GPU (--devices 0,1), or
  // `replicas` engines on --backend (--replicas N; 1: a single engine, no router).
  std::vector<int> devices;
  int replicas = 1;

  // The name /v1/models lists and `model` must match: --name, else the checkpoint's last path
  // component (trailing slashes ignored).
  std::string served_name() const;
};

struct ServeArgs {
  ServeOptions options;
  bool help = false;  // --help / -h was given: print serve_help() and exit 0
};

// argv excludes the program and subcommand names: {"CKPT", "--port", "9000", ...}.
Expected<ServeArgs> parse_serve_args(const std::vector<std::string>& args);
std::string serve_help();

}  // namespace tf
