#include "executors/tee_stream.hpp"

namespace recipe::exec {

void TeeBuf::log_char(char c) {
  // ESC [ ... final byte in @..~ : a CSI sequence (cursor moves, line clears, colours).
  if (in_escape_) {
    if (c >= '@' && c <= '~' && c != '[') in_escape_ = false;
    return;
  }
  if (c == '\x1b') {
    in_escape_ = true;
    return;
  }
  if (c == '\r') {
    if (last_logged_ != '\n') log_.put('\n');
    last_logged_ = '\n';
    return;
  }
  if (c == '\n' && last_logged_ == '\n') return;  // the newline after a redrawn line
  log_.put(c);
  last_logged_ = c;
}

TeeBuf::int_type TeeBuf::overflow(int_type ch) {
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  char c = traits_type::to_char_type(ch);
  terminal_.put(c);
  if (log_) log_char(c);
  return ch;
}

std::streamsize TeeBuf::xsputn(const char* s, std::streamsize n) {
  terminal_.write(s, n);
  if (log_)
    for (std::streamsize i = 0; i < n; ++i) log_char(s[i]);
  return n;
}

int TeeBuf::sync() {
  terminal_.flush();
  if (log_) log_.flush();
  return 0;
}

TeeStream::TeeStream(std::ostream& terminal, const std::string& log_path)
    : std::ostream(nullptr), log_(log_path, std::ios::app), buf_(terminal, log_) {
  rdbuf(&buf_);
  // Flush after every output operation: an interrupted run keeps its log up to the last line.
  setf(std::ios::unitbuf);
}

}  // namespace recipe::exec
