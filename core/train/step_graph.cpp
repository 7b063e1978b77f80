// Capture, warm-up and replay of the device training step (see step_graph.hpp).
#include "core/train/step_graph.hpp"

#include <exception>

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

StepGraph::StepGraph(kernels::Backend& backend, int micro_batches, int64_t rows, std::string off)
    : be_(backend), rows_(rows), status_(std::move(off)), on_(status_.empty()) {
  if (on_) {
    try {
      tokens_ = static_cast<int32_t*>(be_.alloc_host(size_t(micro_batches) * 2 * size_t(rows) * sizeof(int32_t)));
      host_schedule_ = static_cast<float*>(be_.alloc_host(3 * sizeof(float)));
    } catch (const std::exception& e) {
      on_ = false;
      status_ = std::string("page-locked staging: ") + e.what();
      be_.notice("recipe: the training step runs without a CUDA graph (" + status_ + ")");
    }
  }
  if (on_) {
    schedule_buf_ = be_.alloc(3 * sizeof(float));
    schedule_ = Tensor(schedule_buf_, DType::f32, be_.device(), {3});
  }
}

StepGraph::~StepGraph() {
  work_.reset();
  if (tokens_) be_.free_host(tokens_);
  if (host_schedule_) be_.free_host(host_schedule_);
  if (schedule_buf_) be_.free(schedule_buf_);
}

void StepGraph::stage_schedule(const kernels::AdamWSchedule& s) {
  host_schedule_[0] = s.lr;
  host_schedule_[1] = s.inv_bias_correction1;
  host_schedule_[2] = s.inv_bias_correction2;
}

void StepGraph::upload_schedule() { be_.from_host_async(schedule_, host_schedule_); }

void StepGraph::upload_tokens(int m, Tensor inputs_dev, Tensor targets_dev) {
  be_.from_host_async(inputs_dev, inputs(m));
  be_.from_host_async(targets_dev, targets(m));
}

bool StepGraph::run(const std::function<void()>& work) {
  if (!on_) return false;
  if (warm_ && !work_) {
    std::string why;
    work_ = be_.record(work, why);
    if (!work_) {
      on_ = false;
      status_ = "capture failed: " + why;
      be_.notice("recipe: the training step could not be captured in a CUDA graph (" + why + "); it runs uncaptured");
      return false;
    }
    status_.clear();
  }
  if (work_) {
    work_->launch();
    ++steps_;
  } else {
    work();  // the warm-up: the same work as the recording, run eagerly
    warm_ = true;
  }
  return true;
}

}  // namespace recipe::core
