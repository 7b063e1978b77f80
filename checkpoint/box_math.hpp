// Box arithmetic shared by the writer, the commit check and the reader (private to checkpoint/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"

namespace recipe::ckpt {

int64_t shape_numel(const std::vector<int64_t>& shape);

// The common part of two boxes of the same rank; nullopt when they do not overlap (or one is empty).
std::optional<Box> intersect(const Box& a, const Box& b);

// True when every element of `box` lies inside a tensor of `shape` (same rank, sizes >= 0).
bool box_within(const Box& box, const std::vector<int64_t>& shape);

// "[6, 10]" and "[0:3, 5:10]" (begin:end per dim), for error messages.
std::string shape_to_string(const std::vector<int64_t>& shape);
std::string box_to_string(const Box& box);

}  // namespace recipe::ckpt
