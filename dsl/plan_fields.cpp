#include "dsl/plan_fields.hpp"

#include <cmath>
#include <limits>
#include <unordered_map>

namespace recipe::dsl {

using json = nlohmann::ordered_json;

std::string_view field_type_name(FieldType type) {
  switch (type) {
    case FieldType::Int:
      return "an integer";
    case FieldType::Float:
      return "a number";
    case FieldType::Bool:
      return "a boolean (true/false)";
    case FieldType::String:
      return "a string";
    case FieldType::IntList:
      return "a list of integers";
    case FieldType::StringList:
      return "a list of strings";
    case FieldType::StringMap:
      return "a table of strings";
    case FieldType::Blend:
      return "a flat list {weight, \"prefix\", weight, \"prefix\", ...}";
  }
  return "a value";
}

std::string describe_value(const json& value) {
  // Messages never throw and stay one readable line: invalid UTF-8 is shown as U+FFFD, and a huge
  // value is cut.
  auto shown = [](const json& v) {
    std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > 200) text = text.substr(0, 200) + "...";
    return text;
  };
  if (value.is_array()) return value.empty() ? "an empty list" : "a list " + shown(value);
  if (value.is_object()) return value.empty() ? "an empty table" : "a table";
  if (value.is_null()) return "nothing";
  return shown(value);
}

namespace {

std::string type_error(FieldType type, const json& v) {
  return "must be " + std::string(field_type_name(type)) + ", got " + describe_value(v);
}

// A tree integer, or an integral float (Lua writes 1e3 as a float), within int range.
std::optional<int> as_int(const json& v) {
  if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int>::max()))
      return std::nullopt;
    if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max()) return std::nullopt;
    return static_cast<int>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) <= std::numeric_limits<int>::max())
      return static_cast<int>(d);
  }
  return std::nullopt;
}

// An empty Lua table may reach us as {} or [], whichever the loader chose.
bool is_empty_container(const json& v) { return (v.is_object() || v.is_array()) && v.empty(); }

template <class T>
struct Codec;

template <>
struct Codec<int> {
  static constexpr FieldType type = FieldType::Int;
  static json write(int v) { return v; }
  static std::optional<std::string> read(const json& v, int& out) {
    auto i = as_int(v);
    if (!i) {
      if (v.is_number()) return "must be an integer (within ±2^31), got " + describe_value(v);
      return type_error(type, v);
    }
    out = *i;
    return std::nullopt;
  }
};

template <>
struct Codec<double> {
  static constexpr FieldType type = FieldType::Float;
  static json write(double v) { return v; }
  static std::optional<std::string> read(const json& v, double& out) {
    if (!v.is_number()) return type_error(type, v);
    out = v.get<double>();
    return std::nullopt;
  }
};

template <>
struct Codec<bool> {
  static constexpr FieldType type = FieldType::Bool;
  static json write(bool v) { return v; }
  static std::optional<std::string> read(const json& v, bool& out) {
    if (!v.is_boolean()) return type_error(type, v);
    out = v.get<bool>();
    return std::nullopt;
  }
};

template <>
struct Codec<std::string> {
  static constexpr FieldType type = FieldType::String;
  static json write(const std::string& v) { return v; }
  static std::optional<std::string> read(const json& v, std::string& out) {
    if (!v.is_string()) return type_error(type, v);
    out = v.get<std::string>();
    return std::nullopt;
  }
};

template <>
struct Codec<std::vector<int>> {
  static constexpr FieldType type = FieldType::IntList;
  static json write(const std::vector<int>& v) { return json(v); }
  static std::optional<std::string> read(const json& v, std::vector<int>& out) {
    if (is_empty_container(v)) {
      out.clear();
      return std::nullopt;
    }
    if (!v.is_array()) return type_error(type, v);
    std::vector<int> items;
    for (const auto& e : v) {
      auto i = as_int(e);
      if (!i) return type_error(type, v);
      items.push_back(*i);
    }
    out = std::move(items);
    return std::nullopt;
  }
};

template <>
struct Codec<std::vector<std::string>> {
  static constexpr FieldType type = FieldType::StringList;
  static json write(const std::vector<std::string>& v) { return json(v); }
  static std::optional<std::string> read(const json& v, std::vector<std::string>& out) {
    if (is_empty_container(v)) {
      out.clear();
      return std::nullopt;
    }
    if (!v.is_array()) return type_error(type, v);
    std::vector<std::string> items;
    for (const auto& e : v) {
      if (!e.is_string()) return type_error(type, v);
      items.push_back(e.get<std::string>());
    }
    out = std::move(items);
    return std::nullopt;
  }
};

template <>
struct Codec<std::map<std::string, std::string>> {
  static constexpr FieldType type = FieldType::StringMap;
  static json write(const std::map<std::string, std::string>& v) {
    json out = json::object();
    for (const auto& [k, val] : v) out[k] = val;
    return out;
  }
  static std::optional<std::string> read(const json& v, std::map<std::string, std::string>& out) {
    if (is_empty_container(v)) {
      out.clear();
      return std::nullopt;
    }
    if (!v.is_object()) return type_error(type, v);
    std::map<std::string, std::string> items;
    for (const auto& [k, e] : v.items()) {
      if (e.is_string())
        items[k] = e.get<std::string>();
      else if (e.is_number_float() && as_int(e))
        items[k] = std::to_string(*as_int(e));
      else if (e.is_boolean() || e.is_number())  // integers, and floats that are not whole
        items[k] = e.dump();
      else
        return "must be a table of strings; entry `" + k + "` is " + describe_value(e);
    }
    out = std::move(items);
    return std::nullopt;
  }
};

