// Environment variables a recipe may not set through executor.env: those that make the dynamic
// loader or a shell run code the recipe names (LD_PRELOAD, LD_AUDIT, BASH_ENV, ...). A run dir and
// its recipe are data; with these, running someone's recipe (or `runs resume` of their run dir)
// would run their code in every rank. The resolver refuses them with key and fix
// (dsl/resolve_names.cpp); the executors refuse them again for plans built in code
// (executors/launch.cpp). One list for both.
#pragma once

#include <string_view>

namespace recipe::plan {

// Why `name` may not be set by a recipe, or nullptr where it may. LD_LIBRARY_PATH and PATH are
// refused too: they choose which libraries and programs (mpirun, srun) load. No example, preset or
// doc sets them; the shell or job environment that starts `recipe` can.
const char* refused_env_reason(std::string_view name);

}  // namespace recipe::plan
