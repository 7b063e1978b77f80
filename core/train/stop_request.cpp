#include "core/train/stop_request.hpp"

#include <atomic>

namespace recipe::core {

namespace {
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "request_stop must be async-signal-safe");
}  // namespace

void request_stop(int signal) noexcept {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, signal);
}

int stop_signal() noexcept { return g_stop_signal.load(); }

void clear_stop_request() noexcept { g_stop_signal.store(0); }

}  // namespace recipe::core
