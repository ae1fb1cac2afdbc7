#include "io/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/log.h"

namespace tf {
namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string strip_trailing_slashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool valid_repo_part(const std::string& s) {
  if (s.empty() || s[0] == '.' || s.find("--") != std::string::npos) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A cache repo folder (models--ORG--NAME) at revision `rev`: refs/<rev> names the snapshot, or
// `rev` is a snapshot directory name itself.
Expected<std::string> resolve_repo_folder(const std::string& folder, const std::string& rev,
                                          const std::string& arg) {
  std::string snapshots = folder + "/snapshots";
  if (is_dir(snapshots + "/" + rev)) return snapshots + "/" + rev;
  std::string ref_path = folder + "/refs/" + rev;
  if (is_file(ref_path)) {
    std::ifstream in(ref_path);
    std::string hash;
    in >> hash;
    if (hash.empty()) return make_error("checkpoint '" + arg + "': " + ref_path + " is empty");
    std::string snap = snapshots + "/" + hash;
    if (!is_dir(snap))
      return make_error("checkpoint '" + arg + "': " + ref_path + " names revision " + hash + ", but " +
                        snap + " does not exist (incomplete download?)");
    return snap;
  }
  std::vector<std::string> snaps;
  for (const std::string& n : list_dir(snapshots))
    if (is_dir(snapshots + "/" + n)) snaps.push_back(n);
  if (rev == "main" && snaps.size() == 1) {
    log_info("checkpoint '" + arg + "': no refs/main; using the only snapshot " + snaps[0]);
    return snapshots + "/" + snaps[0];
  }
  std::string listed;
  for (size_t i = 0; i < snaps.size() && i < 5; ++i) listed += (i ? ", " : "") + snaps[i];
  return make_error("cannot find checkpoint '" + arg + "': looked for " + ref_path + " and " + snapshots +
                    "/" + rev + "; the cache has " + std::to_string(snaps.size()) + " snapshot" +
                    (snaps.size() == 1 ? "" : "s") + (snaps.empty() ? "" : " (" + listed + ")"));
}

// A snapshot whose symlink points at a blob that is not there is a half-finished download; say
// so instead of "no config.json".
Status check_dangling_links(const std::string& dir) {
  for (const std::string& n : list_dir(dir)) {
    if (!(ends_with(n, ".json") || ends_with(n, ".safetensors") || ends_with(n, ".jinja"))) continue;
    std::string p = dir + "/" + n;
    struct stat lst {
    }, st{};
    if (::lstat(p.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode) && ::stat(p.c_str(), &st) != 0) {
      char target[4096];
      ssize_t len = ::readlink(p.c_str(), target, sizeof(target) - 1);
      std::string t = len > 0 ? std::string(target, static_cast<size_t>(len)) : "?";
      return make_error(p + " is a symlink to " + t + ", which does not exist (incomplete download?)");
    }
  }
  return {};
}

std::string path_if_file(const std::string& dir, const char* name) {
  std::string p = dir + "/" + name;
  return is_file(p) ? p : std::string();
}

}  // namespace

std::string hf_hub_cache_dir() {
  for (const char* var : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"}) {
    std::string v = env_or_empty(var);
    if (!v.empty()) return strip_trailing_slashes(v);
  }
  std::string home = env_or_empty("HF_HOME");
  if (!home.empty()) return strip_trailing_slashes(home) + "/hub";
  std::string xdg = env_or_empty("XDG_CACHE_HOME");
  if (!xdg.empty()) return strip_trailing_slashes(xdg) + "/huggingface/hub";
  return env_or_empty("HOME") + "/.cache/huggingface/hub";
}

Expected<std::string> resolve_checkpoint_dir(const std::string& arg_in) {
  if (arg_in.empty()) return make_error("no checkpoint given");
  std::string arg = strip_trailing_slashes(arg_in);
  if (is_dir(arg)) {
    // A cache repo folder itself (models--ORG--NAME): take its main revision.
    if (!is_file(arg + "/config.json") && is_dir(arg + "/snapshots"))
      return resolve_repo_folder(arg, "main", arg_in);
    return arg;
  }
  // ORG/NAME or ORG/NAME@REV, resolved offline in the hub cache.
  std::string id = arg, rev = "main";
  if (size_t at = arg.find('@'); at != std::string::npos) {
    id = arg.substr(0, at);
    rev = arg.substr(at + 1);
  }
  size_t slash = id.find('/');
  bool looks_like_id = slash != std::string::npos && id.find('/', slash + 1) == std::string::npos &&
                       valid_repo_part(id.substr(0, slash)) && valid_repo_part(id.substr(slash + 1)) &&
                       !rev.empty() && rev.find('/') == std::string::npos &&
                       rev.find("..") == std::string::npos;
  if (!looks_like_id) return make_error("cannot find checkpoint '" + arg_in + "': no such directory");
  std::string cache = hf_hub_cache_dir();
  std::string folder = cache + "/models--" + id.substr(0, slash) + "--" + id.substr(slash + 1);
  if (!is_dir(folder))
    return make_error(
        "cannot find checkpoint '" + arg_in + "': no such directory, and no " + folder +
        " in the Hugging Face cache (set HF_HOME or HF_HUB_CACHE, or pass a directory; nothing is "
        "downloaded)");
  return resolve_repo_folder(folder, rev, arg_in);
}

Expected<Checkpoint> open_checkpoint(const std::string& arg) {
  Checkpoint ck;
  ck.source = arg;
  TF_ASSIGN(ck.dir, resolve_checkpoint_dir(arg));
  TF_TRY(check_dangling_links(ck.dir));
  TF_ASSIGN(HfConfigs cfg, load_hf_configs(ck.dir));
  ck.config = std::move(cfg.config);
  ck.generation_config = std::move(cfg.generation_config);
  ck.tokenizer_config = std::move(cfg.tokenizer_config);
  ck.processor_config = std::move(cfg.processor_config);
  ck.preprocessor_config = std::move(cfg.preprocessor_config);
  ck.image_processor_config = std::move(cfg.image_processor_config);
  ck.tokenizer_json = path_if_file(ck.dir, "tokenizer.json");
  ck.chat_template_jinja = path_if_file(ck.dir, "chat_template.jinja");
  ck.chat_template_json = path_if_file(ck.dir, "chat_template.json");
  TF_ASSIGN(ck.weights, WeightMap::open(ck.dir));
  return ck;
}

}  // namespace tf
