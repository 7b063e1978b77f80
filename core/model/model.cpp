#include "core/model/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/model/ring_attention.hpp"
#include "core/model/rng.hpp"
#include "core/model/token_rows.hpp"

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

Recompute parse_recompute(const std::string& s) {
  if (auto r = plan::from_string<Recompute>(s)) return *r;
  throw std::invalid_argument("trainer.recompute=\"" + s + "\": use \"none\", \"gelu\", \"norm\" or \"full\"");
}

const char* recompute_name(Recompute r) { return plan::to_string(r).data(); }

Recompute checked_recompute(Recompute r) {
  if (!plan::is_valid(r)) return parse_recompute(std::string(plan::to_string(r)));  // throws
  return r;
}

ModelShape local_shape(const ModelShape& g, const ParamLayout& L, int chunk) {
  ModelShape s = g;
  const int tp = L.tp_size;
  s.arch.layers = L.chunks.at(size_t(chunk)).num_layers;
  s.arch.heads = g.arch.heads / tp;
  s.arch.kv_heads = g.arch.kv_heads / tp;
  s.arch.ffn = g.arch.ffn / tp;
  s.arch.padded_vocab = g.arch.padded_vocab / tp;
  return s;
}

Model::Model(const ModelShape& shape, int micro_batch, Recompute recompute, kernels::Backend& backend,
             ParamStore& params, Comm* tp, int slots, int chunk, const Model* share_transient, Comm* cp)
    : s_(cp_local_shape(shape, cp)),
      B_(micro_batch),
      N_(int64_t(micro_batch) * s_.seq),
      R_(N_),
      recompute_(recompute),
      be_(backend),
      store_(params),
      rope_(share_transient ? share_transient->rope_ : std::make_shared<const RopeTable>(backend, s_.arch)),
      tp_(tp) {
  if (micro_batch < 1)
    throw std::invalid_argument("trainer.micro_batch_size=" + std::to_string(micro_batch) + ": must be at least 1");
  if (slots < 1) throw std::invalid_argument("Model: slots must be at least 1");
  const ParamLayout& L = params.layout();
  const int comm_size = tp ? tp->size() : 1;
  if (comm_size != L.tp_size)
    throw std::invalid_argument("Model: the tensor-parallel group has " + std::to_string(comm_size) +
                                " ranks but the ParamLayout was built for tp=" + std::to_string(L.tp_size));
  if (chunk < 0 || chunk >= int(L.chunks.size()))
    throw std::invalid_argument("Model: chunk " + std::to_string(chunk) + " of a layout with " +
                                std::to_string(L.chunks.size()) + " model chunks");
  const LayerChunk& own = L.chunks[size_t(chunk)];
  tp_size_ = L.tp_size;
  tp_rank_ = L.tp_rank;
  // Sequence parallelism splits the rows over the TP group: the resolver checked tp > 1 and that
  // the rows divide (the arena's sizes depend on both, so a hand-built shape is checked here).
  sp_ = s_.sequence_parallel > 1;
  if (sp_ && (s_.sequence_parallel != tp_size_ || N_ % tp_size_ != 0))
    throw std::invalid_argument("parallelism.sequence_parallel over " + std::to_string(s_.sequence_parallel) +
                                " ranks needs tp=" + std::to_string(s_.sequence_parallel) + " (got " +
                                std::to_string(tp_size_) +
                                ") and micro_batch_size × seq_length = " + std::to_string(N_) + " divisible by it");
  if (sp_) R_ = N_ / tp_size_;
  first_layer_ = own.first_layer;
  for (size_t c = size_t(chunk) + 1; c < L.chunks.size(); ++c) phase_above_ += L.chunks[c].num_layers;
  first_stage_ = own.first_stage;
  last_stage_ = own.last_stage;
  ls_ = local_shape(s_, L, chunk);
  vocab_start_ = tp_rank_ * ls_.arch.padded_vocab;
  valid_cols_ = std::clamp(s_.arch.vocab - vocab_start_, 0, ls_.arch.padded_vocab);
  w_ = bind_params(false, own);
  g_ = bind_params(true, own);
  linear_list_ = core::linear_list(s_.arch, first_layer_, ls_.arch.layers);
  linears_per_layer_ = int64_t(block_linears(s_.arch).size());
  tp_partial_grads_.assign(size_t(ls_.arch.layers), {});
  auto heads_partial = [](const TensorDecl& d) { return d.role == Role::q_norm || d.role == Role::k_norm; };
  for (const ParamSpec& p : L.params)
    if (tp_size_ > 1 && p.layer >= first_layer_ && p.layer < first_layer_ + ls_.arch.layers && p.tp_replicated() &&
        p.trainable && p.decl && !is_adapter(*p.decl) && (sp_ || heads_partial(*p.decl)))
      tp_partial_grads_[size_t(p.layer - first_layer_)].push_back(store_.grad(p));
  if (s_.lora()) {
    // The adapters' scratch: h = s·d(x)·Aᵀ and its gradient, [N, r] each, shared by every linear;
    // with adapter dropout also one [N, in] buffer for the dropped input, in = the widest adapted
    // input this rank holds (linear.hpp).
    const size_t es = kernels::dtype_size(be_.act_dtype());
    const size_t one = size_t(N_) * size_t(s_.lora_rank) * es;
    int64_t widest = 0;
    if (s_.lora_dropout > 0.f)
      for (const LayerParams& lp : w_.layers)
        for (const BlockLinear& b : block_linears(s_.arch))
          if (const LinearTensors& t = tensors_of(lp, b.role); t.lora_a.defined())
            widest = std::max(widest, t.lora_a.dim(1));
    const size_t dropped = size_t(N_) * size_t(widest) * es;
    lora_buf_ = be_.alloc(2 * one + dropped);
    lora_.h = Tensor(lora_buf_, be_.act_dtype(), be_.device(), {N_, int64_t(s_.lora_rank)});
    lora_.dh = Tensor(static_cast<char*>(lora_buf_) + one, be_.act_dtype(), be_.device(), {N_, int64_t(s_.lora_rank)});
    if (widest > 0)
      lora_.dropped = Tensor(static_cast<char*>(lora_buf_) + 2 * one, be_.act_dtype(), be_.device(), {N_, widest});
    lora_.scale = s_.lora_scale;
    lora_.dropout = s_.lora_dropout;
  }
  alloc_fp8_scratch();
  make_linears();
  setup_context_parallel(cp);

  // Attention's kernels are chosen (and the workspace they need sized) before the first step, so a
  // slow path is said at start, not discovered by the first call. Ring attention (cp > 1) runs
  // only its blocks, which RingAttention prepared.
  if (ls_.arch.layers > 0 && !cp_.ring)
    be_.prepare_attention({.B = B_,
                           .T = s_.seq,
                           .Hq = ls_.arch.heads,
                           .Hkv = ls_.arch.kv_heads,
                           .D = s_.arch.head_dim,
                           .max_samples = s_.max_samples});

  const DType act = be_.act_dtype();
  acts_.resize(size_t(slots));
  loss_scratch_.resize(size_t(slots));
  // The arena is the declaration's list (family/activations.hpp), which the memory estimate sums:
  // one allocation of its total, then every buffer in its order. Slots share every rank-scope
  // buffer (those living inside one layer's forward or backward), and so do the model chunks of a rank.
  const std::vector<ActBuffer> decl =
      declare_activations(activation_knobs(ls_, B_, recompute_, act, tp_size_ > 1 && last_stage_));
  arena_bytes_ = size_t(arena_bytes(decl, ls_.arch.layers, slots, share_transient == nullptr));
  arena_ = be_.alloc(arena_bytes_);
  Carver real(arena_, be_.device());
  const Activations* shared = share_transient ? &share_transient->acts_.at(0) : nullptr;
  for (int i = 0; i < slots; ++i) {
    carve_activations(real, acts_[size_t(i)], decl, ls_.arch.layers, recompute_, act, i ? &acts_[0] : shared);
    loss_scratch_[size_t(i)] = {.rowmax = acts_[size_t(i)].loss_rowmax, .sums = acts_[size_t(i)].loss_sums};
  }
  if (real.used() != arena_bytes_) throw std::logic_error("Model: the activation arena is not its declaration's size");
  arena_entries_ = real.entries();
  sp_scratch_ = {.full = acts_[0].sp_full, .full_grad = acts_[0].sp_full_grad};  // the linears point here
  first_rows_.assign(size_t(slots), 0);
  host_inputs_.resize(size_t(N_));
  host_targets_.resize(size_t(N_));
}

