#include "core/comm_nccl.hpp"

#if RECIPE_WITH_NCCL && RECIPE_WITH_MPI

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_backend.hpp"

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

namespace {

void cuda_check(cudaError_t rc, const char* what, const std::string& group) {
  if (rc != cudaSuccess)
    throw std::runtime_error(std::string(what) + " failed in communicator '" + group + "': " +
                             cudaGetErrorString(rc));
}

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
  }
  throw std::invalid_argument("nccl_type: unknown dtype");
}

void require_device(const Tensor& t, const std::string& group, const char* op, const char* what) {
  if (!t.defined() && t.numel() > 0)
    throw std::invalid_argument(group + "." + op + ": " + what + " has no memory");
  if (t.device != kernels::Device::cuda)
    throw std::invalid_argument(group + "." + op + ": " + what + " " + t.shape_str() +
                                " is a host tensor; NCCL communicators move CUDA memory");
}

void require_chunks(const Tensor& part, const Tensor& whole, int size, const std::string& group, const char* op) {
  if (part.dtype != whole.dtype)
    throw std::invalid_argument(group + "." + op + ": dtypes differ (" + part.shape_str() + " vs " +
                                whole.shape_str() + ")");
  if (whole.numel() != part.numel() * size)
    throw std::invalid_argument(group + "." + op + ": " + whole.shape_str() + " must hold " +
                                std::to_string(size) + " chunks of " + part.shape_str());
}

// NCCL works in place only when the chunk is exactly chunk rank of the full buffer; any other
// overlap would silently corrupt data, so it is refused.
void require_chunk_or_disjoint(const Tensor& part, const Tensor& whole, int rank, const std::string& group,
                               const char* op) {
  auto p0 = static_cast<const char*>(part.ptr), w0 = static_cast<const char*>(whole.ptr);
  const bool overlap = p0 < w0 + whole.bytes() && w0 < p0 + part.bytes();
  if (overlap && p0 != w0 + size_t(rank) * part.bytes())
    throw std::invalid_argument(group + "." + op + ": the " + part.shape_str() + " chunk overlaps the full " +
                                whole.shape_str() + " tensor but is not chunk rank()=" + std::to_string(rank) +
                                " of it; pass exactly that chunk (in place) or separate memory");
}

}  // namespace

NcclComm::NcclComm(MPI_Comm group, std::string name, kernels::Backend& backend) : host_(group, std::move(name)) {
  auto* cuda = dynamic_cast<kernels::cuda::CudaBackend*>(&backend);
  if (!cuda)
    throw std::invalid_argument("NcclComm '" + host_.name() + "': NCCL communicators need the CUDA backend, got " +
                                backend.name());
  device_ = cuda->device_index();
  compute_ = cuda->stream();
  cuda_check(cudaSetDevice(device_), "cudaSetDevice", host_.name());

  ncclUniqueId id{};
  if (host_.rank() == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess)
      throw std::runtime_error("ncclGetUniqueId failed for communicator '" + host_.name() +
                               "': " + ncclGetErrorString(rc));
  }
  check_mpi(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, host_.handle()), "MPI_Bcast(NCCL unique id)", host_.name());
  const ncclResult_t rc = ncclCommInitRank(&comm_, host_.size(), id, host_.rank());
  if (rc != ncclSuccess) {
    comm_ = nullptr;
    throw std::runtime_error("ncclCommInitRank failed for communicator '" + host_.name() + "' (rank " +
                             std::to_string(host_.rank()) + " of " + std::to_string(host_.size()) + ", device " +
                             std::to_string(device_) + "): " + ncclGetErrorString(rc) +
                             "; NCCL_DEBUG=WARN in the environment shows NCCL's reason");
  }
  cuda_check(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", host_.name());
  cuda_check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags", host_.name());
  cuda_check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreateWithFlags", host_.name());
}

NcclComm::~NcclComm() {
  // Errors are ignored here: a destructor cannot report them, and the process may be ending.
  if (comm_) {
    if (pending_)
      ncclCommAbort(comm_);  // unjoined work may never complete if a peer is gone
    else
      ncclCommDestroy(comm_);
  }
  if (ready_) cudaEventDestroy(ready_);
  if (done_) cudaEventDestroy(done_);
  if (side_) cudaStreamDestroy(side_);
}

void NcclComm::check(ncclResult_t rc, const char* op) const {
  if (rc == ncclSuccess) return;
  std::string detail = ncclGetErrorString(rc);
  if (const char* last = ncclGetLastError(comm_); last && *last) detail += std::string(" (") + last + ")";
  throw std::runtime_error(std::string(op) + " failed in communicator '" + host_.name() + "': " + detail);
}

