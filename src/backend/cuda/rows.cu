// embedding, gather_rows, scatter_rows: row copies by index (exact). An index out of range traps the
// kernel (the CPU op's TF_CHECK); the next synchronisation then reports the error and aborts.
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/vec8.cuh"
#include "backend/op_checks.h"

namespace tf::cuda {
namespace {

// Copies rows of `row_bytes` bytes in units of U (a thread per unit of a row).
template <class U>
void copy_rows_as(cudaStream_t s, const void* src, void* dst, const int32_t* idx, int64_t m,
                  int64_t n_src_rows, int64_t n_dst_rows, size_t row_bytes, bool scatter) {
  const int64_t units = static_cast<int64_t>(row_bytes / sizeof(U));
  const U* a = static_cast<const U*>(src);
  U* o = static_cast<U*>(dst);
  launch_elementwise(s, m * units, [=] __device__(int64_t e) {
    const int64_t i = e / units, u = e % units;
    const int32_t r = idx[i];
    if (r < 0 || r >= (scatter ? n_dst_rows : n_src_rows)) __trap();
    if (scatter)
      o[r * units + u] = a[i * units + u];
    else
      o[i * units + u] = a[r * units + u];
  });
}

// Copies rows of `row_bytes` bytes: 16 bytes a thread where rows and both bases allow it (a vision tower's q
// / k / v split of [37632, 768] bf16 rows: 51 us in 2-byte units, BENCHMARKS.md), else 2 (every dtype here is
// a multiple of 2 bytes).
void copy_rows(cudaStream_t s, const void* src, void* dst, const int32_t* idx, int64_t m, int64_t n_src_rows,
               int64_t n_dst_rows, size_t row_bytes, bool scatter) {
  TF_CHECK(row_bytes % 2 == 0);
  if (row_bytes % 16 == 0 && aligned16(src) && aligned16(dst))
    copy_rows_as<uint4>(s, src, dst, idx, m, n_src_rows, n_dst_rows, row_bytes, scatter);
  else
    copy_rows_as<uint16_t>(s, src, dst, idx, m, n_src_rows, n_dst_rows, row_bytes, scatter);
}

}  // namespace

void launch_embedding(cudaStream_t s, const Tensor& ids, const Tensor& table, const Tensor& out) {
  TF_CHECK(ids.dtype == DType::I32 && table.rank() == 2 && out.rank() == 2);
  const int64_t n = ids.numel(), vocab = table.dim(0), d = table.dim(1);
  TF_CHECK(out.dim(0) == n && out.dim(1) == d && is_float_act(table.dtype) && is_float_act(out.dtype));
  if (n == 0 || d == 0) return;
  if (table.dtype == out.dtype) {
    copy_rows(s, table.data, out.data, ptr<const int32_t>(ids), n, vocab, n,
              static_cast<size_t>(d) * dtype_size(out.dtype), false);
    return;
  }
  const int32_t* id = ptr<const int32_t>(ids);
  TF_DISPATCH_ACT(table.dtype, TT, {
    TF_DISPATCH_ACT(out.dtype, TO, {
      const TT* t = ptr<const TT>(table);
      TO* o = ptr<TO>(out);
      launch_elementwise(s, n * d, [=] __device__(int64_t e) {
        const int64_t i = e / d, c = e % d;
        const int32_t r = id[i];
        if (r < 0 || r >= vocab) __trap();
        o[e] = from_f<TO>(to_f(t[r * d + c]));
      });
    });
  });
}

void launch_gather_rows(cudaStream_t s, const Tensor& src, const Tensor& rows, const Tensor& out) {
  const auto [m, n, rb] = opcheck::gather_rows(src, rows, out);
  copy_rows(s, src.data, out.data, ptr<const int32_t>(rows), m, n, m, rb, false);
}

void launch_scatter_rows(cudaStream_t s, const Tensor& src, const Tensor& rows, const Tensor& dst) {
  const auto [m, n, rb] = opcheck::scatter_rows(src, rows, dst);
  copy_rows(s, src.data, dst.data, ptr<const int32_t>(rows), m, m, n, rb, true);
}

}  // namespace tf::cuda
