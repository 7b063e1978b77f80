// Rules of the batch arithmetic and the LR schedule (part of check_relations).
#include <cstdint>

#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"

namespace recipe::dsl::detail {

void check_batches(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ParallelismConfig& par = p.parallelism;
  const plan::TrainerConfig& t = p.trainer;
  const int pp = par.pp, vpp = par.virtual_pp;
  // Batch arithmetic.
  const int64_t per_step = static_cast<int64_t>(t.micro_batch_size) * par.dp;
  if (t.global_batch_size % per_step != 0) {
    const int64_t lo = t.global_batch_size / per_step * per_step, hi = lo + per_step;
    std::string fix = "try trainer.global_batch_size=" + (lo > 0 ? str(lo) + " or " + str(hi) : str(hi));
    fix += ", or change trainer.micro_batch_size";
    ctx.violation("trainer.global_batch_size",
                  "trainer.global_batch_size=" + str(t.global_batch_size) +
                      " is not divisible by micro_batch_size × dp = " + str(t.micro_batch_size) + " × " + str(par.dp) +
                      " = " + str(per_step),
                  fix);
  }

  // Interleaved 1F1B runs the micro-batches in groups of pp (Megatron's rule).
  const int64_t micro_batches = t.global_batch_size / per_step;
  if (vpp > 1 && pp > 1 && t.global_batch_size % per_step == 0 && micro_batches % pp != 0) {
    const int64_t lo = micro_batches / pp * pp * per_step, hi = (micro_batches / pp + 1) * pp * per_step;
    ctx.violation(
        "parallelism.virtual_pp",
        "parallelism.virtual_pp=" + str(vpp) + " (interleaved 1F1B) needs trainer.num_micro_batches = " +
            "global_batch_size / (micro_batch_size × dp) = " + str(micro_batches) +
            " divisible by parallelism.pp=" + str(pp),
        "try trainer.global_batch_size=" + (lo > 0 ? str(lo) + " or " + str(hi) : str(hi)) + ", or virtual_pp=1",
        "trainer.global_batch_size");
  }
}

void check_schedule(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::TrainerConfig& t = p.trainer;
  // Schedule.
  const plan::ScheduleConfig& s = p.schedule;
  // A short run of a preset with a long warmup (decay_steps derived from max_steps) is fine, as in
  // Megatron: the run simply ends inside warmup. Only an explicit decay_steps shorter than warmup is
  // a contradiction.
  if (s.decay_style != plan::DecayStyle::constant && s.decay_steps < s.warmup_steps &&
      ctx.was_set("schedule.decay_steps"))
    ctx.violation(
        "schedule.warmup_steps",
        "schedule.warmup_steps=" + str(s.warmup_steps) + " exceeds schedule.decay_steps=" + str(s.decay_steps),
        "lower warmup_steps or raise schedule.decay_steps / trainer.max_steps");
  else if (s.warmup_steps > t.max_steps)
    ctx.warn("schedule.warmup_steps=" + str(s.warmup_steps) + " > trainer.max_steps=" + str(t.max_steps) +
             ": the run ends before warmup does");
}

}  // namespace recipe::dsl::detail
