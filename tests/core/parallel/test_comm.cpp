// Communicators and the bootstrap of multi-rank worlds: recipe_comm_probe (tests/tools/comm_probe.cpp)
// runs as every rank of an Open MPI world and checks each Comm operation of each group.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/parallel/parallel_bootstrap.hpp"
#include "kernels/ops.hpp"
#include "tests/core/parallel/mpi_test_util.hpp"

TEST_SUITE_BEGIN("core/parallel");

using recipe::testing::MpiRun;
using recipe::testing::mpirun_available;
using recipe::testing::run_mpi;
using recipe::testing::ScopedEnv;
using recipe::testing::tool_path;

namespace {

// Runs the probe and checks that the world agreed every check passed.
void expect_probe_ok(int np, std::vector<std::string> sizes, const std::string& device = "cpu") {
  std::vector<std::string> argv = {tool_path("comm_probe"), "--device", device};
  argv.insert(argv.end(), sizes.begin(), sizes.end());
  const MpiRun r = run_mpi(np, argv, {}, 90);
  INFO("np=", np, " output:\n", r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("comm_probe ok") != std::string::npos);
}

// No launcher variables at all: the process looks started by hand.
const std::vector<std::pair<std::string, std::optional<std::string>>> kNoLauncher = {
    {"OMPI_COMM_WORLD_RANK", std::nullopt},
    {"OMPI_COMM_WORLD_SIZE", std::nullopt},
    {"OMPI_COMM_WORLD_LOCAL_RANK", std::nullopt},
    {"PMIX_RANK", std::nullopt},
    {"PMI_RANK", std::nullopt},
    {"PMI_SIZE", std::nullopt},
    {"SLURM_PROCID", std::nullopt},
    {"SLURM_NTASKS", std::nullopt},
    {"SLURM_STEP_NUM_TASKS", std::nullopt},
    {"SLURM_LOCALID", std::nullopt},
    {"RANK", std::nullopt},
    {"WORLD_SIZE", std::nullopt},
    {"LOCAL_RANK", std::nullopt}};

}  // namespace

TEST_CASE("launcher_world reads Open MPI, PMIx and Slurm environments") {
  {
    ScopedEnv env(kNoLauncher);
    auto w = recipe::core::launcher_world();
    CHECK_FALSE(w.launched);
    CHECK(w.rank == 0);
    CHECK(w.size == 1);
  }
  {
    auto vars = kNoLauncher;
    vars.push_back({"OMPI_COMM_WORLD_RANK", "3"});
    vars.push_back({"OMPI_COMM_WORLD_SIZE", "8"});
    vars.push_back({"OMPI_COMM_WORLD_LOCAL_RANK", "1"});
    vars.push_back({"SLURM_PROCID", "5"});  // mpirun inside an allocation: Open MPI's view wins
    vars.push_back({"SLURM_NTASKS", "16"});
    ScopedEnv env(vars);
    auto w = recipe::core::launcher_world();
    CHECK(w.launched);
    CHECK(w.rank == 3);
    CHECK(w.size == 8);
    CHECK(w.local_rank == 1);
  }
  {
    auto vars = kNoLauncher;
    vars.push_back({"SLURM_PROCID", "6"});
    vars.push_back({"SLURM_NTASKS", "8"});
    vars.push_back({"SLURM_STEP_NUM_TASKS", "8"});  // a job step (srun), not the batch shell
    vars.push_back({"SLURM_LOCALID", "2"});
    ScopedEnv env(vars);
    auto w = recipe::core::launcher_world();
    CHECK(w.launched);
    CHECK(w.rank == 6);
    CHECK(w.size == 8);
    CHECK(w.local_rank == 2);
  }
  {
    auto vars = kNoLauncher;  // srun --mpi=pmix: PMIx rank, Slurm step size
    vars.push_back({"PMIX_RANK", "2"});
    vars.push_back({"SLURM_STEP_NUM_TASKS", "4"});
    vars.push_back({"SLURM_NTASKS", "32"});
    ScopedEnv env(vars);
    auto w = recipe::core::launcher_world();
    CHECK(w.launched);
    CHECK(w.rank == 2);
    CHECK(w.size == 4);
  }
  {
    auto vars = kNoLauncher;  // garbage is not a launcher
    vars.push_back({"OMPI_COMM_WORLD_RANK", "x"});
    vars.push_back({"OMPI_COMM_WORLD_SIZE", "2"});
    ScopedEnv env(vars);
    CHECK_FALSE(recipe::core::launcher_world().launched);
  }
}

TEST_CASE("bootstrap_parallel: one process without a launcher is the single-process state") {
  ScopedEnv env(kNoLauncher);
  recipe::kernels::BackendOptions o;
  o.cpu_threads = 1;
  auto backend = recipe::kernels::make_cpu_backend(o);
  auto ps = recipe::core::bootstrap_parallel({}, *backend);
  REQUIRE(ps);
  CHECK(ps->world_size() == 1);
  CHECK(ps->world_rank() == 0);
  CHECK(ps->tp().size() == 1);
  CHECK(ps->embedding().size() == 1);
  CHECK(ps->world().all_reduce_sum(2.5) == 2.5);
}

