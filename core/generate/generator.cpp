// The generation model and loop (see generator.hpp).
#include "core/generate/generator.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "core/model/model_shape.hpp"
#include "core/model/param_layout.hpp"
#include "core/train/checkpointing.hpp"

namespace recipe::core {

ModelShape generation_shape(const plan::Plan& plan, int capacity) {
  ModelShape s = model_shape(plan);
  if (capacity < 1 || capacity > s.arch.max_positions)
    throw std::invalid_argument(
        "generation needs " + std::to_string(capacity) +
        " positions (prompt + new tokens), but model.max_position_embeddings=" + std::to_string(s.arch.max_positions) +
        ": shorten the prompt or lower --max-new-tokens");
  s.seq = capacity;
  s.packed = false;
  s.sequence_parallel = 1;      // one rank decodes, whatever layout trained the checkpoint
  s.classifier_chunk_rows = 1;  // the training arena's logits chunk; the decoder has its own row
  s.fp8_frozen = 0;
  s.fp8_linears = 0;  // decoding runs bf16: its row counts are no multiples of 16, and FP8 pays off in training
  return s;
}

GenerationModel::GenerationModel(const plan::Plan& plan, const std::string& checkpoint_dir, int capacity,
                                 kernels::Backend& backend)
    : shape_(generation_shape(plan, capacity)) {
  params_ = std::make_unique<ParamStore>(backend, build_param_layout(shape_, plan.optimizer));
  load_weights(*params_, checkpoint_dir, shape_.arch.vocab);
  // Recompute full: the smallest training arena (the decoder keeps its own buffers and cache).
  model_ = std::make_unique<Model>(shape_, 1, Recompute::full, backend, *params_);
  decoder_ = std::make_unique<IncrementalDecoder>(*model_);
}

GenerationModel::~GenerationModel() = default;

GenerateResult generate(IncrementalDecoder& decoder, std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt holds no tokens");
  if (options.max_new_tokens < 0)
    throw std::invalid_argument("--max-new-tokens=" + std::to_string(options.max_new_tokens) + ": must be >= 0");
  if (int64_t(prompt.size()) + options.max_new_tokens > decoder.capacity())
    throw std::invalid_argument("generate: " + std::to_string(prompt.size()) + " prompt tokens + " +
                                std::to_string(options.max_new_tokens) + " new ones exceed the decoder's " +
                                std::to_string(decoder.capacity()) + " positions");
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  Sampler sampler(options.sampling);
  GenerateResult r;
  r.prompt_tokens = int(prompt.size());
  decoder.reset();
  if (options.max_new_tokens == 0) return r;
  const auto t0 = Clock::now();
  const std::vector<float>* logits = &decoder.forward(prompt);  // prefill: the whole prompt in one forward
  const auto t1 = Clock::now();
  r.prefill_seconds = seconds(t0, t1);
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const int32_t next = sampler.next(*logits);
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), next) != options.stop_ids.end()) {
      r.stopped = true;
      break;
    }
    r.tokens.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 < options.max_new_tokens) {
      logits = &decoder.forward(std::span<const int32_t>(&next, 1));
      ++r.decode_steps;
    }
  }
  r.decode_seconds = seconds(t1, Clock::now());
  return r;
}

}  // namespace recipe::core
