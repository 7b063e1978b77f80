#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "core/data/gpt_dataset.hpp"
#include "core/data/indexed_dataset.hpp"
#include "plan/data_split.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("core/data");

using namespace recipe::data;
using recipe::data::testing::TempDir;

namespace {

// Documents of varied lengths whose tokens are 1, 2, 3, ... (every token unique), `total` in all.
std::shared_ptr<const IndexedDataset> unique_token_dataset(const TempDir& dir, int64_t total, int num_docs) {
  const std::string prefix = dir / "uniq";
  IndexedDatasetWriter w(bin_path_of(prefix), idx_path_of(prefix), TokenDType::int32);
  int32_t next = 1;
  for (int d = 0; d < num_docs; ++d) {
    const int64_t left = total - (next - 1);
    const int64_t len = d == num_docs - 1 ? left : std::min<int64_t>(left, 1 + (d * 7) % 23);
    std::vector<int32_t> doc;
    for (int64_t i = 0; i < len; ++i) doc.push_back(next++);
    w.add_document(doc);
  }
  w.finish();
  return std::make_shared<const IndexedDataset>(prefix);
}

std::vector<int32_t> read(const SampleSource& s, int64_t idx) {
  std::vector<int32_t> v(static_cast<size_t>(s.seq_plus_one()));
  s.sample(idx, v.data());
  return v;
}

std::vector<int32_t> stream_of(const IndexedDataset& ds, const std::vector<int64_t>& order) {
  std::vector<int32_t> stream;
  for (int64_t d : order) {
    const auto doc = ds.document(d);
    stream.insert(stream.end(), doc.begin(), doc.end());
  }
  return stream;
}

}  // namespace

TEST_CASE("GPT dataset: samples are windows of the shuffled concatenation with a 1-token overlap") {
  TempDir dir;
  const int seq = 16;
  const int64_t n = 40;
  auto ds = unique_token_dataset(dir, n * seq + 1, 60);
  GPTDataset gpt(ds, {0, ds->num_documents()}, seq, 1234);
  REQUIRE(gpt.size() == n);
  REQUIRE(gpt.seq_plus_one() == seq + 1);

  const auto order = gpt.document_order(0);
  const auto stream = stream_of(*ds, order);
  std::vector<int64_t> windows;
  std::multiset<int32_t> inputs;
  for (int64_t idx = 0; idx < n; ++idx) {
    const int64_t k = gpt.window_of(idx);
    windows.push_back(k);
    const auto s = read(gpt, idx);
    CHECK(std::equal(s.begin(), s.end(), stream.begin() + k * seq));
    inputs.insert(s.begin(), s.end() - 1);
  }
  // The sample order is a permutation of the windows (shuffled, not the identity) ...
  std::vector<int64_t> sorted = windows;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  CHECK(sorted == all);
  CHECK(windows != all);
  // ... so every token of the epoch but the very last is an input exactly once.
  CHECK(inputs.size() == static_cast<size_t>(n * seq));
  CHECK(std::set<int32_t>(inputs.begin(), inputs.end()).size() == inputs.size());
  CHECK(std::multiset<int32_t>(stream.begin(), stream.end() - 1) == inputs);
}

TEST_CASE("GPT dataset: each epoch has its own document order and sample order") {
  TempDir dir;
  auto ds = unique_token_dataset(dir, 2001, 120);
  GPTDataset gpt(ds, {0, ds->num_documents()}, 8, 7);
  const auto o0 = gpt.document_order(0), o1 = gpt.document_order(1);
  CHECK(o0 != o1);
  auto s0 = o0, s1 = o1;
  std::sort(s0.begin(), s0.end());
  std::sort(s1.begin(), s1.end());
  CHECK(s0 == s1);
  const int64_t n = gpt.size();
  int differ = 0;
  for (int64_t i = 0; i < 20; ++i) differ += read(gpt, i) != read(gpt, n + i);
  CHECK(differ > 15);
  // Every epoch again reads each input token once.
  std::multiset<int32_t> inputs;
  for (int64_t i = n; i < 2 * n; ++i) {
    const auto s = read(gpt, i);
    inputs.insert(s.begin(), s.end() - 1);
  }
  CHECK(std::set<int32_t>(inputs.begin(), inputs.end()).size() == static_cast<size_t>(n * 8));
  // A different seed gives a different order.
  GPTDataset other(ds, {0, ds->num_documents()}, 8, 8);
  CHECK(other.document_order(0) != o0);
}

