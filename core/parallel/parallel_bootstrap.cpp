#include "core/parallel/parallel_bootstrap.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#if RECIPE_WITH_MPI
#include <mpi.h>

#include "core/parallel/comm_mpi.hpp"
#endif
#if RECIPE_WITH_NCCL
#include "core/parallel/comm_nccl.hpp"
#include "core/parallel/rendezvous_store.hpp"
#endif

namespace recipe::core {

namespace {

bool env_int(const char* name, int& out) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v, &end, 10);
  if (errno || *end || x < 0 || x > 1 << 24) return false;
  out = int(x);
  return true;
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

// The launcher's view plus where the size came from (empty: the environment does not say, e.g.
// PMIx outside Slurm; MPI itself is asked after initialization). `plain`: a RANK/WORLD_SIZE world,
// which has no MPI and meets through the rendezvous store.
struct EnvWorld {
  LauncherWorld world;
  std::string size_source;
  bool plain = false;
};

EnvWorld read_launcher_env() {
  EnvWorld e;
  LauncherWorld& w = e.world;
  int rank = 0, size = 0, local = 0;
  auto slurm_size = [&](int& s) -> const char* {
    // Only a job step (srun) makes the Slurm variables a world: an sbatch batch shell also has
    // SLURM_PROCID and SLURM_NTASKS (the allocation's), but it is not a rank of anything.
    if (env_int("SLURM_STEP_NUM_TASKS", s)) return "SLURM_STEP_NUM_TASKS";
    return nullptr;
  };
  if (env_int("OMPI_COMM_WORLD_RANK", rank) && env_int("OMPI_COMM_WORLD_SIZE", size)) {
    w = {rank, size, env_int("OMPI_COMM_WORLD_LOCAL_RANK", local) ? local : 0, true};
    e.size_source = "OMPI_COMM_WORLD_SIZE";
  } else if (env_int("PMIX_RANK", rank)) {
    w = {rank, 1, 0, true};
    if (const char* src = slurm_size(size)) {
      w.size = size;
      e.size_source = src;
    }
    if (env_int("SLURM_LOCALID", local)) w.local_rank = local;
  } else if (env_int("PMI_RANK", rank) && env_int("PMI_SIZE", size)) {
    w = {rank, size, env_int("MPI_LOCALRANKID", local) ? local : 0, true};
    e.size_source = "PMI_SIZE";
  } else if (env_int("SLURM_PROCID", rank)) {
    if (const char* src = slurm_size(size)) {
      w = {rank, size, env_int("SLURM_LOCALID", local) ? local : 0, true};
      e.size_source = src;
    }
  }
  // Plain RANK/WORLD_SIZE/LOCAL_RANK (torchrun-style launchers, or a shell loop) only when no MPI
  // launcher and no Slurm job step describes the process: theirs is the authoritative view.
  const bool mpi_vars = env_set("OMPI_COMM_WORLD_RANK") || env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") ||
                        env_set("PMI_RANK") || env_set("PMI_SIZE");
  if (!w.launched && !mpi_vars && !env_set("SLURM_STEP_NUM_TASKS") && env_int("RANK", rank) &&
      env_int("WORLD_SIZE", size) && size >= 1) {
    w = {rank, size, env_int("LOCAL_RANK", local) ? local : 0, true};
    e.size_source = "WORLD_SIZE";
    e.plain = true;
  }
  if (w.launched && w.size < 1) w.size = 1;
  return e;
}

std::string layout_str(const ParallelSizes& s) {
  return "parallelism.tp=" + std::to_string(s.tp) + " cp=" + std::to_string(s.cp) + " dp=" + std::to_string(s.dp) +
         " pp=" + std::to_string(s.pp) + " (world = tp·cp·dp·pp = " + std::to_string(s.world()) + ")";
}

[[noreturn]] void throw_world_mismatch(const ParallelSizes& s, int launched, const std::string& source) {
  throw std::runtime_error(layout_str(s) + " needs " + std::to_string(s.world()) + " ranks, but the launcher started " +
                           std::to_string(launched) +
                           (source.empty() ? "" : " (" + source + "=" + std::to_string(launched) + ")") +
                           ". Fix: launch " + std::to_string(s.world()) + " ranks (mpirun -np " +
                           std::to_string(s.world()) + ", srun -n " + std::to_string(s.world()) +
                           ", or the executor's --nodes/--gpus-per-node), or change "
                           "parallelism.tp/cp/dp/pp so that their product is " +
                           std::to_string(launched));
}

void validate_sizes(const ParallelSizes& s) {
  if (s.tp < 1 || s.cp < 1 || s.dp < 1 || s.pp < 1)
    throw std::runtime_error(layout_str(s) + ": every parallel size must be at least 1");
}

std::unique_ptr<ParallelState> single_process_state() {
  return std::make_unique<ParallelState>(ParallelState::single_process());
}

#if RECIPE_WITH_MPI

// MPI_Finalize runs from an atexit handler registered when this code initialized MPI, so it runs
// after main() returns (and after static objects constructed later are destroyed). Communicators
// still alive then are not freed by it: MpiComm's destructor checks MPI_Finalized first.
void finalize_mpi_at_exit() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

void ensure_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) throw std::runtime_error("bootstrap_parallel: MPI was already finalized in this process");
  MPI_Initialized(&initialized);
  if (initialized) return;  // whoever initialized MPI finalizes it
  int provided = 0;
  // FUNNELED: only the main thread calls MPI (the trainer's data-loader threads never do).
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread", "world");
  std::atexit(finalize_mpi_at_exit);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

