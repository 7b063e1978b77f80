#include "core/trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "core/init.hpp"

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

namespace {

void check_batch(const dsl::Plan& plan, int micro, int dp, int64_t global) {
  const auto& t = plan.trainer;
  if (micro < 1)
    throw std::invalid_argument("trainer.micro_batch_size=" + std::to_string(micro) + ": must be >= 1");
  if (global % (int64_t(micro) * dp) != 0)
    throw std::invalid_argument(
        "trainer.global_batch_size=" + std::to_string(global) + " is not a multiple of "
        "trainer.micro_batch_size × dp = " + std::to_string(micro) + " × " + std::to_string(dp) +
        "; use a multiple of " + std::to_string(int64_t(micro) * dp));
  if (t.eval_interval > 0 && t.eval_iters < 1)
    throw std::invalid_argument("trainer.eval_iters=" + std::to_string(t.eval_iters) +
                                ": validation every trainer.eval_interval steps needs eval_iters >= 1");
}

}  // namespace

Trainer::Trainer(const dsl::Plan& plan, kernels::Backend& backend, ParallelState* parallel)
    : Trainer(plan, backend, parallel, data::make_train_source(plan), data::make_valid_source(plan)) {}

Trainer::Trainer(const dsl::Plan& plan, kernels::Backend& backend, ParallelState* parallel,
                 std::unique_ptr<data::SampleSource> train, std::unique_ptr<data::SampleSource> valid)
    : plan_(plan), backend_(backend), parallel_(parallel), shape_(model_shape(plan)),
      train_(std::move(train)), valid_(std::move(valid)) {
  if (!parallel_) {
    owned_parallel_ = std::make_unique<ParallelState>(ParallelState::single_process());
    parallel_ = owned_parallel_.get();
  }
  const ParallelSizes& ps = parallel_->sizes();
  if (ps.tp != 1 || ps.cp != 1 || ps.pp != 1)
    throw std::invalid_argument(
        "parallelism.tp/cp/pp = " + std::to_string(ps.tp) + "/" + std::to_string(ps.cp) + "/" +
        std::to_string(ps.pp) + ": the trainer's model runs unsharded; use data parallelism only "
        "(tp = cp = pp = 1)");
  if (!train_) throw std::invalid_argument("Trainer: no training data stream");
  if (train_->seq_plus_one() != shape_.seq + 1)
    throw std::invalid_argument("the training data gives samples of " +
                                std::to_string(train_->seq_plus_one()) + " tokens but model.seq_length=" +
                                std::to_string(shape_.seq) + " needs " + std::to_string(shape_.seq + 1));
  if (valid_ && valid_->seq_plus_one() != shape_.seq + 1)
    throw std::invalid_argument("the validation data gives samples of " +
                                std::to_string(valid_->seq_plus_one()) + " tokens, expected " +
                                std::to_string(shape_.seq + 1));

  micro_ = plan_.trainer.micro_batch_size;
  dp_ = ps.dp;
  dp_rank_ = parallel_->coords().dp;
  global_batch_ = plan_.trainer.global_batch_size > 0 ? plan_.trainer.global_batch_size
                                                      : int64_t(micro_) * dp_;
  check_batch(plan_, micro_, dp_, global_batch_);
  num_micro_ = int(global_batch_ / (int64_t(micro_) * dp_));
  flops_per_token_ = plan_.model.flops_per_token > 0 ? plan_.model.flops_per_token
                                                     : training_flops_per_token(shape_);

  params_ = std::make_unique<ParamStore>(backend_, build_param_layout(shape_, plan_.optimizer));
  init_params(*params_, uint64_t(plan_.trainer.seed));
  model_ = std::make_unique<Model>(shape_, micro_, parse_recompute(plan_.trainer.recompute), backend_,
                                   *params_);
  optimizer_ = std::make_unique<Optimizer>(Optimizer::from_plan(plan_));

  const int64_t N = model_->rows();
  const int64_t loss_rows = std::max<int64_t>(num_micro_, 1);
  losses_buf_ = backend_.alloc(size_t(loss_rows * N) * sizeof(float));
  losses_ = Tensor(losses_buf_, DType::f32, backend_.device(), {loss_rows, N});
  host_losses_.resize(size_t(loss_rows * N));
  host_tokens_.resize(size_t(micro_) * size_t(shape_.seq + 1));

  auto env_on = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v && std::string(v) != "0";
  };
  device_step_ = backend_.device() == kernels::Device::cuda && dp_ == 1 && !env_on("RECIPE_HOST_CLIP");
  if (device_step_) {
    norm_clip_buf_ = backend_.alloc(2 * sizeof(float));
    norm_clip_ = Tensor(norm_clip_buf_, DType::f32, backend_.device(), {2});
  }
  phase_timing_ = env_on("RECIPE_PHASE_TIMING");
}

