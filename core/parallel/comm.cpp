// The group of one: collectives are identities; anything that needs a peer is a logic error.
#include "core/parallel/comm.hpp"

#include <stdexcept>

namespace recipe::core {

void SingleProcessComm::require_same(const kernels::Tensor& out, const kernels::Tensor& in) {
  if (out.ptr != in.ptr || out.numel() != in.numel())
    throw std::logic_error("SingleProcessComm: reduce_scatter/all_gather over one rank must be in place");
}

void SingleProcessComm::send_recv(kernels::Tensor send, int, kernels::Tensor recv, int) {
  if (send.defined() || recv.defined())
    throw std::logic_error("SingleProcessComm::send_recv: a group of one has no peer");
}

}  // namespace recipe::core
