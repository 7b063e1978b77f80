#include "core/train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <stdexcept>

#include "core/model/init.hpp"
#include "plan/memory_estimate.hpp"

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

Trainer::Trainer(const plan::Plan& plan, kernels::Backend& backend, ParallelState* parallel)
    : Trainer(plan, backend, parallel, data::make_train_source(plan), data::make_valid_source(plan)) {}

Trainer::Trainer(const plan::Plan& plan, kernels::Backend& backend, ParallelState* parallel,
                 std::unique_ptr<data::SampleSource> train, std::unique_ptr<data::SampleSource> valid)
    : plan_(plan),
      backend_(backend),
      parallel_(parallel),
      shape_(model_shape(plan)),
      train_(std::move(train)),
      valid_(std::move(valid)) {
  if (!parallel_) {
    owned_parallel_ = std::make_unique<ParallelState>(ParallelState::single_process());
    parallel_ = owned_parallel_.get();
  }
  // The plan is resolved (dsl/resolve_*): cp = 1, no sequence parallelism, the batch divides
  // micro × dp, tp divides the heads and KV heads, and every stage has layers. Nothing is re-checked.
  const ParallelSizes& ps = parallel_->sizes();
  if (!train_) throw std::invalid_argument("Trainer: no training data stream");
  if (train_->seq_plus_one() != shape_.seq + 1)
    throw std::invalid_argument("the training data gives samples of " + std::to_string(train_->seq_plus_one()) +
                                " tokens but model.seq_length=" + std::to_string(shape_.seq) + " needs " +
                                std::to_string(shape_.seq + 1));
  if (valid_ && valid_->seq_plus_one() != shape_.seq + 1)
    throw std::invalid_argument("the validation data gives samples of " + std::to_string(valid_->seq_plus_one()) +
                                " tokens, expected " + std::to_string(shape_.seq + 1));

  micro_ = plan_.trainer.micro_batch_size;
  dp_ = ps.dp;
  dp_rank_ = parallel_->coords().dp;
  global_batch_ = plan_.trainer.global_batch_size;
  num_micro_ = plan_.trainer.num_micro_batches;
  flops_per_token_ = plan_.model.flops_per_token;
  pp_ = ps.pp;
  pp_rank_ = parallel_->coords().pp;
  const bool zero1 = plan_.parallelism.zero1;
  LayoutOptions lo;
  lo.tp_size = ps.tp;
  lo.tp_rank = parallel_->coords().tp;
  const std::vector<int>& counts = plan_.parallelism.stage_num_layers;
  // Indexed by stage below: an unresolved plan (no derived split) must not read out of bounds.
  if (int(counts.size()) != pp_ || num_micro_ < 1)
    throw std::logic_error(
        "Trainer: the plan is not resolved (parallelism.stage_num_layers, trainer.num_micro_batches)");
  // The loss buffer holds num_micro rows and each step reads num_micro × micro samples per DP rank:
  // a plan edited after resolving (global batch no longer num_micro × micro × dp) must not pass.
  if (int64_t(num_micro_) * micro_ * dp_ != global_batch_)
    throw std::invalid_argument(
        "trainer.global_batch_size=" + std::to_string(global_batch_) +
        " is not trainer.num_micro_batches × trainer.micro_batch_size × dp = " + std::to_string(num_micro_) + " × " +
        std::to_string(micro_) + " × " + std::to_string(dp_) + "; resolve the plan again (recipe validate)");
  for (int i = 0; i < pp_rank_; ++i) lo.first_layer += counts[size_t(i)];
  lo.num_layers = counts[size_t(pp_rank_)];
  lo.first_stage = parallel_->first_stage();
  lo.last_stage = parallel_->last_stage();
  // ZeRO-1 splits every bucket into dp equal chunks: align packs to dp·kParamAlign.
  lo.align = zero1 ? kParamAlign * dp_ : kParamAlign;
  ParamLayout layout = build_param_layout(shape_, plan_.optimizer, lo);
  const int64_t bucket_elems = int64_t(std::max(0.0, plan_.parallelism.grad_bucket_mb) * 1024.0 * 1024.0 / 4.0);
  grad_sync_ = std::make_unique<GradSync>(layout, parallel_->dp(), zero1, bucket_elems);
  adam_segments_ = grad_sync_->optimizer_segments(layout);
  norm_ranges_ = grad_sync_->norm_ranges(layout, parallel_->coords(), shape_.tied);
  params_ = std::make_unique<ParamStore>(backend_, std::move(layout), grad_sync_->state_numel());
  init_params(*params_, uint64_t(plan_.trainer.seed));
  // 1F1B keeps at most pp - stage micro-batches in flight on a stage.
  const int slots = pp_ == 1 ? 1 : std::min(num_micro_, pp_ - pp_rank_);
  model_ = std::make_unique<Model>(shape_, micro_, parse_recompute(plan_.trainer.recompute), backend_, *params_,
                                   &parallel_->tp(), slots);
  optimizer_ = std::make_unique<Optimizer>(Optimizer::from_plan(plan_));
  loss_holder_ = parallel_->last_stage() && parallel_->coords().tp == 0;

  const int64_t N = model_->rows();
  const int64_t loss_rows = num_micro_;
  losses_buf_ = backend_.alloc(size_t(loss_rows * N) * sizeof(float));
  losses_ = Tensor(losses_buf_, DType::f32, backend_.device(), {loss_rows, N});
  host_losses_.resize(size_t(loss_rows * N));
  host_tokens_.resize(size_t(micro_) * size_t(shape_.seq + 1));

  device_step_ =
      backend_.device() == kernels::Device::cuda && parallel_->world_size() == 1 && !zero1 && !plan_.kernels.host_clip;
  if (device_step_) {
    norm_clip_buf_ = backend_.alloc(2 * sizeof(float));
    norm_clip_ = Tensor(norm_clip_buf_, DType::f32, backend_.device(), {2});
  }
  phase_timing_ = plan_.kernels.phase_timing;

  if (!plan_.trainer.cuda_graph)
    graph_status_ = "trainer.cuda_graph=false";
  else if (!device_step_)
    graph_status_ =
        "the step is not the single-rank CUDA device step (CPU, several ranks, ZeRO-1 or kernels.host_clip=true)";
  else if (phase_timing_)
    graph_status_ = "kernels.phase_timing=true synchronizes inside the step";
  else
    graph_wanted_ = true;
  if (graph_wanted_) {
    try {
      staging_tokens_ =
          static_cast<int32_t*>(backend_.alloc_host(size_t(num_micro_) * 2 * size_t(N) * sizeof(int32_t)));
      staging_schedule_ = static_cast<float*>(backend_.alloc_host(3 * sizeof(float)));
    } catch (const std::exception& e) {
      graph_wanted_ = false;
      graph_status_ = std::string("page-locked staging: ") + e.what();
      std::cerr << "recipe: the training step runs without a CUDA graph (" << graph_status_ << ")\n";
    }
  }
  if (graph_wanted_) {
    schedule_buf_ = backend_.alloc(3 * sizeof(float));
    schedule_ = Tensor(schedule_buf_, DType::f32, backend_.device(), {3});
  }
}

