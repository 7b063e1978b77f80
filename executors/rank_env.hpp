// What a started worker learns from its launcher's environment, before MPI is initialized:
// Open MPI (OMPI_COMM_WORLD_*), a Slurm job step (SLURM_PROCID/STEP_NUM_TASKS/LOCALID) or a plain RANK/WORLD_SIZE/
// LOCAL_RANK. The worker calls pin_local_rank_gpu() first thing, before anything touches CUDA,
// so each local rank sees exactly its own GPU as device 0.
#pragma once

#include <optional>
#include <string>

namespace recipe::exec {

struct RankEnv {
  int rank = 0, world = 1, local_rank = 0;
  std::string source;  // "openmpi" | "slurm" | "env" | "" (none: a single process)
};
RankEnv rank_env_from_environment();

// When started as one of several local ranks, sets CUDA_VISIBLE_DEVICES to the local rank's entry
// of the launcher's list (or to the local rank itself when the list is unset). Leaves a list that
// already names one device alone (Slurm's --gpus-per-task binding). Returns the device chosen.
std::optional<std::string> pin_local_rank_gpu();

// A Slurm batch script's shell (and what it starts without srun) inherits SLURM_PROCID=0 and the
// allocation's SLURM_NTASKS without being one of the job's ranks. Removes SLURM_PROCID from this
// process's environment in that case (no SLURM_STEP_NUM_TASKS: not a job step's task), so that a
// run that is a world of its own (`recipe pretrain` with one local rank inside `sbatch -n 4`) is
// not taken for rank 0 of a 4-rank world.
void forget_batch_shell_rank();

// CPU cores this process may run on (its affinity mask; at least 1).
int usable_cpu_cores();

// BLAS/compute threads for one of `local_ranks` CPU ranks sharing this host, so that ranks ×
// threads ≤ cores: cores / local_ranks, at least 1. nullopt when the user chose already
// (OPENBLAS_NUM_THREADS or OMP_NUM_THREADS set) or when one rank has the host to itself.
std::optional<int> cpu_threads_per_rank(int local_ranks);

}  // namespace recipe::exec
