// FP8 plan vocabulary: which linears run in FP8, their per-rank shapes, the scratch size (fp8.hpp).
#include "plan/fp8.hpp"

#include <algorithm>

#include "family/arch_shape.hpp"
#include "family/linears.hpp"
#include "plan/lora.hpp"
#include "plan/model_family.hpp"
#include "plan/model_size.hpp"

namespace recipe::plan {

Fp8Linears fp8_linears(const Plan& plan) {
  if (plan.trainer.precision != Precision::fp8) return {};
  const LoraTargets t = lora_targets(model_family(plan.model), plan.fp8.linears);
  return {t.mask, t.problems};
}

std::vector<Fp8LinearShape> block_linear_shapes(const Plan& plan) {
  const core::ArchShape s = model_table_shape(plan.model);
  std::vector<Fp8LinearShape> shapes;
  for (const core::BlockLinear& b : core::block_linears(s)) {
    const core::LinearFeatures f = core::linear_features(s, b.role, plan.parallelism.tp);
    shapes.push_back({lora_target_name(b.bit), b.bit, f.in, f.out});
  }
  return shapes;
}

unsigned fp8_frozen_linears(const Plan& plan) {
  if (plan.peft.kind != PeftKind::lora || !plan.peft.base_fp8_only) return 0;
  return fp8_linears(plan).mask;
}

int64_t fp8_frozen_weight_numel(const Plan& plan) {
  const unsigned frozen = fp8_frozen_linears(plan);
  int64_t n = 0;
  for (const Fp8LinearShape& s : block_linear_shapes(plan))
    if (frozen & s.bit) n += s.in * s.out;
  return n;
}

// Layout (core/model/model.cpp carves it in this order, each part 256-byte aligned), per model chunk:
//   x     [N, max in]  the input in the forward format (forward), its transpose [max in, N] (backward)
//   g     [N, max out] the output gradient in the backward format
//   g_t   [max out, N] its transpose
//   stats f32 [64]     amax and inverse scale of x and g, in 16-byte cells
//   w_t   [max in·out] FP8-only frozen weights: the transpose of one (absent otherwise)
int64_t fp8_scratch_bytes(const Plan& plan) {
  const unsigned mask = fp8_linears(plan).mask, frozen = fp8_frozen_linears(plan);
  if (!mask) return 0;
  const int64_t N = int64_t(plan.trainer.micro_batch_size) * plan.model.seq_length;
  int64_t in = 0, out = 0, weight = 0;
  for (const Fp8LinearShape& s : block_linear_shapes(plan)) {
    if (!(mask & s.bit)) continue;
    in = std::max(in, s.in);
    out = std::max(out, s.out);
    if (frozen & s.bit) weight = std::max(weight, s.in * s.out);
  }
  auto a = [](int64_t b) { return (b + 255) / 256 * 256; };
  return a(N * in) + 2 * a(N * out) + 256 + a(weight);
}

// Per FP8 linear of a layer (core/model/linear.hpp, Fp8WeightCache): the weight cast [out, in] and
// its transpose [in, out], one byte per element, and 256 bytes of amax / scale cells; an FP8-only
// frozen weight has the cells alone (its bytes are the parameter, counted with the weights).
int64_t fp8_weight_cache_bytes(const Plan& plan) {
  const unsigned mask = fp8_linears(plan).mask, frozen = fp8_frozen_linears(plan);
  auto a = [](int64_t b) { return (b + 255) / 256 * 256; };
  int64_t bytes = 0;
  for (const Fp8LinearShape& s : block_linear_shapes(plan))
    if (mask & s.bit) bytes += (frozen & s.bit ? 0 : 2 * a(s.in * s.out)) + 256;
  return bytes;
}

// (core/model/model.cpp rounds each of its three buffers up to 256 bytes per model chunk; the
// estimate counts the x, W, dy tensors of every linear of a layer, as the model does, FP8 or not.)
int64_t fp8_history_bytes(const Plan& plan) {
  if (!fp8_linears(plan).mask || plan.fp8.scaling != Fp8Scaling::delayed) return 0;
  constexpr int64_t kCellBytes = 16;
  const int64_t tensors = int64_t(block_linear_shapes(plan).size()) * core::kFp8TensorsPerLinear;
  return tensors * (int64_t(plan.fp8.amax_history_len) * 4 + 2 * kCellBytes);
}

}  // namespace recipe::plan
