// Parts 2-4: a dtype-generic RMSNorm forward, registered as a real torch op,
// parallelised over rows.
//
//   y[r, j] = x[r, j] / sqrt(mean_j(x[r, :]^2) + eps) * weight[j]
//
// x is [rows, hidden] (any leading shape: every dimension but the last is a
// "row"), weight is [hidden]. The sum of squares is accumulated in
// at::opmath_type<scalar_t> (float for bfloat16/half, double for double): a
// bfloat16 accumulator has 8 bits of mantissa and would lose most of a long row.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>

namespace cppext {

// Part 2: one row, written once for every dtype. The compiler instantiates it
// for float, double, at::BFloat16 and at::Half from the dispatch below.
template <typename scalar_t>
void rms_norm_row(const scalar_t* x, const scalar_t* weight, scalar_t* out, int64_t hidden, double eps) {
  TORCH_CHECK(false, "rms_norm_row: not implemented yet (README.md, Part 2)");
}

// Part 3: the checks a real op makes before it touches memory. A failed
// TORCH_CHECK throws c10::Error, which Python sees as a RuntimeError; a
// missing check turns a user mistake into an out-of-bounds read.
static void check_inputs(const at::Tensor& x, const at::Tensor& weight, double eps) {
  (void)x; (void)weight; (void)eps;  // TODO: README.md, Part 3
}

// Part 4: rows are independent, so at::parallel_for hands each thread a range
// [begin, end) of rows. Every variable a row writes must be local to the
// lambda (or to rms_norm_row): a shared accumulator is a data race.
at::Tensor rms_norm(const at::Tensor& x_in, const at::Tensor& weight_in, double eps) {
  check_inputs(x_in, weight_in, eps);
  const at::Tensor x = x_in.contiguous();
  const at::Tensor weight = weight_in.contiguous();
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t hidden = x.size(-1);
  const int64_t rows = hidden == 0 ? 0 : x.numel() / hidden;
  if (rows == 0) {
    return out;
  }
  TORCH_CHECK(false, "rms_norm: dispatch and parallel_for not implemented yet (README.md, Parts 2 and 4)");
  return out;
}

// The op's "fake" (Meta) kernel: shapes and dtypes only, no data. torch.compile
// and torch.library.opcheck trace the op through it.
at::Tensor rms_norm_meta(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(false, "rms_norm_meta: not implemented yet (README.md, Part 3)");
}

}  // namespace cppext

// Part 3: the schema, then one kernel per dispatch key. After
// torch.ops.load_library(...), Python calls torch.ops.cppext.rms_norm(x, w, eps).
// TODO: TORCH_LIBRARY(cppext, m) { ... } and TORCH_LIBRARY_IMPL(cppext, CPU / Meta, m) { ... }
