// Finding and opening a checkpoint: a directory, an HF cache snapshot
// (.../models--ORG--NAME/snapshots/REV), a cache repo folder (.../models--ORG--NAME), or a repo
// id ORG/NAME[@REV] resolved offline in the HF hub cache. Nothing is downloaded.
//
// Cache location, as huggingface_hub resolves it: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. Snapshot files are usually
// symlinks into ../../blobs/; they are followed.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "io/hf_config.h"
#include "io/weight_map.h"

namespace tf {

struct Checkpoint {
  std::string source;  // the argument as given
  std::string dir;     // the directory holding config.json (a snapshot dir for cache ids)
  JsonConfig config;   // config.json
  std::optional<JsonConfig> generation_config;       // generation_config.json
  std::optional<JsonConfig> tokenizer_config;        // tokenizer_config.json
  std::optional<JsonConfig> processor_config;        // processor_config.json as written
  std::optional<JsonConfig> preprocessor_config;     // preprocessor_config.json as written
  std::optional<JsonConfig> image_processor_config;  // resolved like Transformers (see HfConfigs)
  std::string tokenizer_json;                        // path of tokenizer.json, "" if absent
  std::string chat_template_jinja;                   // path of chat_template.jinja, "" if absent
  std::string chat_template_json;  // path of chat_template.json (older processors), "" if absent
  WeightMap weights;               // mapped and header-validated; nothing fetched yet
};

// The directory the user means. Errors list where it looked, e.g.
// "cannot find checkpoint 'ORG/NAME': no such directory, and no models--ORG--NAME in the Hugging
//  Face cache /root/.cache/huggingface/hub (set HF_HOME or HF_HUB_CACHE, or pass a directory)".
Expected<std::string> resolve_checkpoint_dir(const std::string& arg);

// The HF hub cache directory from the environment (see the header comment).
std::string hf_hub_cache_dir();

// resolve_checkpoint_dir + configs + WeightMap::open. Maps files; allocates nothing large.
Expected<Checkpoint> open_checkpoint(const std::string& arg);

}  // namespace tf
