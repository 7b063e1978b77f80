// The communicator interface of one group of ranks (`Comm`) and the group of one. Model code
// (the linears' TP reductions, the vocab-parallel loss) and the trainer (DP, PP) talk to groups
// only through it; comm_mpi.* and comm_nccl.* implement it, parallel_state.* owns the instances.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

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
  // Asynchronous forms, for overlapping communication with computation: *_start enqueues (NCCL: on
  // the communicator's own stream, after the work already issued on the compute stream; MPI: a
  // non-blocking collective) and returns the op's handle; wait_all() completes everything started,
  // after which the host and later device work see the results. The tensors must stay untouched
  // until then (or until the op's own wait, below). The defaults run the blocking form at once and
  // return a handle that waits for nothing.
  //
  // ---- One started operation, waited for alone (issue 20: ZeRO-1's weight gather overlapped with
  // the next forward, core/train/grad_sync.cpp, whose gradient buckets are started and joined by
  // wait_all(); the TP linears' backward collectives overlapped with their weight-gradient GEMM,
  // core/model/linear.cpp; the TP communication overlap's ring steps, parallelism.tp_comm_overlap,
  // core/model/linear_overlap.cpp) ----
  // all_reduce_sum_start, reduce_scatter_sum_start, all_gather_start and send_recv_start enqueue
  // their blocking forms' work; wait(op) makes that one result visible to later work without
  // waiting for the rest (NCCL: the compute stream waits on the op's event, the host does not
  // wait, legal inside CUDA-graph capture; MPI: MPI_Wait on its requests, then the result is moved
  // out of its staging). The result is the blocking form's, bit for bit, so a caller may mix the
  // two forms (the TP linears do): NCCL runs the same call; MPI's blocking sums are the
  // non-blocking collectives waited at once (Open MPI's blocking and non-blocking algorithms sum in
  // different orders beyond two ranks).
  // wait_all() completes them too, and a handle from before the last wait_all() waits for nothing;
  // a user that never needs wait_all() otherwise calls it after its last wait, so the handles'
  // events (NCCL) and requests (MPI) are recycled.
  struct Op {
    int64_t seq = -1;  // the communicator's count of started ops; -1: complete already
  };
  virtual Op all_reduce_sum_start(kernels::Tensor t) {
    all_reduce_sum(t);
    return {};
  }
  virtual Op reduce_scatter_sum_start(kernels::Tensor out, kernels::Tensor in) {
    reduce_scatter_sum(out, in);
    return {};
  }
  virtual void wait_all() {}
  virtual Op all_gather_start(kernels::Tensor out, kernels::Tensor in) {
    all_gather(out, in);
    return {};
  }
  virtual Op send_recv_start(kernels::Tensor send, int dst, kernels::Tensor recv, int src) {
    send_recv(send, dst, recv, src);
    return {};
  }
  virtual void wait(Op) {}
  // Whether the started ops of this communicator run one after the other in the order started
  // (NCCL: one comm stream; the defaults: each is complete when its start returns). MPI's
  // non-blocking operations may run at once, so a caller that starts an op writing a buffer an
  // earlier started op still reads must wait for that one first (the pipeline's overlapped
  // exchanges, core/train/pipeline_schedule.cpp).
  virtual bool started_ops_in_order() const { return true; }
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

}  // namespace recipe::core
