#include "core/train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <stdexcept>

#include "family/tensor_table.hpp"
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
  // The plan is resolved (dsl/resolve_*): seq % (2·cp) == 0 (cp only without sequence parallelism
  // or virtual stages), sequence parallelism only with tp > 1 and rows divisible by tp, the batch
  // divides micro × dp, tp divides the heads and KV heads, and every stage has layers. Nothing is
  // re-checked.
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
  const int vpp = std::max(1, plan_.parallelism.virtual_pp);
  const bool zero1 = plan_.parallelism.zero1;
  LayoutOptions lo;
  lo.tp_size = ps.tp;
  lo.tp_rank = parallel_->coords().tp;
  const std::vector<int>& counts = plan_.parallelism.stage_num_layers;
  // Indexed by virtual stage below: an unresolved plan (no derived split) must not read out of bounds.
  if (int(counts.size()) != pp_ * vpp || num_micro_ < 1)
    throw std::logic_error(
        "Trainer: the plan is not resolved (parallelism.stage_num_layers, trainer.num_micro_batches)");
  // The loss buffer holds num_micro rows and each step reads num_micro × micro samples per DP rank:
  // a plan edited after resolving (global batch no longer num_micro × micro × dp) must not pass.
  if (int64_t(num_micro_) * micro_ * dp_ != global_batch_)
    throw std::invalid_argument(
        "trainer.global_batch_size=" + std::to_string(global_batch_) +
        " is not trainer.num_micro_batches × trainer.micro_batch_size × dp = " + std::to_string(num_micro_) + " × " +
        std::to_string(micro_) + " × " + std::to_string(dp_) + "; resolve the plan again (recipe validate)");
  // This rank's model chunks: virtual stages pp_rank, pp_rank + pp, ... (Megatron's assignment).
  for (int c = 0; c < vpp; ++c) {
    const int vs = pp_rank_ + c * pp_;
    LayerChunk chunk{.num_layers = counts[size_t(vs)], .first_stage = vs == 0, .last_stage = vs == pp_ * vpp - 1};
    for (int i = 0; i < vs; ++i) chunk.first_layer += counts[size_t(i)];
    lo.chunks.push_back(chunk);
  }
  // ZeRO-1 splits every bucket into dp equal chunks: align packs to dp·kParamAlign.
  lo.align = zero1 ? kParamAlign * dp_ : kParamAlign;
  ParamLayout layout = build_param_layout(shape_, plan_.optimizer, lo);
  const int64_t bucket_elems = int64_t(plan_.parallelism.grad_bucket_mb * 1024.0 * 1024.0 / 4.0);
  grad_sync_ = std::make_unique<GradSync>(layout, parallel_->dp(), zero1, bucket_elems,
                                          plan_.parallelism.grad_reduce_bf16 ? &backend_ : nullptr);
  grad_sync_->set_overlap_gather(plan_.parallelism.zero1_overlap_gather);
  norm_ranges_ = grad_sync_->norm_ranges(layout, parallel_->coords(), shape_.arch.tied);
  params_ = std::make_unique<ParamStore>(backend_, std::move(layout));
  // The optimizer (optimizer.kind) owns its state over this rank's segments (ZeRO-1: its chunks),
  // allocated right after the parameters, where the ParamStore used to hold it.
  optimizer_ =
      make_optimizer(plan_, backend_, grad_sync_->optimizer_segments(params_->layout()), grad_sync_->state_numel());
  init_params(*params_, uint64_t(plan_.trainer.seed));
  // The micro-batches each chunk keeps in flight under the schedule (1F1B: at most pp - stage).
  const std::vector<int> slots = pipeline_slots(pp_, pp_rank_, vpp, num_micro_);
  std::vector<Model*> models;
  for (int c = 0; c < vpp; ++c) {
    chunks_.push_back(std::make_unique<Model>(shape_, micro_, checked_recompute(plan_.trainer.recompute), backend_,
                                              *params_, &parallel_->tp(), slots[size_t(c)], c,
                                              c ? chunks_[0].get() : nullptr, &parallel_->cp()));
    models.push_back(chunks_.back().get());
  }
  // ZeRO-1's overlapped weight gather: each chunk's forward waits for the buckets of the weights
  // it is about to read (a no-op without it).
  for (auto& chunk : chunks_) chunk->set_weights_hook([this](int phase) { grad_sync_->wait_weights(phase); });
  // peft.base_fp8_only: the frozen FP8 weights, cast once from the init (a load casts them again).
  for (auto& chunk : chunks_) chunk->quantize_frozen_base();
  model_ = chunks_[0].get();
  schedule_ =
      std::make_unique<PipelineSchedule>(models, parallel_->pp(), pp_, pp_rank_, plan_.parallelism.pp_comm_overlap);
  loader_ = std::make_unique<TokenLoader>(micro_, shape_.seq, shape_.arch.vocab, ps.cp, parallel_->coords().cp);
  loss_holder_ = parallel_->last_stage() && parallel_->coords().tp == 0;

  const int64_t N = model_->rows();
  const int64_t loss_rows = num_micro_;
  losses_buf_ = backend_.alloc(size_t(loss_rows * N) * sizeof(float));
  losses_ = Tensor(losses_buf_, DType::f32, backend_.device(), {loss_rows, N});
  host_losses_.resize(size_t(loss_rows * N));

  // Every CUDA step stays on the device (norm, clip, guard, AdamW; with several ranks the norm's
  // and the loss's sums are all-reduced over the world by NCCL in between), unless
  // kernels.host_clip asks for the host path. The CPU keeps the host step.
  device_step_ = backend_.device() == kernels::Device::cuda && !plan_.kernels.host_clip;
  if (device_step_) {
    norm_clip_buf_ = backend_.alloc(2 * sizeof(float));
    norm_clip_ = Tensor(norm_clip_buf_, DType::f32, backend_.device(), {2});
    if (parallel_->world_size() > 1) {
      world_sums_buf_ = backend_.alloc(2 * sizeof(double));
      world_sums_ = Tensor(world_sums_buf_, DType::f64, backend_.device(), {2});
    }
  }
  const bool phase_timing = plan_.kernels.phase_timing;
  phases_ = std::make_unique<PhaseTimer>(backend_, phase_timing);

  // The objective's per-row weights, allocated after the step's other buffers.
  loss_ = make_loss(plan_, {.backend = &backend_,
                            .train = train_.get(),
                            .global_batch = global_batch_,
                            .seq = shape_.seq,
                            .micro_batches = num_micro_,
                            .rows = N});
  std::string graph_off;  // why the step is not captured; "" = capture it
  if (!plan_.trainer.cuda_graph)
    graph_off = "trainer.cuda_graph=false";
  else if (!device_step_)
    graph_off = "the step is not the CUDA device step (CPU, or kernels.host_clip=true)";
  else if (phase_timing)
    graph_off = "kernels.phase_timing=true synchronizes inside the step";
  else if (shape_.lora_dropout > 0.f)
    graph_off = "peft.dropout>0 keys each step's adapter dropout masks by its samples, which a recording would fix";
  else
    graph_off = loss_->graph_off();  // an objective whose per-row weights change every step
  graph_ = std::make_unique<StepGraph>(backend_, num_micro_, N, graph_off);
  if (graph_->on())
    if (std::string why = optimizer_->enable_graph_staging(); !why.empty()) graph_->turn_off(why);
}

