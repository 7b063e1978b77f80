#include "core/model/model.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/model/token_rows.hpp"

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

Recompute parse_recompute(const std::string& s) {
  for (Recompute r : {Recompute::none, Recompute::gelu, Recompute::norm, Recompute::full})
    if (s == recompute_name(r)) return r;
  throw std::invalid_argument("trainer.recompute=\"" + s + "\": use \"none\", \"gelu\", \"norm\" or \"full\"");
}

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::gelu:
      return "gelu";
    case Recompute::norm:
      return "norm";
    case Recompute::full:
      return "full";
  }
  return "none";
}

ModelShape local_shape(const ModelShape& g, const ParamLayout& L) {
  ModelShape s = g;
  const int tp = L.tp_size;
  s.layers = L.num_layers;
  s.heads = g.heads / tp;
  s.kv_heads = g.kv_heads % tp == 0 ? g.kv_heads / tp : 1;
  s.ffn = g.ffn / tp;
  s.padded_vocab = g.padded_vocab / tp;
  return s;
}

Model::Model(const ModelShape& shape, int micro_batch, Recompute recompute, kernels::Backend& backend,
             ParamStore& params, Comm* tp, int slots)
    : s_(shape),
      B_(micro_batch),
      N_(int64_t(micro_batch) * shape.seq),
      recompute_(recompute),
      be_(backend),
      store_(params),
      tp_(tp) {
  if (micro_batch < 1)
    throw std::invalid_argument("trainer.micro_batch_size=" + std::to_string(micro_batch) + ": must be at least 1");
  if (slots < 1) throw std::invalid_argument("Model: slots must be at least 1");
  const ParamLayout& L = params.layout();
  const int comm_size = tp ? tp->size() : 1;
  if (comm_size != L.tp_size)
    throw std::invalid_argument("Model: the tensor-parallel group has " + std::to_string(comm_size) +
                                " ranks but the ParamLayout was built for tp=" + std::to_string(L.tp_size));
  tp_size_ = L.tp_size;
  tp_rank_ = L.tp_rank;
  first_layer_ = L.first_layer;
  first_stage_ = L.first_stage;
  last_stage_ = L.last_stage;
  ls_ = local_shape(s_, L);
  vocab_start_ = tp_rank_ * ls_.padded_vocab;
  valid_cols_ = std::clamp(s_.vocab - vocab_start_, 0, ls_.padded_vocab);
  w_ = bind_params(false);
  g_ = bind_params(true);

  const DType act = be_.act_dtype();
  acts_.resize(size_t(slots));
  loss_scratch_.resize(size_t(slots));
  auto carve_all = [&](Carver& c) {
    // Slots share every buffer that lives inside one layer's forward or backward (see activations.hpp).
    for (int i = 0; i < slots; ++i) {
      carve_activations(c, acts_[size_t(i)], ls_, B_, recompute_, act, i ? &acts_[0] : nullptr);
      if (tp_size_ > 1 && last_stage_) {
        const int64_t chunk = acts_[size_t(i)].chunk_rows;
        loss_scratch_[size_t(i)].rowmax = c.take(DType::f32, {chunk}, "vocab-parallel loss rowmax");
        loss_scratch_[size_t(i)].sums = c.take(DType::f32, {2, chunk}, "vocab-parallel loss sums");
      }
    }
  };
  Carver measure(nullptr, be_.device());
  carve_all(measure);
  arena_bytes_ = measure.used();
  arena_entries_ = measure.entries();
  arena_ = be_.alloc(arena_bytes_);
  Carver real(arena_, be_.device());
  carve_all(real);
  host_inputs_.resize(size_t(N_));
  host_targets_.resize(size_t(N_));
}

Model::~Model() { be_.free(arena_); }

Model::Params Model::bind_params(bool grads) const {
  const ParamLayout& L = store_.layout();
  auto one = [&](const ParamSpec& p) { return grads ? store_.grad(p) : store_.weight(p); };
  auto opt = [&](const std::string& name) {
    const ParamSpec* p = L.find(name);
    return p ? one(*p) : Tensor();
  };
  // Several adjacent parameters read as one tensor (q|k|v, gate|up): checks that the layout really
  // placed them back to back.
  auto packed = [&](std::initializer_list<std::string> names, bool matrix) {
    const ParamSpec* first = L.find(*names.begin());
    if (!first) return Tensor();
    int64_t rows = 0, next = first->offset;
    for (const auto& n : names) {
      const ParamSpec& p = L.get(n);
      if (p.offset != next) throw std::logic_error("ParamLayout: " + n + " is not adjacent to the tensor before it");
      next += p.numel;
      rows += p.local_shape[0];
    }
    Tensor t = grads ? store_.grad_span(first->offset, next - first->offset)
                     : store_.compute_span(first->offset, next - first->offset);
    return matrix ? t.view({rows, first->local_shape[1]}) : t;
  };

  Params P;
  P.word = opt("embedding.word.weight");
  P.position = opt("embedding.position.weight");
  if (L.last_stage) {
    P.classifier = s_.tied ? P.word : one(L.get("lm_head.weight"));
    P.final_norm = {one(L.get("final_norm.weight")), opt("final_norm.bias")};
  }
  for (int i = 0; i < L.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(L.first_layer + i) + ".";
    LayerParams lp;
    lp.norm1 = {one(L.get(p + "attention_norm.weight")), opt(p + "attention_norm.bias")};
    lp.norm2 = {one(L.get(p + "mlp_norm.weight")), opt(p + "mlp_norm.bias")};
    const std::string a = p + "attention.";
    lp.qkv = {packed({a + "q.weight", a + "k.weight", a + "v.weight"}, true),
              packed({a + "q.bias", a + "k.bias", a + "v.bias"}, false)};
    lp.proj = {one(L.get(a + "proj.weight")), opt(a + "proj.bias")};
    const std::string m = p + "mlp.";
    if (s_.gelu) {
      lp.fc_in = {one(L.get(m + "fc1.weight")), opt(m + "fc1.bias")};
      lp.fc_out = {one(L.get(m + "fc2.weight")), opt(m + "fc2.bias")};
    } else {
      lp.fc_in = {packed({m + "gate.weight", m + "up.weight"}, true), packed({m + "gate.bias", m + "up.bias"}, false)};
      lp.fc_out = {one(L.get(m + "down.weight")), opt(m + "down.bias")};
    }
    P.layers.push_back(lp);
  }
  return P;
}