// A plan enum is written and read as its recipe spelling (plan/enums.hpp). read_value checks a
// string against the field's allowed spellings before storing it, so the "not one of" error here
// only guards direct callers of FieldInfo::set.
template <plan::PlanEnum E>
struct Codec<E> {
  static constexpr FieldType type = FieldType::String;
  static json write(E v) { return std::string(plan::to_string(v)); }
  static std::optional<std::string> read(const json& v, E& out) {
    if (!v.is_string()) return type_error(type, v);
    const auto e = plan::from_string<E>(v.get<std::string>());
    if (!e) return "must be one of the listed values, got " + describe_value(v);
    out = *e;
    return std::nullopt;
  }
};

using Blend = std::vector<std::pair<double, std::string>>;

template <>
struct Codec<Blend> {
  static constexpr FieldType type = FieldType::Blend;
  static json write(const Blend& v) {
    json out = json::array();
    for (const auto& [w, p] : v) {
      out.push_back(w);
      out.push_back(p);
    }
    return out;
  }
  static std::optional<std::string> read(const json& v, Blend& out) {
    if (is_empty_container(v)) {
      out.clear();
      return std::nullopt;
    }
    if (!v.is_array()) return type_error(type, v);
    if (v.size() % 2 != 0)
      return "must alternate weights and prefixes {w1, \"p1\", w2, \"p2\", ...}; got " + std::to_string(v.size()) +
             " entries (an odd count)";
    Blend items;
    for (std::size_t i = 0; i < v.size(); i += 2) {
      if (!v[i].is_number())
        return "must alternate weights and prefixes {w1, \"p1\", ...}; entry " + std::to_string(i + 1) +
               " should be a weight, got " + describe_value(v[i]);
      if (!v[i + 1].is_string())
        return "must alternate weights and prefixes {w1, \"p1\", ...}; entry " + std::to_string(i + 2) +
               " should be a dataset prefix string, got " + describe_value(v[i + 1]);
      items.emplace_back(v[i].get<double>(), v[i + 1].get<std::string>());
    }
    out = std::move(items);
    return std::nullopt;
  }
};

template <class S, class T>
FieldInfo field(const char* section, const char* key, S plan::Plan::*sec, T S::*member, std::string doc) {
  FieldInfo f;
  f.section = section;
  f.key = key;
  f.type = Codec<T>::type;
  f.doc = std::move(doc);
  if constexpr (plan::PlanEnum<T>) f.allowed = plan::enum_names<T>();
  f.get = [sec, member](const plan::Plan& p) { return Codec<T>::write((p.*sec).*member); };
  f.set = [sec, member](plan::Plan& p, const json& v) { return Codec<T>::read(v, (p.*sec).*member); };
  return f;
}

template <class T>
FieldInfo top_level(const char* key, T plan::Plan::*member, std::string doc) {
  FieldInfo f;
  f.key = key;
  f.type = Codec<T>::type;
  f.doc = std::move(doc);
  if constexpr (plan::PlanEnum<T>) f.allowed = plan::enum_names<T>();
  f.get = [member](const plan::Plan& p) { return Codec<T>::write(p.*member); };
  f.set = [member](plan::Plan& p, const json& v) { return Codec<T>::read(v, p.*member); };
  return f;
}