// The communicator of one group. `members` are its world ranks in group-rank order.
// `split_needed` must be the same on every rank (it derives from the global sizes), because
// MPI_Comm_split is collective over the whole world. Groups of one are identities: a rank whose
// group is just itself (a middle pipeline stage for the embedding group) joins the split with
// MPI_UNDEFINED and gets a SingleProcessComm.
std::unique_ptr<Comm> make_group(const std::vector<int>& members, bool split_needed, int world_rank,
                                 const std::string& name, kernels::Backend& backend) {
  if (!split_needed) return std::make_unique<SingleProcessComm>(name);
  const bool member = members.size() > 1;
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, member ? members.front() : MPI_UNDEFINED, world_rank, &comm),
            "MPI_Comm_split", name);
  if (!member) return std::make_unique<SingleProcessComm>(name);
  int size = 0, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  if (size != int(members.size()) || members[size_t(rank)] != world_rank) {
    MPI_Comm_free(&comm);
    throw std::logic_error("bootstrap_parallel: the split of group '" + name + "' disagrees with the rank layout");
  }
  if (backend.device() == kernels::Device::cuda) {
#if RECIPE_WITH_NCCL
    return std::make_unique<NcclComm>(comm, name, backend);
#else
    MPI_Comm_free(&comm);
    throw std::runtime_error("bootstrap_parallel: CUDA ranks need NCCL, which this build lacks");
#endif
  }
  return std::make_unique<MpiComm>(comm, name);
}

#endif  // RECIPE_WITH_MPI

#if RECIPE_WITH_NCCL
// A group of a store world: NCCL with its unique id through the store. The same creation order on
// every rank (world, tp, cp, dp, pp, embedding) keeps the blocking ncclCommInitRank calls matched:
// each kind's groups partition the ranks, so no rank waits on a group another has not reached.
std::unique_ptr<Comm> make_store_group(RendezvousStore& store, const std::vector<int>& members, int world_rank,
                                       const std::string& name, kernels::Backend& backend) {
  if (members.size() <= 1) return std::make_unique<SingleProcessComm>(name);
  return std::make_unique<NcclComm>(store, members, world_rank, name, backend);
}
#endif

// A world started with RANK/WORLD_SIZE/LOCAL_RANK and no MPI: CUDA ranks only, communicators
// over NCCL whose ids (and nothing else) go through RECIPE_RENDEZVOUS_DIR.
std::unique_ptr<ParallelState> bootstrap_store_world(const ParallelSizes& sizes, const LauncherWorld& env,
                                                     kernels::Backend& backend) {
  const int world = sizes.world();
  if (env.rank >= env.size)
    throw std::runtime_error("RANK=" + std::to_string(env.rank) +
                             " is not below WORLD_SIZE=" + std::to_string(env.size) + ". Fix: give the ranks RANK=0.." +
                             std::to_string(env.size - 1));
  if (world == 1) return single_process_state();
  if (backend.device() != kernels::Device::cuda)
    throw std::runtime_error(layout_str(sizes) + " on --device " + backend.name() + ": rank " +
                             std::to_string(env.rank) +
                             " was started with RANK/WORLD_SIZE (no MPI), and CPU "
                             "ranks need MPI: start them with mpirun -np " +
                             std::to_string(world) + " (or srun), or run the RANK/WORLD_SIZE world on CUDA");
#if !RECIPE_WITH_NCCL
  throw std::runtime_error(layout_str(sizes) +
                           " on CUDA needs NCCL, but this recipe binary was built without "
                           "it. Fix: install NCCL (libnccl-dev) and rebuild");
#else
  RendezvousStore store = RendezvousStore::from_env(env.rank, world);
  const int me = env.rank;
  std::vector<int> everyone(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) everyone[size_t(r)] = r;
  auto world_comm = make_store_group(store, everyone, me, "world", backend);
  auto group = [&](Group g, const char* name) {
    return make_store_group(store, group_ranks(sizes, me, g), me, name, backend);
  };
  auto tp = group(Group::tp, "tp");
  auto cp = group(Group::cp, "cp");
  auto dp = group(Group::dp, "dp");
  auto pp = group(Group::pp, "pp");
  auto embedding = make_store_group(store, embedding_group_ranks(sizes, me), me, "embedding", backend);
  return std::make_unique<ParallelState>(sizes, me, std::move(world_comm), std::move(tp), std::move(cp), std::move(dp),
                                         std::move(pp), std::move(embedding));
#endif
}

}  // namespace

