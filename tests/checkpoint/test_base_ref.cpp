// A checkpoint that refers to a base (metadata.json "base"): the reader serves the base's tensors
// through find/read, lists only its own, and refuses a base that is missing, changed or itself a
// reference, naming both paths.
#include <doctest/doctest.h>

#include <filesystem>
#include <vector>

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

struct Saved {
  RefTensor w = make_ref({6, 10}, DType::f32, 1), a = make_ref({2, 10}, DType::f32, 2);
  std::string base, adapters;
  BaseRef ref;
};

// base: "w" (two ranks); adapters: "a", referring to the base.
Saved save_pair(const TempDir& tmp) {
  Saved s;
  s.base = tmp / "base/step-0";
  std::vector<RankPieces> b(2);
  b[0].add_all("w", s.w, Box{{0, 0}, {3, 10}});
  b[1].add_all("w", s.w, Box{{3, 0}, {3, 10}});
  save_world(s.base, b);
  s.ref = BaseRef{s.base, checkpoint_hash(s.base)};
  s.adapters = tmp / "ckpts/step-5";
  std::vector<RankPieces> a(1);
  a[0].add_all("a", s.a, whole({2, 10}));
  CommitOptions co;
  co.base = s.ref;
  save_world(s.adapters, a, co);
  return s;
}

std::vector<char> read_all(const CheckpointReader& r, const std::string& name, const std::vector<int64_t>& shape) {
  std::vector<char> out(size_t(whole(shape).numel()) * 4);
  r.read(name, whole(shape), DType::f32, out.data());
  return out;
}

}  // namespace

TEST_CASE("a checkpoint with a base reference reads the base's tensors through it and lists only its own") {
  TempDir tmp;
  const Saved s = save_pair(tmp);
  CHECK(s.ref.hash.rfind("crc32:", 0) == 0);
  CHECK(checkpoint_hash(s.base) == s.ref.hash);  // stable: the same bytes, the same hash

  const CheckpointReader r(s.adapters);
  REQUIRE(r.base_ref());
  CHECK(*r.base_ref() == s.ref);
  REQUIRE(r.base());
  CHECK(r.base()->dir() == s.base);
  const std::vector<TensorInfo> own = r.tensors();
  REQUIRE(own.size() == 1);
  CHECK(own[0].name == "a");
  CHECK(r.holds("a"));
  CHECK_FALSE(r.holds("w"));
  REQUIRE(r.find("w"));
  CHECK(r.find("w")->global_shape == std::vector<int64_t>{6, 10});
  CHECK(read_all(r, "w", {6, 10}) == s.w.bytes);
  CHECK(read_all(r, "a", {2, 10}) == s.a.bytes);
  CHECK(r.find("nothing") == nullptr);
  // A plain checkpoint has no reference.
  CHECK(CheckpointReader(s.base).base_ref() == nullptr);
}

TEST_CASE("a missing base is refused naming both checkpoints") {
  TempDir tmp;
  const Saved s = save_pair(tmp);
  fs::rename(tmp / "base", tmp / "moved");
  CHECK_THROWS_WITH_AS(CheckpointReader{s.adapters},
                       contains(s.adapters + " holds only adapters; its base weights are in " + s.base +
                                ", which does not exist: restore that checkpoint"),
                       CheckpointError);
}

TEST_CASE("a base that changed since the reference was made is refused with both hashes") {
  TempDir tmp;
  const Saved s = save_pair(tmp);
  // Another checkpoint saved at the base's path: other values, same names and shapes.
  std::vector<RankPieces> other(1);
  other[0].add_all("w", make_ref({6, 10}, DType::f32, 99), whole({6, 10}));
  save_world(s.base, other);
  const std::string now = checkpoint_hash(s.base);
  CHECK(now != s.ref.hash);
  CHECK_THROWS_WITH_AS(
      CheckpointReader{s.adapters},
      contains(s.adapters + " holds only adapters; its base " + s.base +
               " has changed since they were saved (content hash " + s.ref.hash + " then, " + now + " now"),
      CheckpointError);
}

TEST_CASE("a base that refers to a base itself is refused (no chains or cycles)") {
  TempDir tmp;
  const Saved s = save_pair(tmp);
  // A second adapter checkpoint that names the first (itself a reference) as its base.
  const std::string second = tmp / "ckpts2/step-9";
  std::vector<RankPieces> a(1);
  a[0].add_all("a2", s.a, whole({2, 10}));
  CommitOptions co;
  co.base = BaseRef{s.adapters, checkpoint_hash(s.adapters)};
  save_world(second, a, co);
  CHECK_THROWS_WITH_AS(CheckpointReader{second}, contains("refers to a base itself"), CheckpointError);
}

TEST_SUITE_END();
