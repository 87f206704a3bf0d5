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
  // BEGIN SOLUTION
  using acc_t = at::opmath_type<scalar_t>;
  acc_t sum_sq = 0;
  for (int64_t j = 0; j < hidden; ++j) {
    const acc_t v = static_cast<acc_t>(x[j]);
    sum_sq += v * v;
  }
  const acc_t inv_rms = acc_t(1) / std::sqrt(sum_sq / static_cast<acc_t>(hidden) + static_cast<acc_t>(eps));
  for (int64_t j = 0; j < hidden; ++j) {
    // Round x * inv_rms to the storage type first, then scale by the weight,
    // exactly as the Python reference (and vLLM's kernel) does.
    const scalar_t normed = static_cast<scalar_t>(static_cast<acc_t>(x[j]) * inv_rms);
    out[j] = static_cast<scalar_t>(static_cast<acc_t>(normed) * static_cast<acc_t>(weight[j]));
  }
  // STARTER
  // TORCH_CHECK(false, "rms_norm_row: not implemented yet (README.md, Part 2)");
  // END SOLUTION
}

// Part 3: the checks a real op makes before it touches memory. A failed
// TORCH_CHECK throws c10::Error, which Python sees as a RuntimeError; a
// missing check turns a user mistake into an out-of-bounds read.
static void check_inputs(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // BEGIN SOLUTION
  TORCH_CHECK(x.device().is_cpu(), "rms_norm: x must be a CPU tensor, got ", x.device());
  TORCH_CHECK(weight.device().is_cpu(), "rms_norm: weight must be a CPU tensor, got ", weight.device());
  TORCH_CHECK(x.dim() >= 1, "rms_norm: x must have at least 1 dimension, got a 0-d tensor");
  TORCH_CHECK(weight.dim() == 1, "rms_norm: weight must be 1-D, got shape ", weight.sizes());
  TORCH_CHECK(weight.size(0) == x.size(-1), "rms_norm: weight has ", weight.size(0),
              " elements but x's last dimension is ", x.size(-1), " (x shape ", x.sizes(), ")");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type(), "rms_norm: x and weight must have the same dtype, got ",
              x.scalar_type(), " and ", weight.scalar_type());
  TORCH_CHECK(eps >= 0, "rms_norm: eps must be >= 0, got ", eps);
  // STARTER
  // (void)x; (void)weight; (void)eps;  // TODO: README.md, Part 3
  // END SOLUTION
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
  // BEGIN SOLUTION
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "rms_norm", [&] {
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    const scalar_t* wp = weight.const_data_ptr<scalar_t>();
    scalar_t* op = out.mutable_data_ptr<scalar_t>();
    // grain_size: don't wake a thread for fewer than ~32K elements of work.
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(hidden, 1));
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        rms_norm_row<scalar_t>(xp + r * hidden, wp, op + r * hidden, hidden, eps);
      }
    });
  });
  // STARTER
  // TORCH_CHECK(false, "rms_norm: dispatch and parallel_for not implemented yet (README.md, Parts 2 and 4)");
  // END SOLUTION
  return out;
}

// The op's "fake" (Meta) kernel: shapes and dtypes only, no data. torch.compile
// and torch.library.opcheck trace the op through it.
at::Tensor rms_norm_meta(const at::Tensor& x, const at::Tensor& weight, double eps) {
  // BEGIN SOLUTION
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), "rms_norm: weight must be 1-D of size x.size(-1)");
  return at::empty_like(x, at::MemoryFormat::Contiguous);
  // STARTER
  // TORCH_CHECK(false, "rms_norm_meta: not implemented yet (README.md, Part 3)");
  // END SOLUTION
}

}  // namespace cppext

// Part 3: the schema, then one kernel per dispatch key. After
// torch.ops.load_library(...), Python calls torch.ops.cppext.rms_norm(x, w, eps).
// BEGIN SOLUTION
TORCH_LIBRARY(cppext, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
}

TORCH_LIBRARY_IMPL(cppext, CPU, m) {
  m.impl("rms_norm", &cppext::rms_norm);
}

TORCH_LIBRARY_IMPL(cppext, Meta, m) {
  m.impl("rms_norm", &cppext::rms_norm_meta);
}
// STARTER
// // TODO: TORCH_LIBRARY(cppext, m) { ... } and TORCH_LIBRARY_IMPL(cppext, CPU / Meta, m) { ... }
// END SOLUTION
