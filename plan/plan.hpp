// The resolved plan: the contract between the resolver and everything downstream.
//
// Every field below is a recipe key: its path is `<section>.<field>` (e.g. `model.num_layers`,
// `parallelism.tp`), its default is the initializer here, and docs/recipes.md describes it.
// Fields under a `// derived` comment are filled in by the resolver and are not recipe keys
// (a recipe that sets them gets an "unknown key" error naming the derived value instead).
// Plain structs, no behaviour: the resolver (dsl/resolve.*) fills them, workers read them back from
// `resolved.toml` through the same resolver, so every rank sees identical values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "plan/enums.hpp"

namespace recipe::plan {

struct ModelConfig {
  Arch arch = Arch::gpt;
  int num_layers = 12;
  int hidden_size = 768;
  int num_attention_heads = 12;
  int num_kv_heads = 0;     // 0 = same as num_attention_heads (MHA)
  int ffn_hidden_size = 0;  // 0 = 4*hidden (gpt) or Llama's 8/3 rule rounded to 256
  int vocab_size = 50257;
  int make_vocab_size_divisible_by = 128;  // padded vocab = multiple of this × tp
  int seq_length = 1024;
  int max_position_embeddings = 0;  // 0 = seq_length
  Norm norm = Norm::layernorm;
  double norm_eps = 1e-5;
  Activation activation = Activation::gelu;  // gelu = tanh approximation
  PositionEmbedding position_embedding = PositionEmbedding::learned;
  double rope_theta = 10000.0;
  // RoPE scaling (family/rope.hpp); the four parameters are set with llama3 only (0 = unset).
  RopeScaling rope_scaling = RopeScaling::none;
  double rope_scaling_factor = 0;
  double rope_scaling_low_freq_factor = 0;
  double rope_scaling_high_freq_factor = 0;
  int rope_scaling_original_max_positions = 0;
  // The Hugging Face architecture of the family that export writes and import expects (its
  // config.json model_type, e.g. "mistral" for model.arch=llama); "" = the family's first.
  std::string hf_architecture;
  bool tie_embeddings = true;
  bool bias = true;  // biases in linears and norms
  bool qk_norm = false;  // per-head RMSNorm of q and k before RoPE (Qwen3)
  double init_std = 0.02;
  int head_dim = 0;  // 0 = hidden_size / num_attention_heads (derived)
  // derived
  int padded_vocab_size = 0;
  int64_t num_params = 0;  // all parameters, tied embedding counted once
  int64_t num_non_embedding_params = 0;
  double flops_per_token = 0;  // 6N + 12·L·d·T (training, fwd+bwd; BENCH.md's MFU formula)
};

struct DataConfig {
  DataKind kind = DataKind::mock;
  // Weighted blend of indexed dataset prefixes: {w1, "path/a", w2, "path/b"} in a recipe; a single
  // prefix may be given as `path`. Weights are normalized by the resolver.
  std::string path;
  std::vector<std::pair<double, std::string>> blend;
  std::string split = "98,2,0";  // train,valid,test proportions of each dataset
  bool fixed_batch = false;      // mock: repeat one batch forever (memorization benchmark)
  Tokenizer tokenizer = Tokenizer::none;
  std::string vocab_file;       // gpt2_bpe: vocab.json
  std::string merges_file;      // gpt2_bpe: merges.txt
  std::string tokenizer_model;  // sentencepiece: .model; hf: tokenizer.json
  std::string eod_token;        // hf: the token ending a document; empty: the rule in core/data/tokenizer.hpp
  int seed = 1234;
  // sft: the chat template the dataset was prepared with;
  // the loss-mask file records it and training checks that they agree.
  ChatTemplate chat_template = ChatTemplate::none;
  // sft: several conversations per sequence (true) or one per sequence, padded (false).
  bool pack = true;
  // sft with pack: the most conversations one sequence holds (its padding is one more sample).
  int max_samples_per_pack = 64;
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  double lr = 3e-4;
  double min_lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool decay_embeddings = false;  // apply weight decay to embeddings too
  double clip_grad = 1.0;         // global L2 norm clip; 0 disables
};

struct ScheduleConfig {
  int warmup_steps = 0;
  DecayStyle decay_style = DecayStyle::cosine;
  int decay_steps = 0;  // 0 = trainer.max_steps
};

struct TrainerConfig {
  int max_steps = 100;
  int micro_batch_size = 4;
  int global_batch_size = 0;  // 0 = micro_batch_size × dp (no accumulation)
  Device device = Device::auto_;
  Precision precision = Precision::bf16;  // bf16 compute with fp32 master weights
  int seed = 1234;
  int log_interval = 1;
  int eval_interval = 0;                  // 0 = no validation
  int eval_iters = 10;                    // global batches per validation (when eval_samples = 0)
  int eval_samples = 0;                   // samples per validation; 0 = eval_iters × global_batch_size
  Recompute recompute = Recompute::gelu;  // what backward rebuilds
  bool deterministic = false;
  bool cuda_graph = true;
  int cpu_threads = 0;          // 0 = leave OpenBLAS default
  double step_timeout_s = 600;  // step watchdog floor (core/train/step_watchdog.hpp); 0 = off
  // derived
  int num_micro_batches = 0;   // global / (micro × dp)
  int eval_micro_batches = 0;  // eval_samples / (micro × dp): the micro-batches of one validation per DP rank
  int64_t tokens_per_step = 0;
  // Rows per classifier chunk on one rank (of micro_batch_size × seq_length; see
  // plan::classifier_chunk_rows): the logits chunk core's activation arena carves.
  int64_t classifier_chunk_rows = 0;
};

// The rank layout (Megatron's order string): tp varies fastest, pp slowest, so
//   world_rank = tp_rank + tp·(cp_rank + cp·(dp_rank + dp·pp_rank)).
// The resolver writes it to parallelism.rank_order; core/parallel and the executors' rank map use it.
inline constexpr const char* kRankOrder = "tp-cp-dp-pp";

// trainer.precision = "fp8": how the block linears run in FP8 (core/model/linear.hpp). Ignored
// (and not checked) under the other precisions.
struct Fp8Config {
  Fp8Scaling scaling = Fp8Scaling::tensorwise;
  int amax_history_len = 1024;  // delayed scaling: steps of amax history (TE's default)
  Fp8AmaxCompute amax_compute = Fp8AmaxCompute::max;
  Fp8Format forward_format = Fp8Format::e4m3;   // activations and weights
  Fp8Format backward_format = Fp8Format::e5m2;  // output gradients (TE's HYBRID recipe)
  // The forward GEMM accumulates in the tensor cores' fast accumulator (TE's default: the
  // gradient GEMMs keep promoting to f32).
  bool fast_accum_forward = true;
  // Which block linears run in FP8, in peft.target_modules' vocabulary (plan/lora.hpp); the
  // embedding and the output head never do.
  std::vector<std::string> linears = {"qkv", "proj", "fc1", "fc2"};
};

struct ParallelismConfig {
  int tp = 1;
  int pp = 1;
  // Model chunks per pipeline stage (Megatron's virtual pipeline): 1 = 1F1B; V ≥ 2 splits the
  // layers into pp·V chunks, stage k holding chunks k, k+pp, ..., run by interleaved 1F1B.
  int virtual_pp = 1;
  int cp = 1;
  int dp = 0;  // 0 = world / (tp·pp·cp)
  bool sequence_parallel = false;
  // Pipeline TP's collectives with the linears' GEMMs (core/model/linear.hpp): with
  // sequence_parallel its all-gathers / reduce-scatters, one TP rank's row block at a time;
  // without it the row-parallel forward's all-reduce, in tp_overlap_chunks row chunks. Needs tp > 1.
  bool tp_comm_overlap = false;
  // Row chunks of that non-SP forward overlap (≥ 1; ≤ the micro-batch's token rows per rank).
  int tp_overlap_chunks = 2;
  // Start the pipeline's neighbour exchanges as early as their data allows and wait for each only
  // where a forward/backward needs its slot (plan/pipeline_overlap.hpp); false = each completes at
  // its place in the schedule (the default: on NVLink H100s the early NCCL kernels slow the
  // compute they run beside more than the transfers gain; docs/performance.md). Needs pp > 1.
  bool pp_comm_overlap = false;
  bool zero1 = false;  // distributed optimizer (shard Adam state over DP)
  // ZeRO-1: all-gather the updated weights bucket by bucket while the next forward runs (each
  // layer waits for its own buckets) instead of blocking at the end of the step.
  bool zero1_overlap_gather = true;
  std::vector<int> layers_per_stage;  // explicit PP split (pp·virtual_pp entries); empty = pipeline_split
  // Without layers_per_stage: an even split, or one balanced by compute (the output head counted
  // against the last stage; plan/pipeline_split.hpp).
  PipelineSplit pipeline_split = PipelineSplit::even;
  double grad_bucket_mb = 128.0;  // DP gradient bucket size (f32 MiB); 0 = one per layer
  bool grad_reduce_bf16 = false;  // reduce DP gradients in bf16 (half the bytes) instead of f32
  // derived
  int world_size = 0;      // tp·pp·cp·dp: the ranks the executor starts
  std::string rank_order;  // "tp-cp-dp-pp": tp varies fastest over consecutive ranks
  // Layers of each virtual pipeline stage in model order (pp·virtual_pp entries: stage k holds
  // entries k, k+pp, ...): layers_per_stage, else pipeline_split's.
  std::vector<int> stage_num_layers;
  // The pipeline bubble: the idle fraction of a step, (pp-1)/(virtual_pp·num_micro_batches).
  double pipeline_bubble = 0;
};

struct CheckpointConfig {
  std::string dir;        // "" = <run dir>/checkpoints
  int save_interval = 0;  // 0 = only at the end (if save_final)
  bool save_final = true;
  std::string load;  // checkpoint dir or run dir to resume/init from
  // mode=finetune without checkpoint.load starts from random weights only when this says so.
  bool allow_random_init = false;
  int keep_last = 0;  // 0 = keep all
};

struct PeftConfig {
  PeftKind kind = PeftKind::none;
  int rank = 16;
  double alpha = 32.0;
  double dropout = 0.0;                     // on the adapter input in training (core/model/linear.hpp)
  bool use_rslora = false;                  // scale alpha/sqrt(rank) instead of alpha/rank
  std::vector<std::string> target_modules;  // e.g. {"qkv", "proj", "fc1", "fc2"}; see plan/lora.hpp
  // With trainer.precision = fp8: the frozen base weight of each FP8 linear is held only in FP8
  // (quantized once at init/load, no bf16 copy; core/model/linear.hpp). No effect otherwise.
  bool base_fp8_only = true;
};

struct ExecutorConfig {
  ExecutorKind kind = ExecutorKind::local;
  int nodes = 1;
  int gpus_per_node = 0;           // 0 = all visible GPUs (local), required elsewhere
  int cpu_ranks = 1;               // ranks per node when running on CPU
  std::string device_memory = "";  // "80GiB" override; "" = from the GPU model
  std::string gpu_model = "";      // "H100-80GB", ... ; "" = detected
  std::string hostfile;
  std::vector<std::string> mpirun_args;
  std::map<std::string, std::string> mca;
  std::string partition;
  std::string account;
  std::string qos;
  std::string time = "01:00:00";
  bool exclusive = true;
  std::vector<std::string> sbatch_directives;
  std::map<std::string, std::string> env;
  // derived
  double device_memory_gib = 0;
};

// Kernel choices and tuning of the CUDA backend and the step. Defaults are the fast path; the
// switches exist for A/B measurements (docs/performance.md) and are recorded in resolved.toml so
// a run dir reproduces its run. The CPU backend ignores them.
struct KernelsConfig {
  int workspace_mb = 0;              // backend workspace in MiB; 0 = derived (workspace_bytes)
  bool cublaslt_tune = true;         // time cuBLASLt's heuristic algorithms per GEMM shape
  int cublaslt_tune_candidates = 8;  // how many of them (1..256)
  bool cublaslt_tune_log = false;    // print each timed GEMM
  bool cudnn_tune = true;            // time cuDNN's attention plans
  Attention attention = Attention::cudnn;
  bool fused_mlp = true;  // fc2's backward as the fused sm_90a kernel
  bool portable = false;  // only kernels every GPU of compute capability ≥ 8.0 runs, also on Hopper
  BiasGrad bias_grad = BiasGrad::kernel;
  bool grad_memset = false;   // zero every gradient at step start instead of first-write overwrite
  bool host_clip = false;     // grad norm and clip on the host instead of the device step
  bool phase_timing = false;  // synchronized per-phase timing (no CUDA graph)
  // derived
  int64_t workspace_bytes = 0;  // workspace_mb MiB, else plan::cuda_workspace_bytes
};

struct ExperimentConfig {
  std::string name = "";  // "" = the recipe/preset name
  std::string dir = "experiments";
};

// Per-rank memory estimate in bytes (derived), for the most loaded rank.
struct MemoryEstimate {
  int64_t weights = 0;  // compute copy (bf16) + fp32 master
  int64_t gradients = 0;
  int64_t optimizer = 0;    // Adam m and v (sharded by dp with zero1)
  int64_t activations = 0;  // at micro_batch_size, with the chosen recompute
  int64_t workspace = 0;    // GEMM/attention workspaces, logits chunk
  int64_t total = 0;
};

struct Plan {
  std::string source;  // where the recipe came from: preset name or file path
  Mode mode = Mode::pretrain;
  ModelConfig model;
  DataConfig data;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  TrainerConfig trainer;
  Fp8Config fp8;
  ParallelismConfig parallelism;
  CheckpointConfig checkpoint;
  PeftConfig peft;
  ExecutorConfig executor;
  KernelsConfig kernels;
  ExperimentConfig experiment;
  MemoryEstimate memory;  // derived
};

}  // namespace recipe::plan
