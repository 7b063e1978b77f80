// The decoder family (GPT and Llama): its tensor table, defined in decoder.cpp.
#pragma once

#include <span>

#include "family/tensor_table.hpp"

namespace recipe::core {

std::span<const TensorDecl> decoder_tensor_table();

}  // namespace recipe::core
