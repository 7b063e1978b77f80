// Train/valid/test split of a dataset's documents (data.split = "98,2,0"), by Megatron-LM's rule.
// In plan/ because two layers apply it: the resolver (dsl/resolve_files.cpp checks before launch that
// each split holds a sample) and core/data (which builds the splits); the dsl does not link the core.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace recipe::data {

enum class Split { train = 0, valid = 1, test = 2 };
const char* split_name(Split s);

struct DocumentRange {
  int64_t begin = 0, end = 0;  // documents [begin, end)
  int64_t size() const { return end - begin; }
};

// "98,2,0", "949/50/1", "0.9,0.1": up to three non-negative numbers separated by ',' or '/', padded
// with zeros and normalized to sum 1. Throws std::runtime_error naming data.split when malformed.
std::array<double, 3> parse_split(const std::string& split);

// Megatron's bounds: b[0] = 0, b[i+1] = b[i] + round(w[i]·n) (round half to even, as Python's
// round), then every bound after the first is shifted by (b[3] - n) so the last one is exactly n.
std::array<DocumentRange, 3> split_documents(int64_t num_documents, const std::array<double, 3>& weights);

}  // namespace recipe::data
