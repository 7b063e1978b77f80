// The names NeMo / Megatron-LM and Hugging Face (transformers' TrainingArguments and config.json,
// peft's LoraConfig) give settings this engine has under its own keys. An unknown key a user brings
// from there (`tensor_model_parallel_size`, `learning_rate`, `per_device_train_batch_size`) is
// answered with ours, which spelling distance alone would never find.
#pragma once

#include <string_view>

namespace recipe::dsl {

// Our dotted key for `name` (the last component of an unknown key, any section), or empty.
std::string_view foreign_key_path(std::string_view name);

}  // namespace recipe::dsl