Model::~Model() {
  cp_.ring.reset();
  if (cp_.buf) be_.free(cp_.buf);
  be_.free(arena_);
  if (lora_buf_) be_.free(lora_buf_);
  if (fp8_buf_) be_.free(fp8_buf_);
}

// One set of FP8 operand buffers for all FP8 linears of this model chunk, sized for the widest,
// and per FP8 linear its weight cache (the layout is in linear.hpp; plan/fp8.cpp's
// fp8_scratch_bytes and fp8_weight_cache_bytes, which the memory estimate counts, mirror it).
// An FP8-only frozen weight (peft.base_fp8_only) is a parameter already in FP8: its cache holds the
// cells alone, and one w_t scratch, sized for the largest, receives the transpose of whichever
// one's input gradient runs.
void Model::alloc_fp8_scratch() {
  if (!s_.fp8_linears || w_.layers.empty()) return;
  int64_t in = 0, out = 0, cache = 0, frozen_max = 0;
  const LayerParams& lp = w_.layers.front();
  auto a = [](int64_t b) { return (b + 255) / 256 * 256; };
  constexpr int64_t kStatsBytes = 256;  // six (scratch) or two (cache) 16-byte cells
  for (const BlockLinear& b : block_linears(s_.arch)) {
    if (!(s_.fp8_linears & b.bit)) continue;
    const Tensor& w = tensors_of(lp, b.role).w;
    in = std::max(in, w.dim(1));
    out = std::max(out, w.dim(0));
    const bool frozen = (s_.fp8_frozen & b.bit) != 0;
    cache += (frozen ? 0 : 2 * a(w.numel())) + kStatsBytes;
    if (frozen) frozen_max = std::max(frozen_max, w.numel());
  }
  const int64_t layers = int64_t(w_.layers.size()), linears = int64_t(linear_list_.size());
  // Delayed scaling: per linear of the flat list its x, W and dy, each an H-step history and two
  // 16-byte cells (the step's amax, the scale's source amax); the amax cells of all tensors are one
  // contiguous buffer, reduced over the groups as one (fp8_end_step).
  const int64_t H = s_.fp8_history_len, T = H > 0 ? linears * kFp8TensorsPerLinear : 0;
  const int64_t delayed = H > 0 ? 2 * a(T * 16) + a(T * H * 4) : 0;
  fp8_buf_ = be_.alloc(size_t(a(N_ * in) + 2 * a(N_ * out) + kStatsBytes + a(frozen_max) + layers * cache + delayed));
  char* p = static_cast<char*>(fp8_buf_);
  auto take = [&](DType dt, int64_t n) {
    Tensor t(p, dt, be_.device(), {n});
    p += a(n * int64_t(kernels::dtype_size(dt)));
    return t;
  };
  fp8_.x = take(DType::e4m3, N_ * in);
  fp8_.g = take(DType::e4m3, N_ * out);
  fp8_.g_t = take(DType::e4m3, N_ * out);
  fp8_.stats = take(DType::f32, kStatsBytes / 4);  // 16-byte cells (linear.hpp)
  if (frozen_max > 0) fp8_.w_t = take(DType::e4m3, frozen_max);
  fp8_.fwd = DType::e4m3;
  fp8_.bwd = s_.fp8_grad_e5m2 ? DType::e5m2 : DType::e4m3;
  fp8_.fast_accum_forward = s_.fp8_fast_accum_forward;
  fp8_weights_.assign(size_t(linears), Fp8WeightCache{});
  for (const LinearRef& r : linear_list_) {
    if (!(s_.fp8_linears & r.linear.bit)) continue;
    const Tensor& wt = tensors_of(w_.layers[size_t(r.layer - first_layer_)], r.linear.role).w;
    Fp8WeightCache& c = fp8_weights_[size_t(r.index)];
    c.frozen = (s_.fp8_frozen & r.linear.bit) != 0;
    if (c.frozen) {
      c.wq = wt;  // the parameter's own FP8 bytes (ParamStore's FP8 region)
    } else {
      c.wq = take(fp8_.fwd, wt.numel()).view({wt.dim(0), wt.dim(1)});
      c.wtq = take(fp8_.fwd, wt.numel()).view({wt.dim(1), wt.dim(0)});
    }
    c.stats = take(DType::f32, kStatsBytes / 4);
  }
  if (H == 0) return;
  fp8_.delayed = true;
  constexpr int64_t kCell = 4;  // floats of one 16-byte cell (cuBLASLt's scale pointers; linear.hpp)
  fp8_hist_.amax = take(DType::f32, T * kCell).view({T, kCell});
  fp8_hist_.scale_amax = take(DType::f32, T * kCell).view({T, kCell});
  fp8_hist_.history = take(DType::f32, T * H).view({T, H});
  // Zero amaxes and histories: the first step seeds them (current scaling, see linear.hpp).
  std::vector<float> zeros(size_t(T * std::max<int64_t>(H, kCell)), 0.f);
  be_.from_host(fp8_hist_.amax, zeros.data());
  be_.from_host(fp8_hist_.scale_amax, zeros.data());
  be_.from_host(fp8_hist_.history, zeros.data());
  fp8_cells_.assign(size_t(linears), Fp8DelayedCells{});
  for (int64_t i = 0; i < linears; ++i)
    for (int r = 0; r < kFp8TensorsPerLinear; ++r) {
      const int64_t t = i * kFp8TensorsPerLinear + r;
      fp8_cells_[size_t(i)].amax[r] = fp8_hist_.amax.view({T * kCell}).rows(t * kCell, 1);
      fp8_cells_[size_t(i)].scale_amax[r] = fp8_hist_.scale_amax.view({T * kCell}).rows(t * kCell, 1);
    }
}

