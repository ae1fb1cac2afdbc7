// Per-op GPU time of the CUDA backend, for finding where a forward pass spends its time (the H200 has no
// working Nsight Systems; ncu needs hardware counters that some machines refuse). Off unless the
// environment variable TF_CUDA_OP_PROFILE names a file ("-": stderr): then every op call outside a graph
// capture is bracketed by two CUDA events, and when the backend is destroyed the totals per op and output
// shape are written there, largest first. The events measure the stream's time between the op's first
// and last kernel, so in steps where the host cannot keep the GPU fed (eager decode) idle gaps count to
// the op that waited; prefill and vision steps, whose kernels are long, are measured as they run.
// Graph replays are one row ("replay"). Profiling changes no bit: it only records events.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tf::cuda {

class OpProfile {
 public:
  // Null when TF_CUDA_OP_PROFILE is unset or empty.
  static std::unique_ptr<OpProfile> from_env(cudaStream_t s);
  ~OpProfile();  // writes the report

  // Around one op: begin() returns a token for end() (-1: not recorded, e.g. inside a capture).
  int begin(const char* op, const Tensor* a, const Tensor* out);
  void end(int token);

 private:
  OpProfile(cudaStream_t s, std::string path) : s_(s), path_(std::move(path)) {}
  void harvest();  // synchronizes, folds the pending pairs into the totals, recycles their events
  cudaEvent_t event();

  struct Pending {
    std::string key;
    cudaEvent_t start, stop;
  };
  struct Total {
    int64_t calls = 0;
    double ms = 0;
  };
  cudaStream_t s_;
  std::string path_;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> free_;
  std::map<std::string, Total> totals_;
};

}  // namespace tf::cuda