Trainer::~Trainer() {
  graph_.reset();
  if (staging_tokens_) backend_.free_host(staging_tokens_);
  if (staging_schedule_) backend_.free_host(staging_schedule_);
  if (schedule_buf_) backend_.free(schedule_buf_);
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
  std::string r = "phase timing (kernels.phase_timing, mean ms/step over " + std::to_string(phase_steps_) +
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

void Trainer::forward_micro(const data::SampleSource& src, int64_t first_sample, int m, bool with_grad, float dloss) {
  const int64_t N = model_->rows();
  read_micro_batch(src, first_sample);
  model_->load_tokens(slot_of(m), host_tokens_.data());
  model_->forward(slot_of(m), with_grad, losses_.rows(m, 1).view({N}), dloss);
}

// The step's last backward reports its phases to the DP reduction, which starts each bucket as
// soon as its gradients are final.
void Trainer::backward_micro(int m, int count) {
  if (m == count - 1) {
    grad_sync_->begin();
    model_->set_phase_hook([this](int phase) { grad_sync_->on_phase(*params_, phase); });
  }
  model_->backward(slot_of(m));
  model_->set_phase_hook({});
}

double Trainer::run_micro_batches(const data::SampleSource& src, const std::function<int64_t(int)>& sample_of,
                                  bool with_grad, int count) {
  const int64_t N = model_->rows();
  const float dloss = float(1.0 / (double(global_batch_) * double(shape_.seq)));
  Comm& pp = parallel_->pp();
  const bool first = parallel_->first_stage(), last = parallel_->last_stage();
  const int prev = pp_rank_ - 1, next = pp_rank_ + 1;
  using kernels::Tensor;
  auto recv_fwd = [&](int m) {
    if (!first) pp.send_recv(Tensor(), -1, model_->stage_input(slot_of(m)), prev);
  };
  auto send_fwd = [&](int m) {
    if (!last) pp.send_recv(model_->stage_output(slot_of(m)), next, Tensor(), -1);
  };
  auto recv_bwd = [&](int m) {
    if (!last) pp.send_recv(Tensor(), -1, model_->stage_output_grad(slot_of(m)), next);
  };
  auto send_bwd = [&](int m) {
    if (!first) pp.send_recv(model_->stage_input_grad(slot_of(m)), prev, Tensor(), -1);
  };

  if (!with_grad) {
    for (int m = 0; m < count; ++m) {
      recv_fwd(m);
      forward_micro(src, sample_of(m), m, false, 0.0f);
      send_fwd(m);
    }
  } else if (pp_ == 1) {
    for (int m = 0; m < count; ++m) {
      forward_micro(src, sample_of(m), m, true, dloss);
      backward_micro(m, count);
    }
  } else {
    // 1F1B (Megatron's non-interleaved schedule): warm-up forwards, then one forward and one
    // backward alternating, then the remaining backwards. Sends and receives that cross in the
    // steady state go as one send_recv, so neighbours never wait on each other in a cycle.
    const int warmup = std::min(pp_ - pp_rank_ - 1, count);
    const int steady = count - warmup;
    for (int m = 0; m < warmup; ++m) {
      recv_fwd(m);
      forward_micro(src, sample_of(m), m, true, dloss);
      send_fwd(m);
    }
    if (steady > 0) recv_fwd(warmup);
    for (int i = 0; i < steady; ++i) {
      const int mf = warmup + i, mb = i;
      forward_micro(src, sample_of(mf), mf, true, dloss);
      if (!last) pp.send_recv(model_->stage_output(slot_of(mf)), next, model_->stage_output_grad(slot_of(mb)), next);
      backward_micro(mb, count);
      if (i == steady - 1)
        send_bwd(mb);
      else if (!first)
        pp.send_recv(model_->stage_input_grad(slot_of(mb)), prev, model_->stage_input(slot_of(mf + 1)), prev);
    }
    for (int i = 0; i < warmup; ++i) {
      const int mb = steady + i;
      recv_bwd(mb);
      backward_micro(mb, count);
      send_bwd(mb);
    }
  }

  if (with_grad) {
    params_->end_grad_writes();
    // The tied word embedding lives on the first and the last stage: both need the sum.
    if (pp_ > 1 && shape_.tied && (first || last))
      parallel_->embedding().all_reduce_sum(params_->grad("embedding.word.weight"));
    grad_sync_->finish(*params_);
  }
  return loss_holder_ ? sum_losses(int64_t(count) * N) : 0.0;
}

double Trainer::world_loss_sum(double local) { return parallel_->world().all_reduce_sum(local); }

double Trainer::compute_gradients(int s) {
  params_->begin_grad_writes();
  const double local = run_micro_batches(
      *train_, [&](int m) { return first_sample(s, m); }, true, num_micro_);
  return world_loss_sum(local) / (double(global_batch_) * double(shape_.seq));
}

double Trainer::compute_loss(int s) {
  const double local = run_micro_batches(
      *train_, [&](int m) { return first_sample(s, m); }, false, num_micro_);
  return world_loss_sum(local) / (double(global_batch_) * double(shape_.seq));
}

double Trainer::global_grad_norm() {
  double sq = 0;
  for (const auto& [a, b] : norm_ranges_) sq += backend_.sum_squares(params_->grad_span(a, b - a));
  return std::sqrt(parallel_->world().all_reduce_sum(sq));
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
  if (graph_wanted_) {
    stage_step_inputs(s);
    if (graph_warm_ && !graph_) capture_step();
  }
  if (graph_) {
    graph_->launch();
    ++graph_steps_;
  } else if (graph_wanted_) {
    enqueue_recordable_step();  // the warm-up: the same work as the graph, run eagerly
    graph_warm_ = true;
  } else {
    phase_mark(-1);
    params_->begin_grad_writes();
    for (int m = 0; m < num_micro_; ++m) {
      read_micro_batch(*train_, first_sample(s, m));
      model_->forward_backward(host_tokens_.data(), losses_.rows(m, 1).view({N}), dloss);
    }
    params_->end_grad_writes();
    phase_mark(0);
    backend_.grad_norm_clip(norm_clip_, params_->grads(), float(plan_.optimizer.clip_grad),
                            losses_.view({losses_.numel()}).rows(0, count),
                            divergence_loss_limit(shape_.vocab) * total_tokens);
    optimizer_->step_device_scaled(*params_, s, norm_clip_);
    phase_mark(1);
  }
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

// Step s's tokens, split into inputs and targets per micro-batch and checked against the
// vocabulary (the check Model::load_tokens makes), and its AdamW scalars, into the page-locked
// staging the recorded step reads. Every step ends with a read-back that waits for the stream,
// so no launch is still reading the staging here; the synchronize only guards that invariant.
void Trainer::stage_step_inputs(int s) {
  backend_.synchronize();
  const int T = shape_.seq;
  const int64_t N = model_->rows();
  for (int m = 0; m < num_micro_; ++m) {
    read_micro_batch(*train_, first_sample(s, m));
    int32_t* inputs = staging_tokens_ + size_t(2 * m) * size_t(N);
    int32_t* targets = inputs + N;
    for (int b = 0; b < micro_; ++b) {
      const int32_t* row = host_tokens_.data() + size_t(b) * size_t(T + 1);
      for (int t = 0; t <= T; ++t)
        if (row[t] < 0 || row[t] >= shape_.vocab)
          throw std::runtime_error("token id " + std::to_string(row[t]) + " (sample row " + std::to_string(b) +
                                   ", position " + std::to_string(t) +
                                   ") is outside model.vocab_size=" + std::to_string(shape_.vocab) +
                                   "; the data was tokenized with a different vocabulary than the "
                                   "model's (check data.tokenizer and model.vocab_size)");
      for (int t = 0; t < T; ++t) {
        inputs[size_t(b) * T + t] = row[t];
        targets[size_t(b) * T + t] = row[t + 1];
      }
    }
  }
  const kernels::AdamWSchedule sc = optimizer_->device_schedule(s);
  staging_schedule_[0] = sc.lr;
  staging_schedule_[1] = sc.inv_bias_correction1;
  staging_schedule_[2] = sc.inv_bias_correction2;
}

// The device step with every per-step value read from memory: the staging (copy nodes when
// recorded), the schedule scalars, the clip factor. Launches the kernels of the uncaptured
// device step in the same order with the same arguments, so results are bitwise the same.
void Trainer::enqueue_recordable_step() {
  const int64_t N = model_->rows();
  const int64_t count = int64_t(num_micro_) * N;
  const double total_tokens = double(global_batch_) * double(shape_.seq);
  const float dloss = float(1.0 / total_tokens);
  backend_.from_host_async(schedule_, staging_schedule_);
  params_->begin_grad_writes();
  for (int m = 0; m < num_micro_; ++m) {
    const int32_t* inputs = staging_tokens_ + size_t(2 * m) * size_t(N);
    backend_.from_host_async(model_->input_tokens(0), inputs);
    backend_.from_host_async(model_->target_tokens(0), inputs + N);
    model_->forward(0, true, losses_.rows(m, 1).view({N}), dloss);
    model_->backward(0);
  }
  params_->end_grad_writes();
  backend_.grad_norm_clip(norm_clip_, params_->grads(), float(plan_.optimizer.clip_grad),
                          losses_.view({losses_.numel()}).rows(0, count),
                          divergence_loss_limit(shape_.vocab) * total_tokens);
  optimizer_->step_device_recorded(*params_, norm_clip_, schedule_);
}

void Trainer::capture_step() {
  std::string why;
  graph_ = backend_.record([this] { enqueue_recordable_step(); }, why);
  if (graph_) {
    graph_status_.clear();
    return;
  }
  graph_wanted_ = false;
  graph_status_ = "capture failed: " + why;
  std::cerr << "recipe: the training step could not be captured in a CUDA graph (" << why << "); it runs uncaptured\n";
}

StepResult Trainer::step() {
  if (device_step_) return step_on_device();
  StepResult r;
  const int s = steps_done_;
  r.loss = compute_gradients(s);
  r.lr = optimizer_->schedule().at(s);
  r.grad_norm = global_grad_norm();
  // Every rank sees the same world-reduced loss and norm, so all take the same branch.
  if (!std::isfinite(r.loss) || r.loss > divergence_loss_limit(shape_.vocab) || !std::isfinite(r.grad_norm)) {
    r.finite = false;
  } else {
    const double clip = plan_.optimizer.clip_grad;
    if (clip > 0) r.clip_factor = std::min(1.0, clip / (r.grad_norm + 1e-6));
    optimizer_->apply(*params_, s, float(r.clip_factor), nullptr, adam_segments_);
    grad_sync_->gather_weights(*params_);
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
  // The same samples at every evaluation: iteration i reads micro·dp of them, this DP rank its part.
  double sum = 0;
  for (int i = 0; i < iters; ++i)
    sum += run_micro_batches(
        *valid_, [&](int) { return int64_t(i) * micro_ * dp_ + int64_t(dp_rank_) * micro_; }, false, 1);
  sum = world_loss_sum(sum);
  return sum / (double(iters) * double(N) * double(dp_));
}

}  // namespace recipe::core
