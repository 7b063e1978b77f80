#include "core/model.hpp"

#include <stdexcept>
#include <string>

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

Recompute parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::none;
  if (s == "full") return Recompute::full;
  throw std::invalid_argument("trainer.recompute=\"" + s + "\": use \"none\" or \"full\"");
}

Model::Model(const ModelShape& shape, int micro_batch, Recompute recompute, kernels::Backend& backend,
             ParamStore& params)
    : s_(shape), B_(micro_batch), N_(int64_t(micro_batch) * shape.seq), recompute_(recompute),
      be_(backend), store_(params) {
  if (micro_batch < 1)
    throw std::invalid_argument("trainer.micro_batch_size=" + std::to_string(micro_batch) +
                                ": must be at least 1");
  if (params.layout().tp_size != 1)
    throw std::invalid_argument("Model: this model runs unsharded (the ParamLayout was built for tp=" +
                                std::to_string(params.layout().tp_size) + ")");
  w_ = bind_params(false);
  g_ = bind_params(true);

  const DType act = be_.act_dtype();
  Carver measure(nullptr, be_.device());
  carve_activations(measure, acts_, s_, B_, recompute_ == Recompute::full, act);
  arena_bytes_ = measure.used();
  arena_ = be_.alloc(arena_bytes_);
  Carver real(arena_, be_.device());
  carve_activations(real, acts_, s_, B_, recompute_ == Recompute::full, act);
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
      if (p.offset != next)
        throw std::logic_error("ParamLayout: " + n + " is not adjacent to the tensor before it");
      next += p.numel;
      rows += p.local_shape[0];
    }
    Tensor t = grads ? store_.grad_span(first->offset, next - first->offset)
                     : store_.compute_span(first->offset, next - first->offset);
    return matrix ? t.view({rows, first->local_shape[1]}) : t;
  };

  Params P;
  P.word = one(L.get("embedding.word.weight"));
  P.position = opt("embedding.position.weight");
  P.classifier = s_.tied ? P.word : one(L.get("lm_head.weight"));
  P.final_norm = {one(L.get("final_norm.weight")), opt("final_norm.bias")};
  for (int l = 0; l < s_.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
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
      lp.fc_in = {packed({m + "gate.weight", m + "up.weight"}, true),
                  packed({m + "gate.bias", m + "up.bias"}, false)};
      lp.fc_out = {one(L.get(m + "down.weight")), opt(m + "down.bias")};
    }
    P.layers.push_back(lp);
  }
  return P;
}

void Model::upload_tokens(const int32_t* tokens) {
  const int T = s_.seq;
  for (int b = 0; b < B_; ++b) {
    const int32_t* row = tokens + size_t(b) * size_t(T + 1);
    for (int t = 0; t <= T; ++t) {
      if (row[t] < 0 || row[t] >= s_.vocab)
        throw std::runtime_error("token id " + std::to_string(row[t]) + " (sample row " +
                                 std::to_string(b) + ", position " + std::to_string(t) +
                                 ") is outside model.vocab_size=" + std::to_string(s_.vocab) +
                                 "; the data was tokenized with a different vocabulary than the "
                                 "model's (check data.tokenizer and model.vocab_size)");
    }
    for (int t = 0; t < T; ++t) {
      host_inputs_[size_t(b) * T + t] = row[t];
      host_targets_[size_t(b) * T + t] = row[t + 1];
    }
  }
  be_.from_host(acts_.inputs, host_inputs_.data());
  be_.from_host(acts_.targets, host_targets_.data());
}

void Model::forward(bool with_grad, Tensor losses, float dloss) {
  if (losses.numel() != N_ || losses.dtype != DType::f32)
    throw std::invalid_argument("Model: losses must be f32 with " + std::to_string(N_) +
                                " elements, got " + losses.shape_str());
  const LayerActs first = acts_.layer(0);
  be_.embedding_fwd(first.residual, acts_.inputs, w_.word, w_.position, s_.seq, 0);
  norm_fwd(first.ln1, first.ln1_mean, first.ln1_rstd, first.residual, w_.layers[0].norm1);
  for (int l = 0; l < s_.layers; ++l) {
    const LayerActs a = acts_.layer(l);
    layer_forward_body(l, a);
    const Linear& out = w_.layers[size_t(l)].fc_out;
    be_.linear_fwd(acts_.proj_out, a.fc_act, out.w, out.b, Tensor());
    // The MLP residual add is fused with the next norm (the next layer's norm1 or the final norm).
    if (l + 1 < s_.layers) {
      const LayerActs next = acts_.layer(l + 1);
      residual_norm(next.residual, next.ln1, next.ln1_mean, next.ln1_rstd, a.residual2, acts_.proj_out,
                    w_.layers[size_t(l + 1)].norm1);
    } else {
      residual_norm(acts_.final_residual, acts_.lnf, acts_.lnf_mean, acts_.lnf_rstd, a.residual2,
                    acts_.proj_out, w_.final_norm);
    }
  }
  classifier(with_grad, losses, dloss);
}

void Model::backward() {
  be_.zero(acts_.dresidual);
  // acts_.dln holds d(final norm output), written by the classifier.
  norm_bwd(acts_.dresidual, g_.final_norm, acts_.dln, acts_.final_residual, w_.final_norm,
           acts_.lnf_mean, acts_.lnf_rstd);
  for (int l = s_.layers - 1; l >= 0; --l) {
    const LayerActs a = acts_.layer(l);
    if (recompute_ == Recompute::full) {
      norm_fwd(a.ln1, a.ln1_mean, a.ln1_rstd, a.residual, w_.layers[size_t(l)].norm1);
      layer_forward_body(l, a);
    }
    layer_backward(l, a);
  }
  be_.embedding_bwd(g_.word, g_.position, acts_.dresidual, acts_.inputs, s_.seq, 0);
}

void Model::forward_backward(const int32_t* tokens, Tensor losses, float dloss) {
  upload_tokens(tokens);
  forward(true, losses, dloss);
  backward();
}

void Model::forward_loss(const int32_t* tokens, Tensor losses) {
  upload_tokens(tokens);
  forward(false, losses, 0.0f);
}

}  // namespace recipe::core
