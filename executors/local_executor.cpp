// Single-process local execution: status.json bookkeeping, log teeing, interrupt handling.
#include "executors/local_executor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/train/stop_request.hpp"
#include "plan/exit_codes.hpp"
#include "runs/run_dir.hpp"
#include "executors/tee_stream.hpp"
#include "executors/watchdog_reports.hpp"
#include "runs/tensorboard_writer.hpp"

namespace fs = std::filesystem;

namespace recipe::exec {

namespace {

// State the signal handler reads. Prepared before training starts so the handler only makes
// async-signal-safe calls (open, write, rename, _exit).
struct InterruptRecord {
  std::string status_path;
  std::string tmp_path;
  // status.json for an interrupt, in two parts around its "steps" value (written from `steps`);
  // its end_time is the sentinel at end_time_at in the head, overwritten with the signal's time.
  std::string interrupted_json;   // "" = this process does not write status.json
  std::string interrupted_tail;
  size_t end_time_at = std::string::npos;
  std::atomic<int> steps{0};      // the steps done, as training reports them (TrainOptions::steps_done)
  std::string message[4];         // what to print for SIGINT, SIGTERM, SIGUSR1, SIGHUP when stopping at once
  std::string graceful[4];        // what to print for a first SIGTERM, SIGUSR1, SIGHUP (stop after the step)
  bool exit_with_signal = false;  // exit 128 + signal (a rank) instead of 130 (the whole run)
  struct sigaction old[4] = {};
};
constexpr int kHandled[4] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
constexpr const char* kHandledNames[4] = {"SIGINT", "SIGTERM", "SIGUSR1", "SIGHUP"};
InterruptRecord* g_interrupt = nullptr;

constexpr int kStepsMark = 987654321;                    // the "steps" value the JSON is split at
constexpr char kEndTimeMark[] = "0000-00-00T00:00:00Z";  // now_iso8601()'s form and length

// Async-signal-safe helpers of the handler: integer arithmetic into caller buffers only.
// Decimal digits of v ≥ 0 into out (≥ 11 bytes); returns the length.
size_t format_uint(int v, char* out) {
  char rev[12];
  size_t n = 0;
  unsigned u = v < 0 ? 0u : static_cast<unsigned>(v);
  do {
    rev[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0 && n < sizeof rev);
  for (size_t i = 0; i < n; ++i) out[i] = rev[n - 1 - i];
  return n;
}

// Seconds since the epoch as YYYY-MM-DDTHH:MM:SSZ into out (20 bytes), UTC; the civil date from
// the day count by the proleptic Gregorian calendar's 400-year eras.
void format_utc(long long t, char* out) {
  const long long days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
  const long long secs = t - days * 86400;
  const long long z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
  const long long doe = z - era * 146097;
  const long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const long long mp = (5 * doy + 2) / 153;
  const long long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
  const long long y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  const long long fields[6] = {y, m, d, secs / 3600, secs % 3600 / 60, secs % 60};
  const int widths[6] = {4, 2, 2, 2, 2, 2};
  const char seps[6] = {'-', '-', 'T', ':', ':', 'Z'};
  size_t o = 0;
  for (int f = 0; f < 6; ++f) {
    long long v = fields[f];
    for (int i = widths[f] - 1; i >= 0; --i) {
      out[o + size_t(i)] = static_cast<char>('0' + v % 10);
      v /= 10;
    }
    o += size_t(widths[f]);
    out[o++] = seps[f];
  }
}

int signal_slot(int sig) { return sig == SIGINT ? 0 : sig == SIGTERM ? 1 : sig == SIGUSR1 ? 2 : 3; }

extern "C" void on_interrupt(int sig) {
  InterruptRecord* rec = g_interrupt;
  if (!rec) ::_exit(exit_code_for_signal(sig));
  // The first SIGUSR1/SIGTERM/SIGHUP: stop after this step with a checkpoint (the loop polls).
  if (sig != SIGINT && core::stop_signal() == 0) {
    core::request_stop(sig);
    const std::string& graceful = rec->graceful[signal_slot(sig)];
    ssize_t ignored = ::write(STDERR_FILENO, graceful.data(), graceful.size());
    (void)ignored;
    return;
  }
  const std::string& msg = rec->message[signal_slot(sig)];
  ssize_t ignored = ::write(STDERR_FILENO, msg.data(), msg.size());
  (void)ignored;
  if (!rec->interrupted_json.empty()) {
    if (rec->end_time_at != std::string::npos)
      format_utc(static_cast<long long>(::time(nullptr)), &rec->interrupted_json[rec->end_time_at]);
    char digits[12];
    const size_t n = format_uint(rec->steps.load(), digits);
    int fd = ::open(rec->tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ignored = ::write(fd, rec->interrupted_json.data(), rec->interrupted_json.size());
      ignored = ::write(fd, digits, n);
      ignored = ::write(fd, rec->interrupted_tail.data(), rec->interrupted_tail.size());
      ::close(fd);
      ::rename(rec->tmp_path.c_str(), rec->status_path.c_str());
    }
  }
  ::_exit(rec->exit_with_signal ? exit_code_for_signal(sig) : kExitInterrupted);
}

class SignalGuard {
 public:
  SignalGuard(const std::string& run_dir, const RunStatus& running, const LocalRunOptions& opts)
      : enabled_(opts.handle_signals), rank_signals_(opts.status_role != StatusRole::owner) {
    if (!enabled_) return;
    if (opts.status_role != StatusRole::none) {
      RunStatus interrupted = running;
      interrupted.state = "interrupted";
      interrupted.exit_code = kExitInterrupted;
      interrupted.message = rank_signals_ ? "rank " + std::to_string(opts.rank) + " stopped by a signal"
                                          : "stopped at once by a signal (SIGINT, or a second SIGTERM/SIGUSR1/SIGHUP)";
      interrupted.steps = kStepsMark;
      interrupted.end_time = kEndTimeMark;
      const std::string json = status_json(interrupted).dump(2) + "\n";
      const std::string mark = std::to_string(kStepsMark);
      const size_t at = json.find(mark);
      rec_.interrupted_json = json.substr(0, at);
      rec_.interrupted_tail = json.substr(at + mark.size());
      rec_.end_time_at = rec_.interrupted_json.find(kEndTimeMark);
    }
    rec_.status_path = (fs::path(run_dir) / "status.json").string();
    rec_.tmp_path = rec_.status_path + ".interrupted." + std::to_string(::getpid()) + ".tmp";
    rec_.exit_with_signal = rank_signals_;
    const std::string who = rank_signals_ ? "rank " + std::to_string(opts.rank) + " " : "";
    for (int i = 0; i < 4; ++i) {
      if (rank_signals_)
        rec_.message[i] = "recipe: " + who + "received " + kHandledNames[i] + "; stopping now\n";
      else
        rec_.message[i] = "\nrecipe: interrupted; run marked \"interrupted\" in status.json\n";
      rec_.graceful[i] = "\nrecipe: " + who + "received " + kHandledNames[i] +
                         ": stopping after this step with a checkpoint (send it again, or Ctrl-C, to stop at once)\n";
    }
    g_interrupt = &rec_;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; ++i) sigaction(kHandled[i], &sa, &rec_.old[i]);
  }
  ~SignalGuard() {
    if (!enabled_) return;
    for (int i = 0; i < 4; ++i) sigaction(kHandled[i], &rec_.old[i], nullptr);
    g_interrupt = nullptr;
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  // Where training reports its steps, so an interrupt records them (nullptr: no handler).
  std::atomic<int>* steps() { return enabled_ ? &rec_.steps : nullptr; }

 private:
  bool enabled_;
  bool rank_signals_;
  InterruptRecord rec_;
};

// A file's whole text; "" when it cannot be read (the checkpoint then carries no plan copy).
std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return in ? s.str() : std::string();
}

std::string summary_line(const core::TrainResult& r, const std::string& run_dir) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(4);
  s << (r.stop_signal ? "stopped early: " : "finished: ") << r.steps_done << " steps, loss " << r.first_loss << " -> "
    << r.last_loss;
  if (r.last_val_loss >= 0) s << " (val " << r.last_val_loss << ")";
  s.precision(0);
  s << ", " << r.tokens_per_sec << " tok/s, run dir " << run_dir;
  return s.str();
}

}  // namespace

