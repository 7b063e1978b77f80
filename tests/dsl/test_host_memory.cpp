// CPU plans on the local executor: ranks × the per-rank estimate must fit the launching host's
// available memory (dsl/resolve_host_memory.cpp), so validate refuses what would die of bad_alloc.
#include "helpers.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;

namespace {

ExecutorFacts host_with(double gib) {
  ExecutorFacts f;
  f.gpus_per_node = 0;
  f.host_memory_gib = gib;
  return f;
}

json cpu(json tree, int ranks) {
  return with(std::move(tree), {{"trainer", {{"device", "cpu"}}}, {"executor", {{"cpu_ranks", ranks}}}});
}

}  // namespace

TEST_CASE("host memory: llama3_8b on 8 CPU ranks does not fit a 24 GiB host; the fix names the ranks that fit") {
  const json plan = cpu(with(llama3_8b(), {{"trainer", {{"global_batch_size", 8}}}}), 8);
  const auto r = resolve_json(plan, host_with(24));
  const Violation* v = find_violation(r, "memory");
  REQUIRE(v != nullptr);
  CHECK(v->message.find("8 CPU ranks ×") != std::string::npos);
  CHECK(v->message.find("available on this host") != std::string::npos);
  CHECK(v->fix.find("lower trainer.micro_batch_size") != std::string::npos);
  // Unknown host memory (a plan for another machine) is not checked.
  CHECK(find_violation(resolve_json(plan, host_with(0)), "memory") == nullptr);
}

TEST_CASE("host memory: absurd CPU plans are refused, small ones pass, GPU plans are not host-checked") {
  const auto huge_batch = resolve_json(
      cpu(with(tiny_gpt(), {{"trainer", {{"micro_batch_size", 2147483647}, {"global_batch_size", 2147483647}}}}), 1),
      host_with(24));
  CHECK(find_violation(huge_batch, "memory") != nullptr);
  const auto small = resolve_json(cpu(tiny_gpt(), 2), host_with(24));
  CHECK_MESSAGE(small.ok(), report(small));
  // 4 ranks of a plan that fits once but not four times: the fix offers the ranks that fit.
  const double per_rank_gib = static_cast<double>(small.plan.memory.total) / (1 << 30);
  const auto four = resolve_json(cpu(tiny_gpt(), 4), host_with(per_rank_gib * 2.5));
  const Violation* v = find_violation(four, "memory");
  REQUIRE(v != nullptr);
  CHECK(v->fix.find("executor.cpu_ranks=2 or fewer") != std::string::npos);
}

TEST_SUITE_END();
