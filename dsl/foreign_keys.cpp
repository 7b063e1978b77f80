#include "dsl/foreign_keys.hpp"

#include <utility>

namespace recipe::dsl {

namespace {

// Foreign name → our key. Settings without a key of their own map to the key that decides them:
// epochs to trainer.max_steps (a run is counted in optimizer steps: steps = epochs · samples /
// global batch), gradient accumulation to trainer.global_batch_size (micro-batches per step are
// derived from it).
constexpr std::pair<std::string_view, std::string_view> kForeign[] = {
    // NeMo / Megatron-LM
    {"tensor_model_parallel_size", "parallelism.tp"},
    {"pipeline_model_parallel_size", "parallelism.pp"},
    {"context_parallel_size", "parallelism.cp"},
    {"virtual_pipeline_model_parallel_size", "parallelism.virtual_pp"},
    {"encoder_seq_length", "model.seq_length"},
    {"val_check_interval", "trainer.eval_interval"},
    {"num_query_groups", "model.num_kv_heads"},
    // Hugging Face transformers (TrainingArguments, config.json) and DeepSpeed-style names
    {"tensor_parallel_degree", "parallelism.tp"},
    {"tensor_parallel_size", "parallelism.tp"},
    {"pipeline_parallel_degree", "parallelism.pp"},
    {"learning_rate", "optimizer.lr"},
    {"lr_scheduler_type", "schedule.decay_style"},
    {"num_train_epochs", "trainer.max_steps"},
    {"per_device_train_batch_size", "trainer.micro_batch_size"},
    {"gradient_accumulation_steps", "trainer.global_batch_size"},
    {"max_grad_norm", "optimizer.clip_grad"},
    {"max_seq_length", "model.seq_length"},
    {"max_length", "model.seq_length"},
    {"eval_steps", "trainer.eval_interval"},
    {"save_steps", "checkpoint.save_interval"},
    {"save_total_limit", "checkpoint.keep_last"},
    {"num_hidden_layers", "model.num_layers"},
    {"num_key_value_heads", "model.num_kv_heads"},
    {"intermediate_size", "model.ffn_hidden_size"},
    // peft's LoraConfig
    {"r", "peft.rank"},
    {"lora_r", "peft.rank"},
    {"lora_alpha", "peft.alpha"},
    {"lora_dropout", "peft.dropout"},
};

}  // namespace

std::string_view foreign_key_path(std::string_view name) {
  for (const auto& [foreign, ours] : kForeign)
    if (name == foreign) return ours;
  return {};
}

}  // namespace recipe::dsl
