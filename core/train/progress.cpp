#include "core/train/progress.hpp"

#include <cmath>
#include <cstdio>

namespace recipe::core {

namespace {
std::string printf_str(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}
}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = long(std::llround(seconds));
  long h = s / 3600, m = (s / 60) % 60, sec = s % 60;
  char buf[48];
  if (h > 0)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", h, m, sec);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", m, sec);
  return buf;
}

std::string format_rate(double v) {
  if (!std::isfinite(v)) return "?";
  if (v >= 1e9) return printf_str("%.2fG", v / 1e9);
  if (v >= 1e6) return printf_str("%.2fM", v / 1e6);
  if (v >= 1e3) return printf_str("%.1fk", v / 1e3);
  return printf_str("%.0f", v);
}

std::string format_bytes(double b) {
  if (b >= double(1ull << 30)) return printf_str("%.2f GiB", b / double(1ull << 30));
  if (b >= double(1ull << 20)) return printf_str("%.1f MiB", b / double(1ull << 20));
  if (b >= 1024) return printf_str("%.1f KiB", b / 1024);
  return printf_str("%.0f B", b);
}

std::string format_progress(const ProgressLine& p) {
  std::string s = "step " + std::to_string(p.step) + "/" + std::to_string(p.max_steps);
  s += " | loss " + printf_str("%.4f", p.loss);
  s += " | lr " + printf_str("%.2e", p.lr);
  s += " | gnorm " + printf_str("%.3f", p.grad_norm);
  s += " | " + format_rate(p.tokens_per_sec) + " tok/s";
  s += " | MFU " + (p.mfu ? printf_str("%.1f%%", *p.mfu * 100.0) : std::string("n/a"));
  s += " | ETA " + (p.eta_seconds ? format_duration(*p.eta_seconds) : std::string("?"));
  if (p.val_loss) s += " | val " + printf_str("%.4f", *p.val_loss);
  return s;
}

void ProgressPrinter::update(const std::string& line, bool keep) {
  if (!interactive_) {
    out_ << line << '\n' << std::flush;
    return;
  }
  out_ << '\r' << line;
  if (line.size() < last_width_) out_ << std::string(last_width_ - line.size(), ' ');
  last_width_ = line.size();
  if (keep) {
    out_ << '\n';
    pending_ = false;
    last_width_ = 0;
  } else {
    pending_ = true;
  }
  out_ << std::flush;
}

void ProgressPrinter::message(const std::string& line) {
  end_pending();
  out_ << line << '\n' << std::flush;
}

void ProgressPrinter::end_pending() {
  if (pending_) out_ << '\n' << std::flush;
  pending_ = false;
  last_width_ = 0;
}

}  // namespace recipe::core
