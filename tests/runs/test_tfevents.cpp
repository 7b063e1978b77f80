// TensorBoard event files: CRC32C, record framing, protobuf fields, run-dir conversion.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "runs/tensorboard_writer.hpp"
#include "tests/executors/exec_test_util.hpp"

TEST_SUITE_BEGIN("runs");

using namespace recipe::exec;
using namespace recipe::exec::testing;

TEST_CASE("crc32c matches the Castagnoli check value") {
  CHECK(crc32c("123456789", 9) == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
  uint32_t c = crc32c("a", 1);
  CHECK(masked_crc32c("a", 1) == ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST_CASE("an Event protobuf is encoded field by field") {
  // wall_time=1.5 (field 1, fixed64), step=3 (field 2, varint), summary{value{tag "x", simple_value 2}}.
  std::string e = encode_scalar_event({1.5, 3, "x", 2.0f});
  std::string expect = "\x09";
  double w = 1.5;
  expect.append(reinterpret_cast<const char*>(&w), 8);
  expect += "\x10\x03";
  std::string value = std::string("\x0a\x01x\x15", 4);
  float f = 2.0f;
  value.append(reinterpret_cast<const char*>(&f), 4);
  std::string summary = "\x0a" + std::string(1, static_cast<char>(value.size())) + value;
  expect += "\x2a" + std::string(1, static_cast<char>(summary.size())) + summary;
  CHECK(e == expect);

  std::string rec = tf_record("abc");
  REQUIRE(rec.size() == 8 + 4 + 3 + 4);
  uint64_t len;
  std::memcpy(&len, rec.data(), 8);
  CHECK(len == 3);
  uint32_t crc;
  std::memcpy(&crc, rec.data() + 15, 4);
  CHECK(crc == masked_crc32c("abc", 3));
}

TEST_CASE("a run dir's metrics round-trip through the event file") {
  TempDir tmp;
  auto dir = make_run(tmp.path(), "exp", "run-1", "x = 1\n", 4, 3.0);
  std::string path = write_run_events(dir.string());
  REQUIRE_FALSE(path.empty());
  CHECK(std::filesystem::path(path).filename().string().starts_with("events.out.tfevents."));
  auto events = read_event_file(path);
  REQUIRE(events.size() == 1 + 4 * (3 + 3));  // version + 4 steps x (loss, lr, grad norm, tok/s, step_ms, tflops)
  CHECK(events[0].file_version == "brain.Event:2");
  int losses = 0;
  for (const auto& e : events) {
    if (e.values.empty()) continue;
    REQUIRE(e.values.size() == 1);
    if (e.values[0].first == "train/loss") {
      ++losses;
      CHECK(e.values[0].second == doctest::Approx(3.0 - 0.1 * e.step).epsilon(1e-5));
      // start_time 2025-01-02T03:04:05Z plus 100 ms per step.
      CHECK(e.wall_time == doctest::Approx(1735787045.0 + 0.1 * e.step));
    }
    if (e.values[0].first == "perf/tokens_per_sec") CHECK(e.values[0].second == doctest::Approx(1000.0 * e.step));
  }
  CHECK(losses == 4);

  // Unchanged metrics keep the file; a second conversion after new metrics replaces it (one file).
  CHECK(write_run_events(dir.string()) == path);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << "{\"step\":5,\"loss\":1.0,\"lr\":0.001,\"grad_norm\":1.0}\n";
  std::string again = write_run_events(dir.string());
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files += e.path().filename().string().starts_with("events.out.tfevents.");
  CHECK(files == 1);
  CHECK(read_event_file(again).size() > events.size());

  // A damaged record is refused with its offset.
  std::string bytes = read_text(again);
  bytes[20] ^= 0x55;
  write_text(tmp.path() / "bad", bytes);
  CHECK_THROWS_WITH_AS(read_event_file((tmp.path() / "bad").string()), doctest::Contains("record at byte 0"),
                       std::runtime_error);
}

TEST_SUITE_END();
