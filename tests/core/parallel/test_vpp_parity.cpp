// Interleaved 1F1B (parallelism.virtual_pp) trains like one process: gpt_tiny and llama_tiny with 4
// layers (so that pp = 2 × virtual_pp = 2 gives every model chunk one layer) trained for 20 steps
// as PP2×v2, PP2×v2×TP2 and PP2×v2×DP2 (2 micro-batches per DP rank: the count == pp case, every
// forward first) give the single-process loss curve and final parameters within the 1e-5 of the
// other parity tests (fp32 CPU ranks under Open MPI). Parameter names are global, so a checkpoint
// saved at PP2×v2 resumes at one process and at PP2 without virtual stages and finishes like the
// uninterrupted single process.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/ops.hpp"
#include "tests/core/parallel/mpi_test_util.hpp"
#include "tests/core/parallel/probe_run.hpp"
#include "tests/core/parallel/trained_result.hpp"

TEST_SUITE_BEGIN("core/parallel");

namespace fs = std::filesystem;
using recipe::testing::rel_l2;
using recipe::testing::Layout;
using recipe::testing::run_layout_probe;
using recipe::testing::TempOut;
using recipe::testing::Trained;

namespace {

// Worst relative difference of the losses `got` against `ref` from ref's step `offset` on.
double worst_loss(const Trained& got, const Trained& ref, size_t offset = 0) {
  double worst = 0;
  for (size_t i = 0; i < got.losses.size(); ++i)
    worst = std::max(worst, std::abs(got.losses[i] - ref.losses[offset + i]) / std::abs(ref.losses[offset + i]));
  return worst;
}

void check_params(const Trained& got, const Trained& ref, double tol) {
  REQUIRE(got.params.size() == ref.params.size());
  double worst = 0;
  std::string worst_name;
  for (const auto& named : ref.params) {
    const std::string& name = named.first;
    const auto& values = named.second;
    // The key bias: an exact zero gradient, so rounding noise only (see test_training_parity.cpp).
    if (name.find("attention.k.bias") != std::string::npos) continue;
    auto it = got.params.find(name);
    REQUIRE_MESSAGE(it != got.params.end(), name);
    REQUIRE(it->second.size() == values.size());
    const double e = rel_l2(it->second, values);
    if (e > worst) worst = e, worst_name = name;
  }
  INFO("worst parameter: " << worst_name << " rel L2 " << worst);
  CHECK(worst <= tol);
}

const Layout kSerial{"serial", 1, {}};
const Layout kPp2V2{"PP2xv2", 2, {"parallelism.pp=2", "parallelism.virtual_pp=2"}};

void vpp_parity_for(const std::string& recipe, const std::vector<std::string>& extra = {}, double loss_tol = 1e-5,
                    double param_tol = 1e-5, int max_world = 4) {
  if (!recipe::testing::mpirun_available()) {
    MESSAGE("skipped: mpirun not found");
    return;
  }
  TempOut tmp("vpp-" + recipe);
  const Trained serial = run_layout_probe(recipe, kSerial, tmp.path / "serial", extra);
  REQUIRE(serial.losses.size() == 20);
  CHECK(serial.losses.back() < serial.losses.front() - 0.05);  // the curve really moved
  const std::vector<Layout> layouts = {
      kPp2V2,
      {"PP2xv2xTP2", 4, {"parallelism.pp=2", "parallelism.virtual_pp=2", "parallelism.tp=2"}},
      {"PP2xv2xDP2", 4, {"parallelism.pp=2", "parallelism.virtual_pp=2"}},
  };
  int n = 0;
  for (const Layout& l : layouts) {
    if (l.world > max_world) continue;
    const Trained par = run_layout_probe(recipe, l, tmp.path / ("par-" + std::to_string(n++)), extra);
    INFO(recipe << " " << l.name);
    CHECK(par.problems.empty());
    INFO(par.problems);
    REQUIRE(par.losses.size() == serial.losses.size());
    const double worst = worst_loss(par, serial);
    INFO("worst relative loss difference " << worst);
    CHECK(worst <= loss_tol);
    check_params(par, serial, param_tol);
  }
}

}  // namespace

TEST_CASE("gpt_tiny: interleaved 1F1B (PP2 x virtual_pp 2, with TP2 and DP2) trains like one process") {
  vpp_parity_for("gpt_tiny");
}

TEST_CASE("llama_tiny: interleaved 1F1B (PP2 x virtual_pp 2, with TP2 and DP2) trains like one process") {
  vpp_parity_for("llama_tiny");
}

TEST_CASE("a checkpoint saved at PP2 x virtual_pp 2 resumes at one process and at PP2 without virtual stages") {
  if (!recipe::testing::mpirun_available()) {
    MESSAGE("skipped: mpirun not found");
    return;
  }
  TempOut tmp("vpp-ckpt");
  const Trained serial = run_layout_probe("gpt_tiny", kSerial, tmp.path / "serial");
  REQUIRE(serial.losses.size() == 20);
  const fs::path ckpt = tmp.path / "ckpt";
  const Trained first = run_layout_probe("gpt_tiny", kPp2V2, tmp.path / "first", {}, "", 10, ckpt.string());
  REQUIRE(first.losses.size() == 10);
  REQUIRE(fs::exists(ckpt / "step-10" / "metadata.json"));
  CHECK(worst_loss(first, serial) <= 1e-5);
  for (const Layout& l : {kSerial, Layout{"PP2", 2, {"parallelism.pp=2"}}}) {
    INFO("resumed as " << l.name);
    const Trained resumed = run_layout_probe("gpt_tiny", l, tmp.path / ("resumed-" + l.name), {}, (ckpt / "step-10").string());
    REQUIRE(resumed.losses.size() == 10);
    CHECK(resumed.problems.empty());
    CHECK(worst_loss(resumed, serial, 10) <= 1e-5);
    check_params(resumed, serial, 1e-5);
  }
}

// The same on GPUs (NCCL point-to-point round the ring, bf16): within the bf16 tolerance of the
// other CUDA parity tests. Needs ≥ 2 GPUs (the 4-rank layouts ≥ 4).
TEST_CASE("CUDA: interleaved 1F1B trains like one GPU (bf16 tolerance) [gpu]") {
  const int gpus = recipe::testing::parity_gpus();
  if (gpus == 0) return;
  for (const std::string recipe : {"gpt_tiny", "llama_tiny"})
    vpp_parity_for(recipe, recipe::testing::cuda_bf16(), 1e-2, 3e-2, gpus);
}

TEST_SUITE_END();
