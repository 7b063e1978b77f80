// A key/value store in a directory that every rank of a world sees (a shared filesystem for a
// multi-node world; any local directory for one host). Worlds started without MPI (plain RANK /
// WORLD_SIZE / LOCAL_RANK) exchange their NCCL unique ids through it.
//
// Layout of the directory:
//   <dir>/epoch                 the current run's epoch id (32 hex digits), written by rank 0
//   <dir>/<epoch>/<key>         one file per key; '/' and other unsafe characters of a key are
//                               %-escaped, so "nccl-id/tp/0" is the file "nccl-id%2Ftp%2F0"
//   <dir>/<epoch>/join.<r>      rank r's nonce: "I read this epoch"
//   <dir>/<epoch>/joined        rank 0's confirmation: every rank's nonce, in rank order
// Every file is written to a temporary name and renamed, so a reader sees all of it or none.
//
// Stale directories: a directory reused from an earlier run still holds that run's epoch, keys and
// confirmation. The constructor runs a handshake that cannot be fooled by them:
//   rank 0  makes a fresh random epoch E, publishes it in <dir>/epoch, waits for join.<r> of every
//           rank inside E (nothing old can be there: E is new), then writes E/joined with their
//           nonces.
//   rank r  generates a random nonce, reads <dir>/epoch (possibly an old run's), writes its
//           join.<r> there, and accepts the epoch only once its joined file lists this nonce at r.
//           An old epoch's joined file lists old nonces, so a rank that read a stale epoch keeps
//           re-reading <dir>/epoch until rank 0 of this run has replaced it.
// After the handshake all keys live under this run's epoch. Two worlds must not share one
// directory at the same time.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace recipe::core {

class RendezvousStore {
 public:
  // Joins the world's rendezvous in `dir` (created if missing) as `rank` of `world` ranks; returns
  // once every rank has joined the same fresh epoch. Throws std::runtime_error naming the
  // directory and the ranks that never arrived when that takes longer than `timeout`.
  RendezvousStore(std::string dir, int rank, int world, std::chrono::milliseconds timeout = default_timeout());

  // The store of RECIPE_RENDEZVOUS_DIR (which must be set: the error says how) with the timeout of
  // RECIPE_RENDEZVOUS_TIMEOUT_S (seconds, default 300).
  static RendezvousStore from_env(int rank, int world);
  static std::chrono::milliseconds default_timeout();

  // Publishes `bytes` under `key` (atomically; replaces an earlier value of this run).
  void set(const std::string& key, const std::string& bytes);
  // Waits until `key` exists, then returns its bytes. `writer` (when >= 0) is the rank expected
  // to set it, named in the timeout error.
  std::string get(const std::string& key, int writer = -1) const { return get(key, timeout_, writer); }
  std::string get(const std::string& key, std::chrono::milliseconds timeout, int writer = -1) const;
  // Returns once every rank of the world has called barrier(name) the same number of times.
  void barrier(const std::string& name);

  const std::string& dir() const { return dir_; }
  const std::string& epoch() const { return epoch_; }
  int rank() const { return rank_; }
  int world() const { return world_; }

 private:
  std::string key_path(const std::string& key) const;
  void join();

  std::string dir_, epoch_;
  int rank_ = 0, world_ = 1;
  std::chrono::milliseconds timeout_;
  std::map<std::string, int> barrier_rounds_;
};

}  // namespace recipe::core
