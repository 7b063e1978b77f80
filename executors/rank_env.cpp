#include "executors/rank_env.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace recipe::exec {

namespace {

std::optional<int> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0) return std::nullopt;
  return static_cast<int>(n);
}

bool read_triplet(const char* rank, const char* world, const char* local, const char* source, RankEnv& out) {
  auto r = env_int(rank), w = env_int(world);
  if (!r || !w) return false;
  out.rank = *r;
  out.world = *w;
  out.local_rank = env_int(local).value_or(0);
  out.source = source;
  return true;
}

}  // namespace

RankEnv rank_env_from_environment() {
  RankEnv e;
  if (read_triplet("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "openmpi", e))
    return e;
  // A task of a job step (srun); the batch shell also has SLURM_PROCID but is no rank.
  if (read_triplet("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "slurm", e)) return e;
  if (read_triplet("RANK", "WORLD_SIZE", "LOCAL_RANK", "env", e)) return e;
  return RankEnv{};
}

std::optional<std::string> pin_local_rank_gpu() {
  RankEnv e = rank_env_from_environment();
  if (e.world <= 1) return std::nullopt;
  std::vector<std::string> devices;
  if (const char* list = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::stringstream s(list);
    std::string item;
    while (std::getline(s, item, ','))
      if (!item.empty()) devices.push_back(item);
    if (devices.size() == 1) return devices[0];
  }
  std::string chosen;
  if (devices.empty())
    chosen = std::to_string(e.local_rank);
  else if (static_cast<size_t>(e.local_rank) < devices.size())
    chosen = devices[e.local_rank];
  else
    return std::nullopt;  // more local ranks than listed devices: the worker reports it
  ::setenv("CUDA_VISIBLE_DEVICES", chosen.c_str(), 1);
  return chosen;
}

void forget_batch_shell_rank() {
  if (std::getenv("SLURM_PROCID") && !std::getenv("SLURM_STEP_NUM_TASKS")) ::unsetenv("SLURM_PROCID");
}

int usable_cpu_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::optional<int> cpu_threads_per_rank(int local_ranks) {
  for (const char* chosen : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    if (const char* v = std::getenv(chosen); v && *v) return std::nullopt;
  if (local_ranks <= 1) return std::nullopt;
  return std::max(1, usable_cpu_cores() / local_ranks);
}

}  // namespace recipe::exec
