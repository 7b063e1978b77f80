// Construction of the CPU backend and the make_cpu_backend factory.
#include "kernels/cpu/cpu_backend.hpp"

#include <cblas.h>

#include <cstdlib>
#include <thread>

#include "kernels/cpu/cpu_detail.hpp"

namespace recipe::kernels {

CpuBackend::CpuBackend(const BackendOptions& opts) {
  if (opts.cpu_threads < 0)
    cpu::fail("options", "cpu_threads=" + std::to_string(opts.cpu_threads) +
                             " is negative; use 0 for the library default or a positive thread count");
  // OpenBLAS keeps one global thread count; setting it only when asked leaves OPENBLAS_NUM_THREADS
  // in charge otherwise.
  if (opts.cpu_threads > 0) openblas_set_num_threads(opts.cpu_threads);
  unsigned hw = std::thread::hardware_concurrency();
  threads_ = opts.cpu_threads > 0 ? opts.cpu_threads : int(hw ? hw : 1);
}

CpuBackend::~CpuBackend() {
  // Buffers the owner forgot to free are released with the backend that made them.
  for (auto& [p, bytes] : live_) std::free(p);
}

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& opts) { return std::make_unique<CpuBackend>(opts); }

}  // namespace recipe::kernels
