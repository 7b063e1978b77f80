// A request to stop training at the next step boundary, saving a checkpoint first (SIGUSR1 before
// a Slurm time limit, SIGTERM from a scheduler). Signal handlers call request_stop (it only stores
// to a lock-free atomic, so it is async-signal-safe); the training loop polls stop_signal() after
// each step and, in a multi-rank world, agrees with the other ranks before stopping.
#pragma once

namespace recipe::core {

void request_stop(int signal) noexcept;  // the first request wins; later ones keep it
int stop_signal() noexcept;              // the signal number of the request, 0 = none
void clear_stop_request() noexcept;

}  // namespace recipe::core
