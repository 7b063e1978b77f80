// Capture, warm-up and replay of the device training step (see step_graph.hpp).
#include "core/train/step_graph.hpp"

#include <exception>

namespace recipe::core {

using kernels::Tensor;

StepGraph::StepGraph(kernels::Backend& backend, int micro_batches, int64_t rows, std::string off)
    : be_(backend), rows_(rows), status_(std::move(off)), on_(status_.empty()) {
  if (on_) {
    try {
      tokens_ = static_cast<int32_t*>(be_.alloc_host(size_t(micro_batches) * 2 * size_t(rows) * sizeof(int32_t)));
    } catch (const std::exception& e) {
      turn_off(std::string("page-locked staging: ") + e.what());
    }
  }
}

void StepGraph::turn_off(const std::string& why) {
  on_ = false;
  status_ = why;
  be_.notice("recipe: the training step runs without a CUDA graph (" + status_ + ")");
}

StepGraph::~StepGraph() {
  work_.reset();
  if (tokens_) be_.free_host(tokens_);
}

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
