// What the verbs that read one checkpoint and run its model (`recipe eval`, `recipe generate`)
// share: the checkpoint a path names, the checkpoint's plan with the verb's overrides, and the
// device. Each verb keeps its own choice of which plan keys must be valid and what it runs.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.hpp"

namespace recipe::cli {

// The checkpoint directory a verb's path names (a step-<N>/, a checkpoints directory or a run
// directory), after checking that every argument after the path is key=value. Empty after printing
// why, with `code` set to the exit code.
std::string checkpoint_for_verb(const std::string& path, const std::vector<std::string>& overrides, std::ostream& err,
                                int& code);

// The checkpoint's plan.toml with `overrides` applied in order, resolved for planning (no cluster
// facts). Violations of keys for which `relevant(key)` holds are printed and give nullopt; the
// others do not matter to the verb (a data path gone since, a batch for another cluster). `needs`
// ends the sentence printed when plan.toml is missing ("...is missing, so <needs>"). An override of
// data.path replaces the stored data.blend (which the run derived from its own data.path), and one
// of data.blend the stored data.path, so naming other data needs one key. evaluation: the plan
// only evaluates (dsl::ExecutorFacts::evaluation).
std::optional<plan::Plan> checkpoint_plan(const std::string& dir, const std::vector<std::string>& overrides,
                                          const std::function<bool(const std::string& key)>& relevant,
                                          std::string_view needs, std::ostream& err, bool evaluation = false);

// Whether a GPU is usable here; with --device cuda and none, prints the fix and gives nullopt.
std::optional<bool> usable_gpu(const std::string& device_flag, std::ostream& err);

}  // namespace recipe::cli