std::vector<FieldInfo> build_fields() {
  using P = plan::Plan;
  using M = plan::ModelConfig;
  using D = plan::DataConfig;
  using O = plan::OptimizerConfig;
  using S = plan::ScheduleConfig;
  using T = plan::TrainerConfig;
  using Par = plan::ParallelismConfig;
  using C = plan::CheckpointConfig;
  using Pe = plan::PeftConfig;
  using E = plan::ExecutorConfig;
  using X = plan::ExperimentConfig;
  using K = plan::KernelsConfig;
  std::vector<FieldInfo> f;
  f.push_back(top_level("mode", &P::mode, "what the run does: pretrain from scratch or finetune a loaded model"));

  const char* m = "model";
  f.push_back(
      field(m, "arch", &P::model, &M::arch,
            "model family (family/registry.cpp): norm, activation, position_embedding, bias, tie_embeddings and "
            "qk_norm left unset take its defaults, and a value the family does not compute is refused"));
  f.push_back(field(m, "num_layers", &P::model, &M::num_layers, "transformer blocks"));
  f.push_back(field(m, "hidden_size", &P::model, &M::hidden_size, "model width d"));
  f.push_back(field(m, "num_attention_heads", &P::model, &M::num_attention_heads, "query heads"));
  f.push_back(
      field(m, "num_kv_heads", &P::model, &M::num_kv_heads, "key/value heads (GQA); 0 = num_attention_heads (MHA)"));
  f.push_back(field(m, "ffn_hidden_size", &P::model, &M::ffn_hidden_size,
                    "MLP width; 0 = 4·hidden (gelu) or Llama's int(8·hidden/3) rounded up to 256 (swiglu)"));
  f.push_back(field(m, "vocab_size", &P::model, &M::vocab_size, "tokenizer vocabulary size"));
  f.push_back(field(m, "make_vocab_size_divisible_by", &P::model, &M::make_vocab_size_divisible_by,
                    "the embedding is padded to a multiple of this × parallelism.tp"));
  f.push_back(field(m, "seq_length", &P::model, &M::seq_length, "training sequence length in tokens"));
  f.push_back(field(m, "max_position_embeddings", &P::model, &M::max_position_embeddings,
                    "learned position table size; 0 = seq_length"));
  f.push_back(field(m, "norm", &P::model, &M::norm, "normalization layer"));
  f.push_back(field(m, "norm_eps", &P::model, &M::norm_eps, "epsilon of the norm layers"));
  f.push_back(field(m, "activation", &P::model, &M::activation, "MLP activation (gelu = tanh approximation)"));
  f.push_back(field(m, "position_embedding", &P::model, &M::position_embedding, "position encoding"));
  f.push_back(field(m, "rope_theta", &P::model, &M::rope_theta, "RoPE base frequency"));
  f.push_back(field(m, "rope_scaling", &P::model, &M::rope_scaling,
                    "RoPE frequency scaling for long contexts: none, or llama3 (Llama 3.1's: slow pairs divided by "
                    "rope_scaling_factor, fast pairs kept, a blend between; HF rope_type \"llama3\")"));
  f.push_back(field(m, "rope_scaling_factor", &P::model, &M::rope_scaling_factor,
                    "llama3 scaling: the factor slow frequencies are divided by (Llama 3.1: 8; 0 = unset)"));
  f.push_back(field(m, "rope_scaling_low_freq_factor", &P::model, &M::rope_scaling_low_freq_factor,
                    "llama3 scaling: wavelengths above original_max_positions / this are scaled (Llama 3.1: 1)"));
  f.push_back(field(m, "rope_scaling_high_freq_factor", &P::model, &M::rope_scaling_high_freq_factor,
                    "llama3 scaling: wavelengths below original_max_positions / this are kept (Llama 3.1: 4)"));
  f.push_back(field(m, "rope_scaling_original_max_positions", &P::model, &M::rope_scaling_original_max_positions,
                    "llama3 scaling: the context length of pretraining before scaling, below "
                    "max_position_embeddings (Llama 3.1: 8192; HF original_max_position_embeddings)"));
  f.push_back(field(m, "hf_architecture", &P::model, &M::hf_architecture,
                    "the Hugging Face model_type of the family that ckpt export writes and ckpt import expects "
                    "(llama: \"llama\" or \"mistral\"); \"\" = the family's first"));
  f.push_back(
      field(m, "tie_embeddings", &P::model, &M::tie_embeddings, "share the input embedding with the output head"));
  f.push_back(field(m, "bias", &P::model, &M::bias,
                    "biases in linears and norms (qwen2 has its q/k/v biases whatever this says, and no others)"));
  f.push_back(field(m, "qk_norm", &P::model, &M::qk_norm,
                    "RMSNorm over each query and key head (weights [head_dim], eps norm_eps) before RoPE (Qwen3)"));
  f.push_back(field(m, "head_dim", &P::model, &M::head_dim,
                    "width of one attention head; 0 = hidden_size / num_attention_heads (Qwen3 sets its own)"));
  f.push_back(field(m, "init_std", &P::model, &M::init_std,
                    "std of the normal init; output projections are scaled by 1/sqrt(2·num_layers)"));

  const char* d = "data";
  f.push_back(field(d, "kind", &P::data, &D::kind,
                    "mock: deterministic random tokens; indexed: Megatron .bin/.idx; sft: chat/instruction .bin/.idx "
                    "with a loss mask (data prepare --format chat)"));
  f.push_back(field(d, "path", &P::data, &D::path, "one indexed dataset prefix (a blend of one)"));
  f.push_back(field(d, "blend", &P::data, &D::blend,
                    "weighted dataset prefixes {w1, \"prefix1\", w2, \"prefix2\"}; weights are normalized"));
  f.push_back(field(d, "split", &P::data, &D::split, "train,valid,test proportions of each dataset"));
  f.push_back(
      field(d, "fixed_batch", &P::data, &D::fixed_batch, "mock: repeat one batch forever (memorization benchmark)"));
  f.push_back(field(d, "tokenizer", &P::data, &D::tokenizer, "tokenizer used by data prepare and generation"));
  f.push_back(field(d, "vocab_file", &P::data, &D::vocab_file, "gpt2_bpe: vocab.json"));
  f.push_back(field(d, "merges_file", &P::data, &D::merges_file, "gpt2_bpe: merges.txt"));
  f.push_back(field(d, "tokenizer_model", &P::data, &D::tokenizer_model,
                    "sentencepiece: the .model file; hf: the Hugging Face tokenizer.json (byte-level BPE)"));
  f.push_back(field(d, "eod_token", &P::data, &D::eod_token,
                    "hf: the added token that ends a document; empty: the file's end-of-text token (the "
                    "rule is in docs/user-guide.md, Data)"));
  f.push_back(field(d, "seed", &P::data, &D::seed, "seed of sample shuffling and mock tokens"));
  f.push_back(field(d, "chat_template", &P::data, &D::chat_template,
                    "sft: the chat template the dataset was prepared with (its .mask.bin records it)"));
  f.push_back(field(d, "pack", &P::data, &D::pack,
                    "sft: pack several conversations per sequence (positions restart and attention stays inside "
                    "each conversation; RoPE models); false = one conversation per sequence, padded"));
  f.push_back(field(d, "max_samples_per_pack", &P::data, &D::max_samples_per_pack,
                    "sft with pack: the most conversations one sequence holds (the bound cuDNN's ragged attention "
                    "sizes its per-sample work by; 1..4095)"));

  const char* o = "optimizer";
  f.push_back(field(o, "kind", &P::optimizer, &O::kind, "optimizer"));
  f.push_back(field(o, "lr", &P::optimizer, &O::lr, "peak learning rate"));
  f.push_back(field(o, "min_lr", &P::optimizer, &O::min_lr, "learning rate at the end of the decay"));
  f.push_back(field(o, "beta1", &P::optimizer, &O::beta1, "Adam β1"));
  f.push_back(field(o, "beta2", &P::optimizer, &O::beta2, "Adam β2"));
  f.push_back(field(o, "eps", &P::optimizer, &O::eps, "Adam ε"));
  f.push_back(field(o, "weight_decay", &P::optimizer, &O::weight_decay,
                    "decoupled weight decay (not applied to norms and biases)"));
  f.push_back(
      field(o, "decay_embeddings", &P::optimizer, &O::decay_embeddings, "apply weight decay to embeddings too"));
  f.push_back(field(o, "clip_grad", &P::optimizer, &O::clip_grad, "global gradient L2-norm clip; 0 disables"));

  const char* s = "schedule";
  f.push_back(field(s, "warmup_steps", &P::schedule, &S::warmup_steps, "linear warmup steps from 0 to lr"));
  f.push_back(field(s, "decay_style", &P::schedule, &S::decay_style, "shape of the decay from lr to min_lr"));
  f.push_back(
      field(s, "decay_steps", &P::schedule, &S::decay_steps,
            "step at which the decay reaches min_lr (warmup included); 0 = max(trainer.max_steps, warmup_steps)"));

  const char* t = "trainer";
  f.push_back(field(t, "max_steps", &P::trainer, &T::max_steps, "optimizer steps to train"));
  f.push_back(field(t, "micro_batch_size", &P::trainer, &T::micro_batch_size, "sequences per micro-batch per DP rank"));
  f.push_back(field(t, "global_batch_size", &P::trainer, &T::global_batch_size,
                    "sequences per optimizer step over all DP ranks; 0 = micro_batch_size × dp"));
  f.push_back(field(t, "device", &P::trainer, &T::device, "auto = cuda when a GPU is visible, else cpu"));
  f.push_back(
      field(t, "precision", &P::trainer, &T::precision,
            "bf16 compute with fp32 master weights, fp32 throughout, or fp8: bf16 with the block linears' GEMMs in "
            "FP8 (E4M3/E5M2, the fp8 section; Ada/Hopper GPUs, or emulated on CPU)"));
  f.push_back(field(t, "seed", &P::trainer, &T::seed, "seed of parameter init"));
  f.push_back(field(t, "log_interval", &P::trainer, &T::log_interval, "steps between progress lines"));
  f.push_back(field(t, "eval_interval", &P::trainer, &T::eval_interval,
                    "steps between validations (and one after the last step); 0 = none; when not set: 1000 where "
                    "the data has a validation split (mock data always; indexed and sft data when data.split gives "
                    "validation at least one sample), else none"));
  f.push_back(field(t, "eval_iters", &P::trainer, &T::eval_iters,
                    "global batches per validation (eval_iters × global_batch_size samples, as Megatron counts), "
                    "unless eval_samples is set"));
  f.push_back(field(t, "eval_samples", &P::trainer, &T::eval_samples,
                    "samples per validation: the first eval_samples sequences of the validation split, the same at "
                    "every layout (micro-batch size, dp), so runs with different layouts report comparable "
                    "validation loss; a multiple of micro_batch_size × dp; 0 = eval_iters × global_batch_size"));
  f.push_back(
      field(t, "recompute", &P::trainer, &T::recompute,
            "activation recomputation, trading memory for speed: none keeps every layer's activations; "
            "gelu (llm.c's default) rebuilds each MLP activation output (GELU or SwiGLU, [tokens, ffn]) from the "
            "kept pre-activation just before its weight gradient, ~2% slower; norm also rebuilds both norm "
            "outputs from the kept residuals and statistics; full keeps only each layer's input and reruns "
            "the layer's forward in backward (~1/3 more compute)"));
  f.push_back(field(t, "deterministic", &P::trainer, &T::deterministic, "bitwise reproducible kernels (slower)"));
  f.push_back(
      field(t, "cuda_graph", &P::trainer, &T::cuda_graph,
            "capture the training step (forward, backward, clip, AdamW) in a CUDA graph at step 2 and replay it every "
            "later step, NCCL collectives included (CUDA runs; the CPU has no graph); off with kernels.host_clip, "
            "kernels.phase_timing, peft.dropout > 0 or data.kind=sft (the log says which); a step that cannot be "
            "captured runs uncaptured, with one log line saying why"));
  f.push_back(field(t, "cpu_threads", &P::trainer, &T::cpu_threads, "OpenBLAS threads per rank; 0 = its default"));
  f.push_back(field(t, "step_timeout_s", &P::trainer, &T::step_timeout_s,
                    "step watchdog: seconds without training progress (a rank stopped, or hung in a kernel or a "
                    "collective) after which every rank reports its step and phase and the run ends with exit code "
                    "6; the limit is the larger of this and 10 × the slowest step after the first; checkpoint saves "
                    "and loads are not watched; 0 = off"));

  const char* f8 = "fp8";
  using F8 = plan::Fp8Config;
  f.push_back(field(f8, "scaling", &P::fp8, &F8::scaling,
                    "how FP8 scales are chosen: tensorwise = current scaling (scale = format max / amax of the "
                    "tensor, computed just before each cast); delayed = Transformer Engine's delayed scaling (the "
                    "scale from an amax history per tensor, the cast records the tensor's amax; the histories roll "
                    "once per step and are saved in checkpoints; the first step of a run seeds them with current "
                    "scaling)"));
  f.push_back(field(f8, "amax_history_len", &P::fp8, &F8::amax_history_len,
                    "delayed scaling: steps of amax history kept per tensor (1 .. 65536)"));
  f.push_back(field(f8, "amax_compute", &P::fp8, &F8::amax_compute,
                    "delayed scaling: the scale comes from the history's max or its most recent amax"));
  f.push_back(field(f8, "forward_format", &P::fp8, &F8::forward_format,
                    "FP8 format of activations and weights (e4m3: max 448, 3 mantissa bits)"));
  f.push_back(field(f8, "backward_format", &P::fp8, &F8::backward_format,
                    "FP8 format of output gradients: e5m2 (max 57344, Transformer Engine's HYBRID) or e4m3"));
  f.push_back(field(f8, "fast_accum_forward", &P::fp8, &F8::fast_accum_forward,
                    "the forward FP8 GEMM keeps partial sums in the tensor cores' fast accumulator instead of "
                    "promoting them to f32 every few products (faster; Transformer Engine's forward default); the "
                    "gradient GEMMs always promote; GPU only (the CPU emulation sums in f32)"));
  f.push_back(field(f8, "linears", &P::fp8, &F8::linears,
                    "block linears that run in FP8, named as peft.target_modules (qkv, proj, fc1, fc2, HF names, "
                    "all-linear); the embedding and output head never do"));

  const char* pa = "parallelism";
  f.push_back(field(pa, "tp", &P::parallelism, &Par::tp, "tensor-parallel size"));
  f.push_back(field(pa, "pp", &P::parallelism, &Par::pp, "pipeline-parallel size (1F1B schedule)"));
  f.push_back(field(pa, "virtual_pp", &P::parallelism, &Par::virtual_pp,
                    "model chunks per pipeline stage (Megatron's virtual pipeline): > 1 splits the layers into "
                    "pp·virtual_pp chunks, stage k holding chunks k, k+pp, ..., and runs interleaved 1F1B, which cuts "
                    "the pipeline bubble to (pp-1)/(virtual_pp·num_micro_batches) for more activations in flight; "
                    "needs pp ≥ 2, num_micro_batches divisible by pp and num_layers by pp·virtual_pp (or "
                    "layers_per_stage)"));
  f.push_back(field(pa, "cp", &P::parallelism, &Par::cp,
                    "context-parallel size: each sample's tokens are split over cp ranks (load-balanced causal "
                    "chunks, ring attention); needs seq_length % (2·cp) == 0; on CUDA the ring's blocks run cuDNN's "
                    "fused attention (kernels.attention=\"cudnn\", head_dim a multiple of 8 up to 256)"));
  f.push_back(field(pa, "dp", &P::parallelism, &Par::dp, "data-parallel size; 0 = world / (tp·pp·cp)"));
  f.push_back(field(pa, "sequence_parallel", &P::parallelism, &Par::sequence_parallel,
                    "Megatron sequence parallelism: the residual stream, norms and stage tensors hold N/tp token rows "
                    "per TP rank (all-gather / reduce-scatter replace TP's all-reduces; less activation memory); needs "
                    "tp > 1 and micro_batch_size × seq_length divisible by tp"));
  f.push_back(field(pa, "tp_comm_overlap", &P::parallelism, &Par::tp_comm_overlap,
                    "overlap tensor parallelism's communication with the linears' GEMMs (Megatron/Transformer "
                    "Engine's TP comm overlap, torchtitan's async TP): with sequence_parallel=true each "
                    "all-gather and reduce-scatter becomes a ring of tp row-block exchanges on the comm stream, "
                    "pipelined with the GEMM of the block at hand; without it the row-parallel linears' forward "
                    "(attention out-projection, fc2) runs in tp_overlap_chunks row chunks, each chunk's all-reduce "
                    "under the next chunk's GEMM; needs tp > 1; not with LoRA or FP8 in this version"));
  f.push_back(field(pa, "tp_overlap_chunks", &P::parallelism, &Par::tp_overlap_chunks,
                    "with tp_comm_overlap=true and sequence_parallel=false: the row chunks of the row-parallel "
                    "forward (chunk i holds token rows [i·N/k, (i+1)·N/k) of the N = micro_batch_size × "
                    "seq_length / cp rows, so sizes differ by at most one row); 1 ≤ k ≤ N, 1 = no pipelining; a "
                    "value other than 2 is rejected where it cannot act (no overlap, or sequence parallelism, whose "
                    "rings always take tp blocks)"));
  f.push_back(field(pa, "pp_comm_overlap", &P::parallelism, &Par::pp_comm_overlap,
                    "overlap the pipeline's point-to-point transfers with compute (Megatron-Core's overlap_p2p_comm): "
                    "each send/receive of stage tensors starts as soon as the forward or backward that produced or "
                    "last used its activation slot was issued, and a forward or backward waits only for the "
                    "transfers of its own slot; false (the default) = every transfer completes at its place in the "
                    "schedule; the same results either way; needs pp > 1. Measured on 4 NVLink H100s: +2.7% at "
                    "virtual_pp 4, 1.5-3% slower at virtual_pp 2 and 1F1B (NCCL's kernels, started early, wait for "
                    "the peer on SMs the compute needs); try it where transfers are slow (PCIe, across nodes)"));
  f.push_back(field(pa, "zero1", &P::parallelism, &Par::zero1, "shard the Adam state over DP ranks"));
  f.push_back(field(pa, "zero1_overlap_gather", &P::parallelism, &Par::zero1_overlap_gather,
                    "with zero1: all-gather the updated weights bucket by bucket while the next step's forward runs "
                    "(each layer waits only for the buckets holding its weights; embeddings and first layers first) "
                    "instead of all of them, blocking, at the end of the step; false = the blocking gather (A/B "
                    "timing)"));
  f.push_back(field(pa, "layers_per_stage", &P::parallelism, &Par::layers_per_stage,
                    "explicit pipeline split, one entry per stage (per model chunk in model order with "
                    "virtual_pp > 1); empty = parallelism.pipeline_split's"));
  f.push_back(field(pa, "pipeline_split", &P::parallelism, &Par::pipeline_split,
                    "how the layers split over the pipeline's model chunks when layers_per_stage is empty: even (the "
                    "first chunks take the remainder), or balanced by compute, the output head's FLOPs "
                    "(6·hidden·vocab per token, against a layer's 6·params + 12·width·seq) counted on the last stage "
                    "and layers moved from the heaviest stage to the lightest while that lowers the heaviest (a "
                    "pipeline runs at its slowest stage's pace); balanced needs pp·virtual_pp ≤ num_layers, not "
                    "divisibility"));
  f.push_back(
      field(pa, "grad_bucket_mb", &P::parallelism, &Par::grad_bucket_mb,
            "size of the gradient buckets reduced over DP while backward runs (MiB of f32); 0 = one bucket per layer"));
  f.push_back(field(pa, "grad_reduce_bf16", &P::parallelism, &Par::grad_reduce_bf16,
                    "reduce the DP gradients in bf16 (Megatron's default: half the bytes on the wire, each bucket cast "
                    "to bf16 before and back to f32 after its all-reduce / reduce-scatter; the sum rounds to bf16) "
                    "instead of f32 (exact sums); needs dp > 1 to matter"));

  const char* c = "checkpoint";
  f.push_back(field(c, "dir", &P::checkpoint, &C::dir, "where checkpoints go; \"\" = <run dir>/checkpoints"));
  f.push_back(
      field(c, "save_interval", &P::checkpoint, &C::save_interval, "steps between checkpoints; 0 = only at the end"));
  f.push_back(field(c, "save_final", &P::checkpoint, &C::save_final, "save after the last step"));
  f.push_back(field(c, "load", &P::checkpoint, &C::load, "checkpoint or run dir to resume or initialize from"));
  f.push_back(field(c, "keep_last", &P::checkpoint, &C::keep_last, "keep only the newest N checkpoints; 0 = all"));
  f.push_back(field(c, "allow_random_init", &P::checkpoint, &C::allow_random_init,
                    "mode=finetune without checkpoint.load: start from random weights (smoke tests, benchmarks) "
                    "instead of refusing"));

  const char* pe = "peft";
  f.push_back(field(pe, "kind", &P::peft, &Pe::kind,
                    "parameter-efficient finetuning: lora trains low-rank adapters on a frozen base (none = full "
                    "fine-tune)"));
  f.push_back(field(pe, "rank", &P::peft, &Pe::rank, "LoRA rank r"));
  f.push_back(field(pe, "alpha", &P::peft, &Pe::alpha, "LoRA scale numerator (scale = alpha / rank)"));
  f.push_back(field(pe, "dropout", &P::peft, &Pe::dropout,
                    "dropout probability on the LoRA adapter input in training (PEFT's lora_dropout), in [0, 1)"));
  f.push_back(field(pe, "use_rslora", &P::peft, &Pe::use_rslora,
                    "rank-stabilized LoRA: scale = alpha / sqrt(rank) instead of alpha / rank"));
  f.push_back(field(pe, "target_modules", &P::peft, &Pe::target_modules,
                    "linears that get adapters: qkv, proj, fc1, fc2; HF names q_proj+k_proj+v_proj (together), "
                    "o_proj, gate_proj+up_proj (together), down_proj, c_attn, c_proj, c_fc; or all-linear"));
  f.push_back(field(pe, "base_fp8_only", &P::peft, &Pe::base_fp8_only,
                    "with trainer.precision=fp8: hold the frozen base weight of each FP8 linear (fp8.linears) only "
                    "in FP8, quantized once when the base is initialized or loaded (1 byte per parameter instead "
                    "of a bf16 copy plus FP8 casts); the same GEMM operands bit for bit; false keeps the bf16 base "
                    "and casts it every step; no effect without LoRA or FP8"));

  const char* e = "executor";
  f.push_back(field(e, "kind", &P::executor, &E::kind, "how ranks are started"));
  f.push_back(field(e, "nodes", &P::executor, &E::nodes, "hosts"));
  f.push_back(field(e, "gpus_per_node", &P::executor, &E::gpus_per_node,
                    "GPU ranks per host; 0 = all visible GPUs (local only)"));
  f.push_back(field(e, "cpu_ranks", &P::executor, &E::cpu_ranks, "ranks per host when training on CPU"));
  f.push_back(field(e, "device_memory", &P::executor, &E::device_memory,
                    "usable memory per GPU, e.g. \"80GiB\"; \"\" = from gpu_model or the detected GPU"));
  f.push_back(field(e, "gpu_model", &P::executor, &E::gpu_model,
                    "GPU model of the target, e.g. \"H100-80GB\"; \"\" = detected"));
  f.push_back(field(e, "hostfile", &P::executor, &E::hostfile, "mpi: Open MPI hostfile"));
  f.push_back(field(e, "mpirun_args", &P::executor, &E::mpirun_args, "mpi/local: extra mpirun arguments"));
  f.push_back(field(e, "mca", &P::executor, &E::mca, "Open MPI MCA parameters (--mca key value)"));
  f.push_back(field(e, "partition", &P::executor, &E::partition, "slurm: partition"));
  f.push_back(field(e, "account", &P::executor, &E::account, "slurm: account"));
  f.push_back(field(e, "qos", &P::executor, &E::qos, "slurm: quality of service"));
  f.push_back(field(e, "time", &P::executor, &E::time, "slurm: time limit ([D-]HH:MM:SS or minutes)"));
  f.push_back(field(e, "exclusive", &P::executor, &E::exclusive, "slurm: whole nodes"));
  f.push_back(field(e, "sbatch_directives", &P::executor, &E::sbatch_directives,
                    "slurm: extra #SBATCH lines, e.g. \"--constraint=h100\""));
  f.push_back(field(e, "env", &P::executor, &E::env, "environment variables set for every rank"));

  const char* k = "kernels";
  f.push_back(field(k, "workspace_mb", &P::kernels, &K::workspace_mb,
                    "CUDA backend workspace in MiB (≥ 16; reductions, cuDNN attention, GEMM timing); 0 = derived "
                    "(kernels.workspace_bytes). The backend grows it at start, with a notice, if cuDNN's attention "
                    "plans for the run's shape need more"));
  f.push_back(field(k, "cublaslt_tune", &P::kernels, &K::cublaslt_tune,
                    "time cuBLASLt's heuristic algorithms per GEMM shape at the first step and keep the fastest; "
                    "false keeps the first (trainer.deterministic never times)"));
  f.push_back(field(k, "cublaslt_tune_candidates", &P::kernels, &K::cublaslt_tune_candidates,
                    "how many heuristic algorithms each GEMM shape times (1 to 256)"));
  f.push_back(field(k, "cublaslt_tune_log", &P::kernels, &K::cublaslt_tune_log,
                    "print each timed GEMM (heuristic #1 against the chosen one)"));
  f.push_back(field(k, "cudnn_tune", &P::kernels, &K::cudnn_tune,
                    "time cuDNN's attention plans and keep the fastest; false keeps the first"));
  f.push_back(field(k, "attention", &P::kernels, &K::attention,
                    "CUDA attention: cuDNN fused attention (own kernels where cuDNN lacks a shape) or always the "
                    "engine's own kernels"));
  f.push_back(field(k, "fused_mlp", &P::kernels, &K::fused_mlp,
                    "fc2's backward as one fused sm_90a kernel (GELU models on Hopper); false runs cuBLASLt's dGELU "
                    "GEMM + GELU rebuild + column sum"));
  f.push_back(field(k, "portable", &P::kernels, &K::portable,
                    "only the kernels every supported GPU (compute capability 8.0 or newer) runs, also on Hopper: "
                    "no Hopper-only kernel (the fused fc2 backward, whatever kernels.fused_mlp says). Other GPUs "
                    "always run these; true tests that path on an H100"));
  f.push_back(field(k, "bias_grad", &P::kernels, &K::bias_grad,
                    "bias gradients by the column-sum kernel or by cuBLASLt's BGRADB epilogue"));
  f.push_back(field(k, "grad_memset", &P::kernels, &K::grad_memset,
                    "zero every gradient at the start of a step instead of letting its first write overwrite"));
  f.push_back(field(k, "host_clip", &P::kernels, &K::host_clip,
                    "compute the grad norm and clip scale on the host (a synchronizing step, no CUDA graph) "
                    "instead of on the device"));
  f.push_back(field(k, "phase_timing", &P::kernels, &K::phase_timing,
                    "synchronize between step phases and print their mean times at the end (no CUDA graph)"));

  const char* x = "experiment";
  f.push_back(field(x, "name", &P::experiment, &X::name, "experiment name; \"\" = the recipe or preset name"));
  f.push_back(field(x, "dir", &P::experiment, &X::dir, "root folder of run dirs <dir>/<name>/<run-id>"));
  return f;
}

}  // namespace

