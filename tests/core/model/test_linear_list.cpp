// The flat linear list (family/linears.hpp): a layer's block linears come from the tensor table's
// weight rows, and what is sized per linear (the Model's FP8 caches, the plan's FP8 shapes) follows
// the list and the table's shard column.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/model/model.hpp"
#include "core/model/param_layout.hpp"
#include "family/linears.hpp"
#include "plan/fp8.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("core/model");

using namespace recipe;
using namespace recipe::core;

TEST_CASE("linear list: GPT and Llama layers hold qkv, proj, fc_in, fc_out, column/row as the table shards them") {
  for (bool llama : {false, true}) {
    CAPTURE(llama);
    const plan::Plan p = llama ? test::llama_tiny_plan() : test::gpt_tiny_plan();
    const ModelShape s = model_shape(p);
    const std::vector<BlockLinear> b = block_linears(s.arch);
    REQUIRE(b.size() == 4);
    CHECK((b[0].role == Role::qkv && b[0].shard == Shard::column && b[0].bit == lora_qkv));
    CHECK((b[1].role == Role::attention_out && b[1].shard == Shard::row && b[1].bit == lora_proj));
    CHECK((b[2].role == Role::mlp_in && b[2].shard == Shard::column && b[2].bit == lora_mlp_in));
    CHECK((b[3].role == Role::mlp_out && b[3].shard == Shard::row && b[3].bit == lora_mlp_out));
    CHECK(std::string(b[2].key) == "fc_in");

    // Layer-major, table order inside a layer; index = position in the list.
    const std::vector<LinearRef> list = linear_list(s.arch, 3, 2);
    REQUIRE(list.size() == 8);
    for (size_t i = 0; i < list.size(); ++i) {
      CHECK(list[i].index == int64_t(i));
      CHECK(list[i].layer == 3 + int(i / b.size()));
      CHECK(list[i].linear.role == b[i % b.size()].role);
    }

    // The features of each linear on a TP rank are its bound weight's local shape.
    for (int tp : {1, 2}) {
      CAPTURE(tp);
      const ParamLayout L = build_param_layout(s, p.optimizer, tp, 0);
      for (const BlockLinear& l : b) {
        int64_t rows = 0, cols = 0;
        for (const ParamSpec* spec : L.bound(l.role, Part::weight, 0)) {
          rows += spec->local_shape[0];
          cols = spec->local_shape[1];
        }
        const LinearFeatures f = linear_features(s.arch, l.role, tp);
        CHECK(f.out == rows);
        CHECK(f.in == cols);
      }
    }

    // The plan's FP8 shapes are the same list, named as fp8.linears names them.
    const std::vector<plan::Fp8LinearShape> shapes = plan::block_linear_shapes(p);
    REQUIRE(shapes.size() == b.size());
    const char* names[] = {"qkv", "proj", "fc1", "fc2"};
    for (size_t i = 0; i < shapes.size(); ++i) {
      CHECK(std::string(shapes[i].name) == names[i]);
      CHECK(shapes[i].bit == b[i].bit);
    }
  }
}

TEST_SUITE_END();
