// Argument checks shared by the CUDA backend's ops (cuda_backend.cpp and the .cu files that check
// their own arguments): each throws std::invalid_argument naming the op and the tensor.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/ops.hpp"

namespace recipe::kernels::cuda {

[[noreturn]] inline void bad_arg(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string("CUDA backend ") + op + ": " + what);
}
// t is defined, a CUDA tensor, of dtype.
inline void expect(const char* op, const char* name, const Tensor& t, DType dtype) {
  if (!t.defined()) bad_arg(op, std::string(name) + " is undefined");
  if (t.device != Device::cuda) bad_arg(op, std::string(name) + " " + t.shape_str() + " is not a CUDA tensor");
  if (t.dtype != dtype) bad_arg(op, std::string(name) + " " + t.shape_str() + " must be " + dtype_name(dtype));
}
// Optional tensors: checked only when defined.
inline void expect_opt(const char* op, const char* name, const Tensor& t, DType dtype) {
  if (t.defined()) expect(op, name, t, dtype);
}
inline void expect_numel(const char* op, const char* name, const Tensor& t, int64_t n) {
  if (t.numel() != n)
    bad_arg(op, std::string(name) + " " + t.shape_str() + " must hold " + std::to_string(n) + " elements");
}

}  // namespace recipe::kernels::cuda
