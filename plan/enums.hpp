// The closed choices of the plan (model.norm, trainer.recompute, ...) as enum class types, each with
// the recipe spelling of its values. The spellings live only here: the resolver's field table
// (dsl/plan_fields.cpp) reads, validates, serializes and documents these keys through
// plan::to_string / plan::from_string / plan::enum_names, and everything downstream compares enums.
//
// Each enum's values are declared in the order of its `names` array (the value is the index), and
// that order is the one users see in "use one of ..." messages and docs/recipes.md.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace recipe::plan {

template <class E>
struct EnumNames;  // specialized below: static constexpr std::array<std::string_view, N> names

#define RECIPE_PLAN_ENUM_NAMES(E, ...)              \
  template <>                                       \
  struct EnumNames<E> {                             \
    static constexpr std::array names{__VA_ARGS__}; \
  };

enum class Arch { gpt, llama, qwen2, qwen3 };
RECIPE_PLAN_ENUM_NAMES(Arch, std::string_view("gpt"), std::string_view("llama"), std::string_view("qwen2"),
                       std::string_view("qwen3"))

enum class Norm { layernorm, rmsnorm };
RECIPE_PLAN_ENUM_NAMES(Norm, std::string_view("layernorm"), std::string_view("rmsnorm"))

enum class Activation { gelu, swiglu };  // gelu = tanh approximation
RECIPE_PLAN_ENUM_NAMES(Activation, std::string_view("gelu"), std::string_view("swiglu"))

enum class PositionEmbedding { learned, rope };
RECIPE_PLAN_ENUM_NAMES(PositionEmbedding, std::string_view("learned"), std::string_view("rope"))

enum class Device { auto_, cpu, cuda };  // auto_: `auto` is a C++ keyword; spelled "auto"
RECIPE_PLAN_ENUM_NAMES(Device, std::string_view("auto"), std::string_view("cpu"), std::string_view("cuda"))

// bf16 = bf16 compute with fp32 master weights; fp8 = bf16 with the block linears' GEMMs in FP8
// (the `fp8` section says how; core/model/linear.hpp the data flow).
enum class Precision { bf16, fp32, fp8 };
RECIPE_PLAN_ENUM_NAMES(Precision, std::string_view("bf16"), std::string_view("fp32"), std::string_view("fp8"))

// What backward rebuilds instead of keeping (core/model/activations.hpp describes each level).
enum class Recompute { none, gelu, norm, full };
RECIPE_PLAN_ENUM_NAMES(Recompute, std::string_view("none"), std::string_view("gelu"), std::string_view("norm"),
                       std::string_view("full"))

enum class DecayStyle { cosine, linear, constant };
RECIPE_PLAN_ENUM_NAMES(DecayStyle, std::string_view("cosine"), std::string_view("linear"), std::string_view("constant"))

enum class Attention { cudnn, fallback };  // fallback = the engine's own attention kernels
RECIPE_PLAN_ENUM_NAMES(Attention, std::string_view("cudnn"), std::string_view("fallback"))

enum class BiasGrad { kernel, epilogue };  // kernel = column sum; epilogue = cuBLASLt BGRADB
RECIPE_PLAN_ENUM_NAMES(BiasGrad, std::string_view("kernel"), std::string_view("epilogue"))

#undef RECIPE_PLAN_ENUM_NAMES