void Model::fp8_weight_pass(bool on, bool record_amax) {
  fp8_.cache_weights = on;
  fp8_.record_amax = on && record_amax;
  for (Fp8WeightCache& c : fp8_weights_)
    if (!c.frozen) c.valid = false;  // a frozen FP8-only weight is cast once, at load
}

Model::StagedWeight Model::stage_frozen_weight(size_t i) const {
  const DType act = be_.act_dtype();
  const size_t es = kernels::dtype_size(act);
  const LinearRef& lin = linear_list_.at(i);
  StagedWeight sw;
  sw.values.resize(size_t(fp8_weights_[i].wq.numel()) * es);
  char* dst = sw.values.data();
  // A pack (q|k|v, gate|up) is one weight: its members' rows back to back, one amax for all.
  for (const ParamSpec* p : store_.layout().bound(lin.linear.role, Part::weight, lin.layer)) {
    const std::vector<float> v = store_.fp8_values(*p);                  // as the compute copy would hold them
    for (const float x : v) sw.amax = std::fmax(sw.amax, std::fabs(x));  // as fp8_amax: NaN skipped
    if (act == DType::f32) {
      std::memcpy(dst, v.data(), v.size() * es);
    } else {
      auto* h = reinterpret_cast<kernels::bf16_t*>(dst);
      for (size_t j = 0; j < v.size(); ++j) h[j] = kernels::f32_to_bf16(v[j]);
    }
    dst += v.size() * es;
  }
  return sw;
}

