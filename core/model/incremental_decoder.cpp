// The Model's forward over a KV cache (see incremental_decoder.hpp).
#include "core/model/incremental_decoder.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace recipe::core {

using kernels::DType;
using kernels::Tensor;

IncrementalDecoder::IncrementalDecoder(Model& model) : m_(model), S_(model.s_.seq) {
  const ModelShape& s = m_.s_;
  if (m_.tp_size_ != 1 || !m_.first_stage_ || !m_.last_stage_ || m_.ls_.arch.layers != s.arch.layers)
    throw std::invalid_argument("IncrementalDecoder: generation runs the whole model on one rank (tp = pp = 1)");
  if (m_.B_ != 1)
    throw std::invalid_argument("IncrementalDecoder: the model must be built for micro-batch 1, not " +
                                std::to_string(m_.B_));
  kernels::Backend& be = m_.be_;
  const DType act = be.act_dtype();
  const int64_t S = S_, C = s.arch.hidden;
  auto carve = [&](Carver& c) {
    k_cache_.assign(size_t(s.arch.layers), Tensor());
    v_cache_.assign(size_t(s.arch.layers), Tensor());
    for (int l = 0; l < s.arch.layers; ++l) {
      k_cache_[size_t(l)] = c.take(act, {1, s.arch.kv_heads, S, s.arch.head_dim}, "KV cache");
      v_cache_[size_t(l)] = c.take(act, {1, s.arch.kv_heads, S, s.arch.head_dim}, "KV cache");
    }
    tokens_ = c.take(DType::i32, {S}, "tokens");
    residual_ = c.take(act, {S, C}, "residual");
    ln_ = c.take(act, {S, C}, "norm output");
    qkv_ = c.take(act, {S, s.arch.qkv_dim()}, "qkv");
    atty_ = c.take(act, {S, s.arch.q_dim()}, "attention output");
    proj_out_ = c.take(act, {S, C}, "projection output");
    residual2_ = c.take(act, {S, C}, "residual2");
    fc_pre_ = c.take(act, {S, s.arch.fc_in_rows()}, "fc_pre");
    fc_act_ = c.take(act, {S, s.arch.ffn}, "fc_act");
    lnf_ = c.take(act, {1, C}, "final norm output");
    logits_ = c.take(act, {1, s.arch.padded_vocab}, "logits");
  };
  Carver measure(nullptr, be.device());
  carve(measure);
  buf_ = be.alloc(measure.used());
  Carver real(buf_, be.device());
  carve(real);
  host_logits_.resize(size_t(s.arch.vocab));
}

IncrementalDecoder::~IncrementalDecoder() { m_.be_.free(buf_); }

