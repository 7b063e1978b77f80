// Saving from one layout of ranks and reading back any region: bit-exact, with dtype conversion.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "checkpoint/checkpoint.hpp"
#include "kernels/tensor.hpp"
#include "tests/checkpoint/ckpt_test_util.hpp"
#include "tests/core/data/temp_dir.hpp"

TEST_SUITE_BEGIN("checkpoint");

using namespace recipe::ckpt;
using namespace recipe::ckpt::testing;
using recipe::data::testing::TempDir;

namespace {

struct World {
  std::map<std::string, RefTensor> refs;
  std::vector<RankPieces> ranks;
};

// Four ranks, each tensor saved in a different layout:
//   w  [6,10] F32   rows split between ranks 0 and 1 (TP-style)
//   b  [10]   F32   replicated, written by rank 0 only
//   m  [5,7]  F32   ZeRO-style flat runs cutting mid-row across ranks 1, 2, 3
//   e  [4,6]  BF16  columns split between ranks 2 and 3
//   t  [3,4,5] F32  a TP shard (cols 0-1) saved as two flat runs by ranks 0 and 1, the rest by rank 2
//   s  []     F32   a scalar, rank 3
//   z  [0,4]  F32   no elements: rank 0 declares it with an empty run
World make_world() {
  World w;
  w.refs["w"] = make_ref({6, 10}, DType::f32, 1);
  w.refs["b"] = make_ref({10}, DType::f32, 2);
  w.refs["m"] = make_ref({5, 7}, DType::f32, 3);
  w.refs["e"] = make_ref({4, 6}, DType::bf16, 4);
  w.refs["t"] = make_ref({3, 4, 5}, DType::f32, 5);
  w.refs["s"] = make_ref({}, DType::f32, 6);
  w.refs["z"] = make_ref({0, 4}, DType::f32, 7);
  w.ranks.resize(4);
  auto& R = w.refs;
  w.ranks[0].add_all("w", R["w"], Box{{0, 0}, {3, 10}});
  w.ranks[1].add_all("w", R["w"], Box{{3, 0}, {3, 10}});
  w.ranks[0].add_all("b", R["b"], whole({10}));
  w.ranks[1].add("m", R["m"], whole({5, 7}), 0, 12);
  w.ranks[2].add("m", R["m"], whole({5, 7}), 12, 29);
  w.ranks[3].add("m", R["m"], whole({5, 7}), 29, 35);
  w.ranks[2].add_all("e", R["e"], Box{{0, 0}, {4, 3}});
  w.ranks[3].add_all("e", R["e"], Box{{0, 3}, {4, 3}});
  const Box tp_shard{{0, 0, 0}, {3, 4, 2}};
  w.ranks[0].add("t", R["t"], tp_shard, 0, 11);
  w.ranks[1].add("t", R["t"], tp_shard, 11, 24);
  w.ranks[2].add_all("t", R["t"], Box{{0, 0, 2}, {3, 4, 3}});
  w.ranks[3].add_all("s", R["s"], whole({}));
  w.ranks[0].add_all("z", R["z"], whole({0, 4}));
  return w;
}

std::vector<char> read_bytes(const CheckpointReader& r, const std::string& name, const Box& region, DType dtype) {
  std::vector<char> out(static_cast<size_t>(region.numel()) * dtype_size(dtype), '\x5a');
  r.read(name, region, dtype, out.data());
  return out;
}

Box random_region(const std::vector<int64_t>& shape, std::mt19937& rng) {
  Box b;
  for (int64_t s : shape) {
    int64_t lo = rng() % s, hi = rng() % s;
    if (lo > hi) std::swap(lo, hi);
    b.offsets.push_back(lo);
    b.sizes.push_back(hi - lo + 1);
  }
  return b;
}

}  // namespace