void NcclComm::fork() {
  cuda_check(cudaEventRecord(ready_, compute_), "cudaEventRecord", host_.name());
  cuda_check(cudaStreamWaitEvent(side_, ready_, 0), "cudaStreamWaitEvent", host_.name());
}

void NcclComm::join() {
  cuda_check(cudaEventRecord(done_, side_), "cudaEventRecord", host_.name());
  cuda_check(cudaStreamWaitEvent(compute_, done_, 0), "cudaStreamWaitEvent", host_.name());
}

void NcclComm::enqueue_all_reduce(Tensor t, ncclRedOp_t op, const char* what) {
  require_device(t, host_.name(), what, "tensor");
  if (op == ncclMax && t.dtype != DType::f32)
    throw std::invalid_argument(host_.name() + "." + what + ": element-wise max is for f32 tensors, got " +
                                t.shape_str());
  fork();
  check(ncclAllReduce(t.ptr, t.ptr, size_t(t.numel()), nccl_type(t.dtype), op, comm_, side_), "ncclAllReduce");
}

void NcclComm::all_reduce_sum(Tensor t) {
  enqueue_all_reduce(t, ncclSum, "all_reduce_sum");
  join();
}

void NcclComm::all_reduce_max(Tensor t) {
  enqueue_all_reduce(t, ncclMax, "all_reduce_max");
  join();
}

void NcclComm::all_reduce_sum_start(Tensor t) {
  enqueue_all_reduce(t, ncclSum, "all_reduce_sum_start");
  pending_ = true;
}

void NcclComm::broadcast(Tensor t, int root) {
  require_device(t, host_.name(), "broadcast", "tensor");
  if (root < 0 || root >= size())
    throw std::invalid_argument(host_.name() + ".broadcast: root " + std::to_string(root) + " outside the group of " +
                                std::to_string(size()));
  fork();
  check(ncclBroadcast(t.ptr, t.ptr, size_t(t.numel()), nccl_type(t.dtype), root, comm_, side_), "ncclBroadcast");
  join();
}

void NcclComm::enqueue_reduce_scatter(Tensor out, Tensor in, const char* what) {
  require_device(out, host_.name(), what, "out");
  require_device(in, host_.name(), what, "in");
  require_chunks(out, in, size(), host_.name(), what);
  require_chunk_or_disjoint(out, in, rank(), host_.name(), what);
  fork();
  check(ncclReduceScatter(in.ptr, out.ptr, size_t(out.numel()), nccl_type(in.dtype), ncclSum, comm_, side_),
        "ncclReduceScatter");
}

void NcclComm::reduce_scatter_sum(Tensor out, Tensor in) {
  enqueue_reduce_scatter(out, in, "reduce_scatter_sum");
  join();
}

void NcclComm::reduce_scatter_sum_start(Tensor out, Tensor in) {
  enqueue_reduce_scatter(out, in, "reduce_scatter_sum_start");
  pending_ = true;
}

void NcclComm::all_gather(Tensor out, Tensor in) {
  require_device(out, host_.name(), "all_gather", "out");
  require_device(in, host_.name(), "all_gather", "in");
  require_chunks(in, out, size(), host_.name(), "all_gather");
  require_chunk_or_disjoint(in, out, rank(), host_.name(), "all_gather");
  fork();
  check(ncclAllGather(in.ptr, out.ptr, size_t(in.numel()), nccl_type(in.dtype), comm_, side_), "ncclAllGather");
  join();
}

void NcclComm::send_recv(Tensor send, int dst, Tensor recv, int src) {
  auto peer_ok = [&](int peer, const char* what) {
    if (peer < 0 || peer >= size())
      throw std::invalid_argument(host_.name() + ".send_recv: " + what + " rank " + std::to_string(peer) +
                                  " outside the group of " + std::to_string(size()));
  };
  if (send.defined()) {
    require_device(send, host_.name(), "send_recv", "send");
    peer_ok(dst, "destination");
  }
  if (recv.defined()) {
    require_device(recv, host_.name(), "send_recv", "recv");
    peer_ok(src, "source");
  }
  if (!send.defined() && !recv.defined()) return;
  fork();
  check(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t rc = ncclSuccess;
  if (send.defined()) rc = ncclSend(send.ptr, size_t(send.numel()), nccl_type(send.dtype), dst, comm_, side_);
  if (rc == ncclSuccess && recv.defined())
    rc = ncclRecv(recv.ptr, size_t(recv.numel()), nccl_type(recv.dtype), src, comm_, side_);
  const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after a failed call
  check(rc, "ncclSend/ncclRecv");
  check(end, "ncclGroupEnd");
  join();
}

void NcclComm::wait_all() {
  if (!pending_) return;
  join();
  pending_ = false;
}

}  // namespace recipe::core

#endif  // RECIPE_WITH_NCCL && RECIPE_WITH_MPI
