// Numeric flags say which flag is out of range and what it must be (issue 18 C), instead of
// CLI11's "Value 0 not in range 0.000000 to 1797693...".
#include <doctest/doctest.h>

#include "tests/cli/cli_test_util.hpp"

TEST_SUITE_BEGIN("cli");

using recipe::cli::testing::run;

TEST_CASE("flag bounds: --nodes 0 and friends name the flag and the bound") {
  auto nodes = run({"validate", "gpt_tiny", "--nodes", "0"});
  CHECK(nodes.code == 2);
  CHECK(nodes.err.find("--nodes") != std::string::npos);
  CHECK(nodes.err.find("must be ≥ 1, got 0") != std::string::npos);
  CHECK(nodes.err.find("1797693") == std::string::npos);

  auto gpus = run({"validate", "gpt_tiny", "--gpus-per-node", "-1"});
  CHECK(gpus.code == 2);
  CHECK(gpus.err.find("must be ≥ 0, got -1") != std::string::npos);

  auto words = run({"validate", "gpt_tiny", "--max-steps", "ten"});
  CHECK(words.code == 2);
  CHECK(words.err.find("must be a whole number ≥ 1, got 'ten'") != std::string::npos);

  CHECK(run({"validate", "gpt_tiny", "--nodes", "1", "--max-steps", "3"}).code == 0);
}

TEST_SUITE_END();
