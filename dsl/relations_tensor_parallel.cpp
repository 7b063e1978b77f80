// Rules of tensor parallelism: what tp must divide, sequence parallelism and the communication
// overlap (part of check_relations).
#include <algorithm>
#include <cstdint>

#include "dsl/suggest.hpp"
#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"

namespace recipe::dsl::detail {

namespace {

// TP sizes (≤ 8, one NVLink domain) that satisfy every TP rule and fit the world.
std::vector<std::string> valid_tp_choices(const ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  std::vector<std::string> out;
  for (int t = 1; t <= 8; ++t) {
    if (t == p.parallelism.tp) continue;
    if (m.num_attention_heads % t != 0) continue;
    if (m.num_kv_heads > 0 && m.num_kv_heads % t != 0) continue;
    if (m.ffn_hidden_size % t != 0) continue;
    if (p.parallelism.sequence_parallel && t == 1) continue;
    if (ctx.world % (t * std::max(1, p.parallelism.pp) * std::max(1, p.parallelism.cp)) != 0) continue;
    out.push_back("tp=" + std::to_string(t));
  }
  return out;
}

std::string tp_fix(const ResolveContext& ctx) {
  const auto choices = valid_tp_choices(ctx);
  if (choices.empty()) return "no tp ≤ 8 fits this model and world size; change the model shape or the world size";
  return "try " + join_or(choices);
}
}  // namespace

void check_tensor_parallel(ResolveContext& ctx, bool kv_ok) {
  const plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  const plan::ParallelismConfig& par = p.parallelism;
  const int kv = m.num_kv_heads;
  // Tensor parallelism.
  const int tp = par.tp;
  if (tp > 1) {
    // One violation naming every size tp fails to divide, so one fix covers them all.
    std::vector<std::string> undivided;
    if (m.num_attention_heads % tp != 0) undivided.push_back("model.num_attention_heads=" + str(m.num_attention_heads));
    // Every TP rank holds whole KV heads of its own. (Replicating a KV head on several ranks would
    // need its gradient summed over exactly those ranks; this version does not do that.)
    if (kv_ok && kv != m.num_attention_heads && kv % tp != 0)  // kv == heads: the heads rule covers it
      undivided.push_back("model.num_kv_heads=" + str(kv) + " (each TP rank needs whole KV heads of its own)");
    if (m.ffn_hidden_size % tp != 0) undivided.push_back("model.ffn_hidden_size=" + str(m.ffn_hidden_size));
    if (m.padded_vocab_size % tp != 0)
      undivided.push_back("the padded vocabulary " + str(m.padded_vocab_size) +
                          " (set model.make_vocab_size_divisible_by)");
    if (!undivided.empty()) {
      std::string list;
      for (std::size_t i = 0; i < undivided.size(); ++i)
        list += (i == 0 ? "" : (i + 1 == undivided.size() ? " and " : ", ")) + undivided[i];
      ctx.violation("parallelism.tp", "parallelism.tp=" + str(tp) + " does not divide " + list, tp_fix(ctx));
    }
  }
  if (par.sequence_parallel && tp == 1)
    ctx.violation("parallelism.sequence_parallel",
                  "parallelism.sequence_parallel=true needs parallelism.tp > 1, got tp=1",
                  "set sequence_parallel=false, or tp ≥ 2");
  // Sequence parallelism splits a micro-batch's micro_batch_size × seq_length token rows into tp
  // equal parts (core/model/linear.hpp).
  const int64_t sp_rows = static_cast<int64_t>(p.trainer.micro_batch_size) * m.seq_length;
  if (par.sequence_parallel && tp > 1 && p.trainer.micro_batch_size > 0 && m.seq_length > 0 && sp_rows % tp != 0)
    ctx.violation(
        "parallelism.sequence_parallel",
        "parallelism.sequence_parallel=true splits trainer.micro_batch_size × model.seq_length = " +
            str(p.trainer.micro_batch_size) + " × " + str(m.seq_length) + " = " + std::to_string(sp_rows) +
            " token rows over parallelism.tp=" + str(tp) + " ranks, which does not divide them",
        "make micro_batch_size × seq_length a multiple of tp=" + str(tp) + ", or set sequence_parallel=false");
  // The communication overlap pipelines TP's collectives with the linears' GEMMs: with sequence
  // parallelism its all-gathers / reduce-scatters, one TP rank's row block at a time; without it the
  // row-parallel forward's all-reduce, in tp_overlap_chunks row chunks (core/model/linear.hpp).
  // Without TP there is no collective to hide.
  if (par.tp_comm_overlap && tp == 1)
    ctx.violation("parallelism.tp_comm_overlap",
                  "parallelism.tp_comm_overlap=true needs parallelism.tp > 1 (it overlaps tensor parallelism's "
                  "collectives with the linears' GEMMs), got tp=1",
                  "set parallelism.tp ≥ 2, or tp_comm_overlap=false");
  // tp_overlap_chunks acts only on that non-SP forward (the rings always take tp blocks), and each
  // chunk needs a token row: micro_batch_size × seq_length / cp rows per rank and micro-batch. A
  // value other than the default where it cannot act is refused (the default itself is written
  // into every resolved.toml, which must re-resolve).
  const bool chunked = par.tp_comm_overlap && !par.sequence_parallel && tp > 1;
  if (par.tp_overlap_chunks != plan::ParallelismConfig{}.tp_overlap_chunks && !chunked &&
      !ctx.bad_paths.count("parallelism.tp_overlap_chunks"))
    ctx.violation(
        "parallelism.tp_overlap_chunks",
        "parallelism.tp_overlap_chunks=" + str(par.tp_overlap_chunks) +
            " has no effect here: it splits the row-parallel forward of tensor parallelism without sequence "
            "parallelism, with the overlap on (tp_comm_overlap=true, sequence_parallel=false, tp > 1); got tp=" +
            str(tp) + ", sequence_parallel=" + (par.sequence_parallel ? "true" : "false") +
            ", tp_comm_overlap=" + (par.tp_comm_overlap ? "true" : "false") +
            (par.sequence_parallel ? " (the sequence-parallel rings always take tp row blocks)" : ""),
        "remove parallelism.tp_overlap_chunks, or set tp_comm_overlap=true with sequence_parallel=false");
  const int64_t chunk_rows = static_cast<int64_t>(p.trainer.micro_batch_size) * m.seq_length / std::max(1, par.cp);
  if (chunked && p.trainer.micro_batch_size > 0 && chunk_rows > 0 && par.tp_overlap_chunks > chunk_rows)
    ctx.violation("parallelism.tp_overlap_chunks",
                  "parallelism.tp_overlap_chunks=" + str(par.tp_overlap_chunks) +
                      " splits trainer.micro_batch_size × model.seq_length" + (par.cp > 1 ? " / parallelism.cp" : "") +
                      " = " + std::to_string(chunk_rows) + " token rows, fewer than the chunks",
                  "set tp_overlap_chunks ≤ " + std::to_string(chunk_rows) + " (the default is 2)");
}

}  // namespace recipe::dsl::detail