TEST_CASE("bootstrap_parallel: a multi-rank layout needs a launcher (or MPI) and says how to start it") {
  ScopedEnv env(kNoLauncher);
  auto backend = recipe::kernels::make_cpu_backend({});
  recipe::core::ParallelSizes sizes;
  sizes.tp = 2;
  sizes.dp = 2;
  try {
    recipe::core::bootstrap_parallel(sizes, *backend);
    FAIL("expected std::runtime_error");
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("tp=2") != std::string::npos);
    CHECK(msg.find("dp=2") != std::string::npos);
    CHECK(msg.find('4') != std::string::npos);
    if (recipe::core::built_with_mpi())
      CHECK(msg.find("mpirun -np 4") != std::string::npos);
    else
      CHECK(msg.find("without MPI") != std::string::npos);
  }
}

TEST_CASE("bootstrap_parallel: the launcher's world size must match the layout (checked before MPI starts)") {
  auto vars = kNoLauncher;
  vars.push_back({"OMPI_COMM_WORLD_RANK", "0"});
  vars.push_back({"OMPI_COMM_WORLD_SIZE", "3"});
  ScopedEnv env(vars);
  auto backend = recipe::kernels::make_cpu_backend({});
  recipe::core::ParallelSizes sizes;
  sizes.pp = 2;
  try {
    recipe::core::bootstrap_parallel(sizes, *backend);
    FAIL("expected std::runtime_error");
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("pp=2") != std::string::npos);
    CHECK(msg.find("needs 2 ranks") != std::string::npos);
    CHECK(msg.find("started 3") != std::string::npos);
  }
}

TEST_CASE("MPI communicators on CPU: every operation of every group, 2 ranks") {
  if (!mpirun_available()) {
    MESSAGE("skipped: mpirun not found on PATH");
    return;
  }
  if (!recipe::core::built_with_mpi()) {
    MESSAGE("skipped: this build has no MPI");
    return;
  }
  SUBCASE("tp=2") { expect_probe_ok(2, {"--tp", "2"}); }
  SUBCASE("dp=2") { expect_probe_ok(2, {"--dp", "2"}); }
  SUBCASE("pp=2") { expect_probe_ok(2, {"--pp", "2"}); }
  SUBCASE("cp=2") { expect_probe_ok(2, {"--cp", "2"}); }
}

TEST_CASE("MPI communicators on CPU: every operation of every group, 4 ranks") {
  if (!mpirun_available() || !recipe::core::built_with_mpi()) {
    MESSAGE("skipped: mpirun or MPI missing");
    return;
  }
  SUBCASE("tp=2 x dp=2") { expect_probe_ok(4, {"--tp", "2", "--dp", "2"}); }
  SUBCASE("tp=2 x pp=2") { expect_probe_ok(4, {"--tp", "2", "--pp", "2"}); }
  SUBCASE("dp=2 x pp=2") { expect_probe_ok(4, {"--dp", "2", "--pp", "2"}); }
  SUBCASE("pp=4 (middle stages outside the embedding group)") { expect_probe_ok(4, {"--pp", "4"}); }
}

// Three ranks: where Open MPI's blocking and non-blocking reductions would sum in different
// orders (the probe checks that the started forms give the blocking forms' bits).
TEST_CASE("MPI communicators on CPU: every operation of every group, 3 ranks") {
  if (!mpirun_available() || !recipe::core::built_with_mpi()) {
    MESSAGE("skipped: mpirun or MPI missing");
    return;
  }
  expect_probe_ok(3, {"--tp", "3"});
}

TEST_CASE("MPI world: a world-size mismatch fails on every rank with both sizes named") {
  if (!mpirun_available() || !recipe::core::built_with_mpi()) {
    MESSAGE("skipped: mpirun or MPI missing");
    return;
  }
  const MpiRun r = run_mpi(2, {tool_path("comm_probe"), "--tp", "4"}, {}, 60);
  INFO(r.output);
  CHECK(r.exit_code != 0);
  CHECK(r.output.find("comm_probe ok") == std::string::npos);
  CHECK(r.output.find("parallelism.tp=4") != std::string::npos);
  CHECK(r.output.find("needs 4 ranks") != std::string::npos);
  CHECK(r.output.find("started 2") != std::string::npos);
  CHECK(r.output.find("mpirun -np 4") != std::string::npos);
}

TEST_CASE("NCCL communicators on CUDA: every operation of every group [gpu]") {
  const int gpus = recipe::kernels::query_gpus().count;
  if (gpus < 2) {
    MESSAGE("skipped: needs 2 GPUs, found " << gpus);
    return;
  }
  if (!mpirun_available()) {
    MESSAGE("skipped: mpirun not found on PATH");
    return;
  }
  SUBCASE("tp=2") { expect_probe_ok(2, {"--tp", "2"}, "cuda"); }
  SUBCASE("dp=2") { expect_probe_ok(2, {"--dp", "2"}, "cuda"); }
  SUBCASE("pp=2") { expect_probe_ok(2, {"--pp", "2"}, "cuda"); }
  if (gpus >= 4) {
    SUBCASE("tp=2 x dp=2") { expect_probe_ok(4, {"--tp", "2", "--dp", "2"}, "cuda"); }
    SUBCASE("tp=2 x pp=2") { expect_probe_ok(4, {"--tp", "2", "--pp", "2"}, "cuda"); }
    SUBCASE("dp=2 x pp=2") { expect_probe_ok(4, {"--dp", "2", "--pp", "2"}, "cuda"); }
  }
}

TEST_SUITE_END();
