#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>

#include "core/data/indexed_dataset.hpp"
#include "core/data/mock_source.hpp"
#include "core/data/prepare.hpp"
#include "core/data/sample_source.hpp"
#include "tests/core/core_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("core/data");

using namespace recipe;
using namespace recipe::data;
using recipe::data::testing::TempDir;
using recipe::data::testing::write_file;

namespace {

// An indexed plan reading `prefix`, with data.blend derived from data.path as the resolver does.
void use_dataset(plan::Plan& plan, const std::string& prefix) {
  plan.data.kind = plan::DataKind::indexed;
  plan.data.path = prefix;
  plan.data.blend.clear();
  test::fill_derived(plan);
}

plan::Plan tiny_plan() {
  plan::Plan plan;
  plan.model.seq_length = 16;
  plan.model.vocab_size = 256;
  plan.trainer.micro_batch_size = 2;
  plan.trainer.global_batch_size = 8;
  plan.parallelism.dp = 2;
  return plan;
}

// A byte-tokenized corpus whose documents all consist of one repeated letter, so a sample's first
// token tells which dataset it came from.
std::string make_corpus(const TempDir& dir, const std::string& name, char letter, int docs) {
  std::string jsonl;
  for (int i = 0; i < docs; ++i)
    jsonl += "{\"text\": \"" + std::string(static_cast<size_t>(20 + i % 13), letter) + "\"}\n";
  write_file(dir / (name + ".jsonl"), jsonl);
  PrepareOptions o;
  o.inputs = {dir / (name + ".jsonl")};
  o.output_prefix = dir / name;
  prepare_dataset(o);
  return o.output_prefix;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("make_source: mock data, fixed batch and a validation stream of its own") {
  plan::Plan plan = tiny_plan();
  auto train = make_train_source(plan);
  REQUIRE(train);
  CHECK(train->seq_plus_one() == 17);
  CHECK(make_valid_source(plan) == nullptr);  // no evaluation

  plan.trainer.eval_interval = 10;
  auto valid = make_valid_source(plan);
  REQUIRE(valid);
  std::vector<int32_t> a(17), b(17);
  train->sample(3, a.data());
  valid->sample(3, b.data());
  CHECK(a != b);
  MockSource seed_plus_one(16, 256, static_cast<uint64_t>(plan.data.seed) + 1);
  seed_plus_one.sample(3, a.data());
  CHECK(a == b);

  plan.data.fixed_batch = true;
  auto fixed = make_train_source(plan);
  for (int64_t i = 0; i < 8; ++i) {
    fixed->sample(i, a.data());
    fixed->sample(i + int64_t{8} * 1000, b.data());
    CHECK(a == b);
  }
}

TEST_CASE("make_source: one indexed dataset split into train and valid") {
  TempDir dir;
  plan::Plan plan = tiny_plan();
  use_dataset(plan, make_corpus(dir, "wiki", 'w', 200));
  plan.data.split = "90,10,0";
  auto train = make_train_source(plan);
  auto valid = make_valid_source(plan);
  REQUIRE(train);
  REQUIRE(valid);
  IndexedDataset ds(plan.data.path);
  int64_t train_tokens = 0, valid_tokens = 0;
  for (int64_t d = 0; d < 180; ++d) train_tokens += ds.document_length(d);
  for (int64_t d = 180; d < 200; ++d) valid_tokens += ds.document_length(d);
  CHECK(train->size() == (train_tokens - 1) / 16);
  CHECK(valid->size() == (valid_tokens - 1) / 16);

  plan.data.split = "100,0,0";
  CHECK(make_valid_source(plan) == nullptr);
}

TEST_CASE("make_source: a blend follows its weights and is reproducible") {
  TempDir dir;
  plan::Plan plan = tiny_plan();
  plan.data.kind = plan::DataKind::indexed;
  plan.data.blend = {{0.7, make_corpus(dir, "a", 'a', 120)}, {0.3, make_corpus(dir, "b", 'b', 80)}};
  auto one = make_train_source(plan);
  auto two = make_train_source(plan);
  std::map<int32_t, int> first_token;
  std::vector<int32_t> x(17), y(17);
  for (int64_t i = 0; i < 10000; ++i) {
    one->sample(i, x.data());
    two->sample(i, y.data());
    REQUIRE(x == y);
    ++first_token[x[0] == 0 ? x[1] : x[0]];  // a window may start on a document's eod
  }
  CHECK(std::abs(first_token['a'] / 10000.0 - 0.7) < 0.01);
  CHECK(std::abs(first_token['b'] / 10000.0 - 0.3) < 0.01);
}

TEST_CASE("make_source: missing files and a vocabulary mismatch are actionable errors") {
  TempDir dir;
  plan::Plan plan = tiny_plan();
  use_dataset(plan, dir / "absent");
  std::string err = error_of([&] { make_train_source(plan); });
  CHECK(err.find(dir / "absent.idx") != std::string::npos);
  CHECK(err.find("recipe data prepare --input") != std::string::npos);
  CHECK(err.find("--output " + (dir / "absent")) != std::string::npos);

  use_dataset(plan, make_corpus(dir, "c", 'z', 50));  // 'z' = 122
  plan.model.vocab_size = 100;
  err = error_of([&] { make_train_source(plan); });
  CHECK(err.find(dir / "c.bin") != std::string::npos);
  CHECK(err.find("up to 122") != std::string::npos);
  CHECK(err.find("model.vocab_size=100") != std::string::npos);
  // The fix names the smallest vocabulary that holds id 122 (not "> 122", which reads as 122 itself).
  CHECK(err.find("model.vocab_size ≥ 123") != std::string::npos);
}

TEST_SUITE_END();
