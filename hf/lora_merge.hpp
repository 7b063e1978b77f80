// LoRA adapters of a checkpoint, folded into their base weights: W' = W + s·B·A. The one place the
// merge math lives; `recipe ckpt export --format hf --merge` (hf_convert.cpp) and `recipe ckpt
// merge` (a full engine checkpoint of the merged model) both read their weights through
// read_merged(). It sits in hf beside the other conversions (it needs the tensor table
// and the core's parameter layout, which the plain checkpoint library does not link).
//
// Which adapter belongs to which weight is read off the family's tensor table: in one layer, the
// weights of a role (q, k, v of qkv; gate, up of mlp_in; fc1; proj; ...) pair in table order with
// the lora_b rows of that role, and all of them share the role's one lora_a. The engine computes
// y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ with A [r, in], B [out, r]; B's rows split like the fused weight's rows
// (B of q|k|v is the pack q.lora_b | k.lora_b | v.lora_b), so W_q' = W_q + s·B_q·A, and so on.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "core/model/model_shape.hpp"

namespace recipe::core::lora {

// One adapted base weight: its name, its adapter's A (shared by the weights of a fused linear) and
// the B rows that belong to it.
struct AdaptedWeight {
  std::string weight, a, b;
};

// Every adapted weight of a model of shape `s` (empty without LoRA), layer by layer in table order.
std::vector<AdaptedWeight> adapted_weights(const ModelShape& s);

// w += scale · b·a, with w [out, in], b [out, r], a [r, in] row-major; each element's sum over r
// accumulates in double and is added to w once.
void add_adapter(std::span<float> w, std::span<const float> b, std::span<const float> a, int64_t r, double scale);

// The whole tensor `name` of the checkpoint as f32; an adapted weight with s·B·A added
// (s = s.lora_scale, the scale the engine trains with).
std::vector<float> read_merged(const ckpt::CheckpointReader& reader, const ModelShape& s, const std::string& name);

// The shape of the merged model: the same model without adapters.
ModelShape without_adapters(ModelShape s);

struct MergeOptions {
  std::string checkpoints_dir;  // step-0/ and `latest` are written here (new or empty)
  std::string plan_toml;        // the merged model's plan (peft.kind = "none"), stored as plan.toml
};

struct MergeResult {
  std::string checkpoint_dir;  // <checkpoints_dir>/step-0
  int tensors = 0;             // written
  int merged = 0;              // of them, with an adapter folded in
};

// Writes the merged model of `checkpoint_dir` (a LoRA checkpoint of a model of shape `s`; an
// adapter-only one reads its base through its reference) as a full step-0 checkpoint: every base
// tensor as f32, no adapters, no optimizer state; common.json records "merged_from". Loadable by
// pretrain, finetune (checkpoint.load) and export like any checkpoint. Throws std::invalid_argument
// when `s` has no adapters, std::runtime_error / ckpt::CheckpointError naming the file otherwise.
MergeResult merge_checkpoint(const std::string& checkpoint_dir, const ModelShape& s, const MergeOptions& options);

}  // namespace recipe::core::lora