Trainer::~Trainer() {
  model_.reset();
  params_.reset();
  if (losses_buf_) backend_.free(losses_buf_);
  if (norm_clip_buf_) backend_.free(norm_clip_buf_);
}

// Phase p ends now: synchronize and add the time since the previous mark (p = -1 only restarts).
void Trainer::phase_mark(int p) {
  if (!phase_timing_) return;
  backend_.synchronize();
  const double now =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (p >= 0) phase_ms_[p] += now - phase_t0_;
  phase_t0_ = now;
}

std::string Trainer::phase_report() const {
  if (!phase_timing_ || phase_steps_ == 0) return "";
  static const char* names[4] = {"forward+backward (all micro-batches)", "grad norm + clip + AdamW",
                                 "loss/norm read-back", "forward alone (one extra micro-batch)"};
  std::string r = "phase timing (RECIPE_PHASE_TIMING, mean ms/step over " + std::to_string(phase_steps_) +
                  " steps, synchronized between phases):\n";
  for (int i = 0; i < 4; ++i) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "  %-40s %9.3f ms\n", names[i], phase_ms_[i] / phase_steps_);
    r += buf;
  }
  return r;
}

// Micro-batch m of step s on this DP rank starts at consumed_samples(s) + m·(micro·dp) + rank·micro.
int64_t Trainer::first_sample(int s, int m) const {
  return int64_t(s) * global_batch_ + int64_t(m) * micro_ * dp_ + int64_t(dp_rank_) * micro_;
}

void Trainer::read_micro_batch(const data::SampleSource& src, int64_t first) {
  const size_t row = size_t(shape_.seq + 1);
  for (int b = 0; b < micro_; ++b) src.sample(first + b, host_tokens_.data() + size_t(b) * row);
}

// Σ of the first `count` per-token losses of losses_, in double, in a fixed order.
double Trainer::sum_losses(int64_t count) {
  backend_.to_host(host_losses_.data(), losses_.view({losses_.numel()}).rows(0, count));
  double s = 0;
  for (int64_t i = 0; i < count; ++i) s += double(host_losses_[size_t(i)]);
  return s;
}

double Trainer::compute_gradients(int s) {
  const int64_t N = model_->rows();
  const double total_tokens = double(global_batch_) * double(shape_.seq);
  const float dloss = float(1.0 / total_tokens);
  params_->zero_grads();
  for (int m = 0; m < num_micro_; ++m) {
    read_micro_batch(*train_, first_sample(s, m));
    model_->forward_backward(host_tokens_.data(), losses_.rows(m, 1).view({N}), dloss);
  }
  // Each DP rank holds the gradient of its share of the mean loss: the sum is the full gradient.
  parallel_->dp().all_reduce_sum(params_->grads());
  double loss_sum = parallel_->dp().all_reduce_sum(sum_losses(int64_t(num_micro_) * N));
  return loss_sum / total_tokens;
}

double Trainer::compute_loss(int s) {
  const int64_t N = model_->rows();
  for (int m = 0; m < num_micro_; ++m) {
    read_micro_batch(*train_, first_sample(s, m));
    model_->forward_loss(host_tokens_.data(), losses_.rows(m, 1).view({N}));
  }
  double loss_sum = parallel_->dp().all_reduce_sum(sum_losses(int64_t(num_micro_) * N));
  return loss_sum / (double(global_batch_) * double(shape_.seq));
}

