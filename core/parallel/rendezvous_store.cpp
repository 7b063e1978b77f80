#include "core/parallel/rendezvous_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace recipe::core {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string errno_text() { return std::strerror(errno); }

// 128 random bits as 32 hex digits. random_device alone may be deterministic on some platforms, so
// the pid and the clock are mixed in: two processes never agree by accident.
std::string random_hex() {
  std::random_device rd;
  uint64_t a = (uint64_t(rd()) << 32) ^ rd(), b = (uint64_t(rd()) << 32) ^ rd();
  a ^= uint64_t(::getpid()) * 0x9E3779B97F4A7C15ull;
  b ^= uint64_t(Clock::now().time_since_epoch().count()) * 0xBF58476D1CE4E5B9ull;
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
  return buf;
}

// Writes to a temporary name in the same directory, then renames: rename within one filesystem is
// atomic, so readers see either no file or all of it (also on NFS, where rename is one server op).
void write_atomic(const fs::path& path, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  const fs::path tmp = path.parent_path() / (".tmp." + std::to_string(::getpid()) + "." +
                                             std::to_string(counter.fetch_add(1)) + "." + path.filename().string());
  const int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("rendezvous: cannot create " + tmp.string() + ": " + errno_text());
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::runtime_error("rendezvous: cannot write " + tmp.string() + ": " + why);
    }
    done += size_t(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw std::runtime_error("rendezvous: cannot publish " + path.string() + ": " + why);
  }
}

// The file's bytes, or false when it does not exist (yet).
bool read_if_present(const fs::path& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    throw std::runtime_error("rendezvous: cannot open " + path.string() + ": " + errno_text());
  }
  out.clear();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = errno_text();
      ::close(fd);
      throw std::runtime_error("rendezvous: cannot read " + path.string() + ": " + why);
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  ::close(fd);
  return true;
}

