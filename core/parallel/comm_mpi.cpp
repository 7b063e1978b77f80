#include "core/parallel/comm_mpi.hpp"

#if RECIPE_WITH_MPI

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

void check_mpi(int rc, const char* what, const std::string& group) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw std::runtime_error(std::string(what) + " failed in communicator '" + group +
                           "': " + std::string(msg, size_t(len)));
}

MPI_Datatype mpi_transfer_type(DType dt) {
  switch (dt) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::bf16:
      return MPI_UINT16_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::e4m3:
    case DType::e5m2:
      return MPI_UINT8_T;
  }
  throw std::invalid_argument("mpi_transfer_type: unknown dtype");
}

namespace {

// The type MPI reduces in: bf16 is reduced through an f32 staging copy.
MPI_Datatype mpi_reduce_type(DType dt) {
  return dt == DType::i32 ? MPI_INT32_T : dt == DType::f64 ? MPI_DOUBLE : MPI_FLOAT;
}

void require_host(const Tensor& t, const std::string& group, const char* op, const char* what) {
  if (!t.defined() && t.numel() > 0) throw std::invalid_argument(group + "." + op + ": " + what + " has no memory");
  if (t.device != kernels::Device::cpu)
    throw std::invalid_argument(group + "." + op + ": " + what + " " + t.shape_str() +
                                " is a CUDA tensor; MPI communicators move host memory (CUDA "
                                "tensors go through NCCL communicators)");
}

int count_of(const Tensor& t, const std::string& group, const char* op) {
  if (t.numel() > int64_t(std::numeric_limits<int>::max()))
    throw std::invalid_argument(group + "." + op + ": " + t.shape_str() +
                                " has more elements than one MPI call can carry (2^31-1); "
                                "split it into buckets");
  return int(t.numel());
}

void widen(std::vector<float>& dst, const Tensor& src) {
  dst.resize(size_t(src.numel()));
  const auto* h = src.as<const kernels::bf16_t>();
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = kernels::bf16_to_f32(h[i]);
}

void narrow(const Tensor& dst, const float* src) {
  auto* h = dst.as<kernels::bf16_t>();
  for (int64_t i = 0; i < dst.numel(); ++i) h[i] = kernels::f32_to_bf16(src[i]);
}

bool overlaps(const Tensor& a, const Tensor& b) {
  auto a0 = static_cast<const char*>(a.ptr), b0 = static_cast<const char*>(b.ptr);
  return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

// out must be chunk rank of `whole` exactly, or disjoint from it.
bool chunk_alias(const Tensor& part, const Tensor& whole, int rank, const std::string& group, const char* op) {
  if (!overlaps(part, whole)) return false;
  const char* want = static_cast<const char*>(whole.ptr) + size_t(rank) * part.bytes();
  if (part.ptr == want) return true;
  throw std::invalid_argument(group + "." + op + ": the " + part.shape_str() + " chunk overlaps the full " +
                              whole.shape_str() + " tensor but is not chunk rank()=" + std::to_string(rank) +
                              " of it; pass exactly that chunk (in place) or separate memory");
}

void require_chunks(const Tensor& part, const Tensor& whole, int size, const std::string& group, const char* op) {
  if (part.dtype != whole.dtype)
    throw std::invalid_argument(group + "." + op + ": dtypes differ (" + part.shape_str() + " vs " + whole.shape_str() +
                                ")");
  if (whole.numel() != part.numel() * size)
    throw std::invalid_argument(group + "." + op + ": " + whole.shape_str() + " must hold " + std::to_string(size) +
                                " chunks of " + part.shape_str() + " (" + std::to_string(part.numel() * size) +
                                " elements)");
}

}  // namespace

MpiComm::MpiComm(MPI_Comm comm, std::string name) : comm_(comm), name_(std::move(name)) {
  if (comm_ == MPI_COMM_NULL) throw std::invalid_argument("MpiComm '" + name_ + "': null communicator");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (!pending_.empty()) {
    // Started collectives were never completed (an exception unwound past wait_all). MPI may still
    // write into their staging, and such requests cannot be cancelled: keep the memory and the
    // communicator alive rather than free them under MPI's feet; the process is ending anyway.
    // No exception may leave a destructor: if even that allocation fails, end the process here
    // (what an escaping bad_alloc would do) instead of freeing the staging.
    if (!new (std::nothrow) std::deque<Pending>(std::move(pending_))) std::abort();
    return;
  }
  if (comm_ != MPI_COMM_NULL && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF) MPI_Comm_free(&comm_);
}

void MpiComm::check(int rc, const char* op) const { check_mpi(rc, op, name_); }

// The non-blocking collective waited at once, as reduce_scatter_sum below: Open MPI's MPI_Allreduce
// and MPI_Iallreduce sum in different orders for some sizes beyond two ranks.
void MpiComm::all_reduce_sum(Tensor t) {
  start_all_reduce(scratch_, t, "all_reduce_sum");
  check(MPI_Wait(&scratch_.request, MPI_STATUS_IGNORE), "MPI_Wait(all_reduce_sum)");
  finish(scratch_);
}

double MpiComm::all_reduce_sum(double v) {
  double out = 0;
  check(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, comm_), "MPI_Allreduce");
  return out;
}