TEST_CASE("GPT dataset: sample(idx) is pure, so resuming and resharding read the same samples") {
  TempDir dir;
  auto ds = unique_token_dataset(dir, 3000, 150);
  const DocumentRange all{0, ds->num_documents()};
  const int seq = 12, global = 8, micro = 2;

  // The trainer's addressing: micro-batch m of step s on DP rank r starts at
  // s·global + m·(micro·dp) + r·micro.
  auto step_samples = [&](const SampleSource& src, int step, int dp) {
    std::vector<std::vector<int32_t>> out;
    for (int m = 0; m < global / (micro * dp); ++m)
      for (int r = 0; r < dp; ++r)
        for (int j = 0; j < micro; ++j)
          out.push_back(read(src, int64_t{step} * global + m * (micro * dp) + r * micro + j));
    std::sort(out.begin(), out.end());
    return out;
  };

  GPTDataset uninterrupted(ds, all, seq, 99);
  std::vector<std::vector<std::vector<int32_t>>> reference;
  const int steps = 3 * static_cast<int>(uninterrupted.size()) / global;  // runs across epoch boundaries
  for (int s = 0; s < steps; ++s) reference.push_back(step_samples(uninterrupted, s, 2));

  GPTDataset resumed(ds, all, seq, 99);  // a fresh process resuming at step k with a different DP size
  const int k = steps / 2 + 1;
  for (int s = k; s < steps; ++s) CHECK(step_samples(resumed, s, 4) == reference[static_cast<size_t>(s)]);
  for (int s = 0; s < k; ++s) CHECK(step_samples(resumed, s, 1) == reference[static_cast<size_t>(s)]);
}

TEST_CASE("GPT dataset: a range too small for one sample is an actionable error") {
  TempDir dir;
  auto ds = unique_token_dataset(dir, 100, 10);
  CHECK_THROWS_WITH_AS(GPTDataset(ds, {0, 1}, 64, 1, 0, "valid"),
                       doctest::Contains("fewer than one sample of model.seq_length+1 = 65"), std::runtime_error);
  CHECK_THROWS_AS(GPTDataset(ds, {5, 11}, 4, 1), std::runtime_error);
}

TEST_CASE("GPT dataset: tokens beyond the model vocabulary are refused with the file named") {
  TempDir dir;
  auto ds = unique_token_dataset(dir, 500, 10);
  GPTDataset gpt(ds, {0, ds->num_documents()}, 8, 1, 300);
  bool thrown = false;
  std::vector<int32_t> buf(9);
  for (int64_t i = 0; i < gpt.size() && !thrown; ++i) {
    try {
      gpt.sample(i, buf.data());
    } catch (const std::runtime_error& e) {
      thrown = true;
      CHECK(std::string(e.what()).find(ds->bin_path()) != std::string::npos);
      CHECK(std::string(e.what()).find("model.vocab_size=300") != std::string::npos);
    }
  }
  CHECK(thrown);
}

TEST_CASE("split: Megatron's proportional document ranges") {
  auto ranges = split_documents(1000, parse_split("98,2,0"));
  CHECK(ranges[0].begin == 0);
  CHECK(ranges[0].end == 980);
  CHECK(ranges[1].begin == 980);
  CHECK(ranges[1].end == 1000);
  CHECK(ranges[2].size() == 0);

  ranges = split_documents(100, parse_split("949,50,1"));
  CHECK(ranges[0].end == 95);
  CHECK(ranges[1].end == 100);
  CHECK(ranges[2].size() == 0);

  // round half to even (2.5 → 2, 7.5 → 8), as Python's round
  ranges = split_documents(10, parse_split("25/75"));
  CHECK(ranges[0].end == 2);
  CHECK(ranges[1].end == 10);

  // rounding overshoot is taken back from every bound after the first
  ranges = split_documents(3, parse_split("1,1,1"));
  CHECK(ranges[0].size() + ranges[1].size() + ranges[2].size() == 3);
  CHECK(ranges[2].end == 3);

  CHECK(parse_split("0.9, 0.1")[1] == doctest::Approx(0.1));
  CHECK_THROWS_WITH_AS(parse_split("98,x,0"), doctest::Contains("data.split"), std::runtime_error);
  CHECK_THROWS_AS(parse_split("0,0,0"), std::runtime_error);
  CHECK_THROWS_AS(parse_split("-1,2"), std::runtime_error);
  CHECK_THROWS_AS(parse_split("1,2,3,4"), std::runtime_error);
}

TEST_SUITE_END();
