#include "core/parallel/comm_nccl.hpp"

#if RECIPE_WITH_NCCL

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_backend.hpp"

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

namespace {

void cuda_check(cudaError_t rc, const char* what, const std::string& group) {
  if (rc != cudaSuccess)
    throw std::runtime_error(std::string(what) + " failed in communicator '" + group + "': " + cudaGetErrorString(rc));
}

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::f32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i32:
      return ncclInt32;
    case DType::f64:
      return ncclFloat64;
    case DType::e4m3:
    case DType::e5m2:
      return ncclUint8;
  }
  throw std::invalid_argument("nccl_type: unknown dtype");
}

void require_device(const Tensor& t, const std::string& group, const char* op, const char* what) {
  if (!t.defined() && t.numel() > 0) throw std::invalid_argument(group + "." + op + ": " + what + " has no memory");
  if (t.device != kernels::Device::cuda)
    throw std::invalid_argument(group + "." + op + ": " + what + " " + t.shape_str() +
                                " is a host tensor; NCCL communicators move CUDA memory");
}

void require_chunks(const Tensor& part, const Tensor& whole, int size, const std::string& group, const char* op) {
  if (part.dtype != whole.dtype)
    throw std::invalid_argument(group + "." + op + ": dtypes differ (" + part.shape_str() + " vs " + whole.shape_str() +
                                ")");
  if (whole.numel() != part.numel() * size)
    throw std::invalid_argument(group + "." + op + ": " + whole.shape_str() + " must hold " + std::to_string(size) +
                                " chunks of " + part.shape_str());
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

void NcclComm::attach(kernels::Backend& backend) {
  auto* cuda = dynamic_cast<kernels::cuda::CudaBackend*>(&backend);
  if (!cuda)
    throw std::invalid_argument("NcclComm '" + name_ + "': NCCL communicators need the CUDA backend, got " +
                                backend.name());
  device_ = cuda->device_index();
  compute_ = cuda->stream();
  cuda_check(cudaSetDevice(device_), "cudaSetDevice", name_);
}

void NcclComm::init(const ncclUniqueId& id) {
  const ncclResult_t rc = ncclCommInitRank(&comm_, size_, id, rank_);
  if (rc != ncclSuccess) {
    comm_ = nullptr;
    throw std::runtime_error("ncclCommInitRank failed for communicator '" + name_ + "' (rank " + std::to_string(rank_) +
                             " of " + std::to_string(size_) + ", device " + std::to_string(device_) + "): " +
                             ncclGetErrorString(rc) + "; NCCL_DEBUG=WARN in the environment shows NCCL's reason");
  }
  // The collectives' stream has the device's greatest priority: while backward keeps every SM busy,
  // the blocks of a gradient bucket's all-reduce are scheduled as soon as SMs free up instead of
  // queueing behind the next GEMM's blocks, so the reduction overlaps backward instead of trailing it.
  int least = 0, greatest = 0;
  cuda_check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange", name_);
  cuda_check(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, greatest), "cudaStreamCreateWithPriority",
             name_);
  cuda_check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags", name_);
  cuda_check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreateWithFlags", name_);
}

#if RECIPE_WITH_MPI
NcclComm::NcclComm(MPI_Comm group, std::string name, kernels::Backend& backend)
    : host_(std::make_unique<MpiComm>(group, name)) {
  name_ = std::move(name);
  rank_ = host_->rank();
  size_ = host_->size();
  attach(backend);
  ncclUniqueId id{};
  if (rank_ == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess)
      throw std::runtime_error("ncclGetUniqueId failed for communicator '" + name_ + "': " + ncclGetErrorString(rc));
  }
  check_mpi(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, host_->handle()), "MPI_Bcast(NCCL unique id)", name_);
  init(id);
}
#endif

NcclComm::NcclComm(RendezvousStore& store, const std::vector<int>& members, int world_rank, std::string name,
                   kernels::Backend& backend)
    : name_(std::move(name)) {
  size_t me = 0;
  while (me < members.size() && members[me] != world_rank) ++me;
  if (me == members.size())
    throw std::logic_error("NcclComm '" + name_ + "': world rank " + std::to_string(world_rank) +
                           " is not a member of its own group");
  rank_ = int(me);
  size_ = int(members.size());
  attach(backend);
  // Group leaders are distinct world ranks per group of one kind, and names are distinct per kind:
  // every communicator of the world has its own key.
  const std::string key = "nccl-id/" + name_ + "/" + std::to_string(members.front());
  ncclUniqueId id{};
  if (rank_ == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess)
      throw std::runtime_error("ncclGetUniqueId failed for communicator '" + name_ + "': " + ncclGetErrorString(rc));
    store.set(key, std::string(reinterpret_cast<const char*>(&id), sizeof id));
  } else {
    const std::string bytes = store.get(key, members.front());
    if (bytes.size() != sizeof id)
      throw std::runtime_error("rendezvous key '" + key + "' in " + store.dir() + " holds " +
                               std::to_string(bytes.size()) + " bytes, not an NCCL unique id (" +
                               std::to_string(sizeof id) + " bytes)");
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  init(id);
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(double)), "cudaMalloc(scalar scratch)", name_);
}

