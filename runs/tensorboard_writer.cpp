// TFRecord framing, a minimal protobuf encoder/decoder for tensorflow.Event, and the run-dir
// conversion from metrics.jsonl/timing.jsonl.
#include "runs/tensorboard_writer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <optional>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runs/run_dir.hpp"

namespace fs = std::filesystem;

namespace recipe::exec {

namespace {

// CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, table-driven.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protobuf wire format: key = (field << 3) | wire type; 0 varint, 1 fixed64, 2 length-delimited,
// 5 fixed32. Little-endian fixed widths.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void put_key(std::string& out, int field, int wire) { put_varint(out, (static_cast<uint64_t>(field) << 3) | wire); }
template <typename T>
void put_fixed(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // x86/ARM Linux hosts are little endian, as the wire format
  out.append(b, sizeof(T));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

class ProtoReader {
 public:
  explicit ProtoReader(std::string_view data) : d_(data) {}
  bool done() const { return pos_ >= d_.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= d_.size()) throw std::runtime_error("truncated varint");
      uint8_t b = static_cast<uint8_t>(d_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("varint too long");
  }
  template <typename T>
  T fixed() {
    if (pos_ + sizeof(T) > d_.size()) throw std::runtime_error("truncated fixed field");
    T v;
    std::memcpy(&v, d_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view bytes() {
    uint64_t n = varint();
    if (pos_ + n > d_.size()) throw std::runtime_error("truncated length-delimited field");
    std::string_view v = d_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  void skip(int wire) {
    switch (wire) {
      case 0:
        varint();
        break;
      case 1:
        fixed<uint64_t>();
        break;
      case 2:
        bytes();
        break;
      case 5:
        fixed<uint32_t>();
        break;
      default:
        throw std::runtime_error("unsupported wire type " + std::to_string(wire));
    }
  }

 private:
  std::string_view d_;
  size_t pos_ = 0;
};

std::pair<std::string, float> decode_value(std::string_view data) {
  ProtoReader r(data);
  std::pair<std::string, float> v{"", 0.f};
  while (!r.done()) {
    uint64_t key = r.varint();
    int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 2)
      v.first = std::string(r.bytes());
    else if (field == 2 && wire == 5)
      v.second = r.fixed<float>();
    else
      r.skip(wire);
  }
  return v;
}

DecodedEvent decode_event(std::string_view data) {
  ProtoReader r(data);
  DecodedEvent e;
  while (!r.done()) {
    uint64_t key = r.varint();
    int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 1)
      e.wall_time = r.fixed<double>();
    else if (field == 2 && wire == 0)
      e.step = static_cast<int64_t>(r.varint());
    else if (field == 3 && wire == 2)
      e.file_version = std::string(r.bytes());
    else if (field == 5 && wire == 2) {
      ProtoReader s(r.bytes());
      while (!s.done()) {
        uint64_t k = s.varint();
        if ((k >> 3) == 1 && (k & 7) == 2)
          e.values.push_back(decode_value(s.bytes()));
        else
          s.skip(static_cast<int>(k & 7));
      }
    } else
      r.skip(wire);
  }
  return e;
}

std::optional<double> parse_iso8601(const std::string& s) {
  std::tm tm{};
  std::istringstream in(s);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  if (in.fail()) return std::nullopt;
  return static_cast<double>(timegm(&tm));
}

double mtime_seconds(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    // A line cut by a crash is skipped, not fatal: everything before it is still a valid curve.
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) rows.push_back(std::move(j));
  }
  return rows;
}

bool is_our_event_file(const fs::path& p) { return p.filename().string().rfind("events.out.tfevents.", 0) == 0; }

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc_table();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string encode_file_version_event(double wall_time) {
  std::string out;
  put_key(out, 1, 1);
  put_fixed<double>(out, wall_time);
  put_bytes(out, 3, "brain.Event:2");
  return out;
}

std::string encode_scalar_event(const ScalarEvent& e) {
  std::string value;
  put_bytes(value, 1, e.tag);
  put_key(value, 2, 5);
  put_fixed<float>(value, e.value);
  std::string summary;
  put_bytes(summary, 1, value);
  std::string out;
  put_key(out, 1, 1);
  put_fixed<double>(out, e.wall_time);
  put_key(out, 2, 0);
  put_varint(out, static_cast<uint64_t>(e.step));
  put_bytes(out, 5, summary);
  return out;
}

std::string tf_record(const std::string& data) {
  std::string out;
  uint64_t len = data.size();
  put_fixed<uint64_t>(out, len);
  put_fixed<uint32_t>(out, masked_crc32c(&len, sizeof(len)));
  out += data;
  put_fixed<uint32_t>(out, masked_crc32c(data.data(), data.size()));
  return out;
}

void write_event_file(const std::string& path, const std::vector<ScalarEvent>& scalars, double wall_time) {
  std::string bytes = tf_record(encode_file_version_event(wall_time));
  for (const auto& s : scalars) bytes += tf_record(encode_scalar_event(s));
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw std::runtime_error("cannot write " + path + ": " + ec.message());
}

std::vector<DecodedEvent> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<DecodedEvent> events;
  size_t pos = 0;
  while (pos < data.size()) {
    auto fail = [&](const std::string& why) {
      return std::runtime_error(path + ": record at byte " + std::to_string(pos) + ": " + why);
    };
    if (data.size() - pos < 12) throw fail("truncated header");
    uint64_t len;
    uint32_t len_crc;
    std::memcpy(&len, data.data() + pos, 8);
    std::memcpy(&len_crc, data.data() + pos + 8, 4);
    if (len_crc != masked_crc32c(&len, 8)) throw fail("length CRC mismatch");
    if (data.size() - pos - 12 < len + 4) throw fail("truncated data");
    std::string_view body(data.data() + pos + 12, len);
    uint32_t body_crc;
    std::memcpy(&body_crc, data.data() + pos + 12 + len, 4);
    if (body_crc != masked_crc32c(body.data(), body.size())) throw fail("data CRC mismatch");
    try {
      events.push_back(decode_event(body));
    } catch (const std::runtime_error& e) {
      throw fail(std::string("bad Event protobuf: ") + e.what());
    }
    pos += 12 + len + 4;
  }
  return events;
}

std::vector<ScalarEvent> run_scalars(const std::string& run_dir) {
  const fs::path dir(run_dir);
  double start = 0;
  try {
    if (auto t = parse_iso8601(read_status(run_dir).start_time)) start = *t;
  } catch (const std::exception&) {}
  if (start == 0) start = mtime_seconds(dir / "metrics.jsonl");

  // Wall time of each step = start + accumulated step_ms.
  std::map<int64_t, double> wall;
  std::vector<ScalarEvent> out;
  double elapsed = 0;
  auto timing = read_jsonl(dir / "timing.jsonl");
  for (const auto& t : timing) {
    int64_t step = t.value("step", 0);
    if (t.contains("step_ms") && t["step_ms"].is_number()) elapsed += t["step_ms"].get<double>() / 1000.0;
    wall[step] = start + elapsed;
  }
  auto wall_of = [&](int64_t step) {
    auto it = wall.find(step);
    return it != wall.end() ? it->second : start;
  };
  auto add = [&](const nlohmann::json& row, const char* key, const char* tag) {
    if (!row.contains(key) || !row[key].is_number()) return;
    int64_t step = row.value("step", 0);
    out.push_back({wall_of(step), step, tag, row[key].get<float>()});
  };
  for (const auto& m : read_jsonl(dir / "metrics.jsonl")) {
    add(m, "loss", "train/loss");
    add(m, "lr", "train/lr");
    add(m, "grad_norm", "train/grad_norm");
    add(m, "val_loss", "val/loss");
  }
  for (const auto& t : timing) {
    add(t, "tokens_per_sec", "perf/tokens_per_sec");
    add(t, "step_ms", "perf/step_ms");
    add(t, "tflops", "perf/tflops");
    add(t, "mfu", "perf/mfu");
  }
  std::stable_sort(out.begin(), out.end(), [](const ScalarEvent& a, const ScalarEvent& b) { return a.step < b.step; });
  return out;
}

std::string write_run_events(const std::string& run_dir) {
  const fs::path dir(run_dir);
  std::error_code ec;
  if (!fs::is_regular_file(dir / "metrics.jsonl", ec)) return "";
  double newest_input = std::max(mtime_seconds(dir / "metrics.jsonl"), mtime_seconds(dir / "timing.jsonl"));
  std::vector<fs::path> existing;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && is_our_event_file(entry.path())) existing.push_back(entry.path());
  if (existing.size() == 1 && mtime_seconds(existing[0]) >= newest_input) return existing[0].string();

  std::vector<ScalarEvent> scalars = run_scalars(run_dir);
  if (scalars.empty()) return "";
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const fs::path path = dir / ("events.out.tfevents." + std::to_string(static_cast<long long>(now)) + "." + host);
  write_event_file(path.string(), scalars, scalars.front().wall_time);
  for (const auto& old : existing)
    if (old != path) fs::remove(old, ec);
  return path.string();
}

}  // namespace recipe::exec
