// A Comm over an MPI communicator, for host (CPU) tensors.
//
// Data movement (broadcast, all-gather, send/recv) sends raw elements: f32 as MPI_FLOAT, i32 as
// MPI_INT32_T, bf16 as MPI_UINT16_T. Sums and maxima need arithmetic, which MPI has no bf16 type
// for: bf16 tensors are widened into an f32 staging vector, reduced in f32 and rounded back once,
// so every rank rounds the same f32 result and the bf16 results stay bitwise identical.
// MPI's reductions give the same bits on every rank of a group (Open MPI's algorithms combine
// the same operands in a rank-independent order), and nothing here post-processes per rank.
//
// Errors: the communicator returns error codes (MPI_ERRORS_RETURN) which become std::runtime_error
// naming the operation and the group; shape/dtype misuse throws std::invalid_argument before any
// rank enters the collective.
#pragma once

#if RECIPE_WITH_MPI

#include <mpi.h>

#include <deque>
#include <string>
#include <vector>

#include "core/parallel/parallel_state.hpp"

namespace recipe::core {

class MpiComm final : public Comm {
 public:
  // Takes ownership of `comm` (not MPI_COMM_WORLD/SELF: pass a duplicate); it is freed in the
  // destructor while MPI is still running (after MPI_Finalize there is nothing to free).
  MpiComm(MPI_Comm comm, std::string name);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  MPI_Comm handle() const { return comm_; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  // Blocking: the non-blocking collective waited at once (the started form's arithmetic, see
  // comm_mpi.cpp).
  void all_reduce_sum(kernels::Tensor t) override;
  double all_reduce_sum(double v) override;
  double all_reduce_max(double v) override;
  void broadcast(kernels::Tensor t, int root) override;
  void barrier() override;
  void all_reduce_max(kernels::Tensor t) override;
  // In place (out == chunk rank() of in) the rest of `in` is left as it was. Blocking: the
  // non-blocking collective waited at once (the started form's arithmetic, see comm_mpi.cpp).
  void reduce_scatter_sum(kernels::Tensor out, kernels::Tensor in) override;
  void all_gather(kernels::Tensor out, kernels::Tensor in) override;
  void send_recv(kernels::Tensor send, int dst, kernels::Tensor recv, int src) override;
  void wait_all() override;
  // ---- one started op waited for alone (comm.hpp) ----
  // Non-blocking collectives (MPI_Iallreduce, MPI_Ireduce_scatter_block, MPI_Iallgather) or
  // MPI_Irecv + MPI_Isend; wait(op) is MPI_Wait on its requests, then the result moves out of its
  // staging (a bf16 sum, an in-place reduce-scatter); the entry stays in the pending list with null
  // requests and nothing left to move until wait_all(). Without an MPI progress thread the
  // transfer advances inside MPI calls, so on CPU the overlap is modest; the ordering guarantees
  // are what matter.
  Op all_reduce_sum_start(kernels::Tensor t) override;
  Op reduce_scatter_sum_start(kernels::Tensor out, kernels::Tensor in) override;
  Op all_gather_start(kernels::Tensor out, kernels::Tensor in) override;
  Op send_recv_start(kernels::Tensor send, int dst, kernels::Tensor recv, int src) override;
  bool started_ops_in_order() const override { return false; }
  void wait(Op op) override;

 private:
  // A started operation: its request, and the host staging that must outlive it (the f32 widening
  // of a bf16 tensor, or the reduce-scatter result before it is moved into `out`).
  struct Pending {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Request request2 = MPI_REQUEST_NULL;  // send_recv_start's send (request: its receive)
    kernels::Tensor dst;                      // where the result goes at completion
    std::vector<float> staging;               // f32 result (bf16 dst: rounded back; f32 dst: copied)
    std::vector<float> staging_in;            // bf16 input widened to f32 (reduce-scatter)
    bool copy_back = false;
    int64_t seq = -1;  // the op's handle (Op::seq); -1 for a blocking call's staging
  };

  void check(int rc, const char* op) const;
  void start_reduce_scatter(Pending& p, kernels::Tensor out, kernels::Tensor in, const char* op);
  void start_all_reduce(Pending& p, kernels::Tensor t, const char* op);
  static void finish(Pending& p);
  // Posts send_recv's receive and send into `requests` (null where a half is undefined).
  void post_send_recv(kernels::Tensor send, int dst, kernels::Tensor recv, int src, MPI_Request* requests,
                      const char* op);

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string name_;
  int rank_ = 0, size_ = 1;
  std::deque<Pending> pending_;
  int64_t next_seq_ = 0;  // the waitable ops' handles, counted over the communicator's life
  Pending scratch_;       // the blocking sums' request and staging, reused: steady state never allocates
};

// Throws std::runtime_error "<what> failed in <group>: <MPI's error string>" when rc != MPI_SUCCESS.
void check_mpi(int rc, const char* what, const std::string& group);

// MPI's datatype for moving `dt` elements without arithmetic (bf16 → MPI_UINT16_T).
MPI_Datatype mpi_transfer_type(kernels::DType dt);

}  // namespace recipe::core

#endif  // RECIPE_WITH_MPI
