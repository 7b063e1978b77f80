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

#include "core/parallel/comm.hpp"
#include "plan/plan.hpp"

namespace recipe::core {

struct ParallelSizes {
  int tp = 1, cp = 1, dp = 1, pp = 1;
  int world() const { return tp * cp * dp * pp; }
};

struct RankCoords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

enum class Group { tp, cp, dp, pp };

// Sizes of a resolved plan, read as they are (the resolver derived dp and checked world = tp·cp·dp·pp).
ParallelSizes parallel_sizes(const plan::Plan& plan);

RankCoords rank_coords(const ParallelSizes& sizes, int world_rank);
int world_rank_of(const ParallelSizes& sizes, const RankCoords& coords);
// World ranks of the members of `world_rank`'s group of kind g, in group-rank order.
std::vector<int> group_ranks(const ParallelSizes& sizes, int world_rank, Group g);
// World ranks of the embedding group of `world_rank`: {stage 0, stage pp-1} at its (tp, cp, dp)
// when pp > 1 and `world_rank` is one of those two stages, else just itself (pp = 1, or a middle
// stage, which holds no embedding).
std::vector<int> embedding_group_ranks(const ParallelSizes& sizes, int world_rank);

class ParallelState {
 public:
  // The single-process world: all sizes 1, all communicators identities.
  static ParallelState single_process();
  // A world whose communicators were built by a launcher (MPI/NCCL). Throws std::invalid_argument
  // if a communicator's size disagrees with the layout.
  // `embedding`: the first and last pipeline stage of this rank's (tp, cp, dp) coordinates when
  // pp > 1 (they both hold the tied word embedding and sum its gradients); null = a group of one.
  ParallelState(ParallelSizes sizes, int world_rank, std::unique_ptr<Comm> world, std::unique_ptr<Comm> tp,
                std::unique_ptr<Comm> cp, std::unique_ptr<Comm> dp, std::unique_ptr<Comm> pp,
                std::unique_ptr<Comm> embedding = nullptr);

  const ParallelSizes& sizes() const { return sizes_; }
  const RankCoords& coords() const { return coords_; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return sizes_.world(); }
  Comm& world() const { return *world_; }
  Comm& tp() const { return *tp_; }
  Comm& cp() const { return *cp_; }
  Comm& dp() const { return *dp_; }
  Comm& pp() const { return *pp_; }
  Comm& embedding() const { return *embedding_; }
  bool first_stage() const { return coords_.pp == 0; }
  bool last_stage() const { return coords_.pp == sizes_.pp - 1; }

 private:
  ParallelSizes sizes_;
  RankCoords coords_;
  int world_rank_ = 0;
  std::unique_ptr<Comm> world_, tp_, cp_, dp_, pp_, embedding_;
};

}  // namespace recipe::core
