// TensorBoard event files, written without TensorFlow or protobuf.
//
// An event file is a sequence of TFRecords:
//   uint64 length (little endian) | uint32 masked_crc32c(length bytes) | data[length] | uint32 masked_crc32c(data)
// with masked_crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's data is a serialized
// `tensorflow.Event` protobuf; only these fields are written:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2", as TensorBoard expects.
//
// core/ does not depend on executors/, so the trainer never calls this: the executors convert a
// run's metrics.jsonl + timing.jsonl into `events.out.tfevents.<unix time>.<host>` when a run ends,
// and `recipe runs show` refreshes it, so `tensorboard --logdir <experiments dir>` shows every run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace recipe::exec {

uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

struct ScalarEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;  // "train/loss"
  float value = 0;
};

// Serialized tensorflow.Event protobufs.
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(const ScalarEvent& e);
// One TFRecord framing `data`.
std::string tf_record(const std::string& data);

// Writes every scalar (sorted as given) after the file_version record. Throws std::runtime_error.
void write_event_file(const std::string& path, const std::vector<ScalarEvent>& scalars, double wall_time);

// A decoded record, for tests and `recipe runs show`: file_version or one scalar per record.
struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;
};
// Reads and checks every record (lengths, both CRCs, protobuf fields). Throws std::runtime_error
// naming the byte offset of the first damaged record.
std::vector<DecodedEvent> read_event_file(const std::string& path);

// The scalars of a run dir: train/loss, train/lr, train/grad_norm, val/loss from metrics.jsonl and
// perf/tokens_per_sec, perf/step_ms, perf/tflops, perf/mfu from timing.jsonl. The files hold no
// clock, so wall times are the run's start_time (status.json; else metrics.jsonl's modification
// time) plus the accumulated step_ms of timing.jsonl.
std::vector<ScalarEvent> run_scalars(const std::string& run_dir);

// Writes (or refreshes, when metrics.jsonl is newer) the run dir's event file and returns its
// path; returns "" when the run has no metrics yet. Older event files written by recipe in the
// run dir are replaced, so TensorBoard never shows a curve twice.
std::string write_run_events(const std::string& run_dir);

}  // namespace recipe::exec
