// FP8 training's plan-level vocabulary, shared by the resolver (checks), the memory estimate and the
// core (which linears run in FP8, the formats): trainer.precision = "fp8" and the `fp8` section.
//
// The block linears a plan runs in FP8 are named like peft.target_modules (plan/lora.hpp): qkv,
// proj, fc1 (or gate|up), fc2 (or down), their Hugging Face names, or all-linear. The embedding
// and the output head never run in FP8 (as in Transformer Engine and torchao recipes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.hpp"

namespace recipe::plan {

// Largest finite value of each format: E4M3 (OCP "fn": no infinities) 448, E5M2 57344.
constexpr float fp8_max(Fp8Format f) { return f == Fp8Format::e4m3 ? 448.f : 57344.f; }

// The core::LoraTarget bits of the linears that run in FP8 (0 unless trainer.precision = fp8),
// and what is wrong with fp8.linears entries that name none.
struct Fp8Linears {
  unsigned mask = 0;
  std::vector<std::string> problems;
};
Fp8Linears fp8_linears(const Plan& plan);

// One FP8 linear's local GEMM sizes on a TP rank: in and out features (per rank), as the linear
// holds them.
struct Fp8LinearShape {
  const char* name;  // its peft.target_modules / fp8.linears name: qkv, proj, fc1, fc2
  unsigned bit;      // its core::LoraTarget bit
  int64_t in, out;
};
// The block linears of one layer of the plan's model on one TP rank (whether or not they run in
// FP8), in the order of the flat linear list (family/linears.hpp).
std::vector<Fp8LinearShape> block_linear_shapes(const Plan& plan);

// The FP8 linears whose weight is a frozen base held only in FP8 (peft.base_fp8_only with
// peft.kind = lora: every base weight is frozen): their bf16 copy does not exist, and each one's
// FP8 bytes are the parameter itself (core/model/linear.hpp). 0 unless that applies.
unsigned fp8_frozen_linears(const Plan& plan);
// Elements of those weights in one layer on one TP rank (held at 1 byte each, not 2).
int64_t fp8_frozen_weight_numel(const Plan& plan);

// Bytes of the FP8 scratch each model chunk allocates (core/model/linear.hpp, Fp8Scratch): the
// quantized operands of whichever FP8 linear runs now, shared by all of them, and with FP8-only
// frozen weights the transpose of the one whose input gradient runs now. 0 without FP8.
int64_t fp8_scratch_bytes(const Plan& plan);
// Bytes of one layer's FP8 weight caches (Fp8WeightCache: each FP8 linear's weight cast once per
// step, as stored and transposed; only the amax and scale cells of an FP8-only frozen weight,
// whose bytes are the parameter). 0 without FP8.
int64_t fp8_weight_cache_bytes(const Plan& plan);
// Per layer, delayed scaling's state (fp8.scaling = "delayed"; 0 otherwise): x, W and dy of each
// block linear, each an amax history of fp8.amax_history_len floats and two 16-byte cells.
int64_t fp8_history_bytes(const Plan& plan);

}  // namespace recipe::plan
