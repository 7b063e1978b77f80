// LoRA fine-tuning in parallel equals one process: llama_tiny_lora (adapters on q|k|v, o, gate|up,
// down) with adapter dropout 0.1 trained for 12 steps under TP2, PP2, DP2 + ZeRO-1 and TP2×PP2
// (and gpt_tiny_lora, GELU with biases and tied embeddings, under TP2×PP2) gives the
// single-process loss curve and final adapters within the pretraining parity tolerance (1e-5
// relative, fp32 CPU ranks under Open MPI), with every frozen base tensor bit-identical to the
// serial run's. Dropout takes part: its mask is keyed by the sample and the global input feature
// (core/model/linear.hpp), so every layout drops exactly what the serial run drops — and a serial
// run without dropout follows another curve. A checkpoint saved in one layout (adapters by their
// shard specs) resumes in another on the serial curve. The bounds are the larger of 1e-5 and
// kNoiseFactor times the serial run's rounding floor under other BLAS kernels
// (tests/core/parallel/trained_result.hpp): the drift Adam gives rounding depends on the CPU.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/core/parallel/mpi_test_util.hpp"
#include "tests/core/parallel/probe_run.hpp"
#include "tests/core/parallel/trained_result.hpp"

TEST_SUITE_BEGIN("core/parallel");

using recipe::testing::MpiRun;
using recipe::testing::read_result;
using recipe::testing::rel_l2;
using recipe::testing::run_mpi;
using recipe::testing::Layout;
using recipe::testing::TempOut;
using recipe::testing::tool_path;
using recipe::testing::Trained;

