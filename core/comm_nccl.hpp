// A Comm for CUDA tensors: NCCL moves device memory, MPI carries the host scalars.
//
// Streams: every NCCL operation of one communicator runs on the communicator's own stream
// (`comm stream`), so operations of one communicator never run concurrently with each other (which
// NCCL requires) whether they were started blocking or asynchronously. Ordering with the training
// step uses events, never host waits:
//   compute stream ──record ready──► comm stream waits on ready ─► NCCL op ─► record done
//   blocking forms:  the compute stream waits on done at once (later kernels see the result);
//   *_start forms:   the compute stream waits on done only at wait_all() (the backward pass keeps
//                    running while gradients reduce).
// The host is never blocked, and the pattern (fork/join with events) is legal inside CUDA-graph
// capture as long as wait_all() is called before the capture ends.
// Scalar collectives and barrier() go through the group's MPI communicator on the host.
#pragma once

#if RECIPE_WITH_NCCL && RECIPE_WITH_MPI

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <string>

#include "core/comm_mpi.hpp"
#include "kernels/ops.hpp"

namespace recipe::core {

class NcclComm final : public Comm {
 public:
  // Collective over `group` (whose ownership passes to the comm): group rank 0 creates the NCCL
  // unique id and broadcasts it over MPI; every member then joins with ncclCommInitRank on the
  // backend's device. `backend` must be the CUDA backend (its stream is the compute stream).
  NcclComm(MPI_Comm group, std::string name, kernels::Backend& backend);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t handle() const { return comm_; }
  cudaStream_t comm_stream() const { return side_; }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string name() const override { return host_.name(); }
  void all_reduce_sum(kernels::Tensor t) override;
  double all_reduce_sum(double v) override { return host_.all_reduce_sum(v); }
  double all_reduce_max(double v) override { return host_.all_reduce_max(v); }
  void broadcast(kernels::Tensor t, int root) override;
  void barrier() override { host_.barrier(); }
  void all_reduce_max(kernels::Tensor t) override;
  void reduce_scatter_sum(kernels::Tensor out, kernels::Tensor in) override;
  void all_gather(kernels::Tensor out, kernels::Tensor in) override;
  void send_recv(kernels::Tensor send, int dst, kernels::Tensor recv, int src) override;
  void all_reduce_sum_start(kernels::Tensor t) override;
  void reduce_scatter_sum_start(kernels::Tensor out, kernels::Tensor in) override;
  void wait_all() override;

 private:
  void fork();  // the comm stream waits for the compute stream's work so far
  void join();  // the compute stream waits for the comm stream's work so far
  void check(ncclResult_t rc, const char* op) const;
  void enqueue_all_reduce(kernels::Tensor t, ncclRedOp_t op, const char* what);
  void enqueue_reduce_scatter(kernels::Tensor out, kernels::Tensor in, const char* what);

  MpiComm host_;
  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  cudaStream_t compute_ = nullptr;  // the backend's stream (not owned)
  cudaStream_t side_ = nullptr;     // the comm stream (owned)
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  bool pending_ = false;            // *_start work not yet joined by wait_all()
};

}  // namespace recipe::core

#endif  // RECIPE_WITH_NCCL && RECIPE_WITH_MPI
