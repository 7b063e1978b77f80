#include "kernels/grad_write_tracker.hpp"

#include <iterator>
#include <stdexcept>
#include <string>

namespace recipe::kernels {

namespace {
uintptr_t begin_of(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.ptr); }
uintptr_t end_of(const Tensor& t) { return begin_of(t) + t.bytes(); }
}  // namespace

void GradWriteTracker::begin(const std::vector<Tensor>& grads) {
  fresh_.clear();
  for (const Tensor& g : grads) {
    if (!g.defined() || g.numel() == 0) continue;
    uintptr_t a = begin_of(g), b = end_of(g);
    auto next = fresh_.lower_bound(a);
    if ((next != fresh_.end() && next->first < b) || (next != fresh_.begin() && std::prev(next)->second > a))
      throw std::invalid_argument("begin_grad_writes: gradient tensors overlap (" + g.shape_str() + ")");
    // Coalesce with touching neighbours, so a packed view (q|k|v) over adjacent tensors is whole.
    if (next != fresh_.end() && next->first == b) {
      b = next->second;
      next = fresh_.erase(next);
    }
    if (next != fresh_.begin() && std::prev(next)->second == a) {
      std::prev(next)->second = b;
    } else {
      fresh_.emplace(a, b);
    }
  }
  active_ = true;
}

bool GradWriteTracker::take(uintptr_t a, uintptr_t b, bool zero_if_partial) {
  // The interval that may contain a, then every one starting inside [a, b).
  auto it = fresh_.upper_bound(a);
  if (it != fresh_.begin() && std::prev(it)->second > a) --it;
  if (it != fresh_.end() && it->first <= a && it->second >= b) {  // wholly fresh
    const uintptr_t s = it->first, e = it->second;
    fresh_.erase(it);
    if (s < a) fresh_.emplace(s, a);
    if (b < e) fresh_.emplace(b, e);
    return true;
  }
  while (it != fresh_.end() && it->first < b) {
    const uintptr_t s = it->first, e = it->second;
    it = fresh_.erase(it);
    const uintptr_t lo = s > a ? s : a, hi = e < b ? e : b;
    if (zero_if_partial) zero_(reinterpret_cast<void*>(lo), size_t(hi - lo));
    if (s < lo) fresh_.emplace(s, lo);
    if (hi < e) it = fresh_.emplace(hi, e).first;
  }
  return false;
}

GradWriteTracker::Write GradWriteTracker::whole_write(const Tensor& t) {
  if (!active_ || !t.defined() || t.numel() == 0) return Write::accumulate;
  return take(begin_of(t), end_of(t), true) ? Write::overwrite : Write::accumulate;
}

void GradWriteTracker::partial_write(const Tensor& t) {
  if (!active_ || !t.defined() || t.numel() == 0) return;
  const uintptr_t a = begin_of(t), b = end_of(t);
  if (take(a, b, true)) zero_(reinterpret_cast<void*>(a), size_t(b - a));
}

void GradWriteTracker::end() {
  if (!active_) return;
  for (const auto& [a, b] : fresh_) zero_(reinterpret_cast<void*>(a), size_t(b - a));
  fresh_.clear();
  active_ = false;
}

size_t GradWriteTracker::fresh_bytes() const {
  size_t n = 0;
  for (const auto& [a, b] : fresh_) n += size_t(b - a);
  return n;
}

}  // namespace recipe::kernels
