#include <iostream>

#include "cli/cli.hpp"

int main(int argc, char** argv) { return recipe::cli::run_cli(argc, argv, std::cout, std::cerr); }
