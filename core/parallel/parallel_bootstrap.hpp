// Building this process's ParallelState from the launcher's world.
//
// Multi-rank worlds are MPI worlds (DESIGN.md, "Processes"): mpirun, srun --mpi=pmix, or mpirun
// inside a Slurm allocation start the ranks, and MPI tells each its rank. CUDA ranks started by
// another scheduler may instead come with a plain RANK / WORLD_SIZE / LOCAL_RANK environment and
// RECIPE_RENDEZVOUS_DIR (a directory every rank sees): NCCL ids then go through a file store
// (core/parallel/rendezvous_store.hpp) and host scalars through NCCL. CPU ranks need MPI. The group
// communicators are split from MPI_COMM_WORLD in the tp → cp → dp → pp layout of
// core/parallel/parallel_state.hpp. CPU backends get MPI communicators; CUDA backends get NCCL
// communicators (unique ids broadcast over MPI) whose tensor collectives run on the backend's
// stream, with MPI kept for the host scalars (losses, norms, flags).
#pragma once

#include <memory>
#include <string>

#include "core/parallel/parallel_state.hpp"
#include "kernels/ops.hpp"

namespace recipe::core {

// What the launcher's environment says about this process, read without initializing MPI:
// Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK), PMIx (PMIX_RANK), Slurm job steps
// (SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_LOCALID; a batch shell without a step is not a rank),
// or plain RANK/WORLD_SIZE/LOCAL_RANK. size 1 and launched=false when none is set.
struct LauncherWorld {
  int rank = 0, size = 1, local_rank = 0;
  bool launched = false;
};
LauncherWorld launcher_world();

// True when this build can start multi-rank worlds (compiled with MPI).
bool built_with_mpi();

// The ParallelState for `sizes` in this process.
// - sizes.world() == 1 and no launcher world: the single-process state; MPI is never touched.
// - otherwise MPI is initialized (once per process; finalized at exit) and its world size must
//   equal sizes.world(); a mismatch, or a build without MPI, throws std::runtime_error naming the
//   sizes and the fix (launch with -np <world>, or change parallelism.*).
// The backend decides the tensor transport: Device::cpu → MPI, Device::cuda → NCCL (a build
// without NCCL throws). Collective calls are matched across ranks by program order.
std::unique_ptr<ParallelState> bootstrap_parallel(const ParallelSizes& sizes, kernels::Backend& backend);

// Ends every rank of the world at once (MPI_Abort when MPI is initialized, else std::exit): a rank
// that failed must not leave its peers waiting forever inside a collective.
[[noreturn]] void abort_world(int exit_code);

}  // namespace recipe::core
