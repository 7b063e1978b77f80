// Commit refuses inconsistent saves; the reader refuses partial or corrupt checkpoints, naming the file.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/checkpoint.hpp"
#include "tests/checkpoint/ckpt_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("checkpoint");

using namespace recipe::ckpt;
using namespace recipe::ckpt::testing;
using recipe::data::testing::read_file;
using recipe::data::testing::TempDir;
using recipe::data::testing::write_file;
namespace fs = std::filesystem;

namespace {

// Two ranks saving w [6,10] by rows and b [10] from rank 1.
std::vector<RankPieces> good_ranks(const RefTensor& w, const RefTensor& b) {
  std::vector<RankPieces> ranks(2);
  ranks[0].add_all("w", w, Box{{0, 0}, {3, 10}});
  ranks[1].add_all("w", w, Box{{3, 0}, {3, 10}});
  ranks[1].add_all("b", b, whole({10}));
  return ranks;
}

void expect_commit_refused(const TempDir& tmp, std::vector<RankPieces>& ranks, const std::string& needle,
                           int world_size = 0) {
  const std::string final_dir = tmp / "ckpts/step-3";
  const std::string staging = staging_dir_of(final_dir);
  for (size_t r = 0; r < ranks.size(); ++r) write_shard(staging, static_cast<int>(r), ranks[r].pieces);
  CommitOptions opts;
  opts.world_size = world_size ? world_size : static_cast<int>(ranks.size());
  CHECK_THROWS_WITH_AS(commit(staging, final_dir, opts), contains(needle), CheckpointError);
  // Nothing was published.
  CHECK_FALSE(fs::exists(final_dir));
  CHECK_FALSE(fs::exists(tmp / "ckpts/latest"));
  CHECK_FALSE(fs::exists(staging + "/metadata.json"));
}

void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

}  // namespace

TEST_CASE("commit refuses inconsistent saves") {
  TempDir tmp;
  RefTensor w = make_ref({6, 10}, DType::f32, 1), b = make_ref({10}, DType::f32, 2);
  auto ranks = good_ranks(w, b);

  SUBCASE("a missing shard") { expect_commit_refused(tmp, ranks, "shard-2.json: missing shard of rank 2", 3); }
  SUBCASE("overlapping chunks") {
    ranks[0].add_all("b", b, whole({10}));  // b saved by both ranks
    expect_commit_refused(tmp, ranks, "chunks overlap");
  }
  SUBCASE("overlap of flat runs cutting mid-row") {
    RefTensor m = make_ref({5, 7}, DType::f32, 3);
    ranks[0].add("m", m, whole({5, 7}), 0, 13);
    ranks[1].add("m", m, whole({5, 7}), 12, 35);
    expect_commit_refused(tmp, ranks, "tensor \"m\" [5, 7]: chunks overlap");
  }
  SUBCASE("an uncovered tensor") {
    ranks[1].pieces.erase(ranks[1].pieces.begin());  // rows 3-5 of w never saved
    expect_commit_refused(tmp, ranks, "tensor \"w\" [6, 10]: the saved chunks hold 30 of its 60 elements");
  }
  SUBCASE("shapes of one name disagree") {
    ranks[1].pieces[0].global_shape = {6, 11};
    ranks[1].pieces[0].held = Box{{3, 0}, {3, 10}};
    expect_commit_refused(tmp, ranks, "disagree");
  }
  SUBCASE("dtypes of one name disagree") {
    ranks[1].pieces[0].dtype = DType::bf16;
    expect_commit_refused(tmp, ranks, "F32 but shard-1.safetensors as [6, 10] BF16");
  }
}

TEST_CASE("commit refuses a shard file whose size does not match its index") {
  TempDir tmp;
  RefTensor w = make_ref({6, 10}, DType::f32, 1), b = make_ref({10}, DType::f32, 2);
  auto ranks = good_ranks(w, b);
  const std::string final_dir = tmp / "step-1", staging = staging_dir_of(final_dir);
  for (size_t r = 0; r < ranks.size(); ++r) write_shard(staging, static_cast<int>(r), ranks[r].pieces);
  fs::resize_file(staging + "/shard-1.safetensors", 100);
  CommitOptions opts;
  opts.world_size = 2;
  CHECK_THROWS_WITH_AS(commit(staging, final_dir, opts), contains("shard-1.safetensors: 100 bytes"), CheckpointError);
}

