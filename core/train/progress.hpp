// Human progress output: one line per logged step,
//   step 12/200 | loss 3.2145 | lr 1.00e-03 | gnorm 0.812 | 41.2k tok/s | MFU 3.1% | ETA 0:12
// redrawn in place (\r) on an interactive terminal, plain lines otherwise (logs, pipes).
#pragma once

#include <optional>
#include <ostream>
#include <string>

namespace recipe::core {

std::string format_duration(double seconds);  // "0:07", "12:34", "1:02:03"
std::string format_rate(double per_second);   // "812", "41.2k", "1.23M"
std::string format_bytes(double bytes);       // "512 B", "12.3 MiB", "1.50 GiB"

struct ProgressLine {
  int step = 0, max_steps = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_sec = 0;
  std::optional<double> mfu;  // fraction; nullopt prints "MFU n/a"
  std::optional<double> eta_seconds;
  std::optional<double> val_loss;
};
std::string format_progress(const ProgressLine& p);

class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, bool interactive) : out_(out), interactive_(interactive) {}
  // A progress line: replaces the previous one when interactive.
  void update(const std::string& line, bool keep = false);
  // A line that stays (messages, summaries): ends a pending progress line first.
  void message(const std::string& line);
  ~ProgressPrinter() { end_pending(); }

 private:
  void end_pending();
  std::ostream& out_;
  bool interactive_;
  bool pending_ = false;
  size_t last_width_ = 0;
};

}  // namespace recipe::core
