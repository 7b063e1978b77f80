// Dropout with a counter-based mask (kernels/dropout_mask.hpp), the reference the CUDA kernel is
// tested against: f32 or bf16 storage, f32 arithmetic, one rounding into out.
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_detail.hpp"
#include "kernels/dropout_mask.hpp"

namespace recipe::kernels {

namespace {

template <class Load, class Store>
void dropout_rows(const DropoutArgs& a, int64_t rows, int64_t cols, Load load, Store store) {
  const uint32_t threshold = dropout_threshold(a.p);
  const float keep_scale = 1.0f / (1.0f - a.p);
  for (int64_t i = 0; i < rows; ++i) {
    const uint64_t base = uint64_t(a.first_row + i) * uint64_t(a.row_stride) + uint64_t(a.first_col);
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t e = i * cols + j;
      const float v = dropout_keep(a.key, base + uint64_t(j), threshold) ? load(a.inp, e) * keep_scale : 0.0f;
      store(a.out, e, a.accumulate ? load(a.out, e) + v : v);
    }
  }
}

}  // namespace

void CpuBackend::dropout(const DropoutArgs& a) {
  const char* op = "dropout";
  cpu::require(a.inp.defined() && a.inp.ndim == 2, op, "inp must be a defined [rows, cols] tensor");
  cpu::require_tensor(a.inp, op, "inp", a.inp.dtype);
  cpu::require_tensor(a.out, op, "out", a.inp.dtype);
  cpu::require(a.inp.dtype == DType::f32 || a.inp.dtype == DType::bf16, op, "inp must be f32 or bf16");
  cpu::require_numel(a.out, a.inp.numel(), op, "out");
  cpu::require(a.p >= 0.0f && a.p < 1.0f, op, "p=" + std::to_string(a.p) + " must be in [0, 1)");
  const int64_t rows = a.inp.dim(0), cols = a.inp.dim(1);
  cpu::require(a.first_row >= 0 && a.first_col >= 0 && a.row_stride >= a.first_col + cols, op,
               "the block's columns [" + std::to_string(a.first_col) + ", " + std::to_string(a.first_col + cols) +
                   ") do not fit a row of " + std::to_string(a.row_stride));
  if (a.inp.dtype == DType::f32)
    dropout_rows(
        a, rows, cols, [](const Tensor& t, int64_t e) { return t.as<float>()[e]; },
        [](const Tensor& t, int64_t e, float v) { t.as<float>()[e] = v; });
  else
    dropout_rows(
        a, rows, cols, [](const Tensor& t, int64_t e) { return bf16_to_f32(t.as<bf16_t>()[e]); },
        [](const Tensor& t, int64_t e, float v) { t.as<bf16_t>()[e] = f32_to_bf16(v); });
}

}  // namespace recipe::kernels
