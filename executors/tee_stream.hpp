// An ostream that writes to a terminal stream and to a log file at once. The log side gets plain
// lines: a carriage return (progress-line redraw) becomes a newline and ANSI escape sequences are
// dropped, so `less logs/rank-0.log` shows every progress update.
#pragma once

#include <fstream>
#include <ostream>
#include <streambuf>
#include <string>

namespace recipe::exec {

class TeeBuf : public std::streambuf {
 public:
  TeeBuf(std::ostream& terminal, std::ofstream& log) : terminal_(terminal), log_(log) {}

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  void log_char(char c);
  std::ostream& terminal_;
  std::ofstream& log_;
  bool in_escape_ = false;
  char last_logged_ = '\n';
};

class TeeStream : public std::ostream {
 public:
  TeeStream(std::ostream& terminal, const std::string& log_path);
  bool log_ok() const { return static_cast<bool>(log_); }

 private:
  std::ofstream log_;
  TeeBuf buf_;
};

}  // namespace recipe::exec
