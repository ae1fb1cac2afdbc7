#include "backend/cuda/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"

namespace tf::cuda {

std::unique_ptr<OpProfile> OpProfile::from_env(cudaStream_t s) {
  const char* path = std::getenv("TF_CUDA_OP_PROFILE");
  if (!path || !*path) return nullptr;
  return std::unique_ptr<OpProfile>(new OpProfile(s, path));
}

cudaEvent_t OpProfile::event() {
  if (!free_.empty()) {
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  TF_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

int OpProfile::begin(const char* op, const Tensor* a, const Tensor* out) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TF_CUDA_CHECK(cudaStreamIsCapturing(s_, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return -1;
  if (pending_.size() >= 4096) harvest();
  // "linear [2333, 1024] -> [2333, 4096] BF16": the op, its first input's and its output's shapes.
  std::string key = op;
  if (a) key += " " + shape_str(a->shape);
  if (out)
    key += std::string(a ? " -> " : " ") + shape_str(out->shape) + " " + std::string(dtype_name(out->dtype));
  Pending p{std::move(key), event(), event()};
  TF_CUDA_CHECK(cudaEventRecord(p.start, s_));
  pending_.push_back(std::move(p));
  return static_cast<int>(pending_.size()) - 1;
}

void OpProfile::end(int token) {
  if (token < 0) return;
  TF_CUDA_CHECK(cudaEventRecord(pending_[token].stop, s_));
}

void OpProfile::harvest() {
  TF_CUDA_CHECK(cudaStreamSynchronize(s_));
  for (Pending& p : pending_) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, p.start, p.stop) == cudaSuccess) {
      Total& t = totals_[p.key];
      t.calls += 1;
      t.ms += ms;
    }
    free_.push_back(p.start);
    free_.push_back(p.stop);
  }
  pending_.clear();
}

OpProfile::~OpProfile() {
  try {
    harvest();
  } catch (...) {  // a failed device: report what was folded already
  }
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
  std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double all = 0;
  for (const auto& r : rows) all += r.second.ms;
  FILE* f = path_ == "-" ? stderr : std::fopen(path_.c_str(), "a");
  if (!f) return;
  std::fprintf(f,
               "| op (input -> output) | calls | total ms | mean us | share |\n|---|---:|---:|---:|---:|\n");
  for (const auto& [key, t] : rows)
    std::fprintf(f, "| %s | %lld | %.3f | %.1f | %.1f %% |\n", key.c_str(), static_cast<long long>(t.calls),
                 t.ms, 1000.0 * t.ms / static_cast<double>(t.calls), all > 0 ? 100.0 * t.ms / all : 0.0);
  std::fprintf(f, "| all | | %.3f | | |\n\n", all);
  if (f != stderr) std::fclose(f);
}

}  // namespace tf::cuda
