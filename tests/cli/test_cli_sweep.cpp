// `recipe sweep` end to end with the built binary on gpt_tiny (CPU): a 2×2 grid gives four run dirs
// named for their points and the envelope report; a re-run skips the finished points and runs
// only an unfinished one; a point predicted too big is reported and never launched; a mistyped key
// refuses the sweep before anything exists; `runs envelope -o` draws the chart.
#include <doctest/doctest.h>

#include <filesystem>

#include "runs/run_dir.hpp"
#include "runs/sweep_record.hpp"
#include "tests/cli/cli_test_util.hpp"

TEST_SUITE_BEGIN("cli");

namespace fs = std::filesystem;
using namespace recipe::cli::testing;

namespace {

std::string sweep_2x2(const fs::path& exp, int steps = 4) {
  return "sweep gpt_tiny trainer.micro_batch_size=1,2 model.seq_length=32,64 trainer.global_batch_size=2 "
         "--device cpu --max-steps " +
         std::to_string(steps) + " --warmup 1 --experiments-dir " + exp.string();
}

}  // namespace

TEST_CASE("sweep: a 2x2 grid gives four run dirs and the envelope; a re-run resumes only the unfinished point") {
  TempDir tmp;
  const fs::path exp = tmp.path() / "exp";
  const auto first = run_binary(sweep_2x2(exp));
  REQUIRE_MESSAGE(first.code == 0, first.out);
  const fs::path root = exp / "gpt_tiny";
  for (const char* point : {"mb1-seq32", "mb1-seq64", "mb2-seq32", "mb2-seq64"}) {
    CAPTURE(point);
    CHECK(recipe::exec::read_status((root / point).string()).state == "completed");
    CHECK(read_text(root / point / "resolved.toml").find("micro_batch_size = ") != std::string::npos);
  }
  CHECK(read_text(root / "mb2-seq64" / "resolved.toml").find("seq_length = 64") != std::string::npos);
  CHECK(read_text(root / "mb2-seq64" / "overrides.txt").find("trainer.micro_batch_size=2") != std::string::npos);
  const auto record = recipe::exec::read_sweep_record(root.string());
  REQUIRE(record);
  CHECK(record->points.size() == 4);
  CHECK(first.out.find("== point 4/4: mb2-seq64") != std::string::npos);
  CHECK(first.out.find("tokens/s\n") != std::string::npos);
  CHECK(first.out.find("peak memory (GiB)") != std::string::npos);
  CHECK(first.out.find("KiB per token per step +") != std::string::npos);

  // The points are ordinary runs.
  const auto list = run_binary("runs list --experiments-dir " + exp.string());
  CHECK(list.out.find("mb1-seq64") != std::string::npos);
  const auto diff = run_binary("runs diff gpt_tiny/mb1-seq32 gpt_tiny/mb2-seq32 --experiments-dir " + exp.string());
  CHECK(diff.out.find("trainer.micro_batch_size: 1 -> 2") != std::string::npos);

  // Interrupted: one point left unfinished. The same command runs that point only.
  const std::string kept = read_text(root / "mb1-seq32" / "timing.jsonl");
  recipe::exec::RunStatus st = recipe::exec::read_status((root / "mb2-seq32").string());
  st.state = "interrupted";
  recipe::exec::write_status((root / "mb2-seq32").string(), st);
  const auto again = run_binary(sweep_2x2(exp));
  REQUIRE_MESSAGE(again.code == 0, again.out);
  CHECK(again.out.find("mb1-seq32: finished, skipped") != std::string::npos);
  CHECK(again.out.find("mb2-seq32: to run again (was interrupted)") != std::string::npos);
  CHECK(again.out.find("== point 1/1: mb2-seq32") != std::string::npos);
  CHECK(again.out.find("== point 2/") == std::string::npos);
  CHECK(recipe::exec::read_status((root / "mb2-seq32").string()).state == "completed");
  CHECK(read_text(root / "mb1-seq32" / "timing.jsonl") == kept);  // finished points untouched

  // Everything finished: nothing runs, the report is printed again.
  const auto done = run_binary(sweep_2x2(exp));
  CHECK(done.code == 0);
  CHECK(done.out.find("nothing to run") != std::string::npos);
  CHECK(done.out.find("tokens/s\n") != std::string::npos);

  // A changed plan in the same folders is another sweep: refused before anything runs.
  const auto changed = run_binary(sweep_2x2(exp, 5));
  CHECK(changed.code == 2);
  CHECK(changed.out.find("holds a run of another plan (trainer.max_steps: 4 there, 5 now)") != std::string::npos);

  // The envelope at any time, with the chart.
  const fs::path svg = tmp.path() / "envelope.svg";
  const auto env =
      run_binary("runs envelope gpt_tiny --warmup 1 -o " + svg.string() + " --experiments-dir " + exp.string());
  REQUIRE_MESSAGE(env.code == 0, env.out);
  CHECK(env.out.find("mb2") != std::string::npos);
  CHECK(read_text(svg).find("peak memory (GiB)") != std::string::npos);
}

TEST_CASE("sweep: a point predicted too big is reported and not launched; a mistyped key refuses the sweep") {
  TempDir tmp;
  const fs::path exp = tmp.path() / "exp";
  // hidden 131072 (the largest the resolver takes) puts ~4e11 parameters on one CPU rank: TBs, more than any host has.
  const auto r = run_binary(
      "sweep gpt_tiny model.hidden_size=64,131072 --device cpu --max-steps 2 --warmup 0 --name "
      "big --experiments-dir " +
      exp.string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("hidden131072: not launched, predicted 1 CPU rank ×") != std::string::npos);
  CHECK(r.out.find("available on this host") != std::string::npos);
  CHECK_FALSE(fs::exists(exp / "big" / "hidden131072"));
  CHECK(recipe::exec::read_status((exp / "big" / "hidden64").string()).state == "completed");
  CHECK(r.out.find("too big") != std::string::npos);

  const auto bad = run_binary("sweep gpt_tiny trainer.micro_batch=1,2 --device cpu --max-steps 2 --experiments-dir " +
                              (tmp.path() / "exp2").string());
  CHECK(bad.code == 1);
  CHECK(bad.out.find("did you mean trainer.micro_batch_size") != std::string::npos);
  CHECK(bad.out.find("nothing was run") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp.path() / "exp2"));

  const auto no_axis = run_binary("sweep gpt_tiny trainer.micro_batch_size=2 --device cpu");
  CHECK(no_axis.code == 2);
  CHECK(no_axis.out.find("at least one key with two or more values") != std::string::npos);

  const auto help = run_binary("--help");
  CHECK(help.out.find("sweep") != std::string::npos);
}

TEST_SUITE_END();
