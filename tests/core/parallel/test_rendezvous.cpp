// The file rendezvous of worlds started without MPI (RANK/WORLD_SIZE/LOCAL_RANK), and how the
// launcher's environment is read. The store's ranks are forked processes of this test: each child
// runs one rank and reports through its exit status.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel/parallel_bootstrap.hpp"
#include "core/parallel/rendezvous_store.hpp"
#include "kernels/ops.hpp"
#include "tests/core/data/temp_dir.hpp"
#include "tests/core/parallel/mpi_test_util.hpp"

TEST_SUITE_BEGIN("core/parallel");

using recipe::core::RendezvousStore;
using namespace std::chrono_literals;
using recipe::testing::ScopedEnv;

namespace {

namespace fs = std::filesystem;

// A fresh directory under the temp dir, removed with everything in it at scope exit.
// A scratch directory per test, removed afterwards (shared with the data tests).
using recipe::data::testing::TempDir;

// Exit statuses of a rank body: 0 passed, 1 a check failed, 2 an exception.
using RankBody = std::function<int(int rank)>;

// Forks one child per rank (rank r starts after delays[r]), waits up to `limit` for all of them,
// kills the rest, and returns each child's exit status (-1: killed or crashed).
std::vector<int> run_ranks(int world, const RankBody& body, std::vector<std::chrono::milliseconds> delays = {},
                           std::chrono::seconds limit = 30s) {
  delays.resize(size_t(world), 0ms);
  std::vector<pid_t> pids;
  std::fflush(nullptr);  // a child must not inherit (and print again) the parent's buffered output
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 2;
      try {
        std::this_thread::sleep_for(delays[size_t(r)]);
        status = body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rendezvous test rank %d: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      ::_exit(status);  // never return into doctest in a child
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(size_t(world), -1);
  std::vector<bool> done(size_t(world), false);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int left = world;
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int r = 0; r < world; ++r) {
      if (done[size_t(r)]) continue;
      int st = 0;
      if (::waitpid(pids[size_t(r)], &st, WNOHANG) == pids[size_t(r)]) {
        done[size_t(r)] = true;
        --left;
        codes[size_t(r)] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
    }
    std::this_thread::sleep_for(5ms);
  }
  for (int r = 0; r < world; ++r) {
    if (done[size_t(r)]) continue;
    ::kill(pids[size_t(r)], SIGKILL);
    ::waitpid(pids[size_t(r)], nullptr, 0);
  }
  return codes;
}

std::string value_of(int rank) { return "value of rank " + std::to_string(rank) + std::string(rank + 1, '*'); }

using EnvVars = std::vector<std::pair<std::string, std::optional<std::string>>>;

// Every variable launcher_world() reads, unset.
EnvVars no_launcher() {
  EnvVars v;
  for (const char* k :
       {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_RANK", "PMI_RANK",
        "PMI_SIZE", "MPI_LOCALRANKID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "RANK",
        "WORLD_SIZE", "LOCAL_RANK", "RECIPE_RENDEZVOUS_DIR", "RECIPE_RENDEZVOUS_TIMEOUT_S"})
    v.push_back({k, std::nullopt});
  return v;
}

EnvVars with(EnvVars base, const EnvVars& extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("rendezvous store: four processes exchange values and meet at barriers") {
  TempDir dir;
  const int world = 4;
  const auto codes = run_ranks(world, [&](int r) {
    RendezvousStore store(dir.path.string(), r, world, 20s);
    store.set("value/" + std::to_string(r), value_of(r));
    for (int q = 0; q < world; ++q)
      if (store.get("value/" + std::to_string(q), q) != value_of(q)) return 1;
    store.barrier("exchanged");
    store.barrier("exchanged");  // a second round of the same name is a new barrier
    // Binary values (an NCCL id is 128 raw bytes) come back byte for byte.
    std::string raw(128, '\0');
    for (size_t i = 0; i < raw.size(); ++i) raw[i] = char((i * 37 + 11) & 0xFF);
    if (r == 0) store.set("nccl-id/tp/0", raw);
    if (store.get("nccl-id/tp/0", 0) != raw) return 1;
    return 0;
  });
  for (int r = 0; r < world; ++r) {
    INFO("rank ", r);
    CHECK(codes[size_t(r)] == 0);
  }
}

TEST_CASE("rendezvous store: a barrier waits for the slowest rank") {
  TempDir dir;
  // Rank 1 sets "before" only after a pause, then enters the barrier; rank 0 reads it with no
  // waiting right after the barrier, which only works if the barrier held it back.
  const auto codes = run_ranks(2, [&](int r) {
    RendezvousStore store(dir.path.string(), r, 2, 20s);
    if (r == 1) {
      std::this_thread::sleep_for(400ms);
      store.set("before", "yes");
    }
    store.barrier("b");
    if (r == 0) {
      try {
        return store.get("before", 0ms, 1) == "yes" ? 0 : 1;
      } catch (const std::runtime_error&) {
        return 1;
      }
    }
    return 0;
  });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
}

TEST_CASE("rendezvous store: timeouts name the directory, the key and the ranks that never arrived") {
  TempDir dir;
  SUBCASE("a missing key") {
    RendezvousStore store(dir.path.string(), 0, 1, 5s);  // a world of one joins at once
    const std::string msg = error_of([&] { store.get("nccl-id/dp/2", 150ms, 2); });
    INFO(msg);
    CHECK(msg.find(dir.path.string()) != std::string::npos);
    CHECK(msg.find("'nccl-id/dp/2'") != std::string::npos);
    CHECK(msg.find("rank 2 never arrived") != std::string::npos);
  }
  SUBCASE("rank 0 waits for ranks that never start") {
    const std::string msg = error_of([&] { RendezvousStore(dir.path.string(), 0, 3, 200ms); });
    INFO(msg);
    CHECK(msg.find(dir.path.string()) != std::string::npos);
    CHECK(msg.find("rank(s) 1, 2 of 3 never arrived") != std::string::npos);
    CHECK(msg.find("RECIPE_RENDEZVOUS_DIR") != std::string::npos);
  }
  SUBCASE("another rank waits for a rank 0 that never starts") {
    const std::string msg = error_of([&] { RendezvousStore(dir.path.string(), 2, 3, 200ms); });
    INFO(msg);
    CHECK(msg.find(dir.path.string()) != std::string::npos);
    CHECK(msg.find("rank 0 of this run never arrived") != std::string::npos);
  }
  SUBCASE("a barrier names the missing ranks") {
    const auto codes = run_ranks(3, [&](int r) {
      RendezvousStore store(dir.path.string(), r, 3, 1500ms);
      if (r != 0) return 0;  // ranks 1 and 2 leave before the barrier
      const std::string msg = error_of([&] { store.barrier("never"); });
      return msg.find("barrier 'never'") != std::string::npos && msg.find("rank(s) 1, 2 of 3") != std::string::npos ? 0
                                                                                                                    : 1;
    });
    CHECK(codes[0] == 0);
  }
}

TEST_CASE("rendezvous store: a directory left by an earlier run does not confuse a new one") {
  TempDir dir;
  // The earlier run: its epoch, its join confirmation and its keys stay in the directory.
  auto old = run_ranks(2, [&](int r) {
    RendezvousStore store(dir.path.string(), r, 2, 20s);
    store.set("nccl-id/world/0", "old id");
    store.barrier("end");
    return 0;
  });
  REQUIRE(old[0] == 0);
  REQUIRE(old[1] == 0);
  // A new run started together.
  const auto codes = run_ranks(2, [&](int r) {
    RendezvousStore store(dir.path.string(), r, 2, 20s);
    if (r == 0) store.set("nccl-id/world/0", "new id");
    return store.get("nccl-id/world/0", 0) == "new id" ? 0 : 1;
  });
  CHECK(codes[0] == 0);
  CHECK(codes[1] == 0);
  // The next run's rank 1 starts first, while the previous epoch (complete, with its key) is still
  // the published one; rank 0 comes 500 ms later. Rank 1 must wait for it and see only its value.
  const auto late_rank0 = run_ranks(2,
                                    [&](int r) {
                                      RendezvousStore store(dir.path.string(), r, 2, 20s);
                                      if (r == 0) store.set("nccl-id/world/0", "newest id");
                                      return store.get("nccl-id/world/0", 0) == "newest id" ? 0 : 1;
                                    },
                                    {500ms, 0ms});
  CHECK(late_rank0[0] == 0);
  CHECK(late_rank0[1] == 0);
}

TEST_CASE("rendezvous store: settings from the environment") {
  SUBCASE("the directory is required, with the fix") {
    ScopedEnv env(no_launcher());
    const std::string msg = error_of([] { RendezvousStore::from_env(1, 2); });
    INFO(msg);
    CHECK(msg.find("RECIPE_RENDEZVOUS_DIR") != std::string::npos);
    CHECK(msg.find("mpirun") != std::string::npos);
  }
  SUBCASE("the timeout") {
    {
      ScopedEnv env(no_launcher());
      CHECK(RendezvousStore::default_timeout() == 300s);
    }
    {
      ScopedEnv env(with(no_launcher(), {{"RECIPE_RENDEZVOUS_TIMEOUT_S", "2.5"}}));
      CHECK(RendezvousStore::default_timeout() == 2500ms);
    }
    {
      ScopedEnv env(with(no_launcher(), {{"RECIPE_RENDEZVOUS_TIMEOUT_S", "soon"}}));
      CHECK(error_of([] { RendezvousStore::default_timeout(); }).find("RECIPE_RENDEZVOUS_TIMEOUT_S='soon'") !=
            std::string::npos);
    }
  }
}

TEST_CASE("launcher_world: plain RANK/WORLD_SIZE/LOCAL_RANK, and what takes precedence") {
  SUBCASE("plain variables alone are a launched world") {
    ScopedEnv env(with(no_launcher(), {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}}));
    const auto w = recipe::core::launcher_world();
    CHECK(w.launched);
    CHECK(w.rank == 3);
    CHECK(w.size == 4);
    CHECK(w.local_rank == 1);
  }
  SUBCASE("Open MPI's variables beat plain ones") {
    ScopedEnv env(
        with(no_launcher(),
             {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
    const auto w = recipe::core::launcher_world();
    CHECK(w.launched);
    CHECK(w.rank == 1);
    CHECK(w.size == 2);
  }
  SUBCASE("a Slurm job step beats plain variables") {
    ScopedEnv env(with(no_launcher(), {{"RANK", "3"},
                                       {"WORLD_SIZE", "4"},
                                       {"SLURM_PROCID", "5"},
                                       {"SLURM_NTASKS", "8"},
                                       {"SLURM_STEP_NUM_TASKS", "8"}}));
    const auto w = recipe::core::launcher_world();
    CHECK(w.launched);
    CHECK(w.rank == 5);
    CHECK(w.size == 8);
  }
  SUBCASE("an sbatch batch shell (Slurm variables, no job step) is not a world") {
    ScopedEnv env(with(no_launcher(), {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}}));
    const auto w = recipe::core::launcher_world();
    CHECK_FALSE(w.launched);
    CHECK(w.size == 1);
  }
  SUBCASE("plain variables inside an sbatch batch shell are the world") {
    ScopedEnv env(
        with(no_launcher(), {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}}));
    const auto w = recipe::core::launcher_world();
    CHECK(w.launched);
    CHECK(w.rank == 1);
    CHECK(w.size == 2);
  }
  SUBCASE("RANK without WORLD_SIZE, or garbage, is not a world") {
    {
      ScopedEnv env(with(no_launcher(), {{"RANK", "1"}}));
      CHECK_FALSE(recipe::core::launcher_world().launched);
    }
    {
      ScopedEnv env(with(no_launcher(), {{"RANK", "one"}, {"WORLD_SIZE", "2"}}));
      CHECK_FALSE(recipe::core::launcher_world().launched);
    }
  }
}

TEST_CASE("launcher_world: a plain-variable world refuses CPU ranks with the fix") {
  TempDir dir;
  ScopedEnv env(
      with(no_launcher(), {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"RECIPE_RENDEZVOUS_DIR", dir.path.string()}}));
  auto backend = recipe::kernels::make_cpu_backend({});
  recipe::core::ParallelSizes sizes;
  sizes.tp = 2;
  const std::string msg = error_of([&] { recipe::core::bootstrap_parallel(sizes, *backend); });
  INFO(msg);
  CHECK(msg.find("CPU ranks need MPI: start them with mpirun") != std::string::npos);
  CHECK(msg.find("mpirun -np 2") != std::string::npos);
  CHECK(fs::is_empty(dir.path.string()));  // refused before touching the rendezvous

  // The size check comes first, naming WORLD_SIZE.
  sizes.tp = 4;
  const std::string mismatch = error_of([&] { recipe::core::bootstrap_parallel(sizes, *backend); });
  INFO(mismatch);
  CHECK(mismatch.find("WORLD_SIZE=2") != std::string::npos);
}

TEST_SUITE_END();