Trainer::~Trainer() {
  graph_.reset();
  loss_.reset();
  while (!chunks_.empty()) chunks_.pop_back();  // the later chunks borrow the first one's transient region
  params_.reset();
  if (losses_buf_) backend_.free(losses_buf_);
  if (norm_clip_buf_) backend_.free(norm_clip_buf_);
  if (world_sums_buf_) backend_.free(world_sums_buf_);
}

// Micro-batch m of step s on this DP rank starts at consumed_samples(s) + m·(micro·dp) + rank·micro.
int64_t Trainer::first_sample(int s, int m) const {
  return int64_t(s) * global_batch_ + int64_t(m) * micro_ * dp_ + int64_t(dp_rank_) * micro_;
}

double divergence_loss_limit(int vocab_size) { return 100.0 * std::log(double(std::max(2, vocab_size))); }

// One optimizer step, top to bottom like llm.c's training section: per micro-batch load the
// tokens, forward, backward (and reduce over DP); then the global grad norm, the clip factor with
// the divergence guard, and the AdamW update at the step's learning rate.
//
// The host step (CPU, or kernels.host_clip) reads the world-reduced loss and norm back and
// decides there. The device step (CUDA, any number of ranks) keeps norm, clip factor and guard on
// the device, so nothing waits between backward and AdamW (several ranks all-reduce the norm's
// and the loss's sums on the device); its one wait is the read-back of loss and norm, and its
// work, NCCL collectives included, runs as one CUDA-graph launch once captured (StepGraph).
StepResult Trainer::step() {
  const int s = steps_done_;
  StepResult r;
  if (device_step_) {
    loss_->prepare(s);                       // step s's per-row loss weights (outside any recording)
    if (graph_->on()) stage_step_inputs(s);  // step s's tokens and AdamW scalars
    // Warm-up, capture or replay; the step runs uncaptured when the graph is off.
    if (!graph_->run([this, s] { enqueue_device_step(s, true); })) enqueue_device_step(s, false);
    float nc[2];                       // ‖g‖, clip factor (NaN: the guard skipped the update)
    backend_.to_host(nc, norm_clip_);  // the step's one wait
    if (world_sums_.defined()) {
      double sums[2];  // world Σ g², world Σ losses (complete: the wait above covered them)
      backend_.to_host(sums, world_sums_);
      r.loss = loss_->value(s, sums[1]);
    } else {
      r.loss = loss_->value(s, sum_losses(int64_t(num_micro_) * model_->rows()));
    }
    phases_->mark(PhaseTimer::read_back);
    if (phases_->on()) time_forward_alone();
    r.grad_norm = nc[0];
    r.finite = std::isfinite(nc[1]);
    r.clip_factor = r.finite ? nc[1] : 1.0;
  } else {
    r.loss = compute_gradients(s);  // the micro-batches through the pipeline schedule, DP-reduced
    r.grad_norm = global_grad_norm();
    // Every rank sees the same world-reduced loss and norm, so all take the same branch.
    r.finite =
        std::isfinite(r.loss) && r.loss <= divergence_loss_limit(shape_.arch.vocab) && std::isfinite(r.grad_norm);
    if (r.finite) {
      const double clip = plan_.optimizer.clip_grad;
      if (clip > 0) r.clip_factor = std::min(1.0, clip / (r.grad_norm + 1e-6));
      optimizer_->step(*params_, s, float(r.clip_factor));
      grad_sync_->weights_updated(*params_);
    }
  }
  r.lr = optimizer_->schedule().at(s);
  if (r.finite) ++steps_done_;
  r.step = s + 1;
  r.consumed_samples = int64_t(s + 1) * global_batch_;
  last_loss_ = r.loss;
  return r;
}