void Model::stage_frozen_base() {
  frozen_staged_.clear();
  if (!s_.fp8_frozen || !fp8_buf_) return;
  std::vector<StagedWeight> staged(fp8_weights_.size());
  for (size_t i = 0; i < fp8_weights_.size(); ++i)
    if (fp8_weights_[i].frozen) staged[i] = stage_frozen_weight(i);
  frozen_staged_ = std::move(staged);
}

// Through the w_t scratch (free now: no backward runs) in blocks of whole rows: the cast is
// element-wise once the amax is known, so the blocks give the bytes one whole-tensor cast would.
// Without a staged set (the seeded init, which cannot fail on one rank alone) one weight at a time,
// so the host holds one weight's values, not the chunk's.
void Model::quantize_frozen_base() {
  if (!s_.fp8_frozen || !fp8_buf_) return;
  const bool staged = !frozen_staged_.empty();
  const DType act = be_.act_dtype();
  const int64_t es = int64_t(kernels::dtype_size(act));
  for (size_t i = 0; i < fp8_weights_.size(); ++i) {
    Fp8WeightCache& c = fp8_weights_[i];
    if (!c.frozen) continue;
    const StagedWeight sw = staged ? std::move(frozen_staged_[i]) : stage_frozen_weight(i);
    const Tensor amax = c.stats.rows(0, 1), scale_inv = c.stats.rows(4, 1);  // cells 0 and 1 (linear_fp8.cpp)
    be_.from_host(amax, &sw.amax);
    tp_group_.max(amax);  // W is sharded whenever TP is on
    const int64_t out = c.wq.dim(0), in = c.wq.dim(1), block = fp8_.w_t.numel() / (es * in);
    if (block < 1) throw std::logic_error("Model: the FP8 transpose scratch cannot hold one weight row");
    for (int64_t r = 0; r < out; r += block) {
      const int64_t n = std::min(block, out - r);
      const Tensor staging(fp8_.w_t.ptr, act, be_.device(), {n, in});
      be_.from_host(staging, sw.values.data() + size_t(r * in * es));
      be_.fp8_quantize({.out = c.wq.rows(r, n), .scale_inv = scale_inv, .inp = staging, .amax = amax, .cols = in});
    }
    c.valid = true;
  }
  frozen_staged_.clear();
}

