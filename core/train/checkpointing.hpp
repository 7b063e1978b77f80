// Saving a Trainer's state as a sharded checkpoint (checkpoint/checkpoint.hpp) and loading one
// into a Trainer of any parallel layout.
//
// What each rank writes (every parameter exactly once over the world):
//   <name>                      f32 master weights
//   <prefix><name>              f32, for each of the optimizer's state tensors, named by the
//                               optimizer (Optimizer::state(); AdamW: optimizer.exp_avg. and
//                               optimizer.exp_avg_sq., its first and second moments)
// restricted to the flat runs this rank's optimizer updates (its segments: the whole buffer,
// or its ZeRO-1 chunks), by DP rank 0 only without ZeRO-1, by TP rank 0 only for TP-replicated
// tensors, and never the last pipeline stage's copy of a tied embedding (stage 0 writes it).
// Under ZeRO-1 the owned chunks are exactly where the master weights are current, so nothing is
// gathered before saving.
//
// Loading reads, for every local parameter, the box of the global tensor this rank holds (its TP
// shard) and, for the optimizer's state, the runs of its own segments; the saved layout does not matter.
// Nor does the vocabulary padding, which depends on TP: the embedding's and lm_head's rows (and
// their moments) are padded with zeros or trimmed to this model's padded vocabulary when the
// checkpoint's vocab_size is the model's (rows ≥ vocab_size are padding on both sides).
//
// LoRA fine-tunes (a frozen base): the frozen tensors have no master or moments and never change,
// so a fine-tune's checkpoints are adapter-only: the adapters (trainable tensors, written as
// above, through the same pieces and chunks as any parameter, TP-sharded or not) and their
// moments, plus a reference (ckpt::BaseRef: absolute path + content hash) to the checkpoint that
// holds the frozen tensors. That base is the checkpoint the fine-tune loaded (checkpoint.load), or
// the base that checkpoint itself refers to; a fine-tune from random weights writes its frozen
// tensors once, before its first save, to <checkpoints>/base/step-0 (save_base_checkpoint) and refers to that.
// Loading goes through ckpt::CheckpointReader, which follows the reference (and refuses a missing
// or changed base), so load_checkpoint is the one load path for full and adapter-only checkpoints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.hpp"
#include "core/train/trainer.hpp"

namespace recipe::core {

struct SaveOptions {
  std::string dir;        // the checkpoints directory (step-<N>/ and `latest` go in it)
  std::string plan_toml;  // the resolved plan, stored beside the shards
  int keep_last = 0;      // prune to the newest N (0 = keep all)
  // Set (a LoRA fine-tune): the frozen tensors are not written, the checkpoint refers to this base
  // instead. Unset: every tensor is written (a self-contained checkpoint, frozen base as f32).
  std::optional<ckpt::BaseRef> base;
};

// Collective over the world: every rank must call it after the same step. Returns the path of the
// committed checkpoint (`<dir>/step-<steps_done>`). Throws std::runtime_error on every rank when
// any rank fails (the failing rank's message names the file).
std::string save_checkpoint(Trainer& trainer, const SaveOptions& options);

// Collective. Writes the trainer's frozen tensors (a LoRA fine-tune's base, as f32, from the
// compute copy) as a step-0 checkpoint `<checkpoints_dir>/base/step-0` (its own `latest` in
// `<checkpoints_dir>/base/`), and returns the reference adapter-only checkpoints record. The
// base's plan.toml is `plan_toml`; a plan with peft.kind="none" and the same model.* loads it as a
// full model. For a fine-tune that starts from random weights (no checkpoint.load).
ckpt::BaseRef save_base_checkpoint(Trainer& trainer, const std::string& checkpoints_dir, const std::string& plan_toml);

enum class LoadMode {
  resume,        // weights, Adam moments and progress (step): the run continues where it stopped
  weights_only,  // weights; moments zero, step 0 (fine-tuning from a pretrained checkpoint)
};

struct LoadResult {
  std::string dir;   // the checkpoint read
  int64_t step = 0;  // the step it was saved at
  bool optimizer_restored = false;
  // For a trainer with frozen tensors (LoRA): the checkpoint they were read from, which this run's
  // adapter-only checkpoints refer to (SaveOptions::base): the loaded checkpoint's own base
  // reference, else the loaded checkpoint itself.
  std::optional<ckpt::BaseRef> base;
};

// Collective over the world. Loads `checkpoint_dir` (a directory with metadata.json; an
// adapter-only one together with its base) into the trainer: its master weights (and compute
// copy), and in resume mode the moments and the step count. Refuses, on every rank, a checkpoint
// of another model shape (naming the tensors that differ), one with LoRA adapters this model does
// not have, an adapter-only checkpoint whose base is missing or changed (naming both paths) or,
// in resume mode, one saved with another global batch size. The one function that puts a
// checkpoint into a Trainer: resume, checkpoint.load and anything else that needs the weights.
LoadResult load_checkpoint(Trainer& trainer, const std::string& checkpoint_dir, LoadMode mode);

// The weights of `checkpoint_dir` alone into `store` (every tensor of its layout, this rank's shards),
// on this rank, no collective: what generation (core/generate) loads. The same reading as
// load_checkpoint's weights; throws std::runtime_error naming the tensors when the checkpoint holds
// another model shape, ckpt::CheckpointError when it is broken. `vocab` is the model's
// vocab_size: a checkpoint of the same vocabulary padded for another TP size is padded or trimmed.
void load_weights(ParamStore& store, const std::string& checkpoint_dir, int64_t vocab);

}  // namespace recipe::core
