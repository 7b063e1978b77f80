// The `latest` pointer, keep_last pruning in numeric step order, re-saving a step, find_checkpoint.
#include <doctest/doctest.h>

#include <filesystem>

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

// Saves a one-tensor checkpoint of `step` under `ckpts` whose values derive from `seed`.
RefTensor save_step(const std::string& ckpts, int64_t step, int keep_last, uint32_t seed) {
  RefTensor v = make_ref({8}, DType::f32, seed);
  std::vector<RankPieces> ranks(2);
  ranks[0].add("v", v, whole({8}), 0, 3);
  ranks[1].add("v", v, whole({8}), 3, 8);
  CommitOptions opts;
  opts.keep_last = keep_last;
  opts.common = {{"step", step}};
  save_world(ckpts + "/" + step_dir_name(step), ranks, opts);
  return v;
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("step and staging directory names") {
  CHECK(step_dir_name(20) == "step-20");
  CHECK(step_dir_name(0) == "step-0");
  CHECK(staging_dir_of("/runs/a/checkpoints/step-20") == "/runs/a/checkpoints/step-20.partial");
}

TEST_CASE("latest points at the newest commit; keep_last prunes by step number, not name") {
  TempDir tmp;
  const std::string ckpts = tmp / "run/checkpoints";
  save_step(ckpts, 2, 0, 1);
  save_step(ckpts, 9, 0, 2);
  save_step(ckpts, 10, 0, 3);
  CHECK(read_file(ckpts + "/latest") == "step-10\n");
  fs::create_directories(ckpts + "/step-3.partial");  // someone else's unfinished save: left alone
  fs::create_directories(ckpts + "/notes");
  CHECK(entries(ckpts) == std::vector<std::string>{"latest", "notes", "step-10", "step-2", "step-3.partial", "step-9"});

  RefTensor v11 = save_step(ckpts, 11, 2, 4);
  // Lexically step-9 and step-2 sort last; numerically the newest two are 10 and 11.
  CHECK(entries(ckpts) == std::vector<std::string>{"latest", "notes", "step-10", "step-11", "step-3.partial"});
  CHECK(read_file(ckpts + "/latest") == "step-11\n");
  CHECK(find_checkpoint(tmp / "run") == ckpts + "/step-11");

  SUBCASE("re-saving an existing step replaces it") {
    RefTensor again = save_step(ckpts, 11, 2, 5);
    CHECK(again.bytes != v11.bytes);
    CHECK(entries(ckpts) == std::vector<std::string>{"latest", "notes", "step-10", "step-11", "step-3.partial"});
    CheckpointReader r(ckpts + "/step-11");
    std::vector<char> out(32);
    r.read("v", whole({8}), DType::f32, out.data());
    CHECK(out == again.bytes);
  }
  SUBCASE("the checkpoint just written is never pruned, even when older than the kept ones") {
    save_step(ckpts, 1, 1, 6);
    CHECK(entries(ckpts) == std::vector<std::string>{"latest", "notes", "step-1", "step-11", "step-3.partial"});
    CHECK(read_file(ckpts + "/latest") == "step-1\n");
  }
}

// issue 35 item 13: keep_last deleted a user's own `step-3/` folder in checkpoint.dir.
TEST_CASE("keep_last prunes only checkpoints this engine committed; a same-named folder is never replaced") {
  TempDir tmp;
  const std::string ckpts = tmp / "checkpoints";
  fs::create_directories(ckpts + "/step-1");
  write_file(ckpts + "/step-1/notes.txt", "mine");
  fs::create_directories(ckpts + "/step-2");  // looks like one, but its metadata is not ours
  write_file(ckpts + "/step-2/common.json", "{}");
  write_file(ckpts + "/step-2/metadata.json", "{\"format\": \"something-else\"}");
  fs::create_directories(tmp / "elsewhere");
  write_file(tmp / "elsewhere/data.txt", "keep");
  save_step(tmp / "elsewhere", 4, 0, 9);
  fs::create_directory_symlink(tmp / "elsewhere/step-4", ckpts + "/step-4");  // a link: not ours either
  save_step(ckpts, 5, 0, 1);
  save_step(ckpts, 6, 0, 2);
  save_step(ckpts, 7, 1, 3);
  CHECK(entries(ckpts) == std::vector<std::string>{"latest", "step-1", "step-2", "step-4", "step-7"});
  CHECK(read_file(ckpts + "/step-1/notes.txt") == "mine");
  CHECK(fs::exists(tmp / "elsewhere/step-4/metadata.json"));

  // Saving step 1 would replace the user's folder: refused, the folder intact.
  CHECK_THROWS_WITH_AS(save_step(ckpts, 1, 1, 4), doctest::Contains("not a checkpoint this engine committed"),
                       CheckpointError);
  CHECK(read_file(ckpts + "/step-1/notes.txt") == "mine");
}

TEST_CASE("find_checkpoint resolves run dirs, checkpoints dirs and checkpoints") {
  TempDir tmp;
  const std::string run = tmp / "run", ckpts = run + "/checkpoints";
  fs::create_directories(run);

  SUBCASE("nothing saved yet: empty run dir and empty checkpoints dir give \"\"") {
    CHECK(find_checkpoint(run) == "");
    fs::create_directories(ckpts);
    CHECK(find_checkpoint(run) == "");
    CHECK(find_checkpoint(ckpts) == "");
    fs::create_directories(ckpts + "/step-4.partial");  // a staging dir is never picked
    write_file(ckpts + "/step-4.partial/shard-0.json", "{}");
    CHECK(find_checkpoint(run) == "");
  }
  SUBCASE("run dir, checkpoints dir and checkpoint dir") {
    save_step(ckpts, 5, 0, 1);
    save_step(ckpts, 7, 0, 2);
    CHECK(find_checkpoint(run) == ckpts + "/step-7");
    CHECK(find_checkpoint(ckpts) == ckpts + "/step-7");
    CHECK(find_checkpoint(ckpts + "/step-5") == ckpts + "/step-5");
    CheckpointReader r(find_checkpoint(run));
    CHECK(r.common().at("step") == 7);
  }
  SUBCASE("a committed checkpoint whose `latest` was never written is still found") {
    save_step(ckpts, 5, 0, 1);
    fs::remove(ckpts + "/latest");
    CHECK(find_checkpoint(run) == ckpts + "/step-5");
  }
  SUBCASE("nonexistent path") {
    CHECK_THROWS_WITH_AS(find_checkpoint(tmp / "missing"), contains("missing: does not exist"), CheckpointError);
  }
  SUBCASE("latest naming a missing directory names both") {
    save_step(ckpts, 5, 0, 1);
    write_file(ckpts + "/latest", "step-6\n");
    CHECK_THROWS_WITH_AS(find_checkpoint(run),
                         contains(ckpts + "/latest names \"step-6\", but " + ckpts + "/step-6 does not exist"),
                         CheckpointError);
  }
  SUBCASE("latest naming a partial checkpoint") {
    save_step(ckpts, 5, 0, 1);
    fs::remove(ckpts + "/step-5/metadata.json");
    CHECK_THROWS_WITH_AS(find_checkpoint(ckpts), contains("partial checkpoint (no metadata.json)"), CheckpointError);
  }
  SUBCASE("a directory of shard files without metadata.json") {
    fs::create_directories(run + "/odd");
    write_file(run + "/odd/shard-0.safetensors", "x");
    CHECK_THROWS_WITH_AS(find_checkpoint(run + "/odd"), contains("partial checkpoint (no metadata.json)"),
                         CheckpointError);
  }
}

TEST_SUITE_END();