void Model::fp8_end_step(const std::vector<Comm*>& groups) {
  if (!fp8_.delayed) return;
  for (Comm* g : groups) g->all_reduce_max(fp8_hist_.amax);  // all this chunk's amaxes at once
  be_.fp8_amax_history({.history = fp8_hist_.history,
                        .amax = fp8_hist_.amax,
                        .scale_amax = fp8_hist_.scale_amax,
                        .most_recent = s_.fp8_amax_most_recent,
                        .push = true});
  fp8_.history_ready = true;
}

void Model::fp8_history_restored() {
  be_.fp8_amax_history({.history = fp8_hist_.history,
                        .amax = fp8_hist_.amax,
                        .scale_amax = fp8_hist_.scale_amax,
                        .most_recent = s_.fp8_amax_most_recent,
                        .push = false});
  fp8_.history_ready = true;
}

Model::Params Model::bind_params(bool grads, const LayerChunk& chunk) const {
  const ParamLayout& L = store_.layout();
  auto one = [&](const ParamSpec& p) { return grads ? store_.grad(p) : store_.weight(p); };
  // A frozen tensor (LoRA's base) binds no gradient: the ops skip the undefined tensor.
  // The tensor the family's table binds to role/part of `layer` (-1: outside the layers); undefined
  // when this stage holds none. A pack (q|k|v, gate|up) reads as one tensor, after checking that the
  // layout really placed its members back to back.
  auto bound = [&](Role role, Part part, int layer = -1) {
    const std::vector<const ParamSpec*> ps = L.bound(role, part, layer);
    if (ps.empty()) return Tensor();
    if (ps.size() == 1) return one(*ps[0]);
    if (grads && !ps[0]->trainable) return Tensor();
    int64_t rows = 0, next = ps[0]->offset;
    for (const ParamSpec* p : ps) {
      if (p->offset != next)
        throw std::logic_error("ParamLayout: " + p->name + " is not adjacent to the tensor before it");
      next += p->numel;
      rows += p->local_shape[0];
    }
    Tensor t = grads        ? store_.grad_span(ps[0]->offset, next - ps[0]->offset)
               : ps[0]->fp8 ? store_.fp8_span(ps[0]->offset, next - ps[0]->offset)
                            : store_.compute_span(ps[0]->offset, next - ps[0]->offset);
    return part == Part::bias ? t : t.view({rows, ps[0]->local_shape[1]});
  };
  using R = Role;
  constexpr Part W = Part::weight, B = Part::bias;

  Params P;
  P.word = bound(R::word_embedding, W);
  P.position = bound(R::position_embedding, W);
  if (chunk.last_stage) {
    P.classifier = s_.arch.tied ? P.word : bound(R::lm_head, W);
    P.final_norm = {bound(R::final_norm, W), bound(R::final_norm, B)};
  }
  for (int i = 0; i < chunk.num_layers; ++i) {
    const int l = chunk.first_layer + i;
    LayerParams lp;
    lp.norm1 = {bound(R::attention_norm, W, l), bound(R::attention_norm, B, l)};
    lp.norm2 = {bound(R::mlp_norm, W, l), bound(R::mlp_norm, B, l)};
    auto linear = [&](Role role) {
      return LinearTensors{bound(role, W, l), bound(role, B, l), bound(role, Part::lora_a, l),
                           bound(role, Part::lora_b, l)};
    };
    lp.qkv = linear(R::qkv);
    lp.proj = linear(R::attention_out);
    lp.fc_in = linear(R::mlp_in);
    lp.fc_out = linear(R::mlp_out);
    lp.q_norm = bound(R::q_norm, W, l);
    lp.k_norm = bound(R::k_norm, W, l);
    P.layers.push_back(lp);
  }
  return P;
}