namespace {

constexpr int kSteps = 12;

// `probe_args`: --stop-after / --save / --load of the probe (tests/tools/train_probe.cpp); `env`:
// the ranks' extra environment.
Trained train_lora(const std::string& recipe, int world, const std::vector<std::string>& layout, const std::string& tag,
                   const std::string& dropout = "0.1", const std::vector<std::string>& probe_args = {},
                   const std::vector<std::pair<std::string, std::string>>& env = {}) {
  TempOut out("lora-" + tag);
  std::vector<std::string> argv = {tool_path("train_probe"),
                                   recipe,
                                   out.path.string(),
                                   "trainer.max_steps=" + std::to_string(kSteps),
                                   "trainer.micro_batch_size=2",
                                   "trainer.global_batch_size=8",
                                   "optimizer.lr=1e-2",
                                   "optimizer.min_lr=1e-3",
                                   "optimizer.weight_decay=0.1",
                                   "optimizer.clip_grad=1.0",
                                   "schedule.warmup_steps=2",
                                   "peft.dropout=" + dropout,
                                   "executor.cpu_ranks=" + std::to_string(world)};
  argv.insert(argv.end(), layout.begin(), layout.end());
  argv.insert(argv.end(), probe_args.begin(), probe_args.end());
  MpiRun r = run_mpi(world, argv, env, 180);
  INFO("mpirun output:\n" << r.output);
  REQUIRE(r.exit_code == 0);
  return read_result(out.path, world);
}

// One process, with its rounding noise floor (measure_noise): the reference of the cases below.
Trained train_serial(const std::string& recipe, const std::string& tag, const std::vector<std::string>& layout = {},
                     const std::string& dropout = "0.1", const std::vector<std::string>& probe_args = {}) {
  return recipe::testing::measure_noise(
      train_lora(recipe, 1, layout, tag, dropout, probe_args), [&](const std::string& core) {
        return train_lora(recipe, 1, layout, tag + "-" + core, dropout, probe_args, {{"OPENBLAS_CORETYPE", core}});
      });
}

bool is_adapter(const std::string& name) { return name.find(".lora_") != std::string::npos; }

// `from`: the first step par ran (a resumed run holds only the losses from there on).
// loss_tol, adapter_tol: the fixed relative bounds (FP8 layouts round differently where summation
// orders differ before a cast; see the FP8 test below), raised to kNoiseFactor times serial's
// measured floor where that is larger (parity_bound).
void check_lora_equal(const Trained& serial, const Trained& par, const std::string& what, size_t from = 0,
                      double loss_tol = 1e-5, double adapter_tol = 1e-5) {
  INFO(what);
  CHECK(par.problems.empty());  // replicated adapters (A of q|k|v, B of o) agree across TP ranks
  INFO(par.problems);
  REQUIRE(serial.losses.size() == size_t(kSteps));
  REQUIRE(par.losses.size() == serial.losses.size() - from);
  double worst_loss = 0;
  for (size_t i = from; i < serial.losses.size(); ++i)
    worst_loss = std::max(worst_loss, std::abs(par.losses[i - from] - serial.losses[i]) / std::abs(serial.losses[i]));
  INFO("worst relative loss difference " << worst_loss << " (bound "
                                         << recipe::testing::parity_bound(serial, "", loss_tol) << ")");
  CHECK(worst_loss <= recipe::testing::parity_bound(serial, "", loss_tol));
  REQUIRE(par.params.size() == serial.params.size());
  double worst = 0;
  std::string worst_name;
  int adapters = 0;
  for (const auto& entry : serial.params) {
    const std::string& name = entry.first;
    const std::vector<double>& ref = entry.second;
    auto it = par.params.find(name);
    REQUIRE_MESSAGE(it != par.params.end(), name);
    if (!is_adapter(name)) {
      CHECK_MESSAGE(it->second == ref, name << ": the frozen base changed or differs");
      continue;
    }
    ++adapters;
    // Every key of a query's attention shifted by one vector leaves its softmax unchanged, so the
    // gradients of the keys sum to zero over each sequence and B of k has near-null directions
    // (the component of h common to all tokens, large with LayerNorm's bias): there rounding
    // noise of different summation orders, which Adam's normalization scales up, is all it holds
    // (as the key bias in the pretraining parity test). The losses agree to 1e-5 all the same; a looser bound here.
    const double fixed = (name.find("attention.k.lora_b") != std::string::npos ? 10 : 1) * adapter_tol;
    const double e = rel_l2(it->second, ref) / recipe::testing::parity_bound(serial, name, fixed);  // ≤ 1: within
    if (e > worst) worst = e, worst_name = name;
  }
  CHECK(adapters > 0);
  INFO("worst adapter: " << worst_name << " rel L2 " << worst << " of its bound (floor measured under "
                         << serial.noise.cores.size() << " other BLAS kernel sets)");
  CHECK(worst <= 1.0);
}

// The layouts every LoRA parity case runs against one process.
const std::vector<Layout> kLayouts = {
    {"TP2", 2, {"parallelism.tp=2"}},
    {"PP2", 2, {"parallelism.pp=2"}},
    {"DP2+ZeRO-1", 2, {"parallelism.zero1=true"}},
    {"TP2xPP2", 4, {"parallelism.tp=2", "parallelism.pp=2"}},
};

}  // namespace

TEST_CASE("LoRA with adapter dropout: TP, PP, DP and TP×PP train like one process") {
  if (!recipe::testing::mpirun_available()) {
    MESSAGE("skipped: mpirun not found");
    return;
  }
  const Trained serial = train_serial("llama_tiny_lora", "llama-serial");
  // The adapters really trained, and dropout really acted.
  CHECK(serial.losses.back() < serial.losses.front() - 0.05);
  const Trained no_dropout = train_lora("llama_tiny_lora", 1, {}, "llama-serial-p0", "0.0");
  CHECK(no_dropout.losses.back() != serial.losses.back());

  for (const Layout& l : kLayouts)
    check_lora_equal(serial, train_lora("llama_tiny_lora", l.world, l.overrides, "llama-" + l.name),
                     "llama_tiny_lora " + l.name);

  const Trained gpt_serial = train_serial("gpt_tiny_lora", "gpt-serial");
  check_lora_equal(gpt_serial, train_lora("gpt_tiny_lora", 4, {"parallelism.tp=2", "parallelism.pp=2"}, "gpt-TP2xPP2"),
                   "gpt_tiny_lora TP2xPP2");
}