LauncherWorld launcher_world() { return read_launcher_env().world; }

bool built_with_mpi() {
#if RECIPE_WITH_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<ParallelState> bootstrap_parallel(const ParallelSizes& sizes, kernels::Backend& backend) {
  validate_sizes(sizes);
  const EnvWorld env = read_launcher_env();
  const int world = sizes.world();
  if (world == 1 && !env.world.launched) return single_process_state();
  if (!env.size_source.empty() && env.world.size != world) throw_world_mismatch(sizes, env.world.size, env.size_source);
  if (env.plain) return bootstrap_store_world(sizes, env.world, backend);

#if !RECIPE_WITH_MPI
  if (world > 1)
    throw std::runtime_error(layout_str(sizes) + " needs " + std::to_string(world) +
                             " ranks, but this recipe binary was built without MPI and can only run "
                             "one process. Fix: install Open MPI (libopenmpi-dev) and rebuild, or set "
                             "parallelism.tp/cp/dp/pp to 1");
  return single_process_state();  // a launcher started exactly one rank
#else
  if (!env.world.launched)
    throw std::runtime_error(layout_str(sizes) + " needs " + std::to_string(world) +
                             " ranks, but this process was started alone (no mpirun/srun environment). "
                             "Fix: start it through an executor (recipe pretrain ... --executor local|mpi|slurm) "
                             "or `mpirun -np " +
                             std::to_string(world) + " ...`, or set parallelism.tp/cp/dp/pp to 1");
#if !RECIPE_WITH_NCCL
  if (backend.device() == kernels::Device::cuda && world > 1)
    throw std::runtime_error(layout_str(sizes) +
                             " on CUDA needs NCCL, but this recipe binary was built without "
                             "it. Fix: install NCCL (libnccl-dev) and rebuild, or run the ranks with --device cpu");
#endif
  ensure_mpi();
  int mpi_size = 0, world_rank = 0;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &mpi_size), "MPI_Comm_size", "world");
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank", "world");
  if (mpi_size != world) throw_world_mismatch(sizes, mpi_size, "MPI_Comm_size(MPI_COMM_WORLD)");

  // The same order on every rank: MPI splits and NCCL initializations are collective.
  std::unique_ptr<Comm> world_comm;
  if (world == 1) {
    world_comm = std::make_unique<SingleProcessComm>("world");
  } else {
    MPI_Comm dup = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup", "world");
    if (backend.device() == kernels::Device::cuda) {
#if RECIPE_WITH_NCCL
      world_comm = std::make_unique<NcclComm>(dup, "world", backend);
#endif
    } else {
      world_comm = std::make_unique<MpiComm>(dup, "world");
    }
  }
  auto group = [&](Group g, int n, const char* name) {
    return make_group(group_ranks(sizes, world_rank, g), n > 1, world_rank, name, backend);
  };
  auto tp = group(Group::tp, sizes.tp, "tp");
  auto cp = group(Group::cp, sizes.cp, "cp");
  auto dp = group(Group::dp, sizes.dp, "dp");
  auto pp = group(Group::pp, sizes.pp, "pp");
  auto embedding = make_group(embedding_group_ranks(sizes, world_rank), sizes.pp > 1, world_rank, "embedding", backend);
  return std::make_unique<ParallelState>(sizes, world_rank, std::move(world_comm), std::move(tp), std::move(cp),
                                         std::move(dp), std::move(pp), std::move(embedding));
#endif
}

void abort_world(int exit_code) {
  std::fflush(nullptr);  // what the rank printed about its failure must reach the log
#if RECIPE_WITH_MPI
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
#endif
  std::_Exit(exit_code);
}

}  // namespace recipe::core