TEST_CASE("checkpoint round trip: 4 ranks, mixed layouts, any region reads back bit-exact") {
  TempDir tmp;
  World w = make_world();
  const std::string final_dir = tmp / "checkpoints/step-20";
  CommitOptions opts;
  opts.common = {{"step", 20}, {"consumed_samples", 640}};
  opts.plan_toml = "[model]\nlayers = 2\n";
  save_world(final_dir, w.ranks, opts);

  CHECK(std::filesystem::exists(final_dir + "/metadata.json"));
  CHECK_FALSE(std::filesystem::exists(staging_dir_of(final_dir)));
  CHECK(recipe::data::testing::read_file(tmp / "checkpoints/latest") == "step-20\n");

  CheckpointReader r(final_dir);
  CHECK(r.common().at("step") == 20);
  CHECK(r.common().at("consumed_samples") == 640);
  CHECK(r.plan_toml() == opts.plan_toml);
  auto infos = r.tensors();
  REQUIRE(infos.size() == 7);
  CHECK(infos[0].name == "b");
  CHECK(infos[5].name == "w");
  CHECK(infos[6].global_shape == std::vector<int64_t>{0, 4});
  REQUIRE(r.find("e") != nullptr);
  CHECK(r.find("e")->dtype == DType::bf16);
  CHECK(r.find("t")->global_shape == std::vector<int64_t>{3, 4, 5});
  CHECK(r.find("nope") == nullptr);

  SUBCASE("whole tensors") {
    for (const auto& [name, ref] : w.refs) {
      CAPTURE(name);
      CHECK(read_bytes(r, name, whole(ref.shape), ref.dtype) == ref.bytes);
    }
  }
  SUBCASE("column slices, row slices, single elements, boxes straddling chunks") {
    const RefTensor& W = w.refs["w"];
    for (Box b : {Box{{0, 4}, {6, 3}}, Box{{2, 0}, {3, 10}}, Box{{4, 9}, {1, 1}}, Box{{1, 2}, {4, 5}}}) {
      CAPTURE(b.offsets);
      CHECK(read_bytes(r, "w", b, DType::f32) == slice(W, b));
    }
    const RefTensor& M = w.refs["m"];  // chunk edges at flat 12 (row 1 col 5) and 29 (row 4 col 1)
    for (Box b : {Box{{1, 4}, {3, 3}}, Box{{0, 6}, {5, 1}}, Box{{4, 1}, {1, 1}}, Box{{1, 0}, {4, 7}}}) {
      CAPTURE(b.offsets);
      CHECK(read_bytes(r, "m", b, DType::f32) == slice(M, b));
    }
    const RefTensor& T = w.refs["t"];
    Box straddle{{1, 1, 1}, {2, 3, 3}};
    CHECK(read_bytes(r, "t", straddle, DType::f32) == slice(T, straddle));
    CHECK(read_bytes(r, "b", Box{{3}, {4}}, DType::f32) == slice(w.refs["b"], Box{{3}, {4}}));
  }
  SUBCASE("random regions of every tensor") {
    std::mt19937 rng(99);
    for (const auto& [name, ref] : w.refs) {
      if (ref.numel() == 0) continue;
      for (int i = 0; i < 40; ++i) {
        Box b = random_region(ref.shape, rng);
        CAPTURE(name);
        CAPTURE(b.offsets);
        CAPTURE(b.sizes);
        CHECK(read_bytes(r, name, b, ref.dtype) == slice(ref, b));
      }
    }
  }
  SUBCASE("F32 stored, BF16 read: round to nearest even like kernels::f32_to_bf16") {
    const RefTensor& W = w.refs["w"];
    Box b{{1, 3}, {4, 6}};
    std::vector<char> got = read_bytes(r, "w", b, DType::bf16);
    std::vector<char> src = slice(W, b);
    for (int64_t i = 0; i < b.numel(); ++i) {
      float f;
      std::memcpy(&f, src.data() + 4 * i, 4);
      uint16_t expect = recipe::kernels::f32_to_bf16(f), h;
      std::memcpy(&h, got.data() + 2 * i, 2);
      CHECK(h == expect);
    }
  }
  SUBCASE("BF16 stored, F32 read: exact widening") {
    const RefTensor& E = w.refs["e"];
    Box b{{1, 1}, {3, 4}};
    std::vector<char> got = read_bytes(r, "e", b, DType::f32);
    std::vector<char> src = slice(E, b);
    for (int64_t i = 0; i < b.numel(); ++i) {
      uint16_t h;
      std::memcpy(&h, src.data() + 2 * i, 2);
      float f;
      std::memcpy(&f, got.data() + 4 * i, 4);
      CHECK(f == recipe::kernels::bf16_to_f32(h));
    }
  }
  SUBCASE("reading a different layout than was saved: rank-sized row blocks of m") {
    const RefTensor& M = w.refs["m"];
    for (int64_t row = 0; row < 5; ++row) {
      Box b{{row, 0}, {1, 7}};
      CHECK(read_bytes(r, "m", b, DType::f32) == slice(M, b));
    }
  }
  SUBCASE("refusals of read: unknown tensor, region outside the tensor, wrong rank") {
    std::vector<char> buf(1024);
    CHECK_THROWS_WITH_AS(r.read("nope", Box{{0}, {1}}, DType::f32, buf.data()), contains("has no tensor \"nope\""),
                         CheckpointError);
    CHECK_THROWS_WITH_AS(r.read("w", Box{{5, 0}, {2, 10}}, DType::f32, buf.data()), contains("lies outside"),
                         CheckpointError);
    CHECK_THROWS_AS(r.read("w", Box{{0}, {6}}, DType::f32, buf.data()), CheckpointError);
  }
}

