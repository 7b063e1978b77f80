// The resolver refuses GPUs below compute capability 8.0 (no bf16 tensor cores) before launch: the
// GPU named by executor.gpu_model (catalog) or the one detected here (executor facts).
#include "plan/gpu_catalog.hpp"
#include "helpers.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;
using recipe::plan::find_gpu;
using recipe::plan::gpu_catalog;

namespace {

ExecutorFacts detected(const std::string& name, int cc) {
  ExecutorFacts f = gpu_facts(1, 1, true, 31.7, name);
  f.gpu_compute_capability = cc;
  return f;
}

}  // namespace

TEST_CASE("dsl_resolve: a detected GPU below compute capability 8.0 is refused with its name and the fix") {
  const auto r = resolve_json(tiny_gpt(), detected("Tesla V100-SXM2-32GB", 70));
  const Violation* v = find_violation(r, "trainer.device");
  REQUIRE_MESSAGE(v, report(r));
  CHECK(v->message.find("Tesla V100-SXM2-32GB") != std::string::npos);
  CHECK(v->message.find("compute capability 7.0") != std::string::npos);
  CHECK(v->message.find("8.0 or newer") != std::string::npos);
  CHECK(v->fix.find("trainer.device=\"cpu\"") != std::string::npos);
  CHECK(v->fix.find("executor.gpu_model") != std::string::npos);
}

TEST_CASE("dsl_resolve: GPUs of compute capability 8.0 and newer pass; an unknown one is not checked") {
  struct Gpu {
    std::string name;
    int cc;
  };
  for (const Gpu& gpu : std::vector<Gpu>{{"NVIDIA A100-SXM4-40GB", 80},
                                         {"NVIDIA GeForce RTX 3080 Laptop GPU", 86},
                                         {"NVIDIA H100 80GB HBM3", 90},
                                         {"NVIDIA GB10", 121},
                                         {"a GPU the driver did not describe", 0}}) {
    CAPTURE(gpu.name);
    const auto r = resolve_json(tiny_gpt(), detected(gpu.name, gpu.cc));
    CHECK_MESSAGE(r.ok(), report(r));
    CHECK(r.plan.trainer.device == recipe::plan::Device::cuda);
  }
}

TEST_CASE("dsl_resolve: executor.gpu_model below compute capability 8.0 is refused, also with no GPU here") {
  ExecutorFacts planning;  // recipe validate on a machine without a GPU
  planning.planning = true;
  const auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"device": "cuda"},
                                                              "executor": {"gpu_model": "V100-16GB"}})")),
                              planning);
  const Violation* v = find_violation(r, "executor.gpu_model");
  REQUIRE_MESSAGE(v, report(r));
  CHECK(v->message.find("V100-16GB") != std::string::npos);
  CHECK(v->message.find("compute capability 7.0") != std::string::npos);
  // The model named beats the GPU detected: an A100 target resolves from a host with a V100.
  const auto a100 = resolve_json(with(tiny_gpt(), json::parse(R"({"executor": {"gpu_model": "A100-40GB"}})")),
                                 detected("Tesla V100-SXM2-32GB", 70));
  CHECK_MESSAGE(a100.ok(), report(a100));
}

TEST_CASE("dsl_resolve: CPU runs are not checked against the visible GPU") {
  const auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"device": "cpu"}})")),
                              detected("Tesla V100-SXM2-32GB", 70));
  CHECK_MESSAGE(r.ok(), report(r));
}

TEST_CASE("dsl_resolve: every GPU catalog entry knows its compute capability") {
  for (const auto& g : gpu_catalog()) {
    CAPTURE(g.name);
    CHECK(g.compute_capability >= 70);
  }
  CHECK(find_gpu("V100-32GB")->compute_capability == 70);
  CHECK(find_gpu("H100-80GB")->compute_capability == 90);
}

TEST_SUITE_END();
