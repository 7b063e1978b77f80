#include "cli/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "executors/launch.hpp"
#include "plan/model_size.hpp"
#include "plan/pipeline_split.hpp"

namespace recipe::cli {

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// Derived by the resolver; the report only reads them.
int dp_of(const plan::Plan& p) { return p.parallelism.dp; }
int world_of(const plan::Plan& p) { return p.parallelism.world_size; }

std::string rank_kind(const plan::Plan& p, int n) {
  std::string what = p.trainer.device == plan::Device::cuda ? "GPU" : "CPU rank";
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

}  // namespace

std::string human_count(double n) {
  double a = std::fabs(n);
  if (a >= 1e12) return fmt("%.2fT", n / 1e12);
  if (a >= 1e9) return fmt("%.2fB", n / 1e9);
  if (a >= 1e6) return fmt("%.1fM", n / 1e6);
  if (a >= 1e3) return fmt("%.1fK", n / 1e3);
  return fmt("%.0f", n);
}

std::string gib(int64_t bytes) { return fmt("%.2f GiB", static_cast<double>(bytes) / double(1ull << 30)); }

std::string layout(const plan::Plan& p) {
  std::ostringstream s;
  s << "tp " << p.parallelism.tp << " x cp " << p.parallelism.cp << " x dp " << dp_of(p) << " x pp "
    << p.parallelism.pp;
  return s.str();
}

std::string model_shape(const plan::Plan& p) {
  std::ostringstream s;
  s << plan::to_string(p.model.arch) << " " << human_count(static_cast<double>(p.model.num_params)) << " params, "
    << p.model.num_layers << " layers x " << p.model.hidden_size << " hidden, seq " << p.model.seq_length;
  if (p.peft.kind == plan::PeftKind::lora) s << ", " << trainable_params(p) << " trainable (LoRA)";
  return s.str();
}

std::string trainable_params(const plan::Plan& p) {
  const double trainable = double(plan::lora_trainable_params(p)), all = double(p.model.num_params) + trainable;
  return human_count(trainable) + " of " + human_count(all) + " params (" +
         fmt("%.2f", all > 0 ? 100.0 * trainable / all : 0.0) + "%)";
}

std::string default_parallelism(const plan::Plan& p) {
  std::ostringstream s;
  s << "tp" << p.parallelism.tp << " pp" << p.parallelism.pp << " cp" << p.parallelism.cp;
  if (p.parallelism.dp > 0) s << " dp" << p.parallelism.dp;
  return s.str();
}

std::string validate_summary(const plan::Plan& p) {
  int world = world_of(p);
  int per_node = exec::ranks_per_node(p);
  int nodes = std::max(1, (world + per_node - 1) / per_node);
  std::ostringstream s;
  s << "world " << world << " (" << layout(p) << ") on " << nodes << (nodes == 1 ? " node" : " nodes") << " x "
    << rank_kind(p, per_node) << "; " << human_count(static_cast<double>(p.model.num_params)) << " params; memory/rank "
    << gib(p.memory.total);
  if (p.executor.device_memory_gib > 0) s << " of " << fmt("%.2f GiB", p.executor.device_memory_gib);
  return s.str();
}

void print_plan_summary(std::ostream& out, const plan::Plan& p) {
  const auto& m = p.model;
  int world = world_of(p);
  int per_node = exec::ranks_per_node(p);
  int nodes = std::max(1, (world + per_node - 1) / per_node);
  out << "Plan: " << p.source << " (" << plan::to_string(p.mode) << ")\n";
  out << "  model      " << plan::to_string(m.arch) << ", " << human_count(static_cast<double>(m.num_params))
      << " params (" << human_count(static_cast<double>(m.num_non_embedding_params)) << " non-embedding), "
      << m.num_layers << " layers x " << m.hidden_size << " hidden, " << m.num_attention_heads << " heads";
  if (m.num_kv_heads > 0 && m.num_kv_heads != m.num_attention_heads) out << " (" << m.num_kv_heads << " kv)";
  out << ", head dim " << m.head_dim << ", seq " << m.seq_length << ", vocab " << m.vocab_size << " (padded "
      << m.padded_vocab_size << ")\n";
  if (p.peft.kind == plan::PeftKind::lora) {
    out << "  peft       LoRA rank " << p.peft.rank << ", alpha " << fmt("%g", p.peft.alpha)
        << (p.peft.use_rslora ? " (rsLoRA)" : "") << ", targets ";
    for (size_t i = 0; i < p.peft.target_modules.size(); ++i) out << (i ? " " : "") << p.peft.target_modules[i];
    out << "; trains " << trainable_params(p) << ", the base frozen\n";
  }
  out << "  compute    " << fmt("%.3g", m.flops_per_token) << " FLOPs/token, " << p.trainer.tokens_per_step
      << " tokens/step, " << p.trainer.max_steps << " steps\n";
  out << "  parallel   world " << world << " = " << layout(p) << " on " << nodes << (nodes == 1 ? " node" : " nodes")
      << " x " << rank_kind(p, per_node) << ", device " << plan::to_string(p.trainer.device);
  if (p.parallelism.virtual_pp > 1) out << ", virtual_pp " << p.parallelism.virtual_pp << " (interleaved 1F1B)";
  if (p.parallelism.pp > 1)
    out << ", pipeline bubble " << fmt("%.1f", 100.0 * p.parallelism.pipeline_bubble) << "%"
        << (p.parallelism.pp_comm_overlap ? ", PP comm overlap" : "");
  if (p.parallelism.sequence_parallel) out << ", sequence parallel";
  if (p.parallelism.tp_comm_overlap) out << ", TP comm overlap";
  if (p.parallelism.tp_comm_overlap && !p.parallelism.sequence_parallel)
    out << " (" << p.parallelism.tp_overlap_chunks << " row chunks)";
  if (p.parallelism.zero1) out << ", zero1";
  out << "\n";
  if (p.parallelism.pp > 1) {
    // The split and what each stage computes, in layers (the head counted on the last): a
    // pipeline runs at its heaviest stage's pace.
    const auto& counts = p.parallelism.stage_num_layers;
    const double head = plan::head_cost_in_layers(m);
    out << "  pipeline   layers per " << (p.parallelism.virtual_pp > 1 ? "model chunk" : "stage") << " [";
    for (size_t i = 0; i < counts.size(); ++i) out << (i ? "," : "") << counts[i];
    out << "] ("
        << (p.parallelism.layers_per_stage.empty() ? std::string(plan::to_string(p.parallelism.pipeline_split))
                                                   : std::string("layers_per_stage"))
        << "); stage compute in layers";
    for (const double load : plan::stage_loads(counts, p.parallelism.pp, head)) out << " " << fmt("%.2f", load);
    out << " (head " << fmt("%.2f", head) << " layers)\n";
    // An even split whose head stage is 5% or more heavier than the balanced split's heaviest:
    // say what the balanced split would be (measured: +5% at the ~1B Llama's PP4).
    if (p.parallelism.layers_per_stage.empty() && p.parallelism.pipeline_split == plan::PipelineSplit::even) {
      const auto balanced = plan::balanced_stage_layers(m.num_layers, p.parallelism.pp, p.parallelism.virtual_pp, head);
      const auto heaviest = [&](const std::vector<int>& c) {
        return plan::heaviest_stage_load(c, p.parallelism.pp, head);
      };
      if (heaviest(counts) >= 1.05 * heaviest(balanced)) {
        out << "             the last stage's head makes it the slowest: parallelism.pipeline_split=\"balanced\" gives "
               "[";
        for (size_t i = 0; i < balanced.size(); ++i) out << (i ? "," : "") << balanced[i];
        out << "], heaviest stage " << fmt("%.2f", heaviest(balanced)) << " instead of "
            << fmt("%.2f", heaviest(counts)) << " layers\n";
      }
    }
    // Interleaving divides the bubble by virtual_pp but multiplies the stage crossings of every
    // micro-batch. Once plain 1F1B's bubble is small, the extra transfers can cost more than the
    // bubble saved: on 4 H100s whose transfers do not run beside compute, PP4 at 64 micro-batches
    // ran 80.5% per GPU in 1F1B against 76.7% with virtual_pp 2 (docs/performance.md).
    const int pp = p.parallelism.pp, v = p.parallelism.virtual_pp, micro = p.trainer.num_micro_batches;
    const double plain_bubble = micro > 0 ? double(pp - 1) / micro : 1.0;
    if (v > 1 && plain_bubble < 0.05)
      out << "             interleaving: each micro-batch crosses " << pp * v - 1 << " stage boundaries instead of "
          << pp - 1 << ", to shrink a 1F1B bubble of only " << fmt("%.1f", 100.0 * plain_bubble)
          << "%; where transfers do not run beside compute, parallelism.virtual_pp=1 can be faster\n";
  }
  out << "  batch      global " << p.trainer.global_batch_size << " = micro " << p.trainer.micro_batch_size << " x dp "
      << dp_of(p) << " x " << p.trainer.num_micro_batches << " micro-batches\n";
  out << "  executor   " << plan::to_string(p.executor.kind) << ", experiment " << p.experiment.name << " in "
      << p.experiment.dir << "\n";
}

void print_rank_map(std::ostream& out, const plan::Plan& p) {
  auto ranks = exec::rank_map(p);
  out << "Rank map (" << ranks.size() << (ranks.size() == 1 ? " rank" : " ranks")
      << "; Megatron order: tp fastest, then cp, dp, pp):\n";
  char line[128];
  std::snprintf(line, sizeof(line), "  %6s %5s %6s %4s %4s %4s %4s %4s\n", "rank", "node", "local", "gpu", "tp", "cp",
                "dp", "pp");
  out << line;
  for (const auto& r : ranks) {
    std::string gpu = r.gpu >= 0 ? std::to_string(r.gpu) : "-";
    std::snprintf(line, sizeof(line), "  %6d %5d %6d %4s %4d %4d %4d %4d\n", r.rank, r.node, r.local_rank, gpu.c_str(),
                  r.tp, r.cp, r.dp, r.pp);
    out << line;
  }
}

void print_memory(std::ostream& out, const plan::Plan& p) {
  const auto& mem = p.memory;
  out << "Memory per rank (estimate, most loaded rank):\n";
  auto row = [&](const char* name, int64_t bytes) {
    char line[96];
    std::snprintf(line, sizeof(line), "  %-12s %12s\n", name, gib(bytes).c_str());
    out << line;
  };
  row("weights", mem.weights);
  row("gradients", mem.gradients);
  row("optimizer", mem.optimizer);
  row("activations", mem.activations);
  row("workspace", mem.workspace);
  char line[128];
  std::snprintf(line, sizeof(line), "  %-12s %12s", "total", gib(mem.total).c_str());
  out << line;
  if (p.executor.device_memory_gib > 0) out << " of " << fmt("%.2f GiB", p.executor.device_memory_gib) << " device";
  out << "\n";
}

}  // namespace recipe::cli
