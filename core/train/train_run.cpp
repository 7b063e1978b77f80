// train(): a whole training run from a plan — backend, Trainer, progress, metrics, validation,
// NaN/inf guard, summary.
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "checkpoint/checkpoint.hpp"
#include "core/train/checkpointing.hpp"
#include "core/train/metrics.hpp"
#include "core/parallel/parallel_bootstrap.hpp"
#include "core/train/progress.hpp"
#include "core/train/step_watchdog.hpp"
#include "core/train/stop_request.hpp"
#include "core/train/trainer.hpp"
#include "plan/gpu_catalog.hpp"
#include "plan/memory_estimate.hpp"

namespace recipe::core {

namespace {

kernels::Device pick_device(plan::Device d) {
  if (d == plan::Device::cpu) return kernels::Device::cpu;
  if (d == plan::Device::cuda) return kernels::Device::cuda;
  if (d == plan::Device::auto_)
    return kernels::built_with_cuda() && kernels::query_gpus().count > 0 ? kernels::Device::cuda : kernels::Device::cpu;
  throw std::invalid_argument("trainer.device=\"" + std::string(plan::to_string(d)) +
                              "\": use \"cpu\", \"cuda\" or \"auto\"");
}

// Dense bf16 peak of one GPU, for MFU: the GPU catalog's figure for the detected device (H100 SXM
// 989 TFLOP/s, GB10 62.5, ...); a GPU the catalog does not know is counted as an H100 (and said).
double peak_flops(kernels::Device dev, const std::function<void(const std::string&)>& notice) {
  if (dev != kernels::Device::cuda) return 0;
  const std::string name = kernels::query_gpus().name;
  if (const auto gpu = plan::find_gpu(name)) return gpu->peak_bf16_tflops * 1e12;
  if (notice)
    notice("note: MFU: \"" + name + "\" is not in the GPU catalog (plan/gpu_catalog.cpp); counted against the " +
           "H100's 989 TFLOP/s");
  return 989e12;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string divergence_message(int step, double loss, double gnorm, double lr, int vocab) {
  std::ostringstream m;
  m << "training diverged at step " << step << ": loss = " << loss << ", grad norm = " << gnorm << " (lr "
    << fmt("%.3g", lr) << ")";
  if (std::isfinite(loss) && loss > divergence_loss_limit(vocab))
    m << "; the loss is far above ln(vocab) = " << fmt("%.3f", std::log(double(vocab)))
      << ", the loss of uniform guessing";
  m << ". The weights of this step were not updated. Try a lower "
    << "optimizer.lr, a longer schedule.warmup_steps or optimizer.clip_grad = 1.0, and check the "
       "data for corrupt or out-of-vocabulary tokens.";
  return m.str();
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGUSR1:
      return "SIGUSR1";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(sig);
  }
}

// Where this run's checkpoints go: checkpoint.dir, else <run dir>/checkpoints; "" = nowhere.
std::string checkpoints_dir(const plan::Plan& plan, const std::string& run_dir) {
  if (!plan.checkpoint.dir.empty()) return plan.checkpoint.dir;
  if (run_dir.empty()) return "";
  return (std::filesystem::path(run_dir) / "checkpoints").string();
}

// The checkpoint to start from and how: this run's own newest (resume), else checkpoint.load.
struct StartPoint {
  std::string dir;
  LoadMode mode = LoadMode::resume;
  bool own = false;
};

StartPoint start_point(const plan::Plan& plan, const std::string& own_dir) {
  StartPoint sp;
  if (!own_dir.empty() && std::filesystem::exists(own_dir)) {
    sp.dir = ckpt::find_checkpoint(own_dir);
    sp.own = !sp.dir.empty();
    if (sp.own) return sp;
  }
  if (plan.checkpoint.load.empty()) return sp;
  sp.dir = ckpt::find_checkpoint(plan.checkpoint.load);
  if (sp.dir.empty())
    throw std::runtime_error("checkpoint.load=\"" + plan.checkpoint.load +
                             "\" holds no checkpoint yet (no `latest` and no step-* with metadata.json): "
                             "point it at a checkpoint directory or a run dir that saved one");
  sp.mode = plan.mode == plan::Mode::finetune ? LoadMode::weights_only : LoadMode::resume;
  return sp;
}

}  // namespace

kernels::BackendOptions backend_options(const plan::Plan& plan) {
  kernels::BackendOptions bo;
  bo.deterministic = plan.trainer.deterministic;
  bo.cpu_threads = plan.trainer.cpu_threads;
  // The plan's `kernels` section: recorded in resolved.toml, so the run dir says what ran.
  const plan::KernelsConfig& k = plan.kernels;
  bo.workspace_bytes = size_t(k.workspace_bytes);  // what the memory estimate counts
  bo.gemm_tune = k.cublaslt_tune;
  bo.gemm_tune_candidates = k.cublaslt_tune_candidates;
  bo.gemm_tune_log = k.cublaslt_tune_log;
  bo.attention_tune = k.cudnn_tune;
  bo.attention_fallback = k.attention == plan::Attention::fallback;
  bo.fused_mlp = k.fused_mlp;
  bo.portable_kernels = k.portable;
  bo.bias_grad_epilogue = k.bias_grad == plan::BiasGrad::epilogue;
  bo.grad_memset = k.grad_memset;
  return bo;
}

TrainResult train(const plan::Plan& plan, const TrainOptions& opts) {
  const kernels::Device device = pick_device(plan.trainer.device);
  std::unique_ptr<kernels::Backend> backend = kernels::make_backend(device, backend_options(plan));
  // The backend's notices (a fast path that cannot run, and why) reach err on every rank as they
  // come: after the backend and the trainer are built, after each step (first uses choose kernels).
  std::ostream& err = opts.err ? *opts.err : std::cerr;
  auto print_notices = [&] {
    for (const std::string& line : backend->take_notices()) err << line << "\n";
  };
  print_notices();

  std::unique_ptr<ParallelState> owned_parallel;
  ParallelState* parallel = opts.parallel;
  if (!parallel) {
    owned_parallel = bootstrap_parallel(parallel_sizes(plan), *backend);
    parallel = owned_parallel.get();
  }
  // World rank 0 speaks for the run: progress lines, metrics.jsonl, timing.jsonl. Every rank
  // computes the same world-reduced loss and norm; the others stay quiet.
  const bool leader = parallel->world_rank() == 0;
  std::ostream quiet(nullptr);
  std::ostream& log = !leader ? quiet : opts.log ? *opts.log : std::cout;

  Trainer trainer(plan, *backend, parallel);
  print_notices();
  const std::string ckpt_dir = checkpoints_dir(plan, opts.run_dir);
  const StartPoint start_from = start_point(plan, ckpt_dir);
  LoadResult loaded;
  if (!start_from.dir.empty()) loaded = load_checkpoint(trainer, start_from.dir, start_from.mode);
  const int start_step = trainer.steps_done();
  MetricsWriter metrics(leader ? opts.run_dir : std::string(), start_step > 0 ? start_step : -1);
  ProgressPrinter progress(log, opts.interactive && leader);
  TrainResult res;
  if (!start_from.dir.empty()) {
    if (start_from.mode == LoadMode::resume) {
      res.resumed_from_step = start_step;
      progress.message("resumed from " + start_from.dir + " at step " + std::to_string(start_step) +
                       (loaded.optimizer_restored ? "" : " (it holds no optimizer state: Adam moments start at zero)"));
    } else {
      progress.message("initialized the weights from " + start_from.dir + " (step " + std::to_string(loaded.step) +
                       "; optimizer state and step count start fresh)");
    }
  }
  SaveOptions save_opts;
  save_opts.dir = ckpt_dir;
  save_opts.plan_toml = opts.plan_toml;
  save_opts.keep_last = plan.checkpoint.keep_last;
  // A LoRA fine-tune saves adapter-only checkpoints that refer to its frozen base: the checkpoint
  // it loaded, or (from random weights) the base it writes once, before its first save
  // (core/train/checkpointing.hpp; the frozen weights never change, so writing them late is the
  // same, and a run that saves nothing, a benchmark, writes no 16 GB base). A base among this
  // run's own step-<N> (an older full LoRA checkpoint resumed) would be pruned by
  // checkpoint.keep_last: the run then writes its own base/ as well.
  save_opts.base = loaded.base;
  const auto own_step = [&](const std::string& path) {
    return std::filesystem::path(path).parent_path() == std::filesystem::absolute(ckpt_dir).lexically_normal();
  };
  // Started after setup and loading: from here on, a stall of trainer.step_timeout_s ends the run.
  std::unique_ptr<StepWatchdog> watchdog;
  if (plan.trainer.step_timeout_s > 0)
    watchdog = std::make_unique<StepWatchdog>(plan.trainer.step_timeout_s, parallel->world_rank(),
                                              parallel->world_size(), StepWatchdog::dir_in(opts.run_dir), opts.on_hang);
  auto phase = [&](int step, const char* what) {
    if (watchdog) watchdog->enter(step, what);
  };
  bool base_due = (!save_opts.base || own_step(save_opts.base->path)) && !ckpt_dir.empty() &&
                  trainer.params().layout().frozen_numel > 0;
  auto save = [&](const std::string& why) {
    if (base_due) {
      save_opts.base = save_base_checkpoint(trainer, ckpt_dir, opts.plan_toml);
      base_due = false;
      progress.message("wrote the frozen base weights to " + save_opts.base->path +
                       " (its checkpoints hold the adapters and refer to it)");
    }
    using sclock = std::chrono::steady_clock;
    const auto t0 = sclock::now();
    std::optional<StepWatchdog::Paused> unwatched;
    if (watchdog) unwatched.emplace(*watchdog);  // a save may take longer than any step
    res.last_checkpoint = save_checkpoint(trainer, save_opts);
    const double secs = std::chrono::duration<double>(sclock::now() - t0).count();
    progress.message("saved checkpoint " + res.last_checkpoint + " (" + why + ", " + fmt("%.1f s", secs) + ")");
  };
  if (plan.trainer.precision == plan::Precision::fp32 && backend->act_dtype() != kernels::DType::f32)
    progress.message("note: trainer.precision=fp32, but the " + backend->name() + " backend computes in " +
                     kernels::dtype_name(backend->act_dtype()) + " (fp32 master weights and optimizer state)");
  // MFU is per GPU: the world's throughput over the world's peak.
  const double peak = peak_flops(device, [&](const std::string& m) { progress.message(m); }) * parallel->world_size();
  const int max_steps = plan.trainer.max_steps;
  const int log_every = plan.trainer.log_interval;  // ≥ 1 (resolver)
  const int eval_every = plan.trainer.eval_interval;
  const bool can_eval = eval_every > 0 && trainer.has_validation();
  if (eval_every > 0 && !trainer.has_validation())
    progress.message("note: trainer.eval_interval=" + std::to_string(eval_every) +
                     " but the data has no validation split; skipping validation");

  const int remaining = max_steps - start_step;
  const int skip = remaining > 1 ? std::max(1, remaining / 10) : 0;  // warm-up steps left out of the mean
  double timed_seconds = 0, timed_tokens = 0, all_seconds = 0;
  int timed_steps = 0;
  using clock = std::chrono::steady_clock;
  const auto run_start = clock::now();

  res.steps_done = start_step;
  if (opts.steps_done) opts.steps_done->store(start_step);
  const int save_every = plan.checkpoint.save_interval;
  const bool multi_rank = parallel->world_size() > 1;
  int saved_step = start_step;  // the newest step with a checkpoint (the start counts: nothing new to save)
  for (int i = start_step; i < max_steps; ++i) {
    const auto t0 = clock::now();
    phase(i + 1, "training step (forward, backward, gradient reduction, update)");
    StepResult r = trainer.step();
    phase(i + 1, "waiting for the device to finish the step");
    backend->synchronize();
    const double secs = std::chrono::duration<double>(clock::now() - t0).count();
    if (watchdog) watchdog->step_done(secs);
    phase(i + 1, "metrics and progress");
    print_notices();
    all_seconds += secs;
    const double tps = double(trainer.tokens_per_step()) / std::max(secs, 1e-12);
    if (i - start_step >= skip) {
      timed_seconds += secs;
      timed_tokens += double(trainer.tokens_per_step());
      ++timed_steps;
    }

    StepMetrics m;
    m.step = r.step;
    m.loss = r.loss;
    m.lr = r.lr;
    m.grad_norm = r.grad_norm;
    m.consumed_samples = r.consumed_samples;

    if (!r.finite) {
      metrics.write(m);
      res.diverged = true;
      res.message = divergence_message(r.step, r.loss, r.grad_norm, r.lr, plan.model.vocab_size);
      progress.message(res.message);
      break;
    }
    if (i == start_step) res.first_loss = r.loss;
    res.last_loss = r.loss;
    res.steps_done = r.step;
    if (opts.steps_done) opts.steps_done->store(r.step);

    const bool eval_now = can_eval && (r.step % eval_every == 0 || r.step == max_steps);
    if (eval_now) {
      phase(r.step, "validation");
      m.val_loss = trainer.evaluate();
      res.last_val_loss = *m.val_loss;
    }
    metrics.write(m);

    StepTiming t;
    t.step = r.step;
    t.step_ms = secs * 1e3;
    t.tokens_per_sec = tps;
    t.tflops = trainer.flops_per_token() * tps / 1e12;
    if (peak > 0) t.mfu = trainer.flops_per_token() * tps / peak;
    t.peak_memory_bytes = backend->peak_memory_bytes();
    const kernels::KernelPaths paths = backend->kernel_paths();
    t.attention_path = paths.attention;
    t.gemm_path = paths.gemm;
    metrics.write(t);

    if (r.step % log_every == 0 || r.step == max_steps || eval_now) {
      ProgressLine p;
      p.step = r.step;
      p.max_steps = max_steps;
      p.loss = r.loss;
      p.lr = r.lr;
      p.grad_norm = r.grad_norm;
      p.tokens_per_sec = tps;
      p.mfu = t.mfu;
      const double mean_step = timed_steps > 0 ? timed_seconds / timed_steps : all_seconds / (i + 1 - start_step);
      p.eta_seconds = mean_step * (max_steps - r.step);
      p.val_loss = m.val_loss;
      progress.update(format_progress(p), eval_now);
    }

    if (!ckpt_dir.empty() && save_every > 0 && r.step % save_every == 0 && r.step < max_steps) {
      save("checkpoint.save_interval=" + std::to_string(save_every));
      saved_step = r.step;
    }
    // Every rank stops after the same step: a signal reaches the ranks at different moments.
    int stop = stop_signal();
    phase(r.step, "agreeing with the other ranks whether to stop (all-reduce)");
    if (multi_rank) stop = int(parallel->world().all_reduce_max(double(stop)));
    if (stop != 0 && r.step < max_steps) {
      res.stop_signal = stop;
      if (!ckpt_dir.empty() && saved_step != r.step) {
        save(signal_name(stop));
        saved_step = r.step;
      }
      progress.message("stopping after step " + std::to_string(r.step) + " on " + signal_name(stop) +
                       (ckpt_dir.empty() ? " (no checkpoint: this run has no run dir or checkpoint.dir)"
                                         : "; rerunning the same run dir resumes from " + res.last_checkpoint));
      break;
    }
  }
  trainer.complete_weights();  // ZeRO-1, overlapped: the last step's weights, gathered
  if (!res.diverged && res.stop_signal == 0 && plan.checkpoint.save_final && !ckpt_dir.empty() &&
      trainer.steps_done() == max_steps && saved_step != max_steps) {
    save("the last step");
    saved_step = max_steps;
  }

  watchdog.reset();  // nothing after this point waits on another rank
  print_notices();   // from the last evaluation
  const double wall = std::chrono::duration<double>(clock::now() - run_start).count();
  const int ran = res.steps_done - start_step;  // steps taken by this invocation
  if (timed_steps == 0 && ran > 0) {            // a single step: use it
    timed_seconds = all_seconds;
    timed_tokens = double(trainer.tokens_per_step()) * ran;
    timed_steps = ran;
  }
  res.tokens_per_sec = timed_seconds > 0 ? timed_tokens / timed_seconds : 0;
  res.mean_step_ms = timed_steps > 0 ? timed_seconds / timed_steps * 1e3 : 0;
  res.peak_memory_bytes = backend->peak_memory_bytes();
  if (std::string phases = trainer.phase_report(); !phases.empty()) log << phases;
  if (!res.diverged) {
    std::string s =
        (res.stop_signal ? "stopped at step " + std::to_string(res.steps_done) + " of " + std::to_string(max_steps)
                         : "done: " + std::to_string(res.steps_done) + " steps") +
        (start_step > 0 ? " (" + std::to_string(ran) + " after resuming)" : std::string()) + " in " +
        format_duration(wall) + " | loss " + fmt("%.4f", res.first_loss) + " -> " + fmt("%.4f", res.last_loss);
    if (res.last_val_loss >= 0) s += " | val " + fmt("%.4f", res.last_val_loss);
    s += " | " + format_rate(res.tokens_per_sec) + " tok/s";
    if (peak > 0) s += " | MFU " + fmt("%.1f%%", 100.0 * trainer.flops_per_token() * res.tokens_per_sec / peak);
    s += " | peak mem " + format_bytes(double(res.peak_memory_bytes));
    res.message = s;
    progress.message(s);
  }
  return res;
}

}  // namespace recipe::core
