// Backend notices: the one-line reports a backend records instead of writing to stderr (a fast
// path that cannot run and why); the caller takes them in order, and taking clears them.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kernels/ops.hpp"

TEST_SUITE_BEGIN("kernels/cpu");

using namespace recipe::kernels;

TEST_CASE("backend notices are taken in order, once") {
  auto be = make_backend(Device::cpu);
  CHECK(be->take_notices().empty());
  be->notice("recipe: first");
  be->notice("recipe: second");
  CHECK(be->take_notices() == std::vector<std::string>{"recipe: first", "recipe: second"});
  CHECK(be->take_notices().empty());
}

TEST_SUITE_END();
