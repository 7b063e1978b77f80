// keep_last: removing old checkpoints after a commit. Internal to checkpoint/.
#pragma once

#include <filesystem>
#include <string>

namespace recipe::ckpt {

// Whether `dir` is a checkpoint this engine committed: a real directory (not a link) holding
// common.json and a metadata.json of this format. Only such directories are ever deleted.
bool is_committed_checkpoint(const std::filesystem::path& dir);

// Keeps the newest `keep_last` committed step-<N> checkpoints of `parent` (by N) and the one just
// written, and removes the older ones. A step-<N> entry that is not a committed checkpoint (a
// user's folder, a link, a partial save) is left alone and named in a warning on stderr.
void prune(const std::filesystem::path& parent, const std::string& just_written, int keep_last);

}  // namespace recipe::ckpt
