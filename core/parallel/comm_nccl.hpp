// A Comm for CUDA tensors: NCCL moves device memory; the host scalars go over MPI when the world is
// an MPI world, else over NCCL too.
//
// Streams: every NCCL operation of one communicator runs on the communicator's own stream
// (`comm stream`), so operations of one communicator never run concurrently with each other (which
// NCCL requires) whether they were started blocking or asynchronously. Ordering with the training
// step uses events, never host waits:
//   compute stream ──record ready──► comm stream waits on ready ─► NCCL op ─► record done
//   blocking forms:  the compute stream waits on done at once (later kernels see the result);
//   *_start forms:   the compute stream waits on done only at wait_all() (the backward pass keeps
//                    running while gradients reduce), or on that operation's own event at wait(op)
//                    (all_gather_start, send_recv_start: the next forward's weights, the TP
//                    overlap's row blocks).
// The host is never blocked, and the pattern (fork/join with events) is legal inside CUDA-graph
// capture as long as wait_all() is called before the capture ends.
// Scalar collectives and barrier():
//   MPI world (first constructor): through the group's MPI communicator on the host.
//   store world (second constructor, no MPI): a one-double device scratch buffer all-reduced
//     (ncclFloat64) on the comm stream, which the host then synchronizes; the comm stream, not the
//     compute stream, so that they stay ordered with this communicator's other NCCL work.
#pragma once

#if RECIPE_WITH_NCCL

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/parallel/parallel_state.hpp"
#include "core/parallel/rendezvous_store.hpp"
#include "kernels/ops.hpp"

#if RECIPE_WITH_MPI
#include <mpi.h>

#include "core/parallel/comm_mpi.hpp"
#endif

namespace recipe::core {

class NcclComm final : public Comm {
 public:
  // Collective over `group` (whose ownership passes to the comm): group rank 0 creates the NCCL
  // unique id and broadcasts it over MPI; every member then joins with ncclCommInitRank on the
  // backend's device. `backend` must be the CUDA backend (its stream is the compute stream).
#if RECIPE_WITH_MPI
  NcclComm(MPI_Comm group, std::string name, kernels::Backend& backend);
#endif
  // Collective over `members` (world ranks in group-rank order; this rank, `world_rank`, among
  // them), without MPI: the first member creates the unique id and sets it in the store under
  // "nccl-id/<name>/<first member>"; the others get it from there.
  NcclComm(RendezvousStore& store, const std::vector<int>& members, int world_rank, std::string name,
           kernels::Backend& backend);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t handle() const { return comm_; }
  cudaStream_t comm_stream() const { return side_; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  void all_reduce_sum(kernels::Tensor t) override;
  double all_reduce_sum(double v) override;
  double all_reduce_max(double v) override;
  void broadcast(kernels::Tensor t, int root) override;
  void barrier() override;
  void all_reduce_max(kernels::Tensor t) override;
  void reduce_scatter_sum(kernels::Tensor out, kernels::Tensor in) override;
  void all_gather(kernels::Tensor out, kernels::Tensor in) override;
  void send_recv(kernels::Tensor send, int dst, kernels::Tensor recv, int src) override;
  void wait_all() override;
  // ---- one started op waited for alone (comm.hpp) ----
  // On the comm stream like every op, followed by a record of its own event; wait(op) makes the
  // compute stream wait on that event only (no host wait; legal inside CUDA-graph capture as
  // long as the op is waited, or wait_all() called, before the capture ends).
  Op all_reduce_sum_start(kernels::Tensor t) override;
  Op reduce_scatter_sum_start(kernels::Tensor out, kernels::Tensor in) override;
  Op all_gather_start(kernels::Tensor out, kernels::Tensor in) override;
  Op send_recv_start(kernels::Tensor send, int dst, kernels::Tensor recv, int src) override;
  void wait(Op op) override;

 private:
  void attach(kernels::Backend& backend);          // device and compute stream of the CUDA backend
  void init(const ncclUniqueId& id);               // ncclCommInitRank, then streams and events
  double device_scalar(double v, ncclRedOp_t op);  // the store world's host scalar collective
  void fork();                                     // the comm stream waits for the compute stream's work so far
  void join();                                     // the compute stream waits for the comm stream's work so far
  void check(ncclResult_t rc, const char* op) const;
  void enqueue_all_reduce(kernels::Tensor t, ncclRedOp_t op, const char* what);
  void enqueue_reduce_scatter(kernels::Tensor out, kernels::Tensor in, const char* what);
  void enqueue_all_gather(kernels::Tensor out, kernels::Tensor in, const char* what);
  bool enqueue_send_recv(kernels::Tensor send, int dst, kernels::Tensor recv, int src, const char* what);
  Op record_op();  // the op just enqueued: its event recorded after it, its handle

  std::string name_;
  int rank_ = 0, size_ = 1;
#if RECIPE_WITH_MPI
  std::unique_ptr<MpiComm> host_;  // the MPI world's group communicator; null in a store world
#endif
  double* scratch_ = nullptr;  // device, one double: the store world's scalar collectives
  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  cudaStream_t compute_ = nullptr;  // the backend's stream (not owned)
  cudaStream_t side_ = nullptr;     // the comm stream (owned)
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  bool pending_ = false;  // *_start work not yet joined by wait_all()
  // The waitable ops' events: op `seq` (first_seq_ ≤ seq < next_seq_, started since the last
  // wait_all()) has op_events_[seq - first_seq_], recorded on the comm stream right after it.
  // Created on first need and reused after every wait_all(), so a step that starts as many ops as
  // the one before creates none (the CUDA-graph capture follows an eager warm-up step).
  std::vector<cudaEvent_t> op_events_;
  int64_t first_seq_ = 0, next_seq_ = 0;
};

}  // namespace recipe::core

#endif  // RECIPE_WITH_NCCL
