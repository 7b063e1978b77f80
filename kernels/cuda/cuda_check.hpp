// Return-code checks for the CUDA runtime, cuBLASLt and cuDNN: every failure becomes a
// std::runtime_error naming the call, the file:line and the library's own message, so a failed
// kernel launch or an unsupported GEMM shape says what broke instead of corrupting later results.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace recipe::kernels::cuda {

[[noreturn]] inline void throw_cuda_error(const char* what, const char* detail, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA backend: ") + what + " failed: " + detail + " (" + file + ":" +
                           std::to_string(line) + ")");
}

inline const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "unknown cuBLAS status";
  }
}

}  // namespace recipe::kernels::cuda

#define RECIPE_CUDA_CHECK(call)                                                                              \
  do {                                                                                                       \
    cudaError_t recipe_err_ = (call);                                                                        \
    if (recipe_err_ != cudaSuccess)                                                                          \
      ::recipe::kernels::cuda::throw_cuda_error(#call, cudaGetErrorString(recipe_err_), __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: catches bad launch configurations immediately (asynchronous faults
// surface at the next synchronizing call, which is checked too).
#define RECIPE_CUDA_CHECK_LAUNCH(name)                                                                            \
  do {                                                                                                            \
    cudaError_t recipe_err_ = cudaGetLastError();                                                                 \
    if (recipe_err_ != cudaSuccess)                                                                               \
      ::recipe::kernels::cuda::throw_cuda_error("kernel launch " name, cudaGetErrorString(recipe_err_), __FILE__, \
                                                __LINE__);                                                        \
  } while (0)

#define RECIPE_CUBLAS_CHECK(call)                                                                               \
  do {                                                                                                          \
    cublasStatus_t recipe_st_ = (call);                                                                         \
    if (recipe_st_ != CUBLAS_STATUS_SUCCESS)                                                                    \
      ::recipe::kernels::cuda::throw_cuda_error(#call, ::recipe::kernels::cuda::cublas_status_name(recipe_st_), \
                                                __FILE__, __LINE__);                                            \
  } while (0)
