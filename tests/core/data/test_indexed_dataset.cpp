#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include "core/data/indexed_dataset.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("core/data");

using namespace recipe::data;
using recipe::data::testing::read_file;
using recipe::data::testing::TempDir;
using recipe::data::testing::write_file;

namespace {

template <class T>
T at(const std::string& bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

void write_dataset(const std::string& prefix, const std::vector<std::vector<int32_t>>& docs, TokenDType dtype) {
  IndexedDatasetWriter w(bin_path_of(prefix), idx_path_of(prefix), dtype);
  for (const auto& d : docs) w.add_document(d);
  w.finish();
}

std::string error_of(const std::string& prefix) {
  try {
    IndexedDataset ds(prefix);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("MMIDIDX: the .idx header and arrays sit at Megatron's byte offsets") {
  TempDir dir;
  const std::string prefix = dir / "ds";
  write_dataset(prefix, {{1, 2, 3}, {40000, 5}}, TokenDType::uint16);

  const std::string idx = read_file(prefix + ".idx");
  REQUIRE(idx.size() == 34 + 2 * 4 + 2 * 8 + 3 * 8);
  CHECK(idx.compare(0, 9, std::string("MMIDIDX\0\0", 9)) == 0);
  CHECK(at<uint64_t>(idx, 9) == 1);           // version
  CHECK(static_cast<uint8_t>(idx[17]) == 8);  // uint16
  CHECK(at<uint64_t>(idx, 18) == 2);          // sequences
  CHECK(at<uint64_t>(idx, 26) == 3);          // document index entries = documents + 1
  CHECK(at<int32_t>(idx, 34) == 3);           // lengths
  CHECK(at<int32_t>(idx, 38) == 2);
  CHECK(at<int64_t>(idx, 42) == 0);  // pointers in bytes
  CHECK(at<int64_t>(idx, 50) == 6);
  CHECK(at<int64_t>(idx, 58) == 0);  // document index
  CHECK(at<int64_t>(idx, 66) == 1);
  CHECK(at<int64_t>(idx, 74) == 2);

  const std::string bin = read_file(prefix + ".bin");
  REQUIRE(bin.size() == 10);
  CHECK(at<uint16_t>(bin, 0) == 1);
  CHECK(at<uint16_t>(bin, 6) == 40000);
}

TEST_CASE("MMIDIDX: reader returns the documents the writer wrote, for uint16 and int32") {
  TempDir dir;
  const std::vector<std::vector<int32_t>> docs = {{7, 8, 9, 10}, {}, {65535}, {1, 1, 2, 3, 5, 8, 13}};
  for (TokenDType dtype : {TokenDType::uint16, TokenDType::int32}) {
    const std::string prefix = dir / (std::string("ds_") + dtype_name(dtype));
    write_dataset(prefix, docs, dtype);
    IndexedDataset ds(prefix);
    CHECK(ds.dtype() == dtype);
    REQUIRE(ds.num_documents() == 4);
    REQUIRE(ds.num_sequences() == 4);
    for (int64_t d = 0; d < 4; ++d) CHECK(ds.document(d) == docs[static_cast<size_t>(d)]);
    CHECK(ds.max_token_id() == 65535);
    int32_t part[3];
    ds.read_document(3, 2, 3, part);
    CHECK(part[0] == 2);
    CHECK(part[2] == 5);
    CHECK_THROWS(ds.read_document(3, 5, 3, part));
  }
}

TEST_CASE("MMIDIDX: large ids use int32, small vocabularies uint16 (Megatron's 65500 rule)") {
  CHECK(token_dtype_for_vocab(256) == TokenDType::uint16);
  CHECK(token_dtype_for_vocab(50257) == TokenDType::uint16);
  CHECK(token_dtype_for_vocab(65500) == TokenDType::int32);
  CHECK(token_dtype_for_vocab(128256) == TokenDType::int32);
  TempDir dir;
  IndexedDatasetWriter w(dir / "x.bin", dir / "x.idx", TokenDType::uint16);
  CHECK_THROWS_WITH_AS(w.add_document(std::vector<int32_t>{70000}), doctest::Contains("does not fit"),
                       std::runtime_error);
}

TEST_CASE("MMIDIDX: broken files are refused with the file and the problem named") {
  TempDir dir;
  const std::string prefix = dir / "ds";
  write_dataset(prefix, {{1, 2, 3, 4}, {5, 6}}, TokenDType::uint16);
  const std::string idx = read_file(prefix + ".idx");
  const std::string bin = read_file(prefix + ".bin");

  SUBCASE("bad magic") {
    std::string bad = idx;
    bad[0] = 'X';
    write_file(prefix + ".idx", bad);
    const std::string err = error_of(prefix);
    CHECK(err.find(prefix + ".idx") != std::string::npos);
    CHECK(err.find("bad magic (not a Megatron MMIDIDX index)") != std::string::npos);
  }
  SUBCASE("bad version") {
    std::string bad = idx;
    bad[9] = 2;
    write_file(prefix + ".idx", bad);
    CHECK(error_of(prefix).find("version 2") != std::string::npos);
  }
  SUBCASE("truncated index") {
    write_file(prefix + ".idx", idx.substr(0, idx.size() - 5));
    const std::string err = error_of(prefix);
    CHECK(err.find(prefix + ".idx") != std::string::npos);
    CHECK(err.find("truncated") != std::string::npos);
  }
  SUBCASE("truncated .bin") {
    write_file(prefix + ".bin", bin.substr(0, 9));
    const std::string err = error_of(prefix);
    CHECK(err.find(prefix + ".bin is 9 bytes but the index needs 12") != std::string::npos);
  }
  SUBCASE("missing .bin") {
    std::filesystem::remove(prefix + ".bin");
    CHECK(error_of(prefix).find(prefix + ".bin") != std::string::npos);
  }
  SUBCASE("garbage counts cannot overflow the size check") {
    std::string bad = idx;
    std::memset(&bad[18], 0xff, 8);
    write_file(prefix + ".idx", bad);
    CHECK(error_of(prefix).find("truncated") != std::string::npos);
  }
}

TEST_SUITE_END();