double NcclComm::device_scalar(double v, ncclRedOp_t op) {
  double out = 0.0;
  cuda_check(cudaMemcpyAsync(scratch_, &v, sizeof v, cudaMemcpyHostToDevice, side_), "cudaMemcpyAsync", name_);
  check(ncclAllReduce(scratch_, scratch_, 1, ncclFloat64, op, comm_, side_), "ncclAllReduce(scalar)");
  cuda_check(cudaMemcpyAsync(&out, scratch_, sizeof out, cudaMemcpyDeviceToHost, side_), "cudaMemcpyAsync", name_);
  cuda_check(cudaStreamSynchronize(side_), "cudaStreamSynchronize", name_);
  return out;
}

double NcclComm::all_reduce_sum(double v) {
#if RECIPE_WITH_MPI
  if (host_) return host_->all_reduce_sum(v);
#endif
  return device_scalar(v, ncclSum);
}

double NcclComm::all_reduce_max(double v) {
#if RECIPE_WITH_MPI
  if (host_) return host_->all_reduce_max(v);
#endif
  return device_scalar(v, ncclMax);
}

void NcclComm::barrier() {
#if RECIPE_WITH_MPI
  if (host_) return host_->barrier();
#endif
  // The host returns once every member's all-reduce completed, i.e. every member reached it.
  device_scalar(0.0, ncclSum);
}

NcclComm::~NcclComm() {
  // Errors are ignored here: a destructor cannot report them, and the process may be ending.
  if (comm_) {
    if (pending_)
      ncclCommAbort(comm_);  // unjoined work may never complete if a peer is gone
    else
      ncclCommDestroy(comm_);
  }
  if (scratch_) cudaFree(scratch_);
  if (ready_) cudaEventDestroy(ready_);
  if (done_) cudaEventDestroy(done_);
  for (cudaEvent_t e : op_events_) cudaEventDestroy(e);
  if (side_) cudaStreamDestroy(side_);
}

void NcclComm::check(ncclResult_t rc, const char* op) const {
  if (rc == ncclSuccess) return;
  std::string detail = ncclGetErrorString(rc);
  if (const char* last = ncclGetLastError(comm_); last && *last) detail += std::string(" (") + last + ")";
  throw std::runtime_error(std::string(op) + " failed in communicator '" + name_ + "': " + detail);
}

void NcclComm::fork() {
  cuda_check(cudaEventRecord(ready_, compute_), "cudaEventRecord", name_);
  cuda_check(cudaStreamWaitEvent(side_, ready_, 0), "cudaStreamWaitEvent", name_);
}

void NcclComm::join() {
  cuda_check(cudaEventRecord(done_, side_), "cudaEventRecord", name_);
  cuda_check(cudaStreamWaitEvent(compute_, done_, 0), "cudaStreamWaitEvent", name_);
}