// LoRA in FP8 with the frozen base held only in FP8 (peft.base_fp8_only, the default): every layout
// casts the base to the serial run's bytes exactly (the amax of a TP-sharded weight is max-reduced
// over the group; the params files hold those bytes), and trains like one process within the FP8
// parity tolerance of the pretraining test for losses (1e-3; measured 1.8e-4 under TP2) and 0.1
// relative L2 for the adapters (measured 3e-2: a different summation order before a cast can flip
// an FP8 rounding, which Adam carries on); PP2 alone is exact.
// Qwen2 (llama_tiny_lora read as model.arch=qwen2): its q/k/v biases belong to the frozen base, so
// they stay bitwise what they were on every rank while the adapters train as in one process.
TEST_CASE("LoRA on qwen2 (frozen q/k/v biases): TP2 and TP2xPP2 train like one process") {
  if (!recipe::testing::mpirun_available()) {
    MESSAGE("skipped: mpirun not found");
    return;
  }
  const std::vector<std::string> qwen2 = {"model.arch=qwen2"};
  const Trained serial = train_serial("llama_tiny_lora", "qwen2-serial", qwen2);
  REQUIRE(serial.params.count("layers.0.attention.q.bias"));
  for (const Layout& l : {kLayouts[0], kLayouts[3]}) {
    std::vector<std::string> overrides = l.overrides;
    overrides.insert(overrides.end(), qwen2.begin(), qwen2.end());
    check_lora_equal(serial, train_lora("llama_tiny_lora", l.world, overrides, "qwen2-" + l.name),
                     "llama_tiny_lora as qwen2 " + l.name);
  }
}

TEST_CASE("LoRA in FP8 with the base held only in FP8: TP, PP, DP and TP×PP train like one process") {
  if (!recipe::testing::mpirun_available()) {
    MESSAGE("skipped: mpirun not found");
    return;
  }
  // (An FFN of 192: its shards of 96 are multiples of 16, as FP8 GEMMs need; the preset's 176 is not.)
  const std::vector<std::string> fp8 = {"trainer.precision=fp8", "model.ffn_hidden_size=192"};
  auto with = [&](std::vector<std::string> v) {
    v.insert(v.end(), fp8.begin(), fp8.end());
    return v;
  };
  const Trained serial = train_lora("llama_tiny_lora", 1, with({}), "llama-fp8-serial");
  CHECK(serial.losses.back() < serial.losses.front() - 0.05);
  for (const Layout& l : kLayouts)
    check_lora_equal(serial, train_lora("llama_tiny_lora", l.world, with(l.overrides), "llama-fp8-" + l.name),
                     "llama_tiny_lora fp8 " + l.name, 0, 1e-3, 0.1);
}

TEST_CASE("LoRA with adapter dropout: a checkpoint saved in one layout resumes in another") {
  if (!recipe::testing::mpirun_available()) {
    MESSAGE("skipped: mpirun not found");
    return;
  }
  const Trained serial = train_serial("llama_tiny_lora", "resume-serial");
  TempOut ckpt("lora-resume-ckpt");
  const std::string saved = (ckpt.path / "tp2pp2").string(), saved1 = (ckpt.path / "serial").string();
  // Saved by TP2×PP2 after 6 steps, resumed by one process; saved by one process, resumed by TP2.
  train_lora("llama_tiny_lora", 4, {"parallelism.tp=2", "parallelism.pp=2"}, "resume-first", "0.1",
             {"--stop-after", "6", "--save", saved});
  check_lora_equal(serial, train_lora("llama_tiny_lora", 1, {}, "resume-second", "0.1", {"--load", saved}),
                   "llama_tiny_lora: saved TP2xPP2, resumed serial", 6);
  train_lora("llama_tiny_lora", 1, {}, "resume-first1", "0.1", {"--stop-after", "6", "--save", saved1});
  check_lora_equal(serial,
                   train_lora("llama_tiny_lora", 2, {"parallelism.tp=2"}, "resume-second1", "0.1", {"--load", saved1}),
                   "llama_tiny_lora: saved serial, resumed TP2", 6);
}

TEST_SUITE_END();
