// Rules across keys of the run as a whole: validation batches, device and executor, and advice
// that is not an error (part of check_relations).
#include <algorithm>
#include <cstdint>

#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"

namespace recipe::dsl::detail {

void check_eval_batches(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ParallelismConfig& par = p.parallelism;
  const plan::TrainerConfig& t = p.trainer;
  // Validation reads the first eval_samples sequences, whole micro-batches per DP rank.
  // (micro_batch_size < 1 is check_ranges' violation already; it must not divide here.)
  if (t.eval_interval > 0 && t.eval_samples > 0 && par.dp > 0 && t.micro_batch_size > 0) {
    const int64_t per_step = int64_t(t.micro_batch_size) * par.dp;
    if (t.eval_samples % per_step != 0) {
      const int64_t down = std::max<int64_t>(per_step, t.eval_samples / per_step * per_step);
      ctx.violation("trainer.eval_samples",
                    "trainer.eval_samples=" + str(t.eval_samples) +
                        " is not a multiple of trainer.micro_batch_size × parallelism.dp = " + str(t.micro_batch_size) +
                        " × " + str(par.dp) + " = " + std::to_string(per_step) +
                        " (each DP rank reads whole micro-batches of the validation split)",
                    "set trainer.eval_samples=" + std::to_string(down) + " or " + std::to_string(down + per_step) +
                        " (a multiple of " + std::to_string(per_step) + " at every layout you compare)");
    }
  }
}

void check_device(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::TrainerConfig& t = p.trainer;
  const plan::ExecutorConfig& ex = p.executor;
  const ExecutorFacts& facts = ctx.facts;
  // Device and executor.
  if (t.device == plan::Device::cuda) {
    if (!facts.has_gpu && !facts.planning && ex.kind == plan::ExecutorKind::local && ex.nodes == 1) {
      const std::string why =
          ctx.auto_device ? "trainer.device=auto chose cuda (executor.gpus_per_node=" + str(ex.gpus_per_node) + ")"
                          : "trainer.device=cuda";
      ctx.violation("trainer.device", why + " but no GPU is visible here; use --device cpu",
                    "pass --device cpu (trainer.device=\"cpu\"), or run on a machine with a GPU");
    } else if (facts.has_gpu && ex.kind == plan::ExecutorKind::local && ex.nodes == 1 && facts.visible_gpus > 0 &&
               ex.gpus_per_node > facts.visible_gpus) {
      ctx.violation("executor.gpus_per_node",
                    "executor.gpus_per_node=" + str(ex.gpus_per_node) + " but only " + str(facts.visible_gpus) +
                        " GPU(s) are visible here",
                    "use --gpus-per-node " + str(facts.visible_gpus) + " or fewer");
    }
  } else if (t.precision == plan::Precision::bf16) {
    ctx.warn("trainer.precision=bf16 on CPU: weights are stored in bf16, the CPU kernels compute in fp32");
  }
  // The local executor cannot reach other hosts: running the ranks of N nodes here would not be
  // the plan that validated.
  if (ex.kind == plan::ExecutorKind::local && ex.nodes > 1)
    ctx.violation("executor.nodes",
                  "executor.nodes=" + str(ex.nodes) + " but executor.kind=local starts ranks on this host only",
                  "use --executor mpi (with executor.hostfile) or --executor slurm, or executor.nodes=1");
}

void check_advice(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ParallelismConfig& par = p.parallelism;
  const plan::TrainerConfig& t = p.trainer;
  // Advice that is not an error.
  if (par.zero1 && par.dp == 1) ctx.warn("parallelism.zero1=true has no effect with dp=1");
  if (p.checkpoint.save_interval > t.max_steps)
    ctx.warn("checkpoint.save_interval=" + str(p.checkpoint.save_interval) +
             " > trainer.max_steps=" + str(t.max_steps) + ": only the final checkpoint is written");
}

}  // namespace recipe::dsl::detail
