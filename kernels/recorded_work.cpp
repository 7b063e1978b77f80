// The defaults of the recorded-work part of the op interface (a backend that cannot record: the
// CPU reference) and the AdamW schedule scalars shared by both backends.
#include <cmath>
#include <cstdlib>
#include <new>

#include "kernels/ops.hpp"

namespace recipe::kernels {

AdamWSchedule adamw_schedule(const AdamWArgs& a) {
  return {a.lr, float(1.0 / (1.0 - std::pow(double(a.beta1), a.step))),
          float(1.0 / (1.0 - std::pow(double(a.beta2), a.step)))};
}

void* Backend::alloc_host(size_t bytes) {
  void* p = std::calloc(bytes ? bytes : 1, 1);
  if (!p) throw std::bad_alloc();
  return p;
}

void Backend::free_host(void* p) { std::free(p); }

void Backend::from_host_async(Tensor dst, const void* src) { from_host(dst, src); }

std::unique_ptr<RecordedWork> Backend::record(const std::function<void()>&, std::string& why) {
  why = "the " + name() + " backend cannot record work";
  return nullptr;
}

}  // namespace recipe::kernels