void Model::make_linears() {
  tp_group_ = {.comm = tp_,
               .rank = tp_rank_,
               .size = tp_size_,
               .sp = sp_ ? &sp_scratch_ : nullptr,
               .overlap = tp_size_ > 1 && s_.tp_comm_overlap,
               .overlap_chunks = s_.tp_overlap_chunks};
  const TpGroup& tp = tp_group_;
  // Each adapter's dropout mask has its own stream, keyed by the seed and the linear's global
  // layer and name (the same on every TP rank, stage and DP rank).
  auto key = [&](size_t l, const char* linear) {
    return rng::stream_key(s_.lora_dropout_seed,
                           "lora_dropout.layers." + std::to_string(first_layer_ + int(l)) + "." + linear);
  };
  linears_.clear();
  for (size_t l = 0; l < w_.layers.size(); ++l) {
    const LayerParams &w = w_.layers[l], &g = g_.layers[l];
    linears_.push_back({.qkv = ColumnParallelLinear(w.qkv, g.qkv, be_, tp, &lora_, key(l, "qkv")),
                        .proj = RowParallelLinear(w.proj, g.proj, be_, tp, &lora_, key(l, "proj")),
                        .fc_in = ColumnParallelLinear(w.fc_in, g.fc_in, be_, tp, &lora_, key(l, "fc_in")),
                        .fc_out = RowParallelLinear(w.fc_out, g.fc_out, be_, tp, &lora_, key(l, "fc_out"))});
  }
  if (!fp8_buf_) return;
  for (const LinearRef& r : linear_list_)
    if (s_.fp8_linears & r.linear.bit)
      linear_of(linears_[size_t(r.layer - first_layer_)], r.linear.role)
          .use_fp8(&fp8_, &fp8_weights_[size_t(r.index)], fp8_.delayed ? &fp8_cells_[size_t(r.index)] : nullptr);
}

const LinearTensors& Model::tensors_of(const LayerParams& p, Role role) {
  switch (role) {
    case Role::qkv:
      return p.qkv;
    case Role::attention_out:
      return p.proj;
    case Role::mlp_in:
      return p.fc_in;
    case Role::mlp_out:
      return p.fc_out;
    default:
      throw std::logic_error("Model: the layer has no linear of this role");
  }
}