// The enums below spell each value as its C++ name: RECIPE_PLAN_ENUM declares the enum class and its
// EnumNames from one list, so adding a value (data.tokenizer "hf", data.kind "sft") is a one-line change.
namespace detail {

constexpr std::size_t count_names(std::string_view list) {
  std::size_t n = 1;
  for (const char c : list) n += c == ',' ? 1 : 0;
  return n;
}

// "a, b, c" (the stringized enumerator list) -> {"a", "b", "c"}.
template <std::size_t N>
constexpr std::array<std::string_view, N> split_names(std::string_view list) {
  std::array<std::string_view, N> out{};
  for (std::size_t i = 0; i < N; ++i) {
    const std::size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    out[i] = name;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return out;
}

}  // namespace detail

#define RECIPE_PLAN_ENUM(E, ...)                                                                        \
  enum class E { __VA_ARGS__ };                                                                         \
  template <>                                                                                           \
  struct EnumNames<E> {                                                                                 \
    static constexpr auto names = detail::split_names<detail::count_names(#__VA_ARGS__)>(#__VA_ARGS__); \
  };

// model.rope_scaling: how RoPE's base frequencies are rescaled (family/rope.hpp); llama3 = Llama 3.1's.
RECIPE_PLAN_ENUM(RopeScaling, none, llama3)

// What the run does (the top-level `mode` key): train from scratch or from loaded weights.
RECIPE_PLAN_ENUM(Mode, pretrain, finetune)

// data.kind: mock = deterministic random tokens; indexed = Megatron .bin/.idx datasets; sft =
// chat/instruction .bin/.idx with a loss mask (core/data/loss_mask.hpp).
RECIPE_PLAN_ENUM(DataKind, mock, indexed, sft)

// data.chat_template: how `data prepare --format chat` rendered conversations (core/data/chat_template.hpp).
RECIPE_PLAN_ENUM(ChatTemplate, none, llama3, chatml, plain)

// data.tokenizer: none = no tokenizer (the data is already token ids).
RECIPE_PLAN_ENUM(Tokenizer, none, byte, gpt2_bpe, sentencepiece, hf)

// optimizer.kind
RECIPE_PLAN_ENUM(OptimizerKind, adamw)

// peft.kind: lora is a value the resolver rejects until LoRA is implemented (dsl/resolve_executable.cpp).
RECIPE_PLAN_ENUM(PeftKind, none, lora)

// fp8.scaling: tensorwise = current scaling (each tensor's scale from its own amax, computed just
// before the cast); delayed = scales from an amax history of earlier steps (Transformer Engine's
// DelayedScaling), which the resolver rejects in this version.
RECIPE_PLAN_ENUM(Fp8Scaling, tensorwise, delayed)

// fp8.forward_format / fp8.backward_format: E4M3 (max 448, 3 mantissa bits) or E5M2 (max 57344, 2).
RECIPE_PLAN_ENUM(Fp8Format, e4m3, e5m2)

// fp8.amax_compute (delayed scaling): the history's maximum or its most recent entry.
RECIPE_PLAN_ENUM(Fp8AmaxCompute, max, most_recent)

// parallelism.pipeline_split: how the layers split over the pipeline's model chunks without
// parallelism.layers_per_stage: even, or balanced by compute with the output head counted
// (plan/pipeline_split.hpp).
RECIPE_PLAN_ENUM(PipelineSplit, even, balanced)

// executor.kind: how ranks are started.
RECIPE_PLAN_ENUM(ExecutorKind, local, mpi, slurm)

#undef RECIPE_PLAN_ENUM

template <class E>
concept PlanEnum = requires {
  EnumNames<E>::names;
};

// False for a value cast from outside the enum (a plan built in code, not by the resolver).
template <PlanEnum E>
constexpr bool is_valid(E e) {
  return static_cast<std::size_t>(e) < EnumNames<E>::names.size();
}

template <PlanEnum E>
constexpr std::string_view to_string(E e) {
  return is_valid(e) ? EnumNames<E>::names[static_cast<std::size_t>(e)] : std::string_view("<invalid>");
}

template <PlanEnum E>
constexpr std::optional<E> from_string(std::string_view s) {
  for (std::size_t i = 0; i < EnumNames<E>::names.size(); ++i)
    if (EnumNames<E>::names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

// The spellings in declaration order, as the field table's allowed values.
template <PlanEnum E>
std::vector<std::string> enum_names() {
  return {EnumNames<E>::names.begin(), EnumNames<E>::names.end()};
}

}  // namespace recipe::plan
