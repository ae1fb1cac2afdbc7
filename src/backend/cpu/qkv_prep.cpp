// qkv_prep (backend/ops.h): the fused q/k/v projection's output cut into heads, then per head the
// rms_norm, rope and K/V placement of the unfused ops, run here as exactly those ops on contiguous
// copies of the three column ranges, so the CPU reference is the unfused path by construction.
#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/op_checks.h"

namespace tf::cpu {

void qkv_prep(ThreadPool& pool, const Tensor& qkv, const Tensor* q_norm, const Tensor* k_norm, float eps,
              const Tensor& cos, const Tensor& sin, const Tensor* slots, const Tensor& q_out,
              const Tensor& k_out, const Tensor& v_out) {
  const opcheck::QkvPrepDims a = opcheck::qkv_prep(qkv, q_norm, k_norm, cos, sin, slots, q_out, k_out, v_out);
  if (a.n == 0) return;
  const DType dt = qkv.dtype;
  const size_t es = dtype_size(dt), row = static_cast<size_t>(qkv.dim(1)) * es;
  const size_t qb = static_cast<size_t>(a.heads * a.d) * es, kb = static_cast<size_t>(a.kv_heads * a.d) * es;
  Buffer k(dt, {a.n, a.kv_heads, a.d}), v(dt, {a.n, a.kv_heads, a.d});
  const char* src = static_cast<const char*>(qkv.data);
  for (int64_t i = 0; i < a.n; ++i) {  // [n, heads|kv|kv] -> q_out, k, v (contiguous)
    std::memcpy(static_cast<char*>(q_out.data) + i * qb, src + i * row, qb);
    std::memcpy(static_cast<char*>(k.data()) + i * kb, src + i * row + qb, kb);
    std::memcpy(static_cast<char*>(v.data()) + i * kb, src + i * row + qb + kb, kb);
  }
  if (q_norm) {
    const Tensor qf = q_out.reshaped({a.n * a.heads, a.d}), kf = k.view().reshaped({a.n * a.kv_heads, a.d});
    rms_norm(pool, qf, *q_norm, eps, RmsNormKind::kWeight, qf);
    rms_norm(pool, kf, *k_norm, eps, RmsNormKind::kWeight, kf);
  }
  rope(pool, q_out, cos, sin, q_out);
  rope(pool, k, cos, sin, k);
  if (slots) {  // scatter_rows, skipping rows whose slot is negative
    const int32_t* sl = slots->as<const int32_t>();
    for (int64_t i = 0; i < a.n; ++i) {
      if (sl[i] < 0) continue;
      TF_CHECK(sl[i] < a.m);
      std::memcpy(static_cast<char*>(k_out.data) + sl[i] * kb, static_cast<const char*>(k.data()) + i * kb,
                  kb);
      std::memcpy(static_cast<char*>(v_out.data) + sl[i] * kb, static_cast<const char*>(v.data()) + i * kb,
                  kb);
    }
  } else {
    std::memcpy(k_out.data, k.data(), k.nbytes());
    std::memcpy(v_out.data, v.data(), v.nbytes());
  }
}

}  // namespace tf::cpu