Linear& Model::linear_of(LayerLinears& l, Role role) {
  switch (role) {
    case Role::qkv:
      return l.qkv;
    case Role::attention_out:
      return l.proj;
    case Role::mlp_in:
      return l.fc_in;
    case Role::mlp_out:
      return l.fc_out;
    default:
      throw std::logic_error("Model: the layer has no linear of this role");
  }
}

void Model::tp_sum(Tensor t) {
  if (tp_size_ > 1) tp_->all_reduce_sum(t);
}

void Model::sum_tp_partial_grads(int l) {
  auto sum = [&](const Tensor& t) {
    if (t.defined()) tp_->all_reduce_sum(t);  // undefined: frozen (LoRA) or absent (no biases)
  };
  if (l < 0) {
    sum(g_.final_norm.w);
    sum(g_.final_norm.b);
    return;
  }
  for (const Tensor& t : tp_partial_grads_[size_t(l)]) sum(t);
}

void Model::load_tokens(int slot, const int32_t* tokens) {
  split_token_rows(tokens, B_, s_.seq, s_.arch.vocab, host_inputs_.data(), host_targets_.data());
  Activations& A = acts_.at(size_t(slot));
  if (first_stage_) be_.from_host(A.inputs, host_inputs_.data());
  if (last_stage_) be_.from_host(A.targets, host_targets_.data());
}

void Model::load_split_tokens(int slot, const int32_t* inputs, const int32_t* targets, const int32_t* positions) {
  check_split_tokens(inputs, targets, B_, s_.seq, s_.arch.vocab);
  Activations& A = acts_.at(size_t(slot));
  if (first_stage_) be_.from_host(A.inputs, inputs);
  if (last_stage_) be_.from_host(A.targets, targets);
  if (!s_.packed) return;
  if (!positions)
    throw std::invalid_argument("Model::load_split_tokens: a packed model (data.pack=true) needs the positions");
  check_sample_positions(positions, B_, s_.seq, s_.max_samples);
  be_.from_host(A.positions, positions);  // every stage: each layer's RoPE and attention read them
}

Tensor Model::stage_input(int slot) const { return acts_.at(size_t(slot)).saved.at(0).residual; }
Tensor Model::stage_output(int slot) const { return acts_.at(size_t(slot)).final_residual; }
Tensor Model::stage_output_grad(int slot) const { return acts_.at(size_t(slot)).dresidual; }
Tensor Model::stage_input_grad(int slot) const { return acts_.at(size_t(slot)).dresidual; }

void Model::forward(int slot, bool with_grad, Tensor losses, Tensor dloss) {
  if (last_stage_ && (losses.numel() != N_ || losses.dtype != DType::f32))
    throw std::invalid_argument("Model: losses must be f32 with " + std::to_string(N_) + " elements, got " +
                                losses.shape_str());
  Activations& A = acts_.at(size_t(slot));
  lora_.training = with_grad;  // adapter dropout: training forwards only
  lora_.first_row = first_rows_.at(size_t(slot));
  const LayerActs first = A.layer(0);
  const int nl = ls_.arch.layers;
  if (first_stage_) {
    weights_needed(layer_phase(-1));  // the embeddings' phase: one past the lowest layer's
    // Every rank's lookup is partial (its vocabulary rows; positions on rank 0): summed over the
    // group, or under sequence parallelism reduce-scattered to this rank's rows.
    const Tensor embedded = sp_ ? sp_scratch_.full : first.residual;
    be_.embedding_fwd({.out = embedded,
                       .tokens = A.inputs,
                       .wte = w_.word,
                       .wpe = tp_rank_ == 0 ? w_.position : Tensor(),
                       .positions = position_rows(),
                       .T = s_.seq,
                       .vocab_start = vocab_start_});
    if (sp_)
      tp_group_.sum_scatter_rows(first.residual, embedded);
    else
      tp_sum(first.residual);
  }
  weights_needed(layer_phase(0));
  norm_fwd(first.ln1, first.residual, w_.layers[0].norm1, first.ln1_mean, first.ln1_rstd);
  for (int l = 0; l < nl; ++l) {
    const LayerActs a = A.layer(l);
    layer_forward_body(A, l, a, true);
    // SwiGLU: fc_act = swiglu(fc_pre) is written by fc_out's forward (with its FP8 cast, if fused).
    linears_[size_t(l)].fc_out.fwd(
        {.out = A.proj_out, .inp = a.fc_act, .swiglu_pre = s_.arch.gelu ? Tensor() : a.fc_pre});
    // The MLP residual add is fused with the next norm (the next layer's norm1 or the final norm),
    // whose weights are the next phase's.
    if (l + 1 < nl || last_stage_) weights_needed(l + 1 < nl ? layer_phase(l + 1) : 0);
    if (l + 1 < nl) {
      const LayerActs next = A.layer(l + 1);
      residual_norm(next.residual, next.ln1, next.ln1_mean, next.ln1_rstd, a.residual2, A.proj_out,
                    w_.layers[size_t(l) + 1].norm1);
    } else if (last_stage_) {
      residual_norm(A.final_residual, A.lnf, A.lnf_mean, A.lnf_rstd, a.residual2, A.proj_out, w_.final_norm);
    } else {
      be_.add(A.final_residual, a.residual2, A.proj_out);  // the stage output
    }
  }
  if (last_stage_) classifier(A, loss_scratch_[size_t(slot)], with_grad, losses, dloss);
}