double divergence_loss_limit(int vocab_size) { return 100.0 * std::log(double(std::max(2, vocab_size))); }

// The device path: forward/backward of every micro-batch, then norm, clip factor and the
// divergence guard on the device, AdamW reading the factor from device memory, and a single wait
// at the end for the loss and the norm. Same arithmetic as the host path (Σ in double, clip factor
// in double then f32), so losses match it bit for bit.
StepResult Trainer::step_on_device() {
  StepResult r;
  const int s = steps_done_;
  const int64_t N = model_->rows();
  const int64_t count = int64_t(num_micro_) * N;
  const double total_tokens = double(global_batch_) * double(shape_.seq);
  const float dloss = float(1.0 / total_tokens);
  phase_mark(-1);
  params_->zero_grads();
  for (int m = 0; m < num_micro_; ++m) {
    read_micro_batch(*train_, first_sample(s, m));
    model_->forward_backward(host_tokens_.data(), losses_.rows(m, 1).view({N}), dloss);
  }
  phase_mark(0);
  backend_.grad_norm_clip(norm_clip_, params_->grads(), float(plan_.optimizer.clip_grad),
                          losses_.view({losses_.numel()}).rows(0, count),
                          divergence_loss_limit(shape_.vocab) * total_tokens);
  optimizer_->step_device_scaled(*params_, s, norm_clip_);
  phase_mark(1);
  float nc[2];
  backend_.to_host(nc, norm_clip_);
  r.loss = sum_losses(count) / total_tokens;
  phase_mark(2);
  if (phase_timing_) {
    model_->forward_loss(host_tokens_.data(), losses_.rows(0, 1).view({N}));
    phase_mark(3);
    ++phase_steps_;
  }
  r.lr = optimizer_->schedule().at(s);
  r.grad_norm = nc[0];
  r.finite = std::isfinite(nc[1]);
  r.clip_factor = r.finite ? nc[1] : 1.0;
  if (r.finite) ++steps_done_;
  r.step = s + 1;
  r.consumed_samples = int64_t(s + 1) * global_batch_;
  last_loss_ = r.loss;
  return r;
}

StepResult Trainer::step() {
  if (device_step_) return step_on_device();
  StepResult r;
  const int s = steps_done_;
  r.loss = compute_gradients(s);
  r.lr = optimizer_->schedule().at(s);
  if (!std::isfinite(r.loss) || r.loss > divergence_loss_limit(shape_.vocab)) {
    r.finite = false;
    r.grad_norm = optimizer_->grad_norm(*params_, parallel_->tp());
  } else {
    // The grads differ across TP ranks (shards) and are equal across DP ranks (reduced above).
    OptimizerStepStats st = optimizer_->step(*params_, s, parallel_->tp());
    r.grad_norm = st.grad_norm;
    r.clip_factor = st.clip_factor;
    r.finite = st.applied;
  }
  if (r.finite) ++steps_done_;
  r.step = s + 1;
  r.consumed_samples = int64_t(s + 1) * global_batch_;
  last_loss_ = r.loss;
  return r;
}

double Trainer::evaluate() {
  if (!valid_) throw std::logic_error("Trainer::evaluate: this plan has no validation data");
  const int64_t N = model_->rows();
  const int iters = std::max(1, plan_.trainer.eval_iters);
  double sum = 0;
  for (int i = 0; i < iters; ++i) {
    read_micro_batch(*valid_, int64_t(i) * micro_ * dp_ + int64_t(dp_rank_) * micro_);
    model_->forward_loss(host_tokens_.data(), losses_.rows(0, 1).view({N}));
    sum += sum_losses(N);
  }
  sum = parallel_->dp().all_reduce_sum(sum);
  return sum / (double(iters) * double(N) * double(dp_));
}

}  // namespace recipe::core
