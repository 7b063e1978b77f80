// The `recipe` command as a library: main() forwards to run_cli, tests call it in-process.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace recipe::cli {

// Parses argv (argv[0] = program name) and runs the verb. Returns the exit code (exit_codes.hpp).
int run_cli(int argc, char** argv, std::ostream& out, std::ostream& err);
// Same, from arguments without the program name.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace recipe::cli
