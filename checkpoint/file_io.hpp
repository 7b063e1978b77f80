// POSIX file plumbing with every result checked: a failure throws CheckpointError naming the path
// and strerror (private to checkpoint/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace recipe::ckpt::io {

// Throws CheckpointError "<path>: <action> failed: <strerror(errno)>".
[[noreturn]] void throw_errno(const std::string& path, const std::string& action);

// Writes `<path>.tmp`; commit() fsyncs, closes and renames it to `path`. Destroyed without
// commit() (an exception on the way), it removes the temporary file so a full disk is not left
// fuller. The caller fsyncs the directory when the rename must be durable.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  uint64_t bytes_written() const { return written_; }
  void commit();

 private:
  std::string path_, tmp_path_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

void write_file_atomic(const std::string& path, std::string_view content);
void fsync_dir(const std::string& dir);

// Whole file as bytes; throws CheckpointError naming the path when it cannot be read.
std::string read_file(const std::string& path);

// Reads exactly `bytes` at `offset`; a short read is reported as a truncated file.
void read_exact(int fd, const std::string& path, uint64_t offset, void* dst, size_t bytes);

}  // namespace recipe::ckpt::io