// The device step's work in launch order: per micro-batch the tokens, forward, backward; then
// norm, clip factor and the divergence guard on the device (Backend::grad_norm_clip) and AdamW
// reading the factor from device memory. Same arithmetic as the host step (Σ in double, clip
// factor in double then f32), so losses match it bit for bit.
// staged: the per-step values come from the graph's staging (the warm-up and the recording read
// nothing from the host; the recording replays this for every later step). Otherwise step s's
// tokens are read here and AdamW takes its scalars as arguments: the same kernels, same values.
void Trainer::enqueue_device_step(int s, bool staged) {
  const int64_t N = model_->rows();
  phases_->start();
  if (staged) optimizer_->upload_staged();
  enqueue_micro_batches(
      *train_, [&](int m) { return first_sample(s, m); }, true, num_micro_, staged);
  phases_->mark(PhaseTimer::forward_backward);
  const Tensor losses = losses_.view({losses_.numel()}).rows(0, int64_t(num_micro_) * N);
  const float clip = float(plan_.optimizer.clip_grad);
  const double loss_limit = divergence_loss_limit(shape_.arch.vocab) * loss_->denominator(s);
  if (!world_sums_.defined()) {
    backend_.grad_norm_clip(norm_clip_, params_->grads(), clip, losses, loss_limit);
  } else {
    // This rank's share of ‖g‖² (the ranges it counts: each parameter once over the world) and of
    // the loss (the rank that holds it), summed over the world, then the clip factor from those.
    std::vector<Tensor> counted;
    for (const auto& [a, b] : norm_ranges_) counted.push_back(params_->grad_span(a, b - a));
    backend_.norm_loss_sums(world_sums_, counted, loss_holder_ ? losses : Tensor());
    parallel_->world().all_reduce_sum(world_sums_);
    backend_.clip_from_sums(norm_clip_, world_sums_, clip, loss_limit);
  }
  if (staged)
    optimizer_->step_recorded(*params_, norm_clip_);
  else
    optimizer_->step_device(*params_, s, norm_clip_);
  // ZeRO-1: every rank's updated chunks to every rank, now or (overlapped) during the next forward.
  grad_sync_->weights_updated(*params_);
  phases_->mark(PhaseTimer::update);
}

