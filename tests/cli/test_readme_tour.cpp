// README.md's tour runs as written: every command of its ```sh block, from a scratch directory outside
// the repository, after the one setup step the README names (the built binary on PATH and
// RECIPE_HOME naming the checkout), exits 0. The commands are read from README.md itself, so the
// README cannot drift from what works.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/cli/cli_test_util.hpp"

TEST_SUITE_BEGIN("cli");

using namespace recipe::cli::testing;

namespace {

// The shell commands of the first ```sh block after "## A short tour": continuation lines joined,
// blank and comment-only lines dropped.
std::vector<std::string> tour_commands() {
  const std::string readme = read_text(RECIPE_SOURCE_DIR "/README.md");
  const size_t tour = readme.find("## A short tour");
  REQUIRE(tour != std::string::npos);
  const size_t open = readme.find("```sh\n", tour);
  REQUIRE(open != std::string::npos);
  const size_t close = readme.find("```", open + 6);
  REQUIRE(close != std::string::npos);
  std::istringstream block(readme.substr(open + 6, close - open - 6));
  std::vector<std::string> commands;
  std::string line, pending;
  while (std::getline(block, line)) {
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1);
      continue;
    }
    pending += line;
    if (pending.find_first_not_of(' ') != std::string::npos && pending[pending.find_first_not_of(' ')] != '#')
      commands.push_back(pending);
    pending.clear();
  }
  return commands;
}

}  // namespace

TEST_CASE("README tour: every command runs as written from a scratch directory") {
  const std::vector<std::string> commands = tour_commands();
  REQUIRE(commands.size() >= 10);
  TempDir scratch;
  // The setup step: `export PATH="$PWD/build/bin:$PATH" RECIPE_HOME="$PWD"` in the checkout.
  const std::string setup = std::string("export PATH='") + RECIPE_BINARY_DIR "/bin:'\"$PATH\" RECIPE_HOME='" +
                            RECIPE_SOURCE_DIR "'\nunset RECIPE_PATH RECIPE_EXECUTABLE\ncd '" + scratch.str() + "'\n";
  const std::string script = scratch.str() + "/.tour.sh", log = scratch.str() + "/.tour.log";
  for (const std::string& command : commands) {
    CAPTURE(command);
    std::ofstream(script) << setup << command << "\n";
    const int status = std::system(("bash '" + script + "' >'" + log + "' 2>&1").c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    const std::string output = read_text(log);
    CHECK_MESSAGE(code == 0, output.substr(output.size() > 3000 ? output.size() - 3000 : 0));
    if (code != 0) break;  // later commands build on this one
  }
}

TEST_SUITE_END();