const std::vector<float>& IncrementalDecoder::forward(std::span<const int32_t> tokens) {
  const ModelShape& s = m_.s_;
  const int n = int(tokens.size()), p = pos_;
  if (n < 1) throw std::invalid_argument("IncrementalDecoder::forward: no tokens");
  if (p + n > S_)
    throw std::invalid_argument("IncrementalDecoder::forward: positions " + std::to_string(p) + ".." +
                                std::to_string(p + n - 1) + " do not fit the cache's " + std::to_string(S_) +
                                " positions");
  for (int i = 0; i < n; ++i)
    if (tokens[size_t(i)] < 0 || tokens[size_t(i)] >= s.arch.vocab)
      throw std::invalid_argument("IncrementalDecoder::forward: token id " + std::to_string(tokens[size_t(i)]) +
                                  " is outside the vocabulary [0, " + std::to_string(s.arch.vocab) + ")");
  kernels::Backend& be = m_.be_;
  const Model::Params& w = m_.w_;
  m_.lora_.training = false;  // generation is evaluation: no adapter dropout (peft.dropout)
  const Tensor tok = tokens_.rows(0, n), res = residual_.rows(0, n), ln = ln_.rows(0, n), qkv = qkv_.rows(0, n),
               atty = atty_.rows(0, n), proj = proj_out_.rows(0, n), res2 = residual2_.rows(0, n),
               fc_pre = fc_pre_.rows(0, n), fc_act = fc_act_.rows(0, n);
  be.from_host(tok, tokens.data());
  // Learned positions: rows p .. p+n−1 of the table (embedding_fwd adds wpe[i % T], so T = n).
  be.embedding_fwd({.out = res,
                    .tokens = tok,
                    .wte = w.word,
                    .wpe = s.arch.learned_positions ? w.position.rows(p, n) : Tensor(),
                    .T = n});
  m_.norm_fwd(ln, res, w.layers[0].norm1);
  const kernels::AttentionShape att{.B = 1, .T = n, .Hq = s.arch.heads, .Hkv = s.arch.kv_heads, .D = s.arch.head_dim};
  for (int l = 0; l < s.arch.layers; ++l) {
    const Model::LayerParams& lp = w.layers[size_t(l)];
    const Model::LayerLinears& L = m_.linears_[size_t(l)];
    const Tensor kc = k_cache_[size_t(l)], vc = v_cache_[size_t(l)];
    L.qkv.fwd({.out = qkv, .inp = ln});
    // qk-norm before RoPE (kv_cache_append rotates), in place: nothing here runs a backward.
    if (s.arch.qk_norm)
      be.qk_norm_fwd({.out = qkv,
                      .inp = qkv,
                      .q_weight = lp.q_norm,
                      .k_weight = lp.k_norm,
                      .Hq = att.Hq,
                      .Hkv = att.Hkv,
                      .D = att.D,
                      .eps = s.arch.norm_eps});
    be.kv_cache_append({.qkv = qkv,
                        .k_cache = kc,
                        .v_cache = vc,
                        .shape = att,
                        .past = p,
                        .rope_inv_freq = m_.rope_->inv_freq()});  // undefined with learned positions
    be.kv_attention({.out = atty, .qkv = qkv, .k_cache = kc, .v_cache = vc, .shape = att, .past = p});
    L.proj.fwd({.out = proj, .inp = atty});
    m_.residual_norm(res2, ln, Tensor(), Tensor(), res, proj, lp.norm2);
    if (s.arch.gelu) {
      L.fc_in.fwd({.out = fc_act, .inp = ln, .pre_gelu = fc_pre});
    } else {
      L.fc_in.fwd({.out = fc_pre, .inp = ln});
      be.swiglu_fwd(fc_act, fc_pre);
    }
    L.fc_out.fwd({.out = proj, .inp = fc_act});
    // As in training, the MLP residual add is fused with the next norm; after the last layer only
    // the last row goes on to the final norm and the classifier.
    if (l + 1 < s.arch.layers)
      m_.residual_norm(res, ln, Tensor(), Tensor(), res2, proj, w.layers[size_t(l) + 1].norm1);
    else
      m_.residual_norm(res.rows(n - 1, 1), lnf_, Tensor(), Tensor(), res2.rows(n - 1, 1), proj.rows(n - 1, 1),
                       w.final_norm);
  }
  be.linear_fwd({.out = logits_, .inp = lnf_, .weight = w.classifier});
  pos_ = p + n;

  // The first `vocab` columns (the rest is padding) as f32.
  if (logits_.dtype == DType::f32) {
    std::vector<float> all(size_t(s.arch.padded_vocab));
    be.to_host(all.data(), logits_);
    std::copy_n(all.begin(), host_logits_.size(), host_logits_.begin());
  } else {
    std::vector<kernels::bf16_t> all(size_t(s.arch.padded_vocab));
    be.to_host(all.data(), logits_);
    for (size_t i = 0; i < host_logits_.size(); ++i) host_logits_[i] = kernels::bf16_to_f32(all[i]);
  }
  return host_logits_;
}

}  // namespace recipe::core