void Model::backward(int slot) {
  Activations& A = acts_.at(size_t(slot));
  lora_.training = true;  // the backward regenerates the training forward's dropout masks
  lora_.first_row = first_rows_.at(size_t(slot));
  if (last_stage_) {
    be_.zero(A.dresidual);
    // A.dln holds d(final norm output), written by the classifier.
    norm_bwd(A.dresidual, g_.final_norm, A.dln, A.final_residual, w_.final_norm, A.lnf_mean, A.lnf_rstd,
             fc_out_bias_grad_from_norm(ls_.arch.layers - 1));
  }
  // Otherwise A.dresidual is stage_output_grad, filled by the caller.
  // The hook marks the step's last backward (set_phase_hook): the partial sums of sequence
  // parallelism (and of qk-norm's weights under TP) are complete for the step now, and summed over
  // TP before the phase leaves for DP.
  const bool tp_sums = tp_size_ > 1 && bool(phase_hook_);
  if (tp_sums && sp_ && last_stage_) sum_tp_partial_grads(-1);
  if (phase_hook_) phase_hook_(0);
  const int nl = ls_.arch.layers;
  // A stage that is not the last receives d(output) from the next stage: no norm summed it.
  bool dres_summed = last_stage_ && fc_out_bias_grad_from_norm(nl - 1).defined();
  for (int l = nl - 1; l >= 0; --l) {
    const LayerActs a = A.layer(l);
    if (recompute_ == Recompute::full) {
      norm_fwd(a.ln1, a.residual, w_.layers[size_t(l)].norm1, a.ln1_mean, a.ln1_rstd);
      layer_forward_body(A, l, a);
    }
    layer_backward(A, l, a, dres_summed);
    dres_summed = fc_out_bias_grad_from_norm(l - 1).defined();
    if (tp_sums) sum_tp_partial_grads(l);
    if (phase_hook_) phase_hook_(1 + phase_above_ + (nl - 1 - l));
  }
  if (first_stage_ && (g_.word.defined() || g_.position.defined())) {  // frozen under LoRA
    // Sequence parallel: every row's gradient (gathered), so the vocabulary shard's and the
    // position table's gradients are complete on every rank.
    be_.embedding_bwd({.dwte = g_.word,
                       .dwpe = g_.position,
                       .dout = sp_ ? tp_group_.gather_rows(A.dresidual, sp_scratch_.full) : A.dresidual,
                       .tokens = A.inputs,
                       .positions = position_rows(),
                       .T = s_.seq,
                       .vocab_start = vocab_start_});
  }
}

}  // namespace recipe::core
