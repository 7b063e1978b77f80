// The overlapped issue order of a pipeline stage (see pipeline_overlap.hpp).
#include "plan/pipeline_overlap.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace recipe::plan {

bool is_compute(const PipeOp& op) { return op.kind == PipeOp::forward || op.kind == PipeOp::backward; }

std::vector<std::pair<int, int>> touched_slots(const PipeOp& op, const std::vector<int>& slots) {
  auto slot_of = [&](int chunk, int m) {
    if (chunk < 0 || size_t(chunk) >= slots.size() || slots[size_t(chunk)] < 1)
      throw std::invalid_argument("touched_slots: chunk " + std::to_string(chunk) + " has no activation slots");
    return std::pair{chunk, m % slots[size_t(chunk)]};
  };
  std::vector<std::pair<int, int>> t{slot_of(op.chunk, op.m)};
  if (!is_compute(op) && op.m2 >= 0) t.push_back(slot_of(op.chunk2, op.m2));
  return t;
}

std::vector<PipeOp> overlapped_order(const std::vector<PipeOp>& ops, const std::vector<int>& slots) {
  std::vector<PipeOp> out;
  out.reserve(ops.size());
  size_t after_exchange = 0;  // the earliest position an exchange may take: after the last one placed
  for (const PipeOp& op : ops) {
    if (is_compute(op)) {
      out.push_back(op);
      continue;
    }
    // After the last forward/backward placed that touches one of this exchange's slots.
    const auto mine = touched_slots(op, slots);
    size_t at = after_exchange;
    for (size_t i = out.size(); i > after_exchange; --i) {
      const PipeOp& prior = out[i - 1];
      const auto theirs = touched_slots(prior, slots);
      const bool shared = std::any_of(mine.begin(), mine.end(), [&](const auto& s) {
        return std::find(theirs.begin(), theirs.end(), s) != theirs.end();
      });
      if (shared) {
        at = i;
        break;
      }
    }
    out.insert(out.begin() + long(at), op);
    after_exchange = at + 1;
  }
  return out;
}

}  // namespace recipe::plan
