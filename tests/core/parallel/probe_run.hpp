// One train_probe world (tests/tools/train_probe.cpp) on CPU ranks under mpirun with the parity
// tests' schedule — 20 steps of 8 samples in micro-batches of 2, weight decay 0.1, clip 1.0 — plus
// the caller's overrides and probe flags, read back as a Trained result. Shared by every
// parallel-vs-serial test (training parity, SP, interleaved PP, CP, resharding).
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/core/parallel/mpi_test_util.hpp"
#include "tests/core/parallel/trained_result.hpp"

namespace recipe::testing {

inline Trained run_train_probe(const std::string& recipe, int world, const std::filesystem::path& out,
                               const std::vector<std::string>& args, const std::string& label = "") {
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
  MpiRun r = run_mpi(world, argv, {}, 180);
  INFO(label << " mpirun output:\n" << r.output);
  REQUIRE(r.exit_code == 0);
  return read_result(out, world);
}

}  // namespace recipe::testing
