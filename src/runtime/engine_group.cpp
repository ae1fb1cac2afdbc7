#include "runtime/engine_group.h"

#include <algorithm>
#include <sstream>

namespace tf {
namespace {

constexpr size_t kKeyBytes = 64 * 1024;

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::shared_ptr<RequestChannel> refusal(std::string message) {
  auto ch = std::make_shared<RequestChannel>();
  EngineEvent e;
  e.kind = EngineEvent::Kind::Error;
  e.http_status = 503;
  e.message = std::move(message);
  e.type = "server_error";
  e.code = "no_engine_ready";
  e.retry_after_s = 1;
  ch->push(std::move(e));
  return ch;
}

}  // namespace

uint64_t affinity_key(const GenerationRequest& r) {
  if (!r.images.empty()) {
    const auto& img = r.images.front();
    return fnv1a(img.data(), std::min(img.size(), kKeyBytes));
  }
  if (r.prompt_ids) {
    const auto& ids = *r.prompt_ids;
    return fnv1a(ids.data(), std::min(ids.size() * sizeof(int32_t), kKeyBytes));
  }
  const std::string s = r.prompt_text ? *r.prompt_text : r.messages ? r.messages->dump() : std::string();
  return fnv1a(s.data(), std::min(s.size(), kKeyBytes));
}

std::string label_metrics(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') {
      const size_t sp = line.find(' ');
      const size_t brace = line.find('{');
      if (brace != std::string::npos && brace < sp)
        line.insert(brace + 1, label + ",");
      else if (sp != std::string::npos)
        line.insert(sp, "{" + label + "}");
    }
    out += line + "\n";
  }
  return out;
}

EngineGroup::EngineGroup(std::vector<std::shared_ptr<EngineApi>> engines)
    : engines_(std::move(engines)), open_(engines_.size()), routed_(engines_.size(), 0) {
  TF_CHECK(!engines_.empty());
}

const EngineApi& EngineGroup::any_ready() const {
  for (const auto& e : engines_)
    if (e->ready()) return *e;
  return *engines_.front();
}

EngineInfo EngineGroup::info() const { return any_ready().info(); }

bool EngineGroup::ready() const {
  return std::any_of(engines_.begin(), engines_.end(), [](const auto& e) { return e->ready(); });
}

std::vector<EngineHealth> EngineGroup::health() const {
  std::vector<EngineHealth> out;
  for (const auto& e : engines_)
    for (EngineHealth& h : e->health()) out.push_back(std::move(h));
  return out;
}

int64_t EngineGroup::outstanding_locked(size_t i) const {
  auto& v = open_[i];
  v.erase(std::remove_if(v.begin(), v.end(), [](const Open& o) { return o.channel.expired(); }), v.end());
  int64_t t = 0;
  for (const Open& o : v) t += o.tokens;
  return t;
}

int64_t EngineGroup::outstanding_tokens(size_t i) const {
  std::lock_guard<std::mutex> lock(mu_);
  return outstanding_locked(i);
}

std::optional<size_t> EngineGroup::route_locked(uint64_t key) const {
  std::optional<size_t> least;
  int64_t least_load = 0;
  for (size_t i = 0; i < engines_.size(); ++i) {
    if (!engines_[i]->ready()) continue;
    const int64_t load = outstanding_locked(i);
    if (!least || load < least_load) least = i, least_load = load;
  }
  if (!least) return std::nullopt;
  if (auto it = holder_.find(key); it != holder_.end()) {
    const size_t h = it->second;
    if (engines_[h]->ready() && outstanding_locked(h) <= least_load + kSlackTokens) return h;
  }
  return least;
}

std::optional<size_t> EngineGroup::route(const GenerationRequest& r) const {
  std::lock_guard<std::mutex> lock(mu_);
  return route_locked(affinity_key(r));
}

std::optional<size_t> EngineGroup::holder(const GenerationRequest& r) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = holder_.find(affinity_key(r));
  if (it == holder_.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<RequestChannel> EngineGroup::submit(GenerationRequest request) {
  const uint64_t key = affinity_key(request);
  const int64_t tokens = request.max_tokens > 0 ? request.max_tokens : kDefaultTokens;
  std::optional<size_t> to;
  {
    std::lock_guard<std::mutex> lock(mu_);
    to = route_locked(key);
    if (!to) {
      ++refused_;
    } else {
      ++routed_[*to];
      auto [it, fresh] = holder_.try_emplace(key, *to);
      if (fresh) {
        key_order_.push_back(key);
        if (key_order_.size() > kKeys) {
          holder_.erase(key_order_.front());
          key_order_.pop_front();
        }
      } else if (it->second != *to) {
        ++spilled_;
        it->second = *to;  // its newest blocks are there now
      }
    }
  }
  if (!to) return refusal("no engine is ready (every engine has failed)");
  std::shared_ptr<RequestChannel> ch = engines_[*to]->submit(std::move(request));
  std::lock_guard<std::mutex> lock(mu_);
  open_[*to].push_back({ch, tokens});
  return ch;
}

Expected<std::vector<int32_t>> EngineGroup::tokenize(const GenerationRequest& request) {
  for (const auto& e : engines_)
    if (e->ready()) return e->tokenize(request);
  return make_error("no engine is ready");
}

Expected<std::string> EngineGroup::detokenize(const std::vector<int32_t>& ids) {
  for (const auto& e : engines_)
    if (e->ready()) return e->detokenize(ids);
  return make_error("no engine is ready");
}

std::string EngineGroup::metrics_text() const {
  std::string out;
  for (size_t i = 0; i < engines_.size(); ++i)
    out += label_metrics(engines_[i]->metrics_text(), "engine=\"" + std::to_string(i) + "\"");
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP tensorfold_router_requests_total Requests the router sent to each engine.\n";
  out += "# TYPE tensorfold_router_requests_total counter\n";
  for (size_t i = 0; i < engines_.size(); ++i)
    out += "tensorfold_router_requests_total{engine=\"" + std::to_string(i) + "\"} " +
           std::to_string(routed_[i]) + "\n";
  out += "# HELP tensorfold_router_outstanding_tokens Output tokens the requests in flight may still take.\n";
  out += "# TYPE tensorfold_router_outstanding_tokens gauge\n";
  for (size_t i = 0; i < engines_.size(); ++i)
    out += "tensorfold_router_outstanding_tokens{engine=\"" + std::to_string(i) + "\"} " +
           std::to_string(outstanding_locked(i)) + "\n";
  out += "# HELP tensorfold_router_spilled_total Requests of a remembered page sent to another engine.\n";
  out += "# TYPE tensorfold_router_spilled_total counter\n";
  out += "tensorfold_router_spilled_total " + std::to_string(spilled_) + "\n";
  out += "# HELP tensorfold_router_refused_total Requests answered 503 because no engine was ready.\n";
  out += "# TYPE tensorfold_router_refused_total counter\n";
  out += "tensorfold_router_refused_total " + std::to_string(refused_) + "\n";
  return out;
}

}  // namespace tf
