// embedding, gather_rows, scatter_rows: row copies by index (exact).
#include <cstring>
#include <vector>

#include "backend/cpu/common.h"
#include "backend/cpu/kernels.h"
#include "backend/op_checks.h"

namespace tf::cpu {

void embedding(const Tensor& ids, const Tensor& table, const Tensor& out) {
  TF_CHECK(ids.dtype == DType::I32 && table.rank() == 2 && out.rank() == 2);
  const int64_t n = ids.numel(), vocab = table.dim(0), d = table.dim(1);
  TF_CHECK(out.dim(0) == n && out.dim(1) == d && is_float_act(table.dtype) && is_float_act(out.dtype));
  std::vector<float> row(static_cast<size_t>(d));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ids.as<const int32_t>()[i];
    TF_CHECK(id >= 0 && id < vocab);
    if (table.dtype == out.dtype) {
      const size_t rb = static_cast<size_t>(d) * dtype_size(out.dtype);
      std::memcpy(static_cast<char*>(out.data) + rb * i, static_cast<const char*>(table.data) + rb * id, rb);
    } else {
      load_f32_row(table, id * d, d, row.data());
      store_f32_row(out, i * d, d, row.data());
    }
  }
}

void gather_rows(const Tensor& src, const Tensor& rows, const Tensor& out) {
  const auto [m, n, rb] = opcheck::gather_rows(src, rows, out);
  for (int64_t i = 0; i < m; ++i) {
    const int32_t r = rows.as<const int32_t>()[i];
    TF_CHECK(r >= 0 && r < n);
    std::memcpy(static_cast<char*>(out.data) + rb * i, static_cast<const char*>(src.data) + rb * r, rb);
  }
}

void scatter_rows(const Tensor& src, const Tensor& rows, const Tensor& dst) {
  const auto [m, n, rb] = opcheck::scatter_rows(src, rows, dst);
  for (int64_t i = 0; i < m; ++i) {
    const int32_t r = rows.as<const int32_t>()[i];
    TF_CHECK(r >= 0 && r < n);
    std::memcpy(static_cast<char*>(dst.data) + rb * r, static_cast<const char*>(src.data) + rb * i, rb);
  }
}

}  // namespace tf::cpu
