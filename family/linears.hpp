// The block linears, addressed by one flat list derived from the tensor table: a layer's linears
// are the roles of its layer-scope weight rows that tensor parallelism splits by column or row (a
// pack such as q|k|v or gate|up is one linear), in table order. Everything sized "per linear" (FP8
// weight caches and amax histories, LoRA targets, the FP8 checkpoint record, the parameter layout's
// FP8-only group) walks this list instead of counting linears itself.
//
// Flat order (LinearRef::index): layer-major, table order inside a layer: entry i of a model chunk
// starting at layer f is layer f + i / n, linear i % n of block_linears() (n of them). Delayed FP8
// scaling keeps kFp8TensorsPerLinear history rows per entry: rows [3·i, 3·i + 3) = x, W, dy.
#pragma once

#include <cstdint>
#include <vector>

#include "family/arch_shape.hpp"
#include "family/tensor_table.hpp"

namespace recipe::core {

// The FP8 tensors of one linear, each with an amax history: its input x, weight W, output gradient dy.
constexpr int64_t kFp8TensorsPerLinear = 3;

struct BlockLinear {
  Role role;        // the table role of its weight rows
  Shard shard;      // Shard::column (column-parallel) or Shard::row (row-parallel)
  unsigned bit;     // its LoraTarget bit: how peft.target_modules and fp8.linears select it
  const char* key;  // the engine's name of it ("qkv", "proj", "fc_in", "fc_out"): RNG stream keys
};

// The LoraTarget bit of a linear's role; 0 for a role that is no block linear.
unsigned linear_bit(Role role);

// One layer's block linears, in table order.
std::vector<BlockLinear> block_linears(const ArchShape& s);

// One entry of the flat list: global layer, position in the list, the linear.
struct LinearRef {
  int layer = 0;
  int64_t index = 0;
  BlockLinear linear;
};
// The linears of layers [first_layer, first_layer + layers), in flat order.
std::vector<LinearRef> linear_list(const ArchShape& s, int first_layer, int layers);

// A linear's GEMM features on one rank of a TP group of `tp`: in (its weight's dim 1) and out
// (dim 0, a pack's rows summed), the table's shard column dividing out (column) or in (row).
struct LinearFeatures {
  int64_t in = 0, out = 0;
};
LinearFeatures linear_features(const ArchShape& s, Role role, int tp);

}  // namespace recipe::core
