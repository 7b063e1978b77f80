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

#include "plan/plan.hpp"
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
  // Element-wise max in place (f32): the row maxima of the vocab-parallel loss.
  virtual void all_reduce_max(kernels::Tensor t) = 0;
  // out (n elements) = Σ over the group of chunk rank() of `in` (n·size() elements, same dtype).
  // `out` may be exactly that chunk of `in` (in place), which is how ZeRO-1 reduces a bucket.
  virtual void reduce_scatter_sum(kernels::Tensor out, kernels::Tensor in) = 0;
  // out (n·size() elements) = the groups' `in` (n elements each) concatenated in group-rank order.
  // `in` may be exactly chunk rank() of `out` (in place).
  virtual void all_gather(kernels::Tensor out, kernels::Tensor in) = 0;
  // Point to point inside the group: sends `send` to group rank `dst` and receives `recv` from group
  // rank `src`, both in flight together, so two neighbours calling it with mirrored arguments never
  // deadlock (the pipeline schedule's send-forward/receive-backward pairs). Either tensor may be
  // undefined: that half is skipped.
  virtual void send_recv(kernels::Tensor send, int dst, kernels::Tensor recv, int src) = 0;
  // Asynchronous forms, for overlapping gradient reduction with the backward pass. *_start enqueues
  // (NCCL: on the communicator's own stream, after the work already issued on the compute stream;
  // MPI: a non-blocking collective) and returns; wait_all() completes everything started, after
  // which the host and later device work see the results. The tensors must stay untouched until
  // then. The defaults run the blocking form at once.
  virtual void all_reduce_sum_start(kernels::Tensor t) { all_reduce_sum(t); }
  virtual void reduce_scatter_sum_start(kernels::Tensor out, kernels::Tensor in) { reduce_scatter_sum(out, in); }
  virtual void wait_all() {}
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
  void all_reduce_max(kernels::Tensor) override {}
  // In place only: with one member the chunk IS the whole tensor.
  void reduce_scatter_sum(kernels::Tensor out, kernels::Tensor in) override { require_same(out, in); }
  void all_gather(kernels::Tensor out, kernels::Tensor in) override { require_same(out, in); }
  void send_recv(kernels::Tensor send, int, kernels::Tensor recv, int) override;

 private:
  static void require_same(const kernels::Tensor& out, const kernels::Tensor& in);
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
