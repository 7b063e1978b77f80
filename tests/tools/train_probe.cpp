// One rank of a training world for the parallel-vs-serial parity tests (tests/core/parallel/).
//
//   recipe_train_probe <recipe> <out dir> [--load CKPT] [--stop-after N] [--save DIR] [key=value ...]
//
//   --load CKPT     resume from a checkpoint directory first (any saving layout)
//   --stop-after N  stop once N steps are done (counted from step 0, so a resumed run continues)
//   --save DIR      save a checkpoint into the checkpoints dir DIR after the last step
//
// Resolves the recipe with the overrides (CPU, world = executor.cpu_ranks), bootstraps the world
// from the launcher (mpirun, or none for one process), trains plan.trainer.max_steps steps and
// writes:
//   <out>/losses.txt          world rank 0: one loss per step, %.17g
//   <out>/params-<rank>.txt   every rank: each parameter it holds, as
//                             name shard_dim shard_begin shard_size ndim dims... numel, then the
//                             master values (%.9g) on the next line (a weight held only in FP8,
//                             peft.base_fp8_only: its FP8 bytes, 0..255)
// Exit 0 on success; any error is printed and ends the whole world (abort_world).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "core/train/checkpointing.hpp"
#include "core/parallel/parallel_bootstrap.hpp"
#include "core/train/trainer.hpp"
#include "dsl/dsl.hpp"

using namespace recipe;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: recipe_train_probe <recipe> <out dir> [key=value ...]\n";
    return 2;
  }
  try {
    dsl::ConfigTree tree = dsl::load_recipe(argv[1]);
    std::vector<std::string> overrides;
    std::string load_dir, save_dir;
    int stop_after = -1;
    for (int i = 3; i < argc; ++i) {
      const std::string a = argv[i];
      if ((a == "--load" || a == "--save" || a == "--stop-after") && i + 1 < argc) {
        const std::string v = argv[++i];
        if (a == "--load")
          load_dir = v;
        else if (a == "--save")
          save_dir = v;
        else
          stop_after = std::stoi(v);
      } else {
        overrides.push_back(a);
      }
    }
    // The probes compare layouts of one random initialization: a fine-tune preset starts from random
    // weights on purpose (--load resumes a probe's own checkpoint, not a base).
    tree.root["checkpoint"]["allow_random_init"] = true;
    dsl::apply_overrides(tree, overrides);
    dsl::ExecutorFacts facts;
    const bool cuda = std::find(overrides.begin(), overrides.end(), "trainer.device=cuda") != overrides.end();
    // CUDA: one GPU per rank of the launcher's world, on one node.
    facts.nodes = 1;
    facts.gpus_per_node = cuda ? core::launcher_world().size : 0;
    facts.has_gpu = cuda;
    facts.planning = cuda;
    dsl::ResolveResult rr = dsl::resolve(tree, facts);
    if (!rr.ok()) {
      std::cerr << dsl::format_violations(rr.violations);
      return 3;
    }
    const plan::Plan& plan = rr.plan;
    // trainer.device=cuda (the GPU parity tests): one GPU per local rank.
    const kernels::Device device =
        plan.trainer.device == plan::Device::cuda ? kernels::Device::cuda : kernels::Device::cpu;
    kernels::BackendOptions bo;
    bo.device_index = core::launcher_world().local_rank;
    bo.deterministic = true;
    auto backend = kernels::make_backend(device, bo);
    auto parallel = core::bootstrap_parallel(core::parallel_sizes(plan), *backend);
    core::Trainer trainer(plan, *backend, parallel.get());
    const std::string out = argv[2];
    const int rank = parallel->world_rank();
    std::vector<double> losses;
    // A LoRA run saves adapter-only checkpoints, as train() does: against the base it resumed
    // with, else its frozen base written now into <save>/base/step-0.
    std::optional<ckpt::BaseRef> base;
    if (!load_dir.empty())
      base = core::load_checkpoint(trainer, ckpt::find_checkpoint(load_dir), core::LoadMode::resume).base;
    if (!save_dir.empty() && !base && trainer.params().layout().frozen_numel > 0)
      base = core::save_base_checkpoint(trainer, save_dir, dsl::to_toml(plan));
    const int last = stop_after >= 0 ? stop_after : plan.trainer.max_steps;
    for (int s = trainer.steps_done(); s < last; ++s) {
      core::StepResult r = trainer.step();
      if (!r.finite) throw std::runtime_error("step " + std::to_string(r.step) + " diverged");
      losses.push_back(r.loss);
    }
    {  // how each rank's step ran: the device step? how many steps as a CUDA-graph launch?
      std::ofstream f(out + "/step-" + std::to_string(rank) + ".txt");
      f << (trainer.device_step() ? 1 : 0) << ' ' << trainer.graph_steps() << '\n';
    }
    if (rank == 0) {
      std::ofstream f(out + "/losses.txt");
      char buf[64];
      for (double l : losses) {
        std::snprintf(buf, sizeof buf, "%.17g\n", l);
        f << buf;
      }
    }
    if (!save_dir.empty()) {
      core::SaveOptions so;
      so.dir = save_dir;
      so.plan_toml = dsl::to_toml(plan);
      so.base = base;
      core::save_checkpoint(trainer, so);
    }
    trainer.gather_master_weights();
    std::ofstream f(out + "/params-" + std::to_string(rank) + ".txt");
    const core::ParamStore& store = trainer.params();
    std::vector<float> host;
    char buf[32];
    for (const core::ParamSpec& p : store.layout().params) {
      f << p.name << ' ' << p.shard_dim << ' ' << p.shard_begin << ' ' << p.shard_size << ' ' << p.global_shape.size();
      for (int64_t d : p.global_shape) f << ' ' << d;
      f << ' ' << p.numel << '\n';
      host.resize(size_t(p.numel));
      if (p.fp8) {  // the bytes a layout cast: equal to the serial run's only with the same (TP-wide) amax
        std::vector<uint8_t> bytes(size_t(p.numel));
        backend->to_host(bytes.data(), store.weight(p));
        std::copy(bytes.begin(), bytes.end(), host.begin());
      } else {
        backend->to_host(host.data(), store.master(p));
      }
      for (float v : host) {
        std::snprintf(buf, sizeof buf, "%.9g ", double(v));
        f << buf;
      }
      f << '\n';
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "train_probe: " << e.what() << "\n";
    core::abort_world(1);
  }
}
