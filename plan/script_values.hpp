// What may be written into a launch script (launch.sh, the sbatch script) as a name or a value.
// The resolver rejects anything else with key, value and fix (dsl/resolve_names.cpp); the executors
// check again before they write (executors/launch.cpp), so a plan built in code cannot inject a
// shell line either. One definition for both, so the two can never disagree.
#pragma once

#include <string>
#include <string_view>

namespace recipe::plan {

// An environment variable name as a POSIX shell accepts it in `export NAME=...`:
// [A-Za-z_][A-Za-z0-9_]*.
bool is_env_name(std::string_view s);

// A Slurm partition, account or QOS name: [A-Za-z0-9._-]+ (a partition may also be a
// comma-separated list of such names, which sbatch accepts).
bool is_slurm_name(std::string_view s, bool allow_list = false);

// The first control byte of `s` (< 0x20 or 0x7f: newline, carriage return, tab, NUL, escape), or
// npos. A control byte in an #SBATCH line or a shell word could end the line and start a command.
std::size_t find_control_char(std::string_view s);

// "\n" → "\\n", 0x1b → "\\x1b": a value shown in a message without reproducing its control bytes.
std::string printable(std::string_view s);

// A name that is one folder of a path on every file system we meet: 1 to 100 bytes of
// [A-Za-z0-9._-], not "." or "..". experiment.name becomes <experiment.dir>/<name>/.
inline constexpr std::size_t kMaxFolderName = 100;
bool is_folder_name(std::string_view s);

}  // namespace recipe::plan
