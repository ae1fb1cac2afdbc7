#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/device_error.h"
#include "backend/ops.h"
#include "backend/test_hooks.h"
#include "base/log.h"
#ifdef TF_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace tf {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::exchange(o.owner_, nullptr);
    t_ = std::move(o.t_);
    o.t_ = Tensor{};
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (owner_ && t_.data) owner_->free_memory(t_.data);
  owner_ = nullptr;
  t_ = Tensor{};
}

Expected<std::unique_ptr<Backend>> create_backend(std::string_view name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "auto") {
    // The GPU when there is a usable one (as vLLM and llama.cpp do), else the CPU; one line says why.
#ifdef TF_HAVE_CUDA
    std::string device;
    auto cuda = make_cuda_backend(&device);
    if (cuda.ok()) {
      log_info("backend: cuda (auto: " + device + ")");
      return cuda;
    }
    log_info("backend: cpu (auto: " + cuda.error().message + ")");
#else
    log_info("backend: cpu (auto: this build has no cuda backend)");
#endif
    return make_cpu_backend();
  }
#ifdef TF_HAVE_CUDA
  if (name == "cuda") return make_cuda_backend();
  if (name.substr(0, 5) == "cuda:") {
    const std::string idx(name.substr(5));
    if (idx.empty() || idx.find_first_not_of("0123456789") != std::string::npos || idx.size() > 4)
      return make_error("backend '" + std::string(name) + "': cuda:N takes a GPU number");
    return make_cuda_backend(nullptr, std::stoi(idx));
  }
  return make_error("unknown backend '" + std::string(name) +
                    "' (auto, cpu or cuda; this build has: cpu, cuda)");
#else
  if (name == "cuda" || name.substr(0, 5) == "cuda:")
    return make_error(
        "this build has no cuda backend: configure where nvcc is installed (TF_CUDA=AUTO) or with "
        "-DTF_CUDA=ON");
  return make_error("unknown backend '" + std::string(name) + "' (auto, cpu or cuda; this build has: cpu)");
#endif
}

const char* act_kind_name(ActKind kind) {
  switch (kind) {
    case ActKind::kSilu:
      return "silu";
    case ActKind::kGelu:
      return "gelu";
    case ActKind::kGeluTanh:
      return "gelu_pytorch_tanh";
    case ActKind::kGeluNew:
      return "gelu_new";
    case ActKind::kQuickGelu:
      return "quick_gelu";
    case ActKind::kRelu:
      return "relu";
  }
  return "?";
}

DeviceBuffer upload_new(Backend& b, const Tensor& host) {
  DeviceBuffer d = b.alloc(host.dtype, host.shape);
  if (host.nbytes()) b.upload(d.tensor(), host.data);
  return d;
}

Buffer download_new(Backend& b, const Tensor& dev) {
  Buffer h(dev.dtype, dev.shape);
  if (dev.nbytes()) b.download(dev, h.data());
  return h;
}

void test_hooks::fail_backend_op(Backend& b, int64_t n) {
  DeviceFailure* f = cpu_device_failure(b);
#ifdef TF_HAVE_CUDA
  if (!f) f = cuda_device_failure(b);
#endif
  TF_CHECK(f != nullptr);
  f->arm(n);
}

}  // namespace tf

#ifndef TF_HAVE_CUDA
namespace tf::test_hooks {
bool set_cuda_linear_small_rows_chunk(int) { return false; }
bool set_cuda_linear_small_grid_cap(int) { return false; }
bool set_cuda_fused_linear(bool) { return false; }
int64_t cuda_layer_tail_launches() { return 0; }
int64_t cuda_linear_large_fused_calls() { return 0; }
bool set_cuda_linear_large_fused_planted(bool) { return false; }
bool set_cuda_linear_large_config(int) { return false; }
int cuda_linear_large_configs() { return 0; }
int cuda_linear_large_default() { return 0; }
const char* cuda_linear_large_config_name(int) { return ""; }
bool set_cuda_linear_small_config(int) { return false; }
int cuda_linear_small_configs() { return 0; }
int cuda_linear_small_default() { return 0; }
const char* cuda_linear_small_config_name(int) { return ""; }
bool set_cuda_linear_split_min_rows(int) { return false; }
int cuda_linear_split_min_rows_default() { return 0; }
int cuda_linear_split_min_rows() { return 0; }
int64_t cuda_linear_split_calls() { return 0; }
bool set_cuda_linear_split_min_chunks(int) { return false; }
int cuda_linear_split_min_chunks_default() { return 0; }
bool set_cuda_linear_split_mma(bool) { return false; }
bool set_cuda_attention_variant(int) { return false; }
int cuda_attention_variants() { return 0; }
int cuda_attention_default() { return 0; }
bool set_cuda_attention_split(int) { return false; }
bool set_cuda_attention_partials(bool) { return false; }
bool set_cuda_attention_pack(int) { return false; }
bool set_cuda_attention_decode_form(bool) { return false; }
bool set_cuda_attention_decode_chunks(int) { return false; }
bool set_cuda_attention_fused_merge(int) { return false; }
bool set_cuda_attention_decode_warps(int) { return false; }
bool set_cuda_pdl(bool) { return false; }
bool set_cuda_delta_rule_variant(int) { return false; }
bool set_cuda_sample_variant(int) { return false; }
}  // namespace tf::test_hooks
#endif