// Step s's tokens, checked and split per micro-batch, and its AdamW scalars into the staging the
// graph's copy nodes read.
void Trainer::stage_step_inputs(int s) {
  graph_->begin_staging();
  for (int m = 0; m < num_micro_; ++m)
    loader_->split(*train_, first_sample(s, m), graph_->inputs(m), graph_->targets(m));
  optimizer_->stage(s);
}

// Phase timing: one more forward of the micro-batch read last, timed alone (it overwrites loss
// row 0, which was read back already).
void Trainer::time_forward_alone() {
  loader_->reload(*model_, 0);
  model_->forward(0, false, losses_.rows(0, 1).view({model_->rows()}), Tensor());
  phases_->mark(PhaseTimer::forward_alone);
  phases_->end_step();
}

double Trainer::compute_gradients(int s) {
  loss_->prepare(s);
  const double local = run_micro_batches(
      *train_, [&](int m) { return first_sample(s, m); }, true, num_micro_);
  return loss_->value(s, world_loss_sum(local));
}

double Trainer::compute_loss(int s) {
  const double local = run_micro_batches(
      *train_, [&](int m) { return first_sample(s, m); }, false, num_micro_);
  return loss_->value(s, world_loss_sum(local));
}

double Trainer::run_micro_batches(const data::SampleSource& src, const std::function<int64_t(int)>& sample_of,
                                  bool with_grad, int count) {
  enqueue_micro_batches(src, sample_of, with_grad, count, false);
  return loss_holder_ ? sum_losses(int64_t(count) * model_->rows()) : 0.0;
}

// The micro-batches through the pipeline schedule (forward, backward with the DP reduction
// started per bucket and finished at the end); enqueued work only, nothing waits for the host.
// staged: the tokens come from the CUDA graph's staging (micro-batch m's into its slot).
void Trainer::enqueue_micro_batches(const data::SampleSource& src, const std::function<int64_t(int)>& sample_of,
                                    bool with_grad, int count, bool staged) {
  const int64_t N = model_->rows();
  auto forward = [&](int chunk, int m, int slot) {
    Model& model = *chunks_[size_t(chunk)];
    if (staged)
      graph_->upload_tokens(m, model.input_tokens(slot), model.target_tokens(slot));
    else
      loader_->load(src, sample_of(m), model, slot);
    model.set_first_token(slot, sample_of(m) * shape_.seq);  // keys the adapter dropout mask
    model.forward(slot, with_grad, losses_.rows(m, 1).view({N}), with_grad ? loss_->dloss(m) : Tensor());
  };
  // The weights stay fixed over the micro-batches: FP8 linears cast theirs once for all of them
  // (and, under delayed scaling, record the amaxes of a pass that computes gradients).
  for (auto& chunk : chunks_) chunk->fp8_weight_pass(true, with_grad);
  if (!with_grad) {
    grad_sync_->complete_weights(*params_);  // evaluation reads the weights outside a step
    schedule_->forward(count, forward);
  } else {
    // ZeRO-1, overlapped: the last update's weights arrive bucket by bucket while forward runs.
    grad_sync_->start_weight_gathers(*params_);
    params_->begin_grad_writes();
    schedule_->train(count, forward, [&](int chunk, int m, int slot) { backward_micro(chunk, m, slot, count); });
    params_->end_grad_writes();
    // The tied word embedding lives on the first and the last stage: both need the sum (unless it
    // is frozen: a LoRA base).
    if (pp_ > 1 && shape_.arch.tied && !shape_.lora() && (parallel_->first_stage() || parallel_->last_stage()))
      parallel_->embedding().all_reduce_sum(params_->grad(word_embedding_name()));
    grad_sync_->finish(*params_);
    sum_over_context_parallel();
    fp8_end_step();
  }
  for (auto& chunk : chunks_) chunk->fp8_weight_pass(false);
}