// Polling with a growing pause: fast when peers are close behind, cheap for a shared filesystem
// when one rank waits minutes for a slow start.
class Poll {
 public:
  explicit Poll(std::chrono::milliseconds timeout) : deadline_(Clock::now() + timeout) {}
  // Sleeps and returns true, or returns false once the deadline has passed.
  bool again() {
    if (Clock::now() >= deadline_) return false;
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, std::chrono::microseconds(50'000));
    return true;
  }

 private:
  Clock::time_point deadline_;
  std::chrono::microseconds pause_{500};
};

std::string seconds_str(std::chrono::milliseconds t) {
  std::ostringstream s;
  s << double(t.count()) / 1000.0 << " s";
  return s.str();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// Internal files (epoch, join.<r>, joined) never collide with keys: keys get a "k." prefix.
std::string escape_key(const std::string& key) {
  std::string out = "k.";
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
      out += char(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

std::chrono::milliseconds RendezvousStore::default_timeout() {
  const char* v = std::getenv("RECIPE_RENDEZVOUS_TIMEOUT_S");
  if (!v || !*v) return std::chrono::seconds(300);
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(v, &end);
  if (errno || *end || !(s > 0) || s > 1e7)
    throw std::runtime_error(std::string("RECIPE_RENDEZVOUS_TIMEOUT_S='") + v +
                             "' is not a positive number of seconds. Fix: e.g. RECIPE_RENDEZVOUS_TIMEOUT_S=600, "
                             "or unset it for the default of 300");
  return std::chrono::milliseconds(int64_t(s * 1000.0 + 0.5));
}

RendezvousStore RendezvousStore::from_env(int rank, int world) {
  const char* dir = std::getenv("RECIPE_RENDEZVOUS_DIR");
  if (!dir || !*dir)
    throw std::runtime_error(
        "rank " + std::to_string(rank) + " of " + std::to_string(world) +
        " was started with RANK/WORLD_SIZE but without RECIPE_RENDEZVOUS_DIR: ranks started without MPI "
        "exchange their NCCL ids through a directory. Fix: export RECIPE_RENDEZVOUS_DIR=<a directory on a "
        "filesystem every rank sees> for all ranks, or start the ranks with mpirun/srun");
  return RendezvousStore(dir, rank, world, default_timeout());
}

RendezvousStore::RendezvousStore(std::string dir, int rank, int world, std::chrono::milliseconds timeout)
    : dir_(std::move(dir)), rank_(rank), world_(world), timeout_(timeout) {
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("RendezvousStore: rank " + std::to_string(rank) + " is outside a world of " +
                                std::to_string(world));
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    throw std::runtime_error("rendezvous directory " + dir_ +
                             " cannot be created: " + (ec ? ec.message() : std::string("not a directory")) +
                             ". Fix: point RECIPE_RENDEZVOUS_DIR at a writable directory every rank sees");
  join();
}

void RendezvousStore::join() {
  const fs::path root(dir_);
  if (rank_ == 0) {
    epoch_ = random_hex();
    std::error_code ec;
    fs::create_directory(root / epoch_, ec);
    if (ec) throw std::runtime_error("rendezvous: cannot create " + (root / epoch_).string() + ": " + ec.message());
    write_atomic(root / "epoch", epoch_);  // from here on, ranks reading the epoch find this run's
    std::vector<std::string> nonces(static_cast<size_t>(world_));
    nonces[0] = "rank0";
    std::vector<int> missing;
    Poll poll(timeout_);
    do {
      missing.clear();
      for (int r = 1; r < world_; ++r)
        if (nonces[size_t(r)].empty() &&
            !read_if_present(root / epoch_ / ("join." + std::to_string(r)), nonces[size_t(r)]))
          missing.push_back(r);
    } while (!missing.empty() && poll.again());
    if (!missing.empty())
      throw std::runtime_error("rendezvous in " + dir_ + " (epoch " + epoch_ + "): rank(s) " + rank_list(missing) +
                               " of " + std::to_string(world_) + " never arrived within " + seconds_str(timeout_) +
                               ". Fix: start every rank with the same RECIPE_RENDEZVOUS_DIR on a filesystem all "
                               "ranks see and WORLD_SIZE=" +
                               std::to_string(world_) + " (RECIPE_RENDEZVOUS_TIMEOUT_S waits longer)");
    std::string joined;
    for (const auto& n : nonces) joined += n + "\n";
    write_atomic(root / epoch_ / "joined", joined);
    return;
  }

  const std::string nonce = random_hex();
  std::string seen, last_joined_in, text;
  Poll poll(timeout_);
  do {
    if (!read_if_present(root / "epoch", seen) || seen.empty()) continue;
    if (seen != last_joined_in) {
      // An old epoch's directory may have been removed since; then wait for the next epoch file.
      if (!fs::is_directory(root / seen)) continue;
      write_atomic(root / seen / ("join." + std::to_string(rank_)), nonce);
      last_joined_in = seen;
    }
    if (read_if_present(root / seen / "joined", text)) {
      const auto lines = split_lines(text);
      if (lines.size() == size_t(world_) && lines[size_t(rank_)] == nonce) {
        epoch_ = seen;
        return;
      }
      if (lines.size() != size_t(world_) && lines.size() > size_t(rank_) && lines[size_t(rank_)] == nonce)
        throw std::runtime_error("rendezvous in " + dir_ + ": rank 0 confirmed a world of " +
                                 std::to_string(lines.size()) + " ranks, but this rank has WORLD_SIZE=" +
                                 std::to_string(world_) + ". Fix: start every rank with the same WORLD_SIZE");
    }
  } while (poll.again());
  throw std::runtime_error(
      "rendezvous in " + dir_ + ": rank " + std::to_string(rank_) + " of " + std::to_string(world_) + " waited " +
      seconds_str(timeout_) + " but rank 0 of this run never arrived (" +
      (seen.empty() ? std::string("no epoch file") : "only the epoch " + seen + ", which never confirmed this rank") +
      "). Fix: start rank 0 with the same RECIPE_RENDEZVOUS_DIR on a filesystem all ranks see "
      "(RECIPE_RENDEZVOUS_TIMEOUT_S waits longer)");
}

std::string RendezvousStore::key_path(const std::string& key) const {
  if (key.empty()) throw std::invalid_argument("RendezvousStore: empty key");
  return (fs::path(dir_) / epoch_ / escape_key(key)).string();
}

void RendezvousStore::set(const std::string& key, const std::string& bytes) { write_atomic(key_path(key), bytes); }

std::string RendezvousStore::get(const std::string& key, std::chrono::milliseconds timeout, int writer) const {
  const std::string path = key_path(key);
  std::string out;
  Poll poll(timeout);
  do {
    if (read_if_present(path, out)) return out;
  } while (poll.again());
  throw std::runtime_error("rendezvous in " + dir_ + " (epoch " + epoch_ + "): rank " + std::to_string(rank_) +
                           " waited " + seconds_str(timeout) + " for key '" + key + "', but " +
                           (writer >= 0 ? "rank " + std::to_string(writer) : std::string("the rank that sets it")) +
                           " never arrived there (" + path + " is missing)");
}

void RendezvousStore::barrier(const std::string& name) {
  const int round = barrier_rounds_[name]++;
  const std::string prefix = "barrier/" + name + "/" + std::to_string(round) + "/";
  set(prefix + std::to_string(rank_), "1");
  std::vector<bool> arrived(static_cast<size_t>(world_), false);
  std::vector<int> missing;
  std::string ignored;
  Poll poll(timeout_);
  do {
    missing.clear();
    for (int r = 0; r < world_; ++r) {
      if (!arrived[size_t(r)]) arrived[size_t(r)] = read_if_present(key_path(prefix + std::to_string(r)), ignored);
      if (!arrived[size_t(r)]) missing.push_back(r);
    }
  } while (!missing.empty() && poll.again());
  if (!missing.empty())
    throw std::runtime_error("rendezvous in " + dir_ + " (epoch " + epoch_ + "): barrier '" + name + "' round " +
                             std::to_string(round) + ": rank(s) " + rank_list(missing) + " of " +
                             std::to_string(world_) + " never arrived within " + seconds_str(timeout_));
}

}  // namespace recipe::core
