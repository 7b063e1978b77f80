// Checked POSIX writes, fsyncs and reads.
#include "checkpoint/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "checkpoint/checkpoint.hpp"

namespace recipe::ckpt::io {

void throw_errno(const std::string& path, const std::string& action) {
  int err = errno;
  throw CheckpointError(path + ": " + action + " failed: " + std::strerror(err));
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_errno(tmp_path_, "create");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t bytes) {
  auto p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(tmp_path_, "write");
    }
    if (n == 0) {
      errno = ENOSPC;
      throw_errno(tmp_path_, "write");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) throw_errno(tmp_path_, "fsync");
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp_path_.c_str());
    errno = err;
    throw_errno(tmp_path_, "close");
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_path_.c_str());
    errno = err;
    throw_errno(path_, "rename from " + tmp_path_);
  }
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFile f(path);
  f.write(content.data(), content.size());
  f.commit();
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(dir, "open directory");
  // Some filesystems cannot fsync a directory (EINVAL); their renames are as durable as they get.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    int err = errno;
    ::close(fd);
    errno = err;
    throw_errno(dir, "fsync directory");
  }
  ::close(fd);
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno(path, "open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    throw_errno(path, "stat");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  try {
    read_exact(fd, path, 0, out.data(), out.size());
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return out;
}

void read_exact(int fd, const std::string& path, uint64_t offset, void* dst, size_t bytes) {
  auto p = static_cast<char*>(dst);
  while (bytes > 0) {
    ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(path, "read");
    }
    if (n == 0)
      throw CheckpointError(path + ": truncated: no data at byte " + std::to_string(offset) +
                            " (the file is partial or corrupt)");
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

}  // namespace recipe::ckpt::io
