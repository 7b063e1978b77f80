// `recipe sweep`'s grid (dsl/sweep_grid): axes from `key=v1,v2` (lists in brackets), the cartesian
// product in axis order with names that say the point, and every point resolved first: a point the
// memory prediction rejects is "too big" with a short verdict, a mistyped key makes the sweep invalid.
#include "dsl/sweep_grid.hpp"
#include "helpers.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;

TEST_CASE("sweep args: axes, plain overrides, bracketed lists and list-typed keys") {
  const SweepArgs a = parse_sweep_args({"trainer.micro_batch_size=2,4,8", "model.seq_length=1024",
                                        "trainer.max_steps+=1", "executor.mpirun_args=--oversubscribe,--tag-output",
                                        "executor.mpirun_args2=[1,2],[3]", "experiment.name=\"a,b\""});
  REQUIRE(a.axes.size() == 2);
  CHECK(a.axes[0].key == "trainer.micro_batch_size");
  CHECK(a.axes[0].values == std::vector<std::string>{"2", "4", "8"});
  // An unknown key's bracketed values still split at the top level only.
  CHECK(a.axes[1].key == "executor.mpirun_args2");
  CHECK(a.axes[1].values == std::vector<std::string>{"[1,2]", "[3]"});
  // One value, an operator, a list-typed key's plain `a,b`, a quoted comma: ordinary overrides.
  CHECK(a.overrides == std::vector<std::string>{"model.seq_length=1024", "trainer.max_steps+=1",
                                                "executor.mpirun_args=--oversubscribe,--tag-output",
                                                "experiment.name=\"a,b\""});
  // A list-typed key sweeps bracketed lists.
  const SweepArgs lists = parse_sweep_args({"executor.mpirun_args=[--a,--b],[--c]"});
  REQUIRE(lists.axes.size() == 1);
  CHECK(lists.axes[0].values == std::vector<std::string>{"[--a,--b]", "[--c]"});
  CHECK_THROWS_AS(parse_sweep_args({"trainer.micro_batch_size=1,,2"}), RecipeError);
  CHECK_THROWS_AS(parse_sweep_args({"model.seq_length=1,2", "model.seq_length=3,4"}), RecipeError);
}

TEST_CASE("sweep grid: first axis outermost, names that say the point, clashes made unique") {
  const auto points = expand_grid({{"trainer.micro_batch_size", {"2", "4"}},
                                   {"model.seq_length", {"1024", "2048"}},
                                   {"trainer.precision", {"bf16", "fp32"}}});
  REQUIRE(points.size() == 8);
  CHECK(points[0].name == "mb2-seq1024-bf16");
  CHECK(points[1].name == "mb2-seq1024-fp32");
  CHECK(points[2].name == "mb2-seq2048-bf16");
  CHECK(points[7].name == "mb4-seq2048-fp32");
  CHECK(points[5].overrides() ==
        std::vector<std::string>{"trainer.micro_batch_size=4", "model.seq_length=1024", "trainer.precision=fp32"});
  CHECK(point_name_part("model.num_kv_heads", "8") == "num_kv_heads8");
  CHECK(point_name_part("executor.mpirun_args", "[--a,--b]") == "mpirun_args__a___b");
  // "a/b" and "a:b" both shorten to a_b: the names get their index.
  const auto clash = expand_grid({{"experiment.name", {"\"a/b\"", "\"a:b\""}}});
  REQUIRE(clash.size() == 2);
  CHECK(clash[0].name != clash[1].name);
  CHECK(expand_grid({}).empty());
}

TEST_CASE("sweep resolve: a point over the host's memory is too big, the others fit; a mistyped key is invalid") {
  ConfigTree base = tree_of(with(tiny_gpt(), {{"trainer", {{"device", "cpu"}, {"global_batch_size", 0}}}}));
  const auto points = expand_grid({{"trainer.micro_batch_size", {"1", "4096"}}});
  ExecutorFacts facts;
  facts.gpus_per_node = 0;
  // Measure both estimates, then give the host room for the small one only.
  const auto sized = resolve_sweep(base, points, {}, facts);
  REQUIRE(sized.size() == 2);
  REQUIRE_MESSAGE(sized[0].resolved.ok(), report(sized[0].resolved));
  const double small = static_cast<double>(sized[0].resolved.plan.memory.total);
  const double large = static_cast<double>(sized[1].resolved.plan.memory.total);
  REQUIRE(large > 2 * small);
  facts.host_memory_gib = (small + large) / 2 / (1024.0 * 1024 * 1024);
  const auto r = resolve_sweep(base, points, {"trainer.max_steps=3"}, facts);
  CHECK(r[0].verdict == PointVerdict::fits);
  CHECK(r[0].resolved.plan.trainer.max_steps == 3);  // the flags' overrides apply after the point's
  CHECK(r[1].verdict == PointVerdict::too_big);
  CHECK(r[1].reason.find("predicted 1 CPU rank ×") == 0);
  CHECK(r[1].reason.find("available on this host") != std::string::npos);

  // A key that is no recipe key: the resolver's violation, with its suggestion.
  const auto bad = resolve_sweep(base, expand_grid({{"trainer.micro_batch", {"1", "2"}}}), {}, facts);
  CHECK(bad[0].verdict == PointVerdict::invalid);
  const Violation* v = find_violation(bad[0].resolved, "trainer.micro_batch");
  REQUIRE_MESSAGE(v, report(bad[0].resolved));
  CHECK(v->message.find("did you mean trainer.micro_batch_size") != std::string::npos);
}

TEST_CASE("sweep resolve: a GPU point over executor.device_memory is too big, with the sizes in its verdict") {
  ConfigTree base = tree_of(with(gpt3_345m(), {{"trainer", {{"device", "cuda"}, {"global_batch_size", 0}}},
                                               {"executor", {{"gpus_per_node", 1}, {"device_memory", "12GiB"}}}}));
  ExecutorFacts facts = gpu_facts(1, 1);
  facts.planning = true;
  const auto r = resolve_sweep(base, expand_grid({{"trainer.micro_batch_size", {"1", "32"}}}), {}, facts);
  REQUIRE(r.size() == 2);
  CHECK_MESSAGE(r[0].verdict == PointVerdict::fits, report(r[0].resolved));
  REQUIRE(r[1].verdict == PointVerdict::too_big);
  CHECK(r[1].reason.find("per rank > 12.0 GiB on executor.device_memory=\"12GiB\"") != std::string::npos);
}

TEST_SUITE_END();
