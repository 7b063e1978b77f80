// Box arithmetic and the cut of a flat row-major run into boxes.
#include <algorithm>
#include <sstream>

#include "checkpoint/box_math.hpp"
#include "checkpoint/checkpoint.hpp"

namespace recipe::ckpt {

int64_t Box::numel() const { return shape_numel(sizes); }

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  if (a.offsets.size() != b.offsets.size()) return std::nullopt;
  Box out;
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    int64_t hi = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (hi <= lo) return std::nullopt;
    out.offsets.push_back(lo);
    out.sizes.push_back(hi - lo);
  }
  return out;
}

bool box_within(const Box& box, const std::vector<int64_t>& shape) {
  if (box.offsets.size() != shape.size() || box.sizes.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (box.offsets[d] < 0 || box.sizes[d] < 0 || box.offsets[d] + box.sizes[d] > shape[d]) return false;
  }
  return true;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << '[';
  for (size_t d = 0; d < shape.size(); ++d) s << (d ? ", " : "") << shape[d];
  s << ']';
  return s.str();
}

std::string box_to_string(const Box& box) {
  std::ostringstream s;
  s << '[';
  for (size_t d = 0; d < box.offsets.size(); ++d) {
    int64_t size = d < box.sizes.size() ? box.sizes[d] : 0;
    s << (d ? ", " : "") << box.offsets[d] << ':' << box.offsets[d] + size;
  }
  s << ']';
  return s.str();
}

namespace {

// Appends the boxes holding [begin, end) of the row-major order of the sub-box of `held` that
// spans dims >= dim, where the dims before `dim` are fixed at the global indices in `prefix`.
// A run that starts mid-row gives a partial head row (recursively cut), then whole rows as one
// box, then a partial tail row: at most two partial rows per dim.
void append_range_boxes(const Box& held, size_t dim, std::vector<int64_t>& prefix, int64_t begin, int64_t end,
                        std::vector<Box>& out) {
  if (begin >= end) return;
  const size_t ndim = held.sizes.size();
  auto rows = [&](int64_t row_begin, int64_t row_count) {
    Box b;
    b.offsets = prefix;
    b.sizes.assign(prefix.size(), 1);
    b.offsets.push_back(held.offsets[dim] + row_begin);
    b.sizes.push_back(row_count);
    for (size_t d = dim + 1; d < ndim; ++d) {
      b.offsets.push_back(held.offsets[d]);
      b.sizes.push_back(held.sizes[d]);
    }
    out.push_back(std::move(b));
  };
  if (dim + 1 == ndim) {
    rows(begin, end - begin);
    return;
  }
  int64_t inner = 1;
  for (size_t d = dim + 1; d < ndim; ++d) inner *= held.sizes[d];
  int64_t first_row = begin / inner;
  const int64_t last_row = end / inner;  // the row holding `end` (exclusive when end % inner == 0)
  if (begin % inner != 0) {
    int64_t head_end = std::min(end, (first_row + 1) * inner);
    prefix.push_back(held.offsets[dim] + first_row);
    append_range_boxes(held, dim + 1, prefix, begin - first_row * inner, head_end - first_row * inner, out);
    prefix.pop_back();
    if (head_end == end) return;
    ++first_row;
  }
  if (last_row > first_row) rows(first_row, last_row - first_row);
  if (end % inner != 0) {
    prefix.push_back(held.offsets[dim] + last_row);
    append_range_boxes(held, dim + 1, prefix, 0, end - last_row * inner, out);
    prefix.pop_back();
  }
}

}  // namespace

std::vector<Box> flat_range_boxes(const Box& held, int64_t begin, int64_t end) {
  if (held.offsets.size() != held.sizes.size())
    throw CheckpointError("flat_range_boxes: box " + box_to_string(held) + " has " +
                          std::to_string(held.offsets.size()) + " offsets but " + std::to_string(held.sizes.size()) +
                          " sizes");
  for (int64_t s : held.sizes)
    if (s < 0) throw CheckpointError("flat_range_boxes: negative size in box sizes " + shape_to_string(held.sizes));
  const int64_t numel = held.numel();
  if (begin < 0 || end < begin || end > numel)
    throw CheckpointError("flat_range_boxes: range [" + std::to_string(begin) + ", " + std::to_string(end) +
                          ") is not inside the " + std::to_string(numel) + " elements of box " + box_to_string(held));
  std::vector<Box> out;
  if (begin == end) return out;
  if (held.sizes.empty()) {  // a scalar: its only element
    out.push_back(held);
    return out;
  }
  std::vector<int64_t> prefix;
  append_range_boxes(held, 0, prefix, begin, end, out);
  return out;
}

}  // namespace recipe::ckpt
