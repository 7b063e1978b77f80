// One train_probe world (tests/tools/train_probe.cpp) on CPU ranks under mpirun with the parity
// tests' schedule — 20 steps of 8 samples in micro-batches of 2, weight decay 0.1, clip 1.0 — plus
// the caller's overrides and probe flags, read back as a Trained result. Shared by every
// parallel-vs-serial test (training parity, SP, interleaved PP, CP, resharding), with the one
// Layout (a named world of ranks and its parallelism overrides) they iterate over.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ops.hpp"
#include "tests/core/parallel/mpi_test_util.hpp"
#include "tests/core/parallel/trained_result.hpp"

namespace recipe::testing {

// `env`: variables set in the ranks' environment (e.g. OPENBLAS_CORETYPE for measure_noise).
inline Trained run_train_probe(const std::string& recipe, int world, const std::filesystem::path& out,
                               const std::vector<std::string>& args, const std::string& label = "",
                               const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::filesystem::create_directories(out);
  std::vector<std::string> argv = {tool_path("train_probe"),
                                   recipe,
                                   out.string(),
                                   "trainer.max_steps=20",
                                   "trainer.micro_batch_size=2",
                                   "trainer.global_batch_size=8",
                                   "optimizer.weight_decay=0.1",
                                   "optimizer.clip_grad=1.0",
                                   "executor.cpu_ranks=" + std::to_string(world)};
  argv.insert(argv.end(), args.begin(), args.end());
  MpiRun r = run_mpi(world, argv, env, 180);
  INFO(label << " mpirun output:\n" << r.output);
  REQUIRE(r.exit_code == 0);
  return read_result(out, world);
}

// The serial run of `recipe` (one rank, `args`) in `dir`/serial, with its rounding noise floor
// measured by the same run under the other BLAS kernel sets (trained_result.hpp, measure_noise).
inline Trained run_serial_with_noise(const std::string& recipe, const std::filesystem::path& dir,
                                     const std::vector<std::string>& args) {
  return measure_noise(run_train_probe(recipe, 1, dir / "serial", args, "serial"), [&](const std::string& core) {
    return run_train_probe(recipe, 1, dir / ("serial-" + core), args, "serial under " + core + " kernels",
                           {{"OPENBLAS_CORETYPE", core}});
  });
}

// A parallel layout under test: its name (for messages), its world size and its overrides.
struct Layout {
  std::string name;
  int world;
  std::vector<std::string> overrides;
};

// One world of `l` over a model of `num_layers` layers (4: the most pp·virtual_pp the layouts use;
// an override in `l` or `extra` may set another), optionally resumed from `load`, stopped after
// `stop_after` steps and saved into `save`; the layout's overrides, then `extra`.
inline Trained run_layout_probe(const std::string& recipe, const Layout& l, const std::filesystem::path& out,
                                const std::vector<std::string>& extra = {}, const std::string& load = "",
                                int stop_after = -1, const std::string& save = "") {
  std::vector<std::string> args = {"model.num_layers=4"};
  if (!load.empty()) args.insert(args.end(), {"--load", load});
  if (stop_after >= 0) args.insert(args.end(), {"--stop-after", std::to_string(stop_after)});
  if (!save.empty()) args.insert(args.end(), {"--save", save});
  args.insert(args.end(), l.overrides.begin(), l.overrides.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return run_train_probe(recipe, l.world, out, args, l.name);
}

// The GPUs a multi-GPU parity case may use: the visible count, or 0 after the skip message when
// there are fewer than 2 or no mpirun (the case then returns: "skipped" without GPUs).
inline int parity_gpus() {
  const int gpus = kernels::query_gpus().count;
  if (gpus >= 2 && mpirun_available()) return gpus;
  MESSAGE("skipped: needs 2 or more GPUs and mpirun (found " << gpus << " GPUs)");
  return 0;
}

// The overrides every GPU parity run adds: CUDA, bf16 compute.
inline const std::vector<std::string>& cuda_bf16() {
  static const std::vector<std::string> overrides = {"trainer.device=cuda", "trainer.precision=bf16"};
  return overrides;
}

}  // namespace recipe::testing
