// The run's RoPE inverse frequencies on the backend's device: family/rope.hpp computes them (the one
// place θ^(-2i/D) and its scaling are written), this uploads them once, and every RoPE and KV-cache
// op reads them (kernels/ops.hpp RopeArgs::inv_freq, KvCacheAppendArgs::rope_inv_freq).
//
// Layout: f64 [head_dim/2], entry i the inverse frequency of the pair (i, i + head_dim/2). Allocated
// and written once when the model is built (like the other buffers; the step allocates nothing) and
// never written again, so a captured CUDA graph reads the same memory at every replay. A model with
// learned positions has no RoPE and an undefined table.
#pragma once

#include "family/arch_shape.hpp"
#include "kernels/ops.hpp"

namespace recipe::core {

class RopeTable {
 public:
  RopeTable(kernels::Backend& be, const ArchShape& s);
  ~RopeTable();
  RopeTable(const RopeTable&) = delete;
  RopeTable& operator=(const RopeTable&) = delete;

  const kernels::Tensor& inv_freq() const { return inv_freq_; }

 private:
  kernels::Backend& be_;
  kernels::Tensor inv_freq_;
};

}  // namespace recipe::core
