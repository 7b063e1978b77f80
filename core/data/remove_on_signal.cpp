// See remove_on_signal.hpp. The handler uses only async-signal-safe calls (unlink, sigaction,
// raise) on storage fixed before the handlers are installed.
#include "core/data/remove_on_signal.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

namespace recipe::data {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kMaxPaths = 4;
constexpr size_t kPathBytes = 4096;

char g_paths[kMaxPaths][kPathBytes];
volatile sig_atomic_t g_count = 0;
struct sigaction g_old[3];
bool g_active = false;

extern "C" void remove_and_reraise(int sig) {
  for (int i = 0; i < g_count; ++i) ::unlink(g_paths[i]);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

}  // namespace

RemoveOnSignal::RemoveOnSignal(const std::vector<std::string>& paths) {
  if (g_active) throw std::logic_error("RemoveOnSignal: one at a time per process");
  g_count = 0;
  for (const std::string& p : paths) {
    if (g_count >= kMaxPaths || p.size() >= kPathBytes) continue;
    std::memcpy(g_paths[g_count], p.c_str(), p.size() + 1);
    g_count = g_count + 1;
  }
  struct sigaction sa {};
  sa.sa_handler = remove_and_reraise;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &g_old[i]);
  g_active = true;
}

RemoveOnSignal::~RemoveOnSignal() {
  for (size_t i = 0; i < 3; ++i) ::sigaction(kSignals[i], &g_old[i], nullptr);
  g_count = 0;
  g_active = false;
}

}  // namespace recipe::data
