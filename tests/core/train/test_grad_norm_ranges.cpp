// GradSync::norm_ranges, the ranges of the flat gradient each rank adds to the global norm: over a
// world they count every parameter once. Context parallelism replicates every gradient over its CP
// group (summed there), so CP rank 0 counts it and the other CP ranks nothing. The CUDA device
// step reads these ranges directly (the host step used to skip CP ranks > 0 itself, the device
// step did not: its clip factor saw √cp times the norm).
#include <doctest/doctest.h>

#include <vector>

#include "core/model/model_shape.hpp"
#include "core/model/param_layout.hpp"
#include "core/parallel/comm.hpp"
#include "core/parallel/parallel_state.hpp"
#include "core/train/grad_sync.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/train");

using namespace recipe;
using namespace recipe::core;

namespace {

int64_t counted(const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  int64_t n = 0;
  for (const auto& [a, b] : ranges) n += b - a;
  return n;
}

}  // namespace

TEST_CASE("norm ranges: CP rank 0 counts the whole gradient, the other CP ranks nothing") {
  for (const plan::Plan& p : {test::gpt_tiny_plan(), test::llama_tiny_plan()}) {
    const ParamLayout layout = build_param_layout(model_shape(p), p.optimizer, LayoutOptions{});
    SingleProcessComm dp("dp");
    GradSync sync(layout, dp, /*zero1=*/false, /*target_elems=*/0);
    const bool tied = p.model.tie_embeddings;
    const auto plain = sync.norm_ranges(layout, RankCoords{}, tied);
    int64_t trainable = 0;
    for (const ParamSpec& s : layout.params)
      if (s.trainable) trainable += s.numel;
    CHECK(counted(plain) >= trainable);  // every trainable tensor (ranges may span alignment gaps)
    for (int cp_rank : {0, 1, 3}) {
      CAPTURE(cp_rank);
      const auto r = sync.norm_ranges(layout, RankCoords{.cp = cp_rank}, tied);
      if (cp_rank == 0)
        CHECK(r == plain);
      else
        CHECK(r.empty());
    }
  }
}
