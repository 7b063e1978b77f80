#include "core/model/rope_table.hpp"

#include <vector>

#include "family/rope.hpp"

namespace recipe::core {

RopeTable::RopeTable(kernels::Backend& be, const ArchShape& s) : be_(be) {
  if (s.learned_positions) return;
  const std::vector<double> host = rope_inv_freq(rope_spec(s), s.head_dim);
  inv_freq_ = kernels::Tensor(nullptr, kernels::DType::f64, be_.device(), {int64_t(host.size())});
  inv_freq_.ptr = be_.alloc(inv_freq_.bytes());
  be_.from_host(inv_freq_, host.data());
}

RopeTable::~RopeTable() {
  if (inv_freq_.defined()) be_.free(inv_freq_.ptr);
}

}  // namespace recipe::core
