#include "plan/memory_estimate.hpp"

#include <algorithm>
#include <cstdio>

#include "family/activations.hpp"
#include "plan/fp8.hpp"
#include "plan/model_size.hpp"
#include "plan/pipeline_order.hpp"
#include "plan/pipeline_split.hpp"

namespace recipe::plan {

namespace {

// Tokens of one sample on one rank: context parallelism splits every sample over its cp ranks.
int64_t local_seq(const Plan& p) { return p.model.seq_length / std::max(1, p.parallelism.cp); }

constexpr double kMiB = 1024.0 * 1024.0;
// What every CUDA rank allocates besides parameters, activations and the backend's workspace
// (cuda_workspace_bytes): the cuBLASLt workspace (32 MiB). NCCL buffers and the CUDA context are
// not in the engine's peak.
constexpr int64_t kCublasWorkspace = 32LL * 1024 * 1024;

int64_t div_ceil(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : a; }
int64_t align256(int64_t n) { return (n + 255) / 256 * 256; }

// The activation declaration's knobs for one rank of this plan (family/activations.hpp): the
// model's dimensions after tensor parallelism (heads, KV heads, FFN, vocabulary) and context
// parallelism (seq/cp tokens of a sample), elements of `es` bytes. core/model's activation_knobs
// says the same from the Model's local shape.
core::ActivationKnobs activation_knobs(const Plan& p, int64_t es) {
  const ModelConfig& m = p.model;
  const int tp = std::max(1, p.parallelism.tp);
  const int64_t D = m.head_dim > 0 ? m.head_dim : m.hidden_size / std::max(1, m.num_attention_heads);
  return {.micro_batch = p.trainer.micro_batch_size,
          .seq = local_seq(p),
          .hidden = m.hidden_size,
          .heads = m.num_attention_heads / tp,
          .kv_heads = m.num_kv_heads % tp == 0 ? m.num_kv_heads / tp : 1,  // the resolver checks kv % tp
          .head_dim = D,
          .ffn = m.ffn_hidden_size / tp,
          .padded_vocab = m.padded_vocab_size / tp,
          .layernorm = m.norm == plan::Norm::layernorm,
          .gelu = m.activation == plan::Activation::gelu,
          .qk_norm = m.qk_norm,
          .packed = p.data.kind == DataKind::sft && p.data.pack,
          .sequence_parallel = p.parallelism.sequence_parallel && tp > 1 ? tp : 1,
          .recompute = core::ActRecompute(int(p.trainer.recompute)),
          .act_bytes = es};
}

// The backend's activation element size: CPU f32, CUDA bf16 unless trainer.precision = fp32.
int64_t act_bytes(const Plan& p) {
  return (p.trainer.precision == plan::Precision::fp32 || p.trainer.device == plan::Device::cpu) ? 4 : 2;
}

// The declaration of one model chunk's arena on one rank (`last`: the pipeline's last chunk, which
// under tensor parallelism holds the vocab-parallel loss scratch), with the chunk rows the resolver
// derives (trainer.classifier_chunk_rows, which core's Model carves with).
std::vector<core::ActBuffer> activation_declaration(const Plan& p, bool last) {
  core::ActivationKnobs k = activation_knobs(p, act_bytes(p));
  k.classifier_chunk_rows = classifier_chunk_rows(p);
  k.vocab_parallel_loss = last && p.parallelism.tp > 1;
  return core::declare_activations(k);
}

// Context parallelism's buffers beside the arena (RingAttention's and the positions' own
// allocations, per model chunk holding layers): ring attention's two K/V blocks in flight and two
// dK/dV blocks (core/model/ring_attention.hpp), each [N, qkv]; the local rows' global positions
// (RoPE and the learned position table read them; core/model/model_context_parallel.cpp).
int64_t ring_bytes(const Plan& p, int layers) {
  if (p.parallelism.cp <= 1 || layers <= 0) return 0;
  const core::ActivationKnobs k = activation_knobs(p, act_bytes(p));
  return 4 * k.rows() * k.qkv_dim() * k.act_bytes + align256(k.rows() * 4);
}

// A pipeline stage's model chunks on one rank: virtual stages stage, stage + pp, ... (one without
// virtual_pp), their layers and the micro-batches each keeps in flight under the schedule
// (plan/pipeline_order.hpp; 1F1B: pp - stage, at most all of them).
struct StageChunks {
  std::vector<int> layers, slots;
};
StageChunks stage_chunks(const Plan& plan, int stage) {
  const int pp = std::max(1, plan.parallelism.pp), vpp = std::max(1, plan.parallelism.virtual_pp);
  const auto counts = stage_layer_counts(plan);
  StageChunks sc;
  for (int c = 0; c < vpp; ++c) {
    const int vs = stage + c * pp;
    sc.layers.push_back(stage >= 0 && vs < static_cast<int>(counts.size()) ? counts[size_t(vs)] : 0);
  }
  const int micro_batches = std::max(1, plan.trainer.num_micro_batches);
  sc.slots = vpp > 1 && pp > 1 && micro_batches % pp == 0
                 ? pipeline_slots(pp, stage, vpp, micro_batches)
                 : std::vector<int>(size_t(vpp), pipeline_slots(pp, stage, micro_batches));
  return sc;
}

}  // namespace

int64_t activation_arena_bytes(const Plan& plan, int stage) {
  const int pp = std::max(1, plan.parallelism.pp), vpp = std::max(1, plan.parallelism.virtual_pp);
  const StageChunks sc = stage_chunks(plan, stage);
  // The rank-scope buffers once (the chunks share them), then per model chunk its slots of layers
  // and slot buffers; the pipeline's last chunk holds the vocab-parallel loss scratch.
  const std::vector<core::ActBuffer> decl = activation_declaration(plan, false);
  int64_t bytes = core::scope_bytes(decl, core::ActScope::rank);
  for (int c = 0; c < vpp; ++c) {
    const bool last_chunk = stage == pp - 1 && c == vpp - 1;
    bytes += core::arena_bytes(last_chunk ? activation_declaration(plan, true) : decl, sc.layers[size_t(c)],
                               sc.slots[size_t(c)], false);
  }
  return bytes;
}

int64_t cuda_workspace_bytes(const Plan& plan) {
  const ModelConfig& m = plan.model;
  const int tp = std::max(1, plan.parallelism.tp);
  const int64_t N = int64_t(plan.trainer.micro_batch_size) * local_seq(plan);
  const int64_t D = m.head_dim > 0 ? m.head_dim : m.hidden_size / std::max(1, m.num_attention_heads);
  const int64_t heads = m.num_attention_heads / tp;
  const int64_t kv = m.num_kv_heads / tp;  // whole KV heads per rank (the resolver checks kv % tp)
  const int64_t mib = int64_t{1} << 20;
  // The own attention backward's f32 dq/dk/dv accumulators, and room for the reductions.
  const int64_t own = N * (heads + 2 * kv) * D * 4 + 16 * mib;
  // cuDNN 9's fused attention backward, as its plans report on an H100 (tests/kernels/cuda/
  // test_cuda_attention_presets.cpp checks every preset, both modes): an f32 dQ accumulator, one
  // more of its size with grouped KV heads, and the f32 row sums of dO·O. The deterministic
  // backward keeps one dQ partial per key tile instead of accumulating atomically: T/128 of them
  // at head dim 64, T/256 at 128 (gpt3_345m: 8 × 16 MiB; the Llama 3 8B layer at seq 8192:
  // 33 × 32 MiB). The backend grows its workspace at start if a plan ever wants more.
  const int64_t dq_accum = N * heads * D * 4;
  const int64_t T = local_seq(plan), key_tile = D <= 64 ? 128 : 256;
  const int64_t partials = plan.trainer.deterministic ? std::max<int64_t>(1, (T + key_tile - 1) / key_tile) : 1;
  // Context parallelism runs ring attention's blocks instead (kernels/cuda/attention_block_backend.cpp):
  // cuDNN's plans for a block need no more than for the whole local sequence, and each block first
  // takes its compact results from the workspace, at most the diagonal block's backward: the lse
  // rows [N, heads] f32, dQ [N, heads·D] and dK|dV [N, 2·kv·D] bf16.
  const int64_t blocks = plan.parallelism.cp > 1 ? N * heads * 4 + N * (heads + 2 * kv) * D * 2 + 1024 : 0;
  const int64_t cudnn = (partials + (kv < heads ? 1 : 0)) * dq_accum + N * heads * 4 + blocks + mib;
  const int64_t need = std::max(own, cudnn);
  return std::max<int64_t>(64 * mib, (need + mib - 1) / mib * mib);
}

int64_t classifier_chunk_rows(int64_t rows, int64_t padded_vocab, int64_t elem_bytes, int64_t room_bytes) {
  constexpr int64_t kMinBudget = int64_t(256) << 20;
  const int64_t per_row = std::max<int64_t>(1, padded_vocab * elem_bytes);
  const int64_t most = std::clamp<int64_t>(std::max(kMinBudget, room_bytes) / per_row, 1, std::max<int64_t>(1, rows));
  const int64_t chunks = div_ceil(rows, most);
  return std::max<int64_t>(1, div_ceil(rows, std::max<int64_t>(1, chunks)));
}

int64_t classifier_chunk_rows(const Plan& plan) {
  const int64_t es = plan.trainer.device == plan::Device::cpu ? 4 : 2;  // the backend's act_dtype(): CPU f32, CUDA bf16
  const int64_t rows = int64_t(plan.trainer.micro_batch_size) * local_seq(plan);
  const int64_t local_vocab = plan.model.padded_vocab_size / std::max(1, plan.parallelism.tp);
  return classifier_chunk_rows(rows, local_vocab, es, core::layers_transient_bytes(activation_knobs(plan, es)));
}

std::vector<int> stage_layer_counts(const Plan& plan) {
  const int n = std::max(1, plan.parallelism.pp) * std::max(1, plan.parallelism.virtual_pp);
  if (static_cast<int>(plan.parallelism.layers_per_stage.size()) == n) return plan.parallelism.layers_per_stage;
  if (plan.parallelism.pipeline_split == PipelineSplit::balanced)
    return balanced_stage_layers(plan.model.num_layers, std::max(1, plan.parallelism.pp),
                                 std::max(1, plan.parallelism.virtual_pp), head_cost_in_layers(plan.model));
  return even_stage_layers(plan.model.num_layers, n);
}

double pipeline_bubble(const Plan& plan) {
  const int pp = std::max(1, plan.parallelism.pp), vpp = std::max(1, plan.parallelism.virtual_pp);
  return double(pp - 1) / (double(vpp) * std::max(1, plan.trainer.num_micro_batches));
}

MemoryEstimate estimate_stage_memory(const Plan& plan, int stage) {
  const ModelConfig& m = plan.model;
  const auto& par = plan.parallelism;
  const int tp = std::max(1, par.tp), pp = std::max(1, par.pp);
  const int dp = std::max(1, par.dp);
  const std::vector<int> chunk_layers = stage_chunks(plan, stage).layers;
  int layers = 0;
  for (int n : chunk_layers) layers += n;
  const bool first = stage == 0, last = stage == pp - 1;

  // Parameters this rank holds.
  const LayerParams lp = layer_params(m);
  int64_t params = layers * (div_ceil(lp.sharded, tp) + lp.replicated);
  const int64_t vocab_shard = word_embedding_params(m, m.padded_vocab_size) / tp;
  if (first) params += vocab_shard + position_embedding_params(m);
  // The last stage holds the head; tied with pp > 1 it is a second copy of the embedding (Megatron).
  if (last) params += final_norm_params(m) + ((!m.tie_embeddings || pp > 1) ? vocab_shard : 0);

  const bool bf16 = plan.trainer.precision != plan::Precision::fp32;  // fp8 keeps bf16 weights
  const bool lora = plan.peft.kind == PeftKind::lora;
  // Trainable parameters on this rank: everything, or only this stage's share of the adapters.
  int64_t trainable = params;
  if (lora) {
    const LayerParams adapters = lora_layer_params(plan);
    trainable = layers * (div_ceil(adapters.sharded, tp) + adapters.replicated);
  }

  MemoryEstimate e;
  // bf16: a bf16 compute copy (2 B) + fp32 master (4 B) per trainable param; frozen LoRA base
  // weights need only the compute copy.
  if (bf16)
    e.weights = (lora ? params * 2 + trainable * 6 : params * 6);
  else
    e.weights = (lora ? params + trainable : params) * 4;
  // peft.base_fp8_only: the FP8 linears' frozen weights are held in FP8 alone, 1 byte per element
  // in place of the compute copy's 2 (CPU: 4).
  const int64_t fp8_frozen = layers * fp8_frozen_weight_numel(plan);
  e.weights -= fp8_frozen * ((bf16 ? 2 : 4) - 1);
  e.gradients = trainable * 4;
  // bf16 DP reduction: a bf16 copy of every bucket in flight (core/train/grad_sync.hpp).
  if (par.grad_reduce_bf16 && dp > 1) e.gradients += trainable * 2;
  e.optimizer = trainable * 8;
  if (par.zero1) e.optimizer = div_ceil(e.optimizer, dp);

  // Activations: the engine's arena (the activation declaration), and context parallelism's
  // buffers beside it.
  e.activations = activation_arena_bytes(plan, stage);
  for (int n : chunk_layers) e.activations += ring_bytes(plan, n);
  // LoRA's scratch (core/model/linear.hpp), in the act dtype: h = s·d(x)·Aᵀ and its gradient,
  // [micro_batch·seq, rank] each; with adapter dropout one [micro_batch·seq, in] buffer for the
  // dropped input, in = the widest adapted input on this rank (hidden for q|k|v and fc1 / gate|up,
  // q_dim/tp for proj, ffn/tp for fc2 / down), shared by every linear.
  if (lora && layers > 0) {
    const int64_t rows = int64_t(plan.trainer.micro_batch_size) * local_seq(plan);
    const int64_t es = plan.trainer.device == plan::Device::cpu ? 4 : 2;
    e.activations += 2 * rows * plan.peft.rank * es;
    if (plan.peft.dropout > 0) e.activations += rows * lora_widest_input(plan, tp) * es;
  }
  // FP8 (plan/fp8.hpp): per model chunk the quantized operands of the linear running now, shared
  // by its linears; per layer the weights' FP8 copies and delayed scaling's amax histories (counted with
  // the weights).
  for (int n : chunk_layers)
    if (n > 0) e.activations += fp8_scratch_bytes(plan);
  e.weights += layers * (fp8_weight_cache_bytes(plan) + fp8_history_bytes(plan));
  // Workspaces, and the trainer's per-token loss buffer (f32, one row per micro-batch).
  // The CUDA backend's RoPE angle table: (cos, sin) f32 pairs [seq, head_dim/2].
  const int64_t rope_table =
      m.position_embedding == PositionEmbedding::rope ? int64_t(m.seq_length) * m.head_dim * 4 : 0;
  e.workspace = cuda_workspace_bytes(plan) + kCublasWorkspace + rope_table +
                static_cast<int64_t>(std::max(1, plan.trainer.num_micro_batches)) * plan.trainer.micro_batch_size *
                    local_seq(plan) * 4;
  e.total = e.weights + e.gradients + e.optimizer + e.activations + e.workspace;
  return e;
}

MemoryEstimate estimate_memory(const Plan& plan) {
  MemoryEstimate worst;
  for (int s = 0; s < std::max(1, plan.parallelism.pp); ++s) {
    const MemoryEstimate e = estimate_stage_memory(plan, s);
    if (s == 0 || e.total > worst.total) worst = e;
  }
  return worst;
}

std::string format_bytes(double bytes) {
  char buf[64];
  const double gib = bytes / (kMiB * 1024.0);
  if (gib >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.2f TiB", gib / 1024.0);
  else if (gib >= 1.0)
    std::snprintf(buf, sizeof buf, "%.1f GiB", gib);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / kMiB);
  return buf;
}

std::string describe_memory(const MemoryEstimate& m) {
  return "weights " + format_bytes(m.weights) + " + gradients " + format_bytes(m.gradients) + " + optimizer " +
         format_bytes(m.optimizer) + " + activations " + format_bytes(m.activations) + " + workspace " +
         format_bytes(m.workspace) + " = " + format_bytes(m.total);
}

}  // namespace recipe::plan
