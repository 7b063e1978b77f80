// Which bytes of a step's parameter gradients have been written yet: the bookkeeping behind
// Backend::begin_grad_writes for a backend that skips the per-step memset (CUDA). Host-only
// interval arithmetic over device addresses; the caller does the device work it asks for.
//
// After begin(), every tracked byte is "fresh": logically zero, physically stale. An op about to
// write a gradient tensor asks first:
//   - whole_write(t) for an op that writes every element of t (a GEMM with beta, a column sum):
//     overwrite when all of t is fresh; otherwise the fresh parts of t are zeroed (through the
//     callback) and the op accumulates. Either way t is no longer fresh.
//   - partial_write(t) for an op that adds into some elements only (a scatter): the fresh parts
//     are zeroed first; the op accumulates.
// end() zeroes whatever is still fresh (a gradient no op touched) and stops tracking. Outside
// begin()/end() every write accumulates, as the op contract says. Recorded work (CUDA graphs)
// replays the decisions taken while recording, which is right because every replay starts a step
// the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "kernels/tensor.hpp"

namespace recipe::kernels {

class GradWriteTracker {
 public:
  // Zeroes bytes [ptr, ptr + bytes) on the device (in stream order).
  using ZeroFn = std::function<void(void* ptr, size_t bytes)>;
  explicit GradWriteTracker(ZeroFn zero) : zero_(std::move(zero)) {}

  enum class Write { overwrite, accumulate };

  // Throws std::invalid_argument when the tensors overlap one another.
  void begin(const std::vector<Tensor>& grads);
  Write whole_write(const Tensor& t);
  void partial_write(const Tensor& t);
  void end();

  bool active() const { return active_; }
  size_t fresh_bytes() const;  // for tests

 private:
  // Zeroes the fresh parts of [a, b) and removes them from the fresh set; true if all of [a, b)
  // was fresh (then nothing is zeroed).
  bool take(uintptr_t a, uintptr_t b, bool zero_if_partial);

  ZeroFn zero_;
  bool active_ = false;
  std::map<uintptr_t, uintptr_t> fresh_;  // start → end of disjoint, coalesced fresh intervals
};

}  // namespace recipe::kernels
