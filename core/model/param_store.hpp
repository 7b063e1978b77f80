// The flat parameter buffers of one rank, allocated once through the backend:
//   master  f32        the weights the optimizer updates (the trainable prefix of the layout)
//   compute act_dtype  what forward/backward read (every tensor, the frozen base included); on a
//                      backend whose act_dtype is f32 this IS the master buffer (no copy, and it
//                      holds the frozen base too); otherwise AdamW rewrites it after each update
//   grads   f32        accumulated over micro-batches, zeroed once per step (trainable prefix)
// All three share the element offsets of the ParamLayout. The optimizer's state (AdamW's moments)
// is not here: the optimizer owns it (core/train/optimizer.hpp) and reads these buffers through
// the spans below.
// A frozen tensor (LoRA's base, ParamSpec::trainable false) lives only in the compute copy: on
// CUDA in bf16 alone. grad(p) of a frozen tensor is undefined (the ops skip an undefined gradient),
// and master(p) throws unless the compute copy is the master buffer.
//
// The layout's FP8 region (ParamSpec::fp8: an FP8 linear's frozen weight with peft.base_fp8_only)
// has no compute copy and no master: it lives in one more buffer,
//   fp8     e4m3       [fp8_numel] bytes, byte offset = element offset - fp8_begin
// that the Model fills by quantizing (Model::quantize_frozen_base), with each weight's scale in
// the Model's Fp8WeightCache. The exact compute-dtype values those bytes were cast from are not
// kept anywhere: whoever initializes or loads the base registers their source (set_fp8_source:
// the seeded init, or the checkpoint it was read from), and fp8_values() regenerates them on
// demand, for the quantization and for writing the base into a checkpoint.
#pragma once

#include <functional>
#include <vector>

#include "core/model/param_layout.hpp"
#include "kernels/ops.hpp"

namespace recipe::core {

class ParamStore {
 public:
  ParamStore(kernels::Backend& backend, ParamLayout layout);
  ~ParamStore();
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  const ParamLayout& layout() const { return layout_; }
  kernels::Backend& backend() const { return backend_; }
  bool compute_is_master() const { return compute_ == master_; }
  kernels::DType compute_dtype() const { return compute_dtype_; }

  // Whole buffers, 1-D: master and grads over the trainable prefix (layout().trainable_numel),
  // compute over layout().total_numel.
  kernels::Tensor master() const { return master_span(0, layout_.trainable_numel); }
  kernels::Tensor compute() const { return compute_span(0, layout_.compute_numel()); }
  kernels::Tensor grads() const { return grad_span(0, layout_.trainable_numel); }

  // 1-D views of [offset, offset+n) of each buffer.
  kernels::Tensor master_span(int64_t offset, int64_t n) const {
    return span(master_, kernels::DType::f32, offset, n, master_numel());
  }
  kernels::Tensor compute_span(int64_t offset, int64_t n) const {
    return span(compute_, compute_dtype_, offset, n, layout_.compute_numel());
  }
  // [offset, offset+n) of the FP8 region (layout element offsets), e4m3.
  kernels::Tensor fp8_span(int64_t offset, int64_t n) const;
  kernels::Tensor grad_span(int64_t offset, int64_t n) const {
    return span(grads_, kernels::DType::f32, offset, n, layout_.trainable_numel);
  }

  // One parameter, with its local shape.
  // One parameter, with its local shape: the compute copy, or the FP8 bytes of an FP8-region one.
  kernels::Tensor weight(const ParamSpec& p) const;
  kernels::Tensor master(const ParamSpec& p) const;
  kernels::Tensor grad(const ParamSpec& p) const {
    return p.trainable ? shaped(grads_, kernels::DType::f32, p) : kernels::Tensor();
  }
  kernels::Tensor weight(std::string_view name) const { return weight(layout_.get(name)); }
  kernels::Tensor master(std::string_view name) const { return master(layout_.get(name)); }
  kernels::Tensor grad(std::string_view name) const { return grad(layout_.get(name)); }

  void zero_grads();
  // A step's gradients: from begin on, every parameter's gradient reads as zero to the backward
  // ops (Backend::begin_grad_writes: the CUDA backend skips the memset and lets each first write
  // overwrite); after end they hold the step's sums. The alignment gaps between parameters are
  // never written by an op and stay zero from allocation.
  void begin_grad_writes();
  void end_grad_writes();
  // Refresh the compute copy of the trainable tensors from the master weights (after init, load,
  // or a test's edit).
  void sync_compute();
  // Writes f32 host values into the compute copy of [offset, offset+n) (converted to the compute
  // dtype): how the frozen base is initialized and loaded.
  void compute_from_host(int64_t offset, int64_t n, const float* host);
  // The compute copy of [offset, offset+n) as f32 host values.
  std::vector<float> compute_to_host(int64_t offset, int64_t n) const;

  // The FP8 region's source: fills an FP8-region parameter's local values (f32, p.numel) as they
  // were initialized or loaded. Set by init_params and by loading a checkpoint.
  using TensorSource = std::function<void(const ParamSpec&, float*)>;
  void set_fp8_source(TensorSource source) { fp8_source_ = std::move(source); }
  // An FP8-region parameter's values as the compute copy would hold them (the source's, rounded to
  // the compute dtype), as f32: what its FP8 bytes are cast from.
  std::vector<float> fp8_values(const ParamSpec& p) const;
  // The whole frozen region [frozen_begin, total_numel) as f32 host values (FP8-region tensors from
  // their source; the gaps zero): what a checkpoint writes for the base.
  std::vector<float> frozen_to_host() const;
  size_t bytes() const { return bytes_; }

 private:
  // Elements of the master buffer: the whole layout when it is the compute copy, else the
  // trainable prefix.
  int64_t master_numel() const { return compute_is_master() ? layout_.compute_numel() : layout_.trainable_numel; }
  kernels::Tensor span(void* base, kernels::DType t, int64_t offset, int64_t n, int64_t limit) const;
  kernels::Tensor shaped(void* base, kernels::DType t, const ParamSpec& p) const;

  kernels::Backend& backend_;
  ParamLayout layout_;
  kernels::DType compute_dtype_;
  void* master_ = nullptr;
  void* compute_ = nullptr;
  void* grads_ = nullptr;
  void* fp8_ = nullptr;  // the FP8 region (null without one)
  TensorSource fp8_source_;
  size_t bytes_ = 0;
};

}  // namespace recipe::core