TEST_CASE("checkpoint shard files are plain safetensors") {
  TempDir tmp;
  RefTensor w = make_ref({6, 10}, DType::f32, 7);
  std::vector<RankPieces> ranks(2);
  ranks[0].add("w", w, whole({6, 10}), 0, 25);  // rows 0-1 and half of row 2
  // rank 1 owns nothing yet still writes its (empty) shard
  ranks[0].add("w", w, whole({6, 10}), 25, 60);
  save_world(tmp / "step-1", ranks);

  std::string bytes = recipe::data::testing::read_file(tmp / "step-1/shard-0.safetensors");
  REQUIRE(bytes.size() > 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK(n % 8 == 0);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  // Run [0, 25) → rows 0-1 + row 2 cols 0-4; run [25, 60) → row 2 cols 5-9 + rows 3-5.
  REQUIRE(header.contains("w#0"));
  CHECK(header["w#0"]["dtype"] == "F32");
  CHECK(header["w#0"]["shape"] == nlohmann::json::array({2, 10}));
  CHECK(header["w#0"]["data_offsets"] == nlohmann::json::array({0, 80}));
  CHECK(header["w#1"]["shape"] == nlohmann::json::array({1, 5}));
  CHECK(header["w#3"]["shape"] == nlohmann::json::array({3, 10}));
  CHECK(header["w#3"]["data_offsets"] == nlohmann::json::array({120, 240}));
  CHECK(header.contains("__metadata__"));
  CHECK(bytes.size() == 8 + n + 240);
  // The first chunk's bytes are the first 20 elements of w.
  CHECK(std::memcmp(bytes.data() + 8 + n, w.bytes.data(), 80) == 0);

  auto meta = nlohmann::json::parse(recipe::data::testing::read_file(tmp / "step-1/metadata.json"));
  CHECK(meta["format"] == "recipe-checkpoint");
  CHECK(meta["version"] == 1);
  CHECK(meta["world_size"] == 2);
  CHECK(meta["tensors"]["w"]["global_shape"] == nlohmann::json::array({6, 10}));
  CHECK(meta["tensors"]["w"]["chunks"].size() == 4);
  CHECK(meta["files"]["shard-1.safetensors"]["size"].get<uint64_t>() > 0);
  // The shard indexes were merged into metadata.json and are gone.
  CHECK_FALSE(std::filesystem::exists(tmp / "step-1/shard-0.json"));
  CHECK(std::filesystem::exists(tmp / "step-1/common.json"));
  CHECK(std::filesystem::exists(tmp / "step-1/plan.toml"));

  CheckpointReader r(tmp / "step-1");
  std::vector<char> out(240);
  r.read("w", whole({6, 10}), DType::f32, out.data());
  CHECK(out == w.bytes);
}

TEST_CASE("checkpoint round trip of a 3M-element tensor split mid-row (streamed writes)") {
  TempDir tmp;
  RefTensor big = make_ref({3000, 1000}, DType::f32, 11);
  std::vector<RankPieces> ranks(3);
  ranks[0].add("big", big, whole(big.shape), 0, 1'234'567);
  ranks[1].add("big", big, whole(big.shape), 1'234'567, 2'500'001);
  ranks[2].add("big", big, whole(big.shape), 2'500'001, 3'000'000);
  save_world(tmp / "step-5", ranks);
  CheckpointReader r(tmp / "step-5");
  CHECK(read_bytes(r, "big", whole(big.shape), DType::f32) == big.bytes);
  Box cols{{0, 500}, {3000, 7}};
  CHECK(read_bytes(r, "big", cols, DType::f32) == slice(big, cols));
  Box across{{1234, 560}, {2, 20}};  // around the cut at flat 1'234'567 (row 1234, col 567)
  CHECK(read_bytes(r, "big", across, DType::f32) == slice(big, across));
}

TEST_CASE("write_shard reports I/O failures with the path") {
  TempDir tmp;
  recipe::data::testing::write_file(tmp / "a_file", "x");
  RefTensor b = make_ref({4}, DType::f32, 1);
  RankPieces rp;
  rp.add_all("b", b, whole({4}));
  CHECK_THROWS_WITH_AS(write_shard(tmp / "a_file/staging", 0, rp.pieces), contains("a_file/staging"), CheckpointError);
}

TEST_CASE("write_shard refuses pieces that do not fit their tensor") {
  TempDir tmp;
  RefTensor w = make_ref({6, 10}, DType::f32, 1);
  RankPieces rp;
  rp.add_all("w", w, Box{{0, 0}, {3, 10}});
  SUBCASE("held box outside the global shape") {
    rp.pieces[0].held = Box{{4, 0}, {3, 10}};
    CHECK_THROWS_WITH_AS(write_shard(tmp / "s", 0, rp.pieces), contains("not inside the global shape"),
                         CheckpointError);
  }
  SUBCASE("run beyond the held box") {
    rp.pieces[0].flat_end = 31;
    CHECK_THROWS_WITH_AS(write_shard(tmp / "s", 0, rp.pieces), contains("is not inside the 30 elements"),
                         CheckpointError);
  }
  SUBCASE("null data") {
    rp.pieces[0].data = nullptr;
    CHECK_THROWS_WITH_AS(write_shard(tmp / "s", 0, rp.pieces), contains("data is null"), CheckpointError);
  }
}

TEST_CASE("shard files put wider dtypes first so every chunk is aligned to its element size") {
  TempDir tmp;
  RefTensor e = make_ref({3}, DType::bf16, 1), w = make_ref({2, 5}, DType::f32, 2);
  std::vector<RankPieces> ranks(1);
  ranks[0].add_all("e", e, whole({3}));  // 6 bytes: would misalign what follows
  ranks[0].add_all("w", w, whole({2, 5}));
  save_world(tmp / "step-1", ranks);
  auto meta = nlohmann::json::parse(recipe::data::testing::read_file(tmp / "step-1/metadata.json"));
  const uint64_t w_offset = meta["tensors"]["w"]["chunks"][0]["offset"].get<uint64_t>();
  const uint64_t e_offset = meta["tensors"]["e"]["chunks"][0]["offset"].get<uint64_t>();
  CHECK(w_offset % 8 == 0);
  CHECK(e_offset == w_offset + 40);
  CheckpointReader r(tmp / "step-1");
  CHECK(read_bytes(r, "e", whole({3}), DType::bf16) == e.bytes);
  CHECK(read_bytes(r, "w", whole({2, 5}), DType::f32) == w.bytes);
}

TEST_SUITE_END();