LocalRunResult run_local(const plan::Plan& plan, const std::string& run_dir, const LocalRunOptions& opts) {
  std::ostream& out = opts.out ? *opts.out : std::cout;
  std::ostream& err = opts.err ? *opts.err : std::cerr;
  LocalRunResult result;
  const bool writes_status = opts.status_role != StatusRole::none;

  RunStatus status;
  if (opts.status_role == StatusRole::reporter) {
    // The launcher wrote "running" with its own pid (the one `recipe runs cancel` signals).
    try {
      status = read_status(run_dir);
    } catch (const std::exception&) {}
    if (status.start_time.empty()) status.start_time = now_iso8601();
  } else {
    status.start_time = now_iso8601();
    set_launcher(status);
  }
  status.state = "running";
  status.exit_code.reset();
  status.end_time = "";
  if (writes_status) write_status(run_dir, status);
  // A launcher clears them before it starts the ranks; the one process of a run does it here.
  if (opts.status_role == StatusRole::owner) clear_watchdog_files(run_dir);

  fs::path log_path = fs::path(run_dir) / "logs" / ("rank-" + std::to_string(opts.rank) + ".log");
  std::error_code ec;
  fs::create_directories(log_path.parent_path(), ec);
  TeeStream log(out, opts.tee_rank_log ? log_path.string() : std::string("/dev/null"));
  if (!log.log_ok()) err << "warning: cannot write " << log_path.string() << "; logging to the terminal only\n";

  {
    SignalGuard guard(run_dir, status, opts);
    core::TrainOptions train_opts;
    train_opts.run_dir = run_dir;
    train_opts.plan_toml = read_text_file((fs::path(run_dir) / "resolved.toml").string());
    train_opts.steps_done = guard.steps();
    train_opts.log = &log;
    train_opts.err = &err;
    train_opts.interactive = opts.interactive;
    // The step watchdog fired: the training thread is stuck (in a collective, a kernel), so record
    // the outcome from the watchdog's thread and end the process; a launcher then stops the others.
    train_opts.on_hang = [&](const std::string& report) {
      write_watchdog_report(run_dir, opts.rank, report);
      if (writes_status) {
        RunStatus hung = status;
        hung.state = "failed";
        hung.exit_code = kExitHung;
        hung.end_time = now_iso8601();
        hung.message = report;
        try {
          write_status(run_dir, hung);
        } catch (const std::exception&) {}
      }
      err << "error: rank " << opts.rank << ": " << report << "\n  run dir: " << run_dir << "\n";
      err.flush();
      log.flush();
      ::_exit(kExitHung);
    };
    try {
      result.train = core::train(plan, train_opts);
      result.ok = !result.train.diverged;
      result.stopped = result.ok && result.train.stop_signal != 0;
      if (!result.ok)
        result.error =
            result.train.message.empty() ? "training diverged (NaN/inf loss or gradient)" : result.train.message;
    } catch (const std::exception& e) {
      result.ok = false;
      result.error = e.what();
    }
  }

  if (writes_status) {
    status.end_time = now_iso8601();
    status.steps = result.train.steps_done;
    status.state = result.stopped ? "stopped" : result.ok ? "completed" : "failed";
    status.exit_code = result.stopped ? kExitStopped : result.ok ? kExitOk : kExitRuntime;
    status.message = result.ok ? result.train.message : result.error;
    if (result.stopped)
      status.message +=
          "; checkpoint " + result.train.last_checkpoint + "; resume with `recipe runs resume " + run_dir + "`";
    try {
      write_status(run_dir, status);
      // (executors) TensorBoard events beside metrics.jsonl, converted now that the run has ended.
      write_run_events(run_dir);
    } catch (const std::exception& e) {
      err << "warning: " << e.what() << "\n";
    }
  }

  if (result.ok) {
    if (writes_status) log << summary_line(result.train, run_dir) << "\n";
  } else {
    if (writes_status) log << "failed after " << result.train.steps_done << " steps: " << result.error << "\n";
    err << "error: " << (opts.status_role == StatusRole::owner ? "" : "rank " + std::to_string(opts.rank) + ": ")
        << "training failed: " << result.error << "\n  run dir: " << run_dir << "\n";
  }
  log.flush();
  err.flush();
  return result;
}

}  // namespace recipe::exec
