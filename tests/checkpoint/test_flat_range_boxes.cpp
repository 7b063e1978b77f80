// flat_range_boxes: a run of the row-major order of a box, cut into boxes.
#include <doctest/doctest.h>

#include <random>

#include "checkpoint/checkpoint.hpp"

TEST_SUITE_BEGIN("checkpoint");

using recipe::ckpt::Box;
using recipe::ckpt::CheckpointError;
using recipe::ckpt::flat_range_boxes;

namespace {

// Flat row-major indices (inside `held`) of the elements of `boxes`, enumerated box by box.
std::vector<int64_t> enumerate(const Box& held, const std::vector<Box>& boxes) {
  std::vector<int64_t> out;
  const size_t ndim = held.sizes.size();
  for (const Box& b : boxes) {
    REQUIRE(b.offsets.size() == ndim);
    REQUIRE(b.sizes.size() == ndim);
    std::vector<int64_t> idx(ndim, 0);
    for (int64_t k = 0; k < b.numel(); ++k) {
      int64_t flat = 0;
      for (size_t d = 0; d < ndim; ++d) {
        int64_t local = b.offsets[d] + idx[d] - held.offsets[d];
        REQUIRE(local >= 0);
        REQUIRE(local < held.sizes[d]);
        flat = flat * held.sizes[d] + local;
      }
      out.push_back(flat);
      for (size_t d = ndim; d-- > 0;) {
        if (++idx[d] < b.sizes[d]) break;
        idx[d] = 0;
      }
    }
  }
  return out;
}

std::vector<int64_t> iota(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

}  // namespace

TEST_CASE("flat_range_boxes: 1-D runs are one box") {
  Box held{{5}, {10}};  // elements 5..14 of a global vector
  auto boxes = flat_range_boxes(held, 2, 7);
  REQUIRE(boxes.size() == 1);
  CHECK(boxes[0] == Box{{7}, {5}});
  CHECK(flat_range_boxes(held, 0, 10) == std::vector<Box>{held});
}

TEST_CASE("flat_range_boxes: empty range gives no boxes") {
  CHECK(flat_range_boxes(Box{{0, 0}, {3, 4}}, 5, 5).empty());
  CHECK(flat_range_boxes(Box{{0, 0}, {3, 4}}, 0, 0).empty());
}

TEST_CASE("flat_range_boxes: 2-D whole box and whole rows") {
  Box held{{2, 3}, {4, 5}};
  CHECK(flat_range_boxes(held, 0, 20) == std::vector<Box>{held});
  // rows 1..2 of the held box
  CHECK(flat_range_boxes(held, 5, 15) == std::vector<Box>{Box{{3, 3}, {2, 5}}});
}

TEST_CASE("flat_range_boxes: 2-D run starting and ending mid-row") {
  Box held{{0, 0}, {4, 5}};
  // 3..17: row 0 cols 3-4, rows 1-2 whole, row 3 cols 0-1
  auto boxes = flat_range_boxes(held, 3, 17);
  REQUIRE(boxes.size() == 3);
  CHECK(boxes[0] == Box{{0, 3}, {1, 2}});
  CHECK(boxes[1] == Box{{1, 0}, {2, 5}});
  CHECK(boxes[2] == Box{{3, 0}, {1, 2}});
  // Inside one row
  CHECK(flat_range_boxes(held, 6, 8) == std::vector<Box>{Box{{1, 1}, {1, 2}}});
  // Ending mid-row after whole rows, starting aligned
  boxes = flat_range_boxes(held, 5, 12);
  REQUIRE(boxes.size() == 2);
  CHECK(boxes[0] == Box{{1, 0}, {1, 5}});
  CHECK(boxes[1] == Box{{2, 0}, {1, 2}});
  // Starting mid-row, ending at a row end
  boxes = flat_range_boxes(held, 7, 15);
  REQUIRE(boxes.size() == 2);
  CHECK(boxes[0] == Box{{1, 2}, {1, 3}});
  CHECK(boxes[1] == Box{{2, 0}, {1, 5}});
}

TEST_CASE("flat_range_boxes: 3-D run cutting through planes and rows") {
  Box held{{1, 0, 10}, {3, 4, 5}};  // 60 elements, planes of 20, rows of 5
  auto boxes = flat_range_boxes(held, 7, 53);
  // plane 0: row 1 cols 2-4, rows 2-3; planes 1; plane 2: rows 0-1, row 2 cols 0-2
  REQUIRE(boxes.size() == 5);
  CHECK(boxes[0] == Box{{1, 1, 12}, {1, 1, 3}});
  CHECK(boxes[1] == Box{{1, 2, 10}, {1, 2, 5}});
  CHECK(boxes[2] == Box{{2, 0, 10}, {1, 4, 5}});
  CHECK(boxes[3] == Box{{3, 0, 10}, {1, 2, 5}});
  CHECK(boxes[4] == Box{{3, 2, 10}, {1, 1, 3}});
  CHECK(enumerate(held, boxes) == iota(7, 53));
}

TEST_CASE("flat_range_boxes: a scalar is one box") {
  Box scalar{{}, {}};
  CHECK(flat_range_boxes(scalar, 0, 1) == std::vector<Box>{scalar});
  CHECK(flat_range_boxes(scalar, 0, 0).empty());
}

TEST_CASE("flat_range_boxes: refuses runs outside the box") {
  Box held{{0, 0}, {2, 3}};
  CHECK_THROWS_AS(flat_range_boxes(held, 0, 7), CheckpointError);
  CHECK_THROWS_AS(flat_range_boxes(held, 4, 3), CheckpointError);
  CHECK_THROWS_AS(flat_range_boxes(held, -1, 3), CheckpointError);
  CHECK_THROWS_AS(flat_range_boxes(Box{{0}, {2, 3}}, 0, 1), CheckpointError);
}

TEST_CASE("flat_range_boxes: property: boxes enumerate exactly the flat range, in order") {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 3000; ++trial) {
    const int ndim = 1 + static_cast<int>(rng() % 4);
    Box held;
    for (int d = 0; d < ndim; ++d) {
      held.offsets.push_back(rng() % 7);
      held.sizes.push_back(1 + rng() % 6);
    }
    const int64_t n = held.numel();
    int64_t a = rng() % (n + 1), b = rng() % (n + 1);
    if (a > b) std::swap(a, b);
    auto boxes = flat_range_boxes(held, a, b);
    CAPTURE(trial);
    CHECK(boxes.size() <= static_cast<size_t>(2 * (ndim - 1) + 1));
    for (const Box& box : boxes) CHECK(box.numel() > 0);
    CHECK(enumerate(held, boxes) == iota(a, b));
  }
}

TEST_SUITE_END();