double MpiComm::all_reduce_max(double v) {
  double out = 0;
  check(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm_), "MPI_Allreduce");
  return out;
}

void MpiComm::all_reduce_max(Tensor t) {
  require_host(t, name_, "all_reduce_max", "tensor");
  const int n = count_of(t, name_, "all_reduce_max");
  if (t.dtype == DType::bf16) {
    std::vector<float>& f = scratch_.staging;  // bf16 → f32 is exact: the maximum rounds back to itself
    widen(f, t);
    check(MPI_Allreduce(MPI_IN_PLACE, f.data(), n, MPI_FLOAT, MPI_MAX, comm_), "MPI_Allreduce");
    narrow(t, f.data());
    return;
  }
  check(MPI_Allreduce(MPI_IN_PLACE, t.ptr, n, mpi_reduce_type(t.dtype), MPI_MAX, comm_), "MPI_Allreduce");
}

void MpiComm::broadcast(Tensor t, int root) {
  require_host(t, name_, "broadcast", "tensor");
  if (root < 0 || root >= size_)
    throw std::invalid_argument(name_ + ".broadcast: root " + std::to_string(root) + " outside the group of " +
                                std::to_string(size_));
  check(MPI_Bcast(t.ptr, count_of(t, name_, "broadcast"), mpi_transfer_type(t.dtype), root, comm_), "MPI_Bcast");
}

void MpiComm::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier"); }

// The non-blocking collective waited at once: Open MPI's MPI_Reduce_scatter_block and
// MPI_Ireduce_scatter_block sum in different orders beyond two ranks, and the TP linears mix the
// blocking and the started forms (linear.cpp), so both go through the same call (comm.hpp: a
// started op's result is the blocking form's, bit for bit).
void MpiComm::reduce_scatter_sum(Tensor out, Tensor in) {
  start_reduce_scatter(scratch_, out, in, "reduce_scatter_sum");
  check(MPI_Wait(&scratch_.request, MPI_STATUS_IGNORE), "MPI_Wait(reduce_scatter_sum)");
  finish(scratch_);
}

Comm::Op MpiComm::reduce_scatter_sum_start(Tensor out, Tensor in) {
  pending_.emplace_back();
  try {
    start_reduce_scatter(pending_.back(), out, in, "reduce_scatter_sum_start");
  } catch (...) {
    pending_.pop_back();
    throw;
  }
  pending_.back().seq = next_seq_;
  return {next_seq_++};
}