// FP8 delayed scaling, once per step after the backward: every chunk's amaxes of the step go into
// its histories, max-reduced over the ranks that hold the same layers (TP, CP, DP: one packed
// all-reduce per group of more than one rank) so their scales stay identical.
void Trainer::fp8_end_step() {
  if (shape_.fp8_history_len == 0) return;
  std::vector<Comm*> groups;
  for (Comm* g : {&parallel_->tp(), &parallel_->cp(), &parallel_->dp()})
    if (g->size() > 1) groups.push_back(g);
  for (auto& chunk : chunks_) chunk->fp8_end_step(groups);
}

// The step's last backward of each chunk reports its phases to the DP reduction, which starts
// each bucket as soon as its gradients are final. The last chunk's comes first (the schedule runs
// a micro-batch's backwards last chunk first), so the phases arrive in order.
void Trainer::backward_micro(int chunk, int m, int slot, int count) {
  Model& model = *chunks_[size_t(chunk)];
  if (m == count - 1) {
    if (chunk == num_chunks() - 1) grad_sync_->begin();
    model.set_phase_hook([this](int phase) { grad_sync_->on_phase(*params_, phase); });
  }
  model.backward(slot);
  model.set_phase_hook({});
}

// Σ of the first `count` per-token losses of losses_, in double, in a fixed order.
double Trainer::sum_losses(int64_t count) {
  backend_.to_host(host_losses_.data(), losses_.view({losses_.numel()}).rows(0, count));
  double s = 0;
  for (int64_t i = 0; i < count; ++i) s += double(host_losses_[size_t(i)]);
  return s;
}

double Trainer::world_loss_sum(double local) { return parallel_->world().all_reduce_sum(local); }

// Context parallelism: each CP rank's gradients are its tokens' share; every parameter's gradient is
// their sum (Megatron reduces over dp × cp). After the DP reduction one sum over the CP group gives
// it (under ZeRO-1 the owned chunks are the ones that count: the CP ranks of a DP rank own the same).
void Trainer::sum_over_context_parallel() {
  if (parallel_->sizes().cp > 1) parallel_->cp().all_reduce_sum(params_->grads());
}

double Trainer::global_grad_norm() {
  double sq = 0;
  // Each parameter once over the world (norm_ranges: TP, PP, DP and CP replicas counted once).
  for (const auto& [a, b] : norm_ranges_) sq += backend_.sum_squares(params_->grad_span(a, b - a));
  return std::sqrt(parallel_->world().all_reduce_sum(sq));
}

double Trainer::evaluate() {
  if (!valid_) throw std::logic_error("Trainer::evaluate: this plan has no validation data");
  const int64_t N = model_->rows();
  // The first trainer.eval_samples samples of the split at every evaluation and every layout:
  // iteration i reads micro·dp of them, this DP rank its part (eval_micro_batches ≥ 1: resolver).
  const int iters = plan_.trainer.eval_micro_batches;
  double sum = 0;
  for (int i = 0; i < iters; ++i)
    sum += run_micro_batches(
        *valid_, [&](int) { return int64_t(i) * micro_ * dp_ + int64_t(dp_rank_) * micro_; }, false, 1);
  sum = world_loss_sum(sum);
  // N is this rank's tokens: the CP ranks of a DP rank together hold cp·N of each micro-batch.
  if (!valid_->loss_masked()) return sum / (double(iters) * double(N) * double(dp_) * double(parallel_->sizes().cp));
  // Masked validation: the mean over the trained targets of every sample read (all DP ranks').
  int64_t trained = 0;
  for (int64_t i = 0; i < int64_t(iters) * micro_ * dp_; ++i) trained += valid_->trained_tokens(i);
  return sum / double(std::max<int64_t>(trained, 1));
}

}  // namespace recipe::core
