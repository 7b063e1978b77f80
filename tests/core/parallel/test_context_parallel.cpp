// Context parallelism trains like one process: gpt_tiny (learned positions, LayerNorm, tied) and
// llama_tiny (RoPE, GQA) trained 20 steps as CP2, CP2×DP2, CP2×TP2, CP2×PP2, CP2×DP2 + ZeRO-1 and
// CP4 (CPU ranks under Open MPI, recipe_train_probe) give the single-process loss curve and final
// parameters within 1e-5 relative, as test_training_parity.cpp requires of the other layouts, and every CP replica
// of a parameter holds the same values. Each CP rank sees only its two chunks of every sample, so
// equal curves need the chunking, the global positions, ring attention (forward and backward, over
// the ring's sends), the gradient sum over the CP group and the loss over all tokens to be right.
// On GPUs (NCCL, bf16, ring attention's blocks through cuDNN) CP2, CP2×DP2 and CP2×TP2 follow the
// single-GPU run within the bf16 tolerance of test_training_parity.cpp's CUDA case, as many layouts
// as the visible GPUs allow.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/ops.hpp"
#include "tests/core/parallel/mpi_test_util.hpp"
#include "tests/core/parallel/probe_run.hpp"
#include "tests/core/parallel/trained_result.hpp"

TEST_SUITE_BEGIN("core/parallel");

using recipe::testing::rel_l2;
using recipe::testing::TempOut;
using recipe::testing::Trained;

namespace {

Trained train_cp(const std::string& recipe, int world, const std::vector<std::string>& layout, const std::string& tag) {
  TempOut out(tag);
  return recipe::testing::run_train_probe(recipe, world, out.path, layout);
}

void check_same_training(const Trained& serial, const Trained& par, const std::string& what) {
  INFO(what);
  CHECK(par.problems.empty());
  INFO(par.problems);
  REQUIRE(serial.losses.size() == 20);
  REQUIRE(par.losses.size() == serial.losses.size());
  double worst_loss = 0;
  for (size_t i = 0; i < serial.losses.size(); ++i)
    worst_loss = std::max(worst_loss, std::abs(par.losses[i] - serial.losses[i]) / std::abs(serial.losses[i]));
  INFO("worst relative loss difference " << worst_loss);
  CHECK(worst_loss <= 1e-5);
  REQUIRE(par.params.size() == serial.params.size());
  double worst = 0;
  std::string worst_name;
  for (const auto& named : serial.params) {
    const std::string& name = named.first;
    const auto& ref = named.second;
    auto it = par.params.find(name);
    REQUIRE_MESSAGE(it != par.params.end(), name);
    REQUIRE(it->second.size() == ref.size());
    // The key bias's exact gradient is zero: its values are rounding noise (test_training_parity.cpp).
    if (name.find("attention.k.bias") != std::string::npos) continue;
    const double e = rel_l2(it->second, ref);
    if (e > worst) worst = e, worst_name = name;
  }
  INFO("worst parameter: " << worst_name << " rel L2 " << worst);
  CHECK(worst <= 1e-5);
  CHECK(serial.losses.back() < serial.losses.front() - 0.05);  // the curve really moved
}

void cp_parity_for(const std::string& recipe) {
  if (!recipe::testing::mpirun_available()) {
    MESSAGE("skipped: mpirun not found");
    return;
  }
  const Trained serial = train_cp(recipe, 1, {}, recipe + "-cp-serial");
  const struct {
    const char* name;
    int world;
    std::vector<std::string> overrides;
  } layouts[] = {
      {"CP2", 2, {"parallelism.cp=2"}},
      {"CP2xDP2", 4, {"parallelism.cp=2"}},
      {"CP2xTP2", 4, {"parallelism.cp=2", "parallelism.tp=2"}},
      {"CP2xPP2", 4, {"parallelism.cp=2", "parallelism.pp=2"}},
      {"CP2xDP2+ZeRO-1", 4, {"parallelism.cp=2", "parallelism.zero1=true"}},
      {"CP4", 4, {"parallelism.cp=4"}},
  };
  for (const auto& l : layouts) {
    const Trained par = train_cp(recipe, l.world, l.overrides, recipe + "-" + l.name);
    check_same_training(serial, par, recipe + " " + l.name);
  }
}

}  // namespace

TEST_CASE("gpt_tiny: context parallel layouts train like one process") { cp_parity_for("gpt_tiny"); }

TEST_CASE("llama_tiny: context parallel layouts train like one process") { cp_parity_for("llama_tiny"); }

// The same on GPUs: each CP rank's ring runs attention_block_fwd/bwd through cuDNN and sends its
// K/V and dK/dV over NCCL. bf16 compute, so the tolerance is the CUDA parity cases' (1e-2 relative
// on the losses, 3e-2 relative L2 on the parameters); the step is the device step, captured in a
// CUDA graph from step 2 on (ring sends included). Needs 2 GPUs (the 4-rank layouts 4).
TEST_CASE("CUDA: context parallelism trains like one GPU (bf16 tolerance) [gpu]") {
  const int gpus = recipe::testing::parity_gpus();
  if (gpus == 0) return;
  const std::vector<std::string>& cuda = recipe::testing::cuda_bf16();
  auto with_cuda = [&](std::vector<std::string> v) {
    v.insert(v.end(), cuda.begin(), cuda.end());
    return v;
  };
  for (const std::string recipe : {"gpt_tiny", "llama_tiny"}) {
    const Trained serial = train_cp(recipe, 1, cuda, recipe + "-cp-cuda-serial");
    const struct {
      const char* name;
      int world;
      std::vector<std::string> overrides;
    } layouts[] = {
        {"CP2", 2, {"parallelism.cp=2"}},
        {"CP2xDP2", 4, {"parallelism.cp=2"}},
        {"CP2xTP2", 4, {"parallelism.cp=2", "parallelism.tp=2"}},
    };
    for (const auto& l : layouts) {
      if (l.world > gpus) continue;
      const Trained par = train_cp(recipe, l.world, with_cuda(l.overrides), recipe + "-cuda-" + l.name);
      INFO(recipe << " on CUDA " << l.name);
      CHECK(par.problems.empty());
      INFO(par.problems);
      REQUIRE(serial.losses.size() == 20);
      REQUIRE(par.losses.size() == serial.losses.size());
      double worst_loss = 0, worst = 0;
      std::string worst_name;
      for (size_t i = 0; i < serial.losses.size(); ++i)
        worst_loss = std::max(worst_loss, std::abs(par.losses[i] - serial.losses[i]) / std::abs(serial.losses[i]));
      for (const auto& named : serial.params) {
        const std::string& name = named.first;
        if (name.find("attention.k.bias") != std::string::npos) continue;  // rounding noise (see above)
        const double e = rel_l2(par.params.at(name), named.second);
        if (e > worst) worst = e, worst_name = name;
      }
      INFO("worst relative loss difference " << worst_loss << "; worst parameter " << worst_name << " rel L2 "
                                             << worst);
      CHECK(worst_loss <= 1e-2);
      CHECK(worst <= 3e-2);
      CHECK(par.device_step == 1);
      CHECK(par.graph_steps == 19);
    }
    CHECK(serial.losses.back() < serial.losses.front() - 0.05);
  }
}
