#include "server/serve_options.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>

namespace tf {
namespace {

Expected<int64_t> parse_int(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size())
    return make_error(flag + " expects an integer, got '" + v + "'");
  if (x < lo || x > hi)
    return make_error(flag + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                      ", got " + v);
  return x;
}

Expected<float> parse_float(const std::string& flag, const std::string& v, double lo, double hi) {
  double x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || !std::isfinite(x))
    return make_error(flag + " expects a number, got '" + v + "'");
  if (x < lo || x > hi) {
    std::ostringstream os;
    os << flag << " must be between " << lo << " and " << hi << ", got " << v;
    return make_error(os.str());
  }
  return static_cast<float>(x);
}

struct FlagSpec {
  const char* name;
  const char* value;  // nullptr: a switch without a value
  const char* help;   // includes the default
};

// One table drives both parsing and --help, so every flag is listed with its default.
const FlagSpec kFlags[] = {
    {"--backend", "auto|cpu|cuda",
     "compute backend; auto = cuda when built and a GPU is usable, else cpu (default: auto)"},
    {"--vision", nullptr, "load the vision encoder and accept image inputs (default: off)"},
    {"--context", "N", "context length in tokens; 0 = the model's max_position_embeddings (default: 0)"},
    {"--parallel", "N", "requests run together, one forward per step over all of them (default: 32)"},
    {"--no-thinking", nullptr,
     "render chat templates with enable_thinking=false unless a request sets it (default: off)"},
    {"--name", "NAME", "served model name (default: the checkpoint directory's name)"},
    {"--host", "ADDR", "address to listen on (default: 127.0.0.1)"},
    {"--port", "N", "port to listen on; 0 picks a free port (default: 8080)"},
    {"--temperature", "T", "temperature where a request is silent (default: generation_config.json)"},
    {"--max-tokens", "N", "max_tokens where a request is silent (default: up to the context)"},
    {"--api-key", "KEY", "require 'Authorization: Bearer KEY' on /v1/* (default: none)"},
    {"--max-body-mb", "N", "largest request body in MiB; larger gets 413 (default: 64)"},
    {"--max-image-pixels", "N", "largest image (width*height, read from its header) (default: 89478485)"},
    {"--allowed-media-dir", "DIR", "allow file:// image URLs under DIR (default: file:// refused)"},
    {"--cache-mb", "N", "prompt-cache budget in MiB (default: 1024)"},
    {"--max-batch-tokens", "N",
     "rows one engine step may compute (decode rows first, then prefill chunks); 0 = 2048 on the CPU, "
     "8192 on a GPU (default: 0)"},
    {"--kv-cache-mb", "N",
     "paged K/V pool in MiB; 0 = 90% of free GPU memory less 2 GiB (CPU: a quarter of RAM), at most "
     "--parallel full contexts (default: 0)"},
    {"--max-queue", "N",
     "requests waiting for a slot; past it a request gets 503 + Retry-After (default: 1024)"},
    {"--no-drafts", nullptr, "disable draft (speculative) decoding (default: drafts on)"},
    {"--drafts", "auto|copy|mtp|off",
     "draft source: copy = prompt lookup, mtp = the checkpoint's MTP layers, auto = mtp where the "
     "checkpoint has them, else copy; output is the same either way (default: auto)"},
    {"--devices", "LIST",
     "one engine per GPU of LIST (e.g. 0,1; implies --backend cuda) behind one server; a request goes to "
     "the engine that holds its page's cache unless that one is busier (default: one engine)"},
    {"--replicas", "N", "N engines on --backend behind one server, routed as --devices routes (default: 1)"},
    {"--enforce-eager", nullptr,
     "run every step op by op instead of replaying recorded decode steps (CUDA graphs); the same "
     "output, slower (default: off)"},
    {"--help", nullptr, "print this help and exit"},
};

const FlagSpec* find_flag(const std::string& name) {
  for (const auto& f : kFlags)
    if (name == f.name) return &f;
  return nullptr;
}

