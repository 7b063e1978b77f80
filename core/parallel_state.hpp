// The rank layout of a training world and the communicators of its groups.
//
// Ranks are laid out tp → cp → dp → pp (Megatron order: TP neighbours are adjacent ranks, so a TP
// group lives inside one node):
//   world_rank = tp_rank + tp·(cp_rank + cp·(dp_rank + dp·pp_rank))
// Sizes of 1 are the normal single-process case, not a separate code path: model and trainer code
// always talk to the group communicators, which are identities when a group has one member.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dsl/plan.hpp"
#include "kernels/tensor.hpp"

namespace recipe::core {

// A communicator over one group of ranks. Tensor collectives work in place on f32 or bf16
// tensors of the trainer's device; scalar collectives are for norms, losses and flags.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;
  virtual void all_reduce_sum(kernels::Tensor t) = 0;
  virtual double all_reduce_sum(double v) = 0;
  virtual double all_reduce_max(double v) = 0;
  virtual void broadcast(kernels::Tensor t, int root) = 0;
  virtual void barrier() = 0;
};

// The group of one: every collective is the identity.
class SingleProcessComm final : public Comm {
 public:
  explicit SingleProcessComm(std::string name = "self") : name_(std::move(name)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return name_; }
  void all_reduce_sum(kernels::Tensor) override {}
  double all_reduce_sum(double v) override { return v; }
  double all_reduce_max(double v) override { return v; }
  void broadcast(kernels::Tensor, int) override {}
  void barrier() override {}

 private:
  std::string name_;
};

struct ParallelSizes {
  int tp = 1, cp = 1, dp = 1, pp = 1;
  int world() const { return tp * cp * dp * pp; }
};

struct RankCoords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

enum class Group { tp, cp, dp, pp };

// Sizes from a resolved plan (dp = 0 there means "derive from the world": world_size/(tp·cp·pp)).
ParallelSizes parallel_sizes(const dsl::Plan& plan);

RankCoords rank_coords(const ParallelSizes& sizes, int world_rank);
int world_rank_of(const ParallelSizes& sizes, const RankCoords& coords);
// World ranks of the members of `world_rank`'s group of kind g, in group-rank order.
std::vector<int> group_ranks(const ParallelSizes& sizes, int world_rank, Group g);

class ParallelState {
 public:
  // The single-process world: all sizes 1, all communicators identities.
  static ParallelState single_process();
  // A world whose communicators were built by a launcher (MPI/NCCL). Throws std::invalid_argument
  // if a communicator's size disagrees with the layout.
  ParallelState(ParallelSizes sizes, int world_rank, std::unique_ptr<Comm> world,
                std::unique_ptr<Comm> tp, std::unique_ptr<Comm> cp, std::unique_ptr<Comm> dp,
                std::unique_ptr<Comm> pp);

  const ParallelSizes& sizes() const { return sizes_; }
  const RankCoords& coords() const { return coords_; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return sizes_.world(); }
  Comm& world() const { return *world_; }
  Comm& tp() const { return *tp_; }
  Comm& cp() const { return *cp_; }
  Comm& dp() const { return *dp_; }
  Comm& pp() const { return *pp_; }

 private:
  ParallelSizes sizes_;
  RankCoords coords_;
  int world_rank_ = 0;
  std::unique_ptr<Comm> world_, tp_, cp_, dp_, pp_;
};

}  // namespace recipe::core