TEST_CASE("checkpoint reader refuses partial or corrupt checkpoints, naming the file") {
  TempDir tmp;
  RefTensor w = make_ref({6, 10}, DType::f32, 1), b = make_ref({10}, DType::f32, 2);
  auto ranks = good_ranks(w, b);
  const std::string dir = tmp / "step-20";
  save_world(dir, ranks);
  const std::string shard1 = dir + "/shard-1.safetensors";
  REQUIRE_NOTHROW(CheckpointReader{dir});

  SUBCASE("truncated shard file") {
    const auto size = fs::file_size(shard1);
    fs::resize_file(shard1, 100);
    CHECK_THROWS_WITH_AS(CheckpointReader{dir},
                         contains(shard1 + ": truncated: 100 bytes, metadata expects " + std::to_string(size)),
                         CheckpointError);
  }
  SUBCASE("missing shard file") {
    fs::remove(shard1);
    CHECK_THROWS_WITH_AS(CheckpointReader{dir}, contains(shard1 + ": missing shard file"), CheckpointError);
  }
  SUBCASE("a flipped byte in a chunk is caught by its CRC when read") {
    auto meta = nlohmann::json::parse(read_file(dir + "/metadata.json"));
    nlohmann::json flipped;
    for (const auto& c : meta["tensors"]["w"]["chunks"])
      if (c["file"] == "shard-1.safetensors") flipped = c;
    REQUIRE(flipped.is_object());
    flip_byte(shard1, flipped["offset"].get<uint64_t>() + 17);
    CheckpointReader r(dir);  // opening checks structure only
    std::vector<float> out(60);
    // Rows 0-2 live in shard-0: still readable.
    CHECK_NOTHROW(r.read("w", Box{{0, 0}, {3, 10}}, DType::f32, out.data()));
    CHECK_THROWS_WITH_AS(r.read("w", Box{{2, 0}, {2, 10}}, DType::f32, out.data()),
                         contains(shard1 + ": chunk \"w#0\" of tensor \"w\""), CheckpointError);
    CHECK_THROWS_WITH_AS(r.read("w", Box{{5, 9}, {1, 1}}, DType::f32, out.data()), contains("CRC32"), CheckpointError);
  }
  SUBCASE("corrupt safetensors header JSON") {
    flip_byte(shard1, 8);  // the header's opening brace
    CHECK_THROWS_WITH_AS(CheckpointReader{dir}, contains(shard1 + ": corrupt safetensors header"), CheckpointError);
  }
  SUBCASE("corrupt safetensors header length") {
    flip_byte(shard1, 6);  // a high byte of the length prefix
    CHECK_THROWS_WITH_AS(CheckpointReader{dir}, contains(shard1 + ": corrupt safetensors header: header length"),
                         CheckpointError);
  }
  SUBCASE("missing metadata.json: a partial checkpoint") {
    fs::remove(dir + "/metadata.json");
    CHECK_THROWS_WITH_AS(CheckpointReader{dir}, contains("partial checkpoint (no metadata.json): " + dir),
                         CheckpointError);
    CHECK_THROWS_WITH_AS(find_checkpoint(dir), contains("partial checkpoint"), CheckpointError);
  }
  SUBCASE("metadata.json that does not parse") {
    write_file(dir + "/metadata.json", "{\"format\": ");
    CHECK_THROWS_WITH_AS(CheckpointReader{dir}, contains(dir + "/metadata.json: does not parse"), CheckpointError);
  }
  SUBCASE("metadata disagreeing with the shard header") {
    auto meta = nlohmann::json::parse(read_file(dir + "/metadata.json"));
    for (auto& c : meta["tensors"]["b"]["chunks"]) c["key"] = "b#7";
    write_file(dir + "/metadata.json", meta.dump());
    CHECK_THROWS_WITH_AS(CheckpointReader{dir}, contains(shard1 + ": chunk \"b#7\" of tensor \"b\""), CheckpointError);
  }
  SUBCASE("not a checkpoint directory at all") {
    CHECK_THROWS_WITH_AS(CheckpointReader{tmp / "nowhere"}, contains("no such checkpoint directory"), CheckpointError);
  }
}

TEST_SUITE_END();