void NcclComm::enqueue_all_reduce(Tensor t, ncclRedOp_t op, const char* what) {
  require_device(t, name_, what, "tensor");
  if (op == ncclMax && t.dtype != DType::f32)
    throw std::invalid_argument(name_ + "." + what + ": element-wise max is for f32 tensors, got " + t.shape_str());
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

Comm::Op NcclComm::all_reduce_sum_start(Tensor t) {
  enqueue_all_reduce(t, ncclSum, "all_reduce_sum_start");
  return record_op();
}

void NcclComm::broadcast(Tensor t, int root) {
  require_device(t, name_, "broadcast", "tensor");
  if (root < 0 || root >= size())
    throw std::invalid_argument(name_ + ".broadcast: root " + std::to_string(root) + " outside the group of " +
                                std::to_string(size()));
  fork();
  check(ncclBroadcast(t.ptr, t.ptr, size_t(t.numel()), nccl_type(t.dtype), root, comm_, side_), "ncclBroadcast");
  join();
}

void NcclComm::enqueue_reduce_scatter(Tensor out, Tensor in, const char* what) {
  require_device(out, name_, what, "out");
  require_device(in, name_, what, "in");
  require_chunks(out, in, size(), name_, what);
  require_chunk_or_disjoint(out, in, rank(), name_, what);
  fork();
  check(ncclReduceScatter(in.ptr, out.ptr, size_t(out.numel()), nccl_type(in.dtype), ncclSum, comm_, side_),
        "ncclReduceScatter");
}

void NcclComm::reduce_scatter_sum(Tensor out, Tensor in) {
  enqueue_reduce_scatter(out, in, "reduce_scatter_sum");
  join();
}

Comm::Op NcclComm::reduce_scatter_sum_start(Tensor out, Tensor in) {
  enqueue_reduce_scatter(out, in, "reduce_scatter_sum_start");
  return record_op();
}

void NcclComm::enqueue_all_gather(Tensor out, Tensor in, const char* what) {
  require_device(out, name_, what, "out");
  require_device(in, name_, what, "in");
  require_chunks(in, out, size(), name_, what);
  require_chunk_or_disjoint(in, out, rank(), name_, what);
  fork();
  check(ncclAllGather(in.ptr, out.ptr, size_t(in.numel()), nccl_type(in.dtype), comm_, side_), "ncclAllGather");
}

void NcclComm::all_gather(Tensor out, Tensor in) {
  enqueue_all_gather(out, in, "all_gather");
  join();
}

void NcclComm::send_recv(Tensor send, int dst, Tensor recv, int src) {
  if (enqueue_send_recv(send, dst, recv, src, "send_recv")) join();
}

// ---- one started op waited for alone (comm.hpp) ----

Comm::Op NcclComm::record_op() {
  pending_ = true;
  const size_t k = size_t(next_seq_ - first_seq_);
  if (k == op_events_.size()) {
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", name_);
    op_events_.push_back(e);
  }
  cuda_check(cudaEventRecord(op_events_[k], side_), "cudaEventRecord", name_);
  return {next_seq_++};
}

Comm::Op NcclComm::all_gather_start(Tensor out, Tensor in) {
  enqueue_all_gather(out, in, "all_gather_start");
  return record_op();
}

Comm::Op NcclComm::send_recv_start(Tensor send, int dst, Tensor recv, int src) {
  if (!enqueue_send_recv(send, dst, recv, src, "send_recv_start")) return {};
  return record_op();
}

void NcclComm::wait(Op op) {
  if (op.seq < first_seq_ || op.seq >= next_seq_) return;  // complete: default handle, or joined by wait_all()
  cuda_check(cudaStreamWaitEvent(compute_, op_events_[size_t(op.seq - first_seq_)], 0), "cudaStreamWaitEvent", name_);
}

// Enqueues the pair on the comm stream (after the compute stream's work so far); false when both
// halves are undefined (nothing to do).
bool NcclComm::enqueue_send_recv(Tensor send, int dst, Tensor recv, int src, const char* what) {
  auto peer_ok = [&](int peer, const char* role) {
    if (peer < 0 || peer >= size())
      throw std::invalid_argument(name_ + "." + what + ": " + role + " rank " + std::to_string(peer) +
                                  " outside the group of " + std::to_string(size()));
  };
  if (send.defined()) {
    require_device(send, name_, what, "send");
    peer_ok(dst, "destination");
  }
  if (recv.defined()) {
    require_device(recv, name_, what, "recv");
    peer_ok(src, "source");
  }
  if (!send.defined() && !recv.defined()) return false;
  fork();
  check(ncclGroupStart(), "ncclGroupStart");
  ncclResult_t rc = ncclSuccess;
  if (send.defined()) rc = ncclSend(send.ptr, size_t(send.numel()), nccl_type(send.dtype), dst, comm_, side_);
  if (rc == ncclSuccess && recv.defined())
    rc = ncclRecv(recv.ptr, size_t(recv.numel()), nccl_type(recv.dtype), src, comm_, side_);
  const ncclResult_t end = ncclGroupEnd();  // always closes the group, even after a failed call
  check(rc, "ncclSend/ncclRecv");
  check(end, "ncclGroupEnd");
  return true;
}

void NcclComm::wait_all() {
  first_seq_ = next_seq_;  // every started op is joined below (or was, by an earlier wait_all())
  if (!pending_) return;
  join();
  pending_ = false;
}

}  // namespace recipe::core

#endif  // RECIPE_WITH_NCCL