const std::vector<FieldInfo>& plan_fields() {
  static const std::vector<FieldInfo> fields = build_fields();
  return fields;
}

const FieldInfo* find_field(std::string_view path) {
  // Looked up once per key of a recipe; an index keeps a recipe of N keys O(N).
  static const std::unordered_map<std::string, const FieldInfo*> index = [] {
    std::unordered_map<std::string, const FieldInfo*> m;
    for (const auto& f : plan_fields()) m.emplace(f.path(), &f);
    return m;
  }();
  const auto it = index.find(std::string(path));
  return it == index.end() ? nullptr : it->second;
}

const std::vector<std::string>& plan_sections() {
  static const std::vector<std::string> sections = {"model",   "data",     "optimizer",   "schedule",
                                                    "trainer", "fp8",      "parallelism", "checkpoint",
                                                    "peft",    "executor", "kernels",     "experiment"};
  return sections;
}

const std::vector<DerivedFieldInfo>& derived_fields() {
  static const std::vector<DerivedFieldInfo> fields = {
      {"model.padded_vocab_size",
       "model.vocab_size rounded up to a multiple of model.make_vocab_size_divisible_by × parallelism.tp"},
      {"model.num_params", "the parameter count of the model as allocated (padded vocabulary)"},
      {"model.num_non_embedding_params", "model.num_params without embeddings and output head"},
      {"model.flops_per_token",
       "6·(num_params − input lookups) + 12·num_layers·heads·head_dim·seq_length; with LoRA 4 per frozen "
       "parameter (no weight gradient) + 6 per adapter parameter"},
      {"trainer.num_micro_batches", "trainer.global_batch_size / (trainer.micro_batch_size × parallelism.dp)"},
      {"trainer.tokens_per_step", "trainer.global_batch_size × model.seq_length"},
      {"trainer.eval_micro_batches",
       "trainer.eval_samples / (trainer.micro_batch_size × parallelism.dp): micro-batches per validation per DP rank"},
      {"trainer.classifier_chunk_rows",
       "rows of one classifier chunk on a rank: as few equal chunks of micro_batch_size × seq_length rows as fit "
       "logits in max(the layers' transient buffers, 256 MiB)"},
      {"parallelism.world_size", "executor.nodes × executor.gpus_per_node (or executor.cpu_ranks on CPU)"},
      {"parallelism.rank_order", "\"tp-cp-dp-pp\": tp varies fastest over consecutive ranks, pp slowest"},
      {"parallelism.stage_num_layers",
       "parallelism.layers_per_stage, else model.num_layers over the pp·virtual_pp model chunks as "
       "parallelism.pipeline_split says (even or balanced)"},
      {"parallelism.pipeline_bubble",
       "the idle fraction of a step in the pipeline: (pp-1)/(virtual_pp·trainer.num_micro_batches), 0 without pp"},
      {"kernels.workspace_bytes",
       "kernels.workspace_mb MiB, else the larger of the own attention backward's f32 accumulators + 16 MiB "
       "and cuDNN's attention backward (f32 dQ, one more with grouped KV heads, one dQ partial per key tile "
       "when deterministic), at least 64 MiB"},
      {"executor.device_memory_gib", "executor.device_memory, else the GPU model's memory"},
      {"memory.weights", "the resolver's per-rank memory estimate"},
      {"memory.gradients", "the resolver's per-rank memory estimate"},
      {"memory.optimizer", "the resolver's per-rank memory estimate"},
      {"memory.activations", "the resolver's per-rank memory estimate"},
      {"memory.workspace", "the resolver's per-rank memory estimate"},
      {"memory.total", "the resolver's per-rank memory estimate"},
  };
  return fields;
}

const DerivedFieldInfo* find_derived_field(std::string_view path) {
  for (const auto& f : derived_fields())
    if (f.path == path) return &f;
  return nullptr;
}

}  // namespace recipe::dsl
