// What a started worker learns from its launcher's environment, before MPI is initialized:
// Open MPI (OMPI_COMM_WORLD_*), Slurm (SLURM_PROCID/NTASKS/LOCALID) or a plain RANK/WORLD_SIZE/
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

}  // namespace recipe::exec