// Out of place when `out` is separate f32/i32 memory; otherwise the result goes through f32
// staging (which also keeps the rest of `in` intact in the in-place case) and is copied or
// rounded into `out` by finish().
void MpiComm::start_reduce_scatter(Pending& p, Tensor out, Tensor in, const char* op) {
  require_host(out, name_, op, "out");
  require_host(in, name_, op, "in");
  require_chunks(out, in, size_, name_, op);
  const int n = count_of(out, name_, op);
  count_of(in, name_, op);
  const bool in_place = chunk_alias(out, in, rank_, name_, op);
  p.dst = out;
  p.copy_back = false;
  p.request = MPI_REQUEST_NULL;
  const void* send = in.ptr;
  void* recv = out.ptr;
  if (in.dtype == DType::f64)  // f64 is for scalar all-reduces; the staging below is 4-byte
    throw std::invalid_argument(name_ + "." + op + ": f64 tensors are all-reduced only, not reduce-scattered");
  MPI_Datatype type = mpi_reduce_type(in.dtype);
  if (in.dtype == DType::bf16) {
    widen(p.staging_in, in);
    send = p.staging_in.data();
  }
  if (in.dtype == DType::bf16 || in_place) {
    p.staging.resize(size_t(n));  // i32 shares the 4-byte staging: only bytes are copied back
    p.copy_back = true;
    recv = p.staging.data();
  }
  check(MPI_Ireduce_scatter_block(send, recv, n, type, MPI_SUM, comm_, &p.request), "MPI_Ireduce_scatter_block");
}

Comm::Op MpiComm::all_reduce_sum_start(Tensor t) {
  pending_.emplace_back();
  try {
    start_all_reduce(pending_.back(), t, "all_reduce_sum_start");
  } catch (...) {
    pending_.pop_back();
    throw;
  }
  pending_.back().seq = next_seq_;
  return {next_seq_++};
}

void MpiComm::start_all_reduce(Pending& p, Tensor t, const char* op) {
  require_host(t, name_, op, "tensor");
  const int n = count_of(t, name_, op);
  p.dst = t;
  p.copy_back = false;
  p.request = MPI_REQUEST_NULL;
  if (t.dtype == DType::bf16) {
    widen(p.staging, t);
    p.copy_back = true;
    check(MPI_Iallreduce(MPI_IN_PLACE, p.staging.data(), n, MPI_FLOAT, MPI_SUM, comm_, &p.request), "MPI_Iallreduce");
    return;
  }
  check(MPI_Iallreduce(MPI_IN_PLACE, t.ptr, n, mpi_reduce_type(t.dtype), MPI_SUM, comm_, &p.request), "MPI_Iallreduce");
}

void MpiComm::finish(Pending& p) {
  if (!p.copy_back) return;
  if (p.dst.dtype == DType::bf16)
    narrow(p.dst, p.staging.data());
  else
    std::memcpy(p.dst.ptr, p.staging.data(), p.dst.bytes());
}

void MpiComm::wait_all() {
  if (pending_.empty()) return;
  std::vector<MPI_Request> requests;
  requests.reserve(pending_.size());
  for (auto& p : pending_) {
    requests.push_back(p.request);
    requests.push_back(p.request2);
  }
  const int rc = MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    // The requests are unusable now; drop them so the destructor does not treat them as live.
    pending_.clear();
    check(rc, "MPI_Waitall");
  }
  for (auto& p : pending_) finish(p);
  pending_.clear();
}

void MpiComm::all_gather(Tensor out, Tensor in) {
  require_host(out, name_, "all_gather", "out");
  require_host(in, name_, "all_gather", "in");
  require_chunks(in, out, size_, name_, "all_gather");
  const int n = count_of(in, name_, "all_gather");
  count_of(out, name_, "all_gather");
  const MPI_Datatype type = mpi_transfer_type(in.dtype);
  if (chunk_alias(in, out, rank_, name_, "all_gather"))
    check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out.ptr, n, type, comm_), "MPI_Allgather");
  else
    check(MPI_Allgather(in.ptr, n, type, out.ptr, n, type, comm_), "MPI_Allgather");
}