void Model::tp_sum(Tensor t) {
  if (tp_size_ > 1) tp_->all_reduce_sum(t);
}

// A row-parallel linear's output is summed over the TP group: only rank 0 adds the bias.
Tensor Model::row_bias(const Tensor& b) const { return tp_rank_ == 0 ? b : Tensor(); }

void Model::load_tokens(int slot, const int32_t* tokens) {
  split_token_rows(tokens, B_, s_.seq, s_.vocab, host_inputs_.data(), host_targets_.data());
  Activations& A = acts_.at(size_t(slot));
  if (first_stage_) be_.from_host(A.inputs, host_inputs_.data());
  if (last_stage_) be_.from_host(A.targets, host_targets_.data());
}

Tensor Model::stage_input(int slot) const { return acts_.at(size_t(slot)).saved.at(0).residual; }
Tensor Model::stage_output(int slot) const { return acts_.at(size_t(slot)).final_residual; }
Tensor Model::stage_output_grad(int slot) const { return acts_.at(size_t(slot)).dresidual; }
Tensor Model::stage_input_grad(int slot) const { return acts_.at(size_t(slot)).dresidual; }

void Model::forward(int slot, bool with_grad, Tensor losses, float dloss) {
  if (last_stage_ && (losses.numel() != N_ || losses.dtype != DType::f32))
    throw std::invalid_argument("Model: losses must be f32 with " + std::to_string(N_) + " elements, got " +
                                losses.shape_str());
  Activations& A = acts_.at(size_t(slot));
  const LayerActs first = A.layer(0);
  if (first_stage_) {
    be_.embedding_fwd(first.residual, A.inputs, w_.word, tp_rank_ == 0 ? w_.position : Tensor(), s_.seq, vocab_start_);
    tp_sum(first.residual);
  }
  norm_fwd(first.ln1, first.ln1_mean, first.ln1_rstd, first.residual, w_.layers[0].norm1);
  const int nl = ls_.layers;
  for (int l = 0; l < nl; ++l) {
    const LayerActs a = A.layer(l);
    layer_forward_body(A, l, a);
    const Linear& out = w_.layers[size_t(l)].fc_out;
    be_.linear_fwd(A.proj_out, a.fc_act, out.w, row_bias(out.b), Tensor());
    tp_sum(A.proj_out);
    // The MLP residual add is fused with the next norm (the next layer's norm1 or the final norm).
    if (l + 1 < nl) {
      const LayerActs next = A.layer(l + 1);
      residual_norm(next.residual, next.ln1, next.ln1_mean, next.ln1_rstd, a.residual2, A.proj_out,
                    w_.layers[size_t(l + 1)].norm1);
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
  if (last_stage_) {
    be_.zero(A.dresidual);
    // A.dln holds d(final norm output), written by the classifier.
    norm_bwd(A.dresidual, g_.final_norm, A.dln, A.final_residual, w_.final_norm, A.lnf_mean, A.lnf_rstd,
             fc_out_bias_grad_from_norm(ls_.layers - 1));
  }
  // Otherwise A.dresidual is stage_output_grad, filled by the caller.
  if (phase_hook_) phase_hook_(0);
  const int nl = ls_.layers;
  // A stage that is not the last receives d(output) from the next stage: no norm summed it.
  bool dres_summed = last_stage_ && fc_out_bias_grad_from_norm(nl - 1).defined();
  for (int l = nl - 1; l >= 0; --l) {
    const LayerActs a = A.layer(l);
    if (recompute_ == Recompute::full) {
      norm_fwd(a.ln1, a.ln1_mean, a.ln1_rstd, a.residual, w_.layers[size_t(l)].norm1);
      layer_forward_body(A, l, a);
    }
    layer_backward(A, l, a, dres_summed);
    dres_summed = fc_out_bias_grad_from_norm(l - 1).defined();
    if (phase_hook_) phase_hook_(1 + (nl - 1 - l));
  }
  if (first_stage_) be_.embedding_bwd(g_.word, g_.position, A.dresidual, A.inputs, s_.seq, vocab_start_);
}

void Model::forward_backward(const int32_t* tokens, Tensor losses, float dloss) {
  if (!first_stage_ || !last_stage_)
    throw std::logic_error("Model::forward_backward runs a whole model; pipeline stages use forward/backward");
  load_tokens(0, tokens);
  forward(0, true, losses, dloss);
  backward(0);
}

void Model::forward_loss(const int32_t* tokens, Tensor losses) {
  if (!first_stage_ || !last_stage_)
    throw std::logic_error("Model::forward_loss runs a whole model; pipeline stages use forward");
  load_tokens(0, tokens);
  forward(0, false, losses, 0.0f);
}

}  // namespace recipe::core