Status apply(ServeArgs& out, const std::string& flag, const std::string& v) {
  ServeOptions& o = out.options;
  if (flag == "--backend") {
    if (v != "auto" && v != "cpu" && v != "cuda")
      return make_error("--backend must be auto, cpu or cuda, got '" + v + "'");
    o.backend = v;
  } else if (flag == "--context") {
    TF_ASSIGN(o.context, parse_int(flag, v, 0, int64_t{1} << 24));
  } else if (flag == "--devices") {
    o.devices.clear();
    size_t at = 0;
    while (at <= v.size()) {
      const size_t comma = std::min(v.find(',', at), v.size());
      TF_ASSIGN(int64_t d, parse_int(flag, v.substr(at, comma - at), 0, 1023));
      if (std::find(o.devices.begin(), o.devices.end(), static_cast<int>(d)) != o.devices.end())
        return make_error("--devices lists GPU " + std::to_string(d) + " twice");
      o.devices.push_back(static_cast<int>(d));
      at = comma + 1;
    }
  } else if (flag == "--replicas") {
    TF_ASSIGN(int64_t n, parse_int(flag, v, 1, 64));
    o.replicas = static_cast<int>(n);
  } else if (flag == "--parallel") {
    TF_ASSIGN(int64_t n, parse_int(flag, v, 1, 1024));
    o.parallel = static_cast<int>(n);
  } else if (flag == "--name") {
    if (v.empty()) return make_error("--name must not be empty");
    o.name = v;
  } else if (flag == "--host") {
    if (v.empty()) return make_error("--host must not be empty");
    o.host = v;
  } else if (flag == "--port") {
    TF_ASSIGN(int64_t n, parse_int(flag, v, 0, 65535));
    o.port = static_cast<int>(n);
  } else if (flag == "--temperature") {
    TF_ASSIGN(o.temperature, parse_float(flag, v, 0.0, 100.0));
  } else if (flag == "--max-tokens") {
    TF_ASSIGN(o.max_tokens, parse_int(flag, v, 1, int64_t{1} << 24));
  } else if (flag == "--api-key") {
    if (v.empty()) return make_error("--api-key must not be empty");
    o.api_key = v;
  } else if (flag == "--max-body-mb") {
    TF_ASSIGN(o.max_body_mb, parse_int(flag, v, 1, 4096));
  } else if (flag == "--max-image-pixels") {
    TF_ASSIGN(o.max_image_pixels, parse_int(flag, v, 1, int64_t{1} << 40));
  } else if (flag == "--allowed-media-dir") {
    struct stat st {};
    if (v.empty() || ::stat(v.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return make_error("--allowed-media-dir '" + v + "' is not an existing directory");
    o.allowed_media_dir = v;
  } else if (flag == "--cache-mb") {
    TF_ASSIGN(o.cache_mb, parse_int(flag, v, 0, int64_t{1} << 30));
  } else if (flag == "--max-batch-tokens") {
    TF_ASSIGN(o.max_batch_tokens, parse_int(flag, v, 0, int64_t{1} << 24));
  } else if (flag == "--kv-cache-mb") {
    TF_ASSIGN(o.kv_cache_mb, parse_int(flag, v, 0, int64_t{1} << 30));
  } else if (flag == "--max-queue") {
    TF_ASSIGN(o.max_queue, parse_int(flag, v, 0, int64_t{1} << 24));
  } else if (flag == "--vision") {
    o.vision = true;
  } else if (flag == "--no-thinking") {
    o.no_thinking = true;
  } else if (flag == "--no-drafts") {
    o.no_drafts = true;
  } else if (flag == "--enforce-eager") {
    o.enforce_eager = true;
  } else if (flag == "--drafts") {
    if (v != "auto" && v != "copy" && v != "mtp" && v != "off")
      return make_error("--drafts must be auto, copy, mtp or off, got '" + v + "'");
    o.drafts = v;
  } else if (flag == "--help") {
    out.help = true;
  }
  return {};
}

}  // namespace

std::string ServeOptions::served_name() const {
  if (!name.empty()) return name;
  std::string s = checkpoint;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

Expected<ServeArgs> parse_serve_args(const std::vector<std::string>& args) {
  ServeArgs out;
  bool have_ckpt = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h") {
      out.help = true;
      continue;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      if (a.rfind("-", 0) == 0 && a.size() > 1)
        return make_error("unknown flag " + a + " (see tensorfold serve --help)");
      if (have_ckpt) return make_error("unexpected argument '" + a + "': only one CKPT is accepted");
      out.options.checkpoint = a;
      have_ckpt = true;
      continue;
    }
    std::string flag = a, value;
    bool inline_value = false;
    if (size_t eq = a.find('='); eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    const FlagSpec* spec = find_flag(flag);
    if (!spec) return make_error("unknown flag " + flag + " (see tensorfold serve --help)");
    if (!spec->value) {
      if (inline_value) return make_error(flag + " takes no value");
    } else if (!inline_value) {
      if (i + 1 >= args.size()) return make_error(flag + " needs a value (" + spec->value + ")");
      value = args[++i];
    }
    TF_TRY(apply(out, flag, value));
  }
  if (!out.help && !have_ckpt)
    return make_error(
        "missing CKPT (a checkpoint directory); usage: tensorfold serve CKPT [flags], see --help");
  const ServeOptions& o = out.options;
  if (!o.devices.empty() && o.replicas > 1)
    return make_error("--devices and --replicas exclude each other (--devices runs one engine per GPU)");
  if (!o.devices.empty() && o.backend == "cpu")
    return make_error("--devices names GPUs: it cannot run with --backend cpu");
  return out;
}

std::string serve_help() {
  std::ostringstream os;
  os << "usage: tensorfold serve CKPT [flags]\n\n"
     << "Serves the checkpoint directory CKPT over an OpenAI-compatible HTTP API.\n\nflags:\n";
  for (const auto& f : kFlags) {
    std::string lhs = std::string("  ") + f.name + (f.value ? std::string(" ") + f.value : "");
    if (lhs.size() < 26)
      lhs.resize(26, ' ');
    else
      lhs += "  ";
    os << lhs << f.help << "\n";
  }
  return os.str();
}

}  // namespace tf