Comm::Op MpiComm::all_gather_start(Tensor out, Tensor in) {
  require_host(out, name_, "all_gather_start", "out");
  require_host(in, name_, "all_gather_start", "in");
  require_chunks(in, out, size_, name_, "all_gather_start");
  const int n = count_of(in, name_, "all_gather_start");
  count_of(out, name_, "all_gather_start");
  const MPI_Datatype type = mpi_transfer_type(in.dtype);
  const bool in_place = chunk_alias(in, out, rank_, name_, "all_gather_start");
  Pending& p = pending_.emplace_back();
  p.dst = out;
  p.seq = next_seq_;
  const int rc = in_place ? MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out.ptr, n, type, comm_, &p.request)
                          : MPI_Iallgather(in.ptr, n, type, out.ptr, n, type, comm_, &p.request);
  if (rc != MPI_SUCCESS) {
    pending_.pop_back();
    check(rc, "MPI_Iallgather");
  }
  return {next_seq_++};
}

void MpiComm::wait(Op op) {
  if (op.seq < 0) return;
  for (Pending& p : pending_) {
    if (p.seq != op.seq) continue;
    // MPI_Wait leaves MPI_REQUEST_NULL behind, so a second wait and wait_all() pass over it.
    if (p.request != MPI_REQUEST_NULL) check(MPI_Wait(&p.request, MPI_STATUS_IGNORE), "MPI_Wait");
    if (p.request2 != MPI_REQUEST_NULL) check(MPI_Wait(&p.request2, MPI_STATUS_IGNORE), "MPI_Wait");
    // The result moves out of its staging once: wait_all() must not overwrite what the caller
    // may have done with the tensor since.
    finish(p);
    p.copy_back = false;
    return;
  }
  // Not pending: completed by an earlier wait_all().
}

void MpiComm::post_send_recv(Tensor send, int dst, Tensor recv, int src, MPI_Request* requests, const char* op) {
  // One tag for all pipeline traffic: MPI keeps messages between one pair of ranks in order, and
  // program order matches sends with receives.
  constexpr int kTag = 7301;
  auto peer_ok = [&](int peer, const char* what) {
    if (peer < 0 || peer >= size_)
      throw std::invalid_argument(name_ + "." + op + ": " + what + " rank " + std::to_string(peer) +
                                  " outside the group of " + std::to_string(size_));
  };
  if (send.defined()) {
    require_host(send, name_, op, "send");
    peer_ok(dst, "destination");
  }
  if (recv.defined()) {
    require_host(recv, name_, op, "recv");
    peer_ok(src, "source");
  }
  if (recv.defined())
    check(MPI_Irecv(recv.ptr, count_of(recv, name_, op), mpi_transfer_type(recv.dtype), src, kTag, comm_, &requests[0]),
          "MPI_Irecv");
  if (send.defined()) {
    const int rc =
        MPI_Isend(send.ptr, count_of(send, name_, op), mpi_transfer_type(send.dtype), dst, kTag, comm_, &requests[1]);
    if (rc != MPI_SUCCESS && requests[0] != MPI_REQUEST_NULL) MPI_Cancel(&requests[0]);
    check(rc, "MPI_Isend");
  }
}

void MpiComm::send_recv(Tensor send, int dst, Tensor recv, int src) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  post_send_recv(send, dst, recv, src, requests, "send_recv");
  check(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE), "MPI_Waitall(send_recv)");
}

Comm::Op MpiComm::send_recv_start(Tensor send, int dst, Tensor recv, int src) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  post_send_recv(send, dst, recv, src, requests, "send_recv_start");
  Pending& p = pending_.emplace_back();
  p.request = requests[0];
  p.request2 = requests[1];
  p.seq = next_seq_;
  return {next_seq_++};
}

}  // namespace recipe::core

#endif  // RECIPE_WITH_MPI
