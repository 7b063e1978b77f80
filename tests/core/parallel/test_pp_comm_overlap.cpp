// The pipeline's overlapped exchanges (parallelism.pp_comm_overlap; plan/
// pipeline_overlap.hpp): each send/receive of stage tensors starts as soon as the compute that
// produced or last used its activation slot was issued, and a forward/backward waits only for
// the exchanges of its own slot. Proven on CPU ranks under Open MPI (MPI_Isend/MPI_Irecv, MPI_Wait
// where a compute needs the slot, an earlier exchange of the same slot completed before a later one
// starts) against the blocking exchanges, bit for bit (the same compute in the same order on the
// same data: only when the bytes move changes), and against one process, for 1F1B and interleaved
// 1F1B. The CUDA case runs the same on GPUs (NCCL on the comm stream, the compute stream waiting
// on each exchange's event, the step captured in a CUDA graph); it is skipped without 2 GPUs.
#include <doctest/doctest.h>

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

const std::vector<Layout>& pipeline_layouts() {
  static const std::vector<Layout> l = {
      {"PP2 (1F1B)", 2, {"model.num_layers=4", "parallelism.pp=2"}},
      {"PP2 x virtual_pp 2", 2, {"model.num_layers=4", "parallelism.pp=2", "parallelism.virtual_pp=2"}},
      {"PP4 x virtual_pp 2", 4, {"model.num_layers=8", "parallelism.pp=4", "parallelism.virtual_pp=2"}},
  };
  return l;
}

// Worst relative difference of the losses and worst relative L2 of the parameters.
std::pair<double, double> difference(const Trained& a, const Trained& b) {
  REQUIRE(a.losses.size() == b.losses.size());
  double loss = 0, param = 0;
  for (size_t i = 0; i < a.losses.size(); ++i)
    loss = std::max(loss, std::abs(a.losses[i] - b.losses[i]) / std::abs(a.losses[i]));
  REQUIRE(a.params.size() == b.params.size());
  for (const auto& named : a.params) {
    if (named.first.find("attention.k.bias") != std::string::npos) continue;  // see test_training_parity.cpp
    param = std::max(param, rel_l2(b.params.at(named.first), named.second));
  }
  return {loss, param};
}

}  // namespace

TEST_CASE("PP with the overlapped exchanges gives the blocking exchanges' run bit for bit, and trains like one process") {
  if (!recipe::testing::mpirun_available()) {
    MESSAGE("skipped: mpirun not found");
    return;
  }
  TempOut tmp("ppov");
  int n = 0;
  for (const Layout& l : pipeline_layouts()) {
    INFO(l.name);
    const fs::path dir = tmp.path / ("case-" + std::to_string(n++));
    const Trained overlapped = run_layout_probe("gpt_tiny", l, dir / "on", {"parallelism.pp_comm_overlap=true"});
    const Trained blocking = run_layout_probe("gpt_tiny", l, dir / "off", {});
    REQUIRE(overlapped.losses.size() == 20);
    CHECK(overlapped.problems.empty());
    for (size_t i = 0; i < blocking.losses.size(); ++i) CHECK(overlapped.losses[i] == blocking.losses[i]);
    REQUIRE(overlapped.params.size() == blocking.params.size());
    for (const auto& named : blocking.params)
      CHECK_MESSAGE(overlapped.params.at(named.first) == named.second, named.first);
    // One process of the same model (the blocking exchanges' own parity is test_training_parity's).
    const Trained serial = run_layout_probe("gpt_tiny", {"serial", 1, {l.overrides.front()}}, dir / "serial", {});
    const auto [loss, param] = difference(serial, overlapped);
    CHECK(loss <= 1e-5);
    CHECK(param <= 1e-5);
  }
}

// On GPUs: bf16 tolerance against one GPU, and the blocking exchanges' run within 1e-6 (the same
// kernels on the same data). Needs ≥ 2 GPUs (the PP4 layout 4).
TEST_CASE("CUDA: PP with the overlapped exchanges trains like one GPU and like the blocking exchanges [gpu]") {
  const int gpus = recipe::testing::parity_gpus();
  if (gpus == 0) return;
  const std::vector<std::string>& cuda = recipe::testing::cuda_bf16();
  for (const std::string recipe : {"gpt_tiny", "llama_tiny"}) {
    TempOut tmp("ppov-cuda-" + recipe);
    int n = 0;
    for (const Layout& l : pipeline_layouts()) {
      if (l.world > gpus) continue;
      INFO(recipe << " " << l.name);
      const fs::path dir = tmp.path / ("case-" + std::to_string(n++));
      std::vector<std::string> on = cuda;
      on.push_back("parallelism.pp_comm_overlap=true");
      const Trained overlapped = run_layout_probe(recipe, l, dir / "on", on);
      const Trained blocking = run_layout_probe(recipe, l, dir / "off", cuda);
      const Trained serial = run_layout_probe(recipe, {"serial", 1, {l.overrides.front()}}, dir / "serial", cuda);
      CHECK(overlapped.problems.empty());
      const auto [loss_b, param_b] = difference(blocking, overlapped);
      CHECK(loss_b <= 1e-6);
      CHECK(param_b <= 1e-6);
      const auto [loss_s, param_s] = difference(serial, overlapped);
      CHECK(loss_s <= 1e-2);
      CHECK(param_s <= 3e-2);
    }
  }
}

TEST_SUITE_END();
