// Human renderings of a resolved plan: one-line summaries, the derived summary, the rank map and
// the per-rank memory breakdown.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "plan/plan.hpp"

namespace recipe::cli {

std::string human_count(double n);                        // 124.4M, 70.55B, 12.3K
std::string gib(int64_t bytes);                           // "12.34 GiB"
std::string layout(const plan::Plan& plan);               // "tp 8 x cp 1 x dp 1 x pp 4"
std::string model_shape(const plan::Plan& plan);          // "gpt 124.4M params, 12 layers x 768 hidden, seq 1024"
// A LoRA plan's trainable parameters against the whole model: "1.2M of 8.0B params (0.02%)".
std::string trainable_params(const plan::Plan& plan);
std::string default_parallelism(const plan::Plan& plan);  // "tp1 pp1 cp1"

// "world 32 (tp 8 x cp 1 x dp 1 x pp 4) on 4 nodes x 8 GPUs; 70.55B params; memory/rank 41.2 GiB of 80.00 GiB"
std::string validate_summary(const plan::Plan& plan);

void print_plan_summary(std::ostream& out, const plan::Plan& plan);
void print_rank_map(std::ostream& out, const plan::Plan& plan);
void print_memory(std::ostream& out, const plan::Plan& plan);

}  // namespace recipe::cli
