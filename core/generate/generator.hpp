// Generation: a model from a checkpoint, prompt ids in, new ids out.
//
//   GenerationModel  the checkpoint's model on one rank, micro-batch 1, sized for `capacity`
//                    positions (prompt + new tokens): its parameter layout and ParamStore, the
//                    weights loaded with load_weights (core/train/checkpointing.hpp, the reading
//                    finetune and resume use), the Model and its IncrementalDecoder (KV cache).
//   generate()       prefill the prompt in one forward, then one token per step, each chosen by a
//                    Sampler, until a stop id or max_new_tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/generate/sampler.hpp"
#include "core/model/incremental_decoder.hpp"
#include "plan/plan.hpp"

namespace recipe::core {

class GenerationModel {
 public:
  // `plan`: the checkpoint's resolved plan (its model, peft and optimizer sections say the layout).
  // Throws std::invalid_argument when capacity is not in [1, model.max_position_embeddings];
  // std::runtime_error / ckpt::CheckpointError from loading (a checkpoint of another shape, broken
  // files), naming the file.
  GenerationModel(const plan::Plan& plan, const std::string& checkpoint_dir, int capacity, kernels::Backend& backend);
  ~GenerationModel();
  GenerationModel(const GenerationModel&) = delete;
  GenerationModel& operator=(const GenerationModel&) = delete;

  IncrementalDecoder& decoder() { return *decoder_; }
  const ModelShape& shape() const { return shape_; }

 private:
  ModelShape shape_;
  std::unique_ptr<ParamStore> params_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<IncrementalDecoder> decoder_;
};

// The ModelShape generation builds: the plan's model with seq = capacity, one classifier row, no
// sample packing. Throws std::invalid_argument naming model.max_position_embeddings when capacity
// exceeds it.
ModelShape generation_shape(const plan::Plan& plan, int capacity);

struct GenerateOptions {
  int max_new_tokens = 64;
  SamplingOptions sampling;
  std::vector<int32_t> stop_ids;  // generation ends after producing one of these (it is not returned)
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new ids, stop id excluded
  bool stopped = false;         // true: a stop id ended it; false: max_new_tokens did
  int prompt_tokens = 0;
  int decode_steps = 0;                            // one-token forwards after the prefill
  double prefill_seconds = 0, decode_seconds = 0;  // the prompt's forward; every later step together
};

// Starts from an empty cache (decoder.reset()). The prompt must hold at least one id and
// prompt + max_new_tokens must fit the decoder's capacity (std::invalid_argument otherwise).
// on_token (optional) sees each new id as soon as it is chosen (streaming output).
GenerateResult generate(IncrementalDecoder& decoder, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(int32_t)>& on_token = {});

}  // namespace recipe::core
