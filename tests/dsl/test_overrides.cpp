// Command-line overrides: operators, value typing, lists, origins and errors.
#include <limits>

#include "temp_recipes.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using Json = nlohmann::ordered_json;
using recipe::dsl::test::recipe_error_of;

namespace {

ConfigTree sample() {
  ConfigTree t;
  t.root = Json::parse(R"({
    "model": {"num_layers": 24, "hidden_size": 1024},
    "data": {"split": "98,2,0", "blend": [0.5, "a", 0.5, "b"]},
    "optimizer": {"lr": 0.0003, "weight_decay": 0.1},
    "trainer": {"max_steps": 100, "precision": "bf16", "cuda_graph": true},
    "peft": {"target_modules": ["qkv", "proj"]},
    "experiment": {"name": "x"}
  })");
  t.origins["model.num_layers"] = Origin{"preset:gpt3_345m", 8};
  return t;
}

const Json& at(const ConfigTree& t, const std::string& section, const std::string& key) {
  return t.root.at(section).at(key);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("override = types values by their syntax") {
  ConfigTree t = sample();
  apply_overrides(t,
                  {"model.num_layers=12", "optimizer.lr=1e-4", "optimizer.weight_decay=0", "trainer.cuda_graph=false",
                   "trainer.precision=fp32", "model.new_float=0.5", "model.new_int=-3", "model.new_bool=true",
                   "model.quoted=\"7\"", "model.word=abc", "model.sci=2E3", "model.plus=+4", "model.inf=inf"});
  CHECK(at(t, "model", "num_layers").is_number_integer());
  CHECK(at(t, "model", "num_layers") == 12);
  CHECK(at(t, "optimizer", "lr").is_number_float());
  CHECK(at(t, "optimizer", "lr").get<double>() == doctest::Approx(1e-4));
  // An integer given for a float-valued key stays a float.
  CHECK(at(t, "optimizer", "weight_decay").is_number_float());
  CHECK(at(t, "trainer", "cuda_graph") == false);
  CHECK(at(t, "trainer", "precision") == "fp32");
  CHECK(at(t, "model", "new_float").is_number_float());
  CHECK(at(t, "model", "new_int") == -3);
  CHECK(at(t, "model", "new_bool") == true);
  CHECK(at(t, "model", "quoted") == "7");
  CHECK(at(t, "model", "word") == "abc");
  CHECK(at(t, "model", "sci").get<double>() == doctest::Approx(2000.0));
  CHECK(at(t, "model", "plus") == 4);
  CHECK(at(t, "model", "inf") == "inf");
}

TEST_CASE("override = keeps strings strings and parses lists") {
  ConfigTree t = sample();
  apply_overrides(
      t, {"experiment.name=2024", "data.split=99,1,0", "peft.target_modules=fc1,fc2", "model.list=[1, 2]",
          "model.names=[\"a\", 'b', c]", "model.empty=[]", "data.blend=[1.0, \"only\"]", "experiment.dir=\"\""});
  CHECK(at(t, "experiment", "name") == "2024");
  CHECK(at(t, "data", "split") == "99,1,0");
  CHECK(at(t, "peft", "target_modules") == Json({"fc1", "fc2"}));
  CHECK(at(t, "model", "list") == Json({1, 2}));
  CHECK(at(t, "model", "list")[0].is_number_integer());
  CHECK(at(t, "model", "names") == Json({"a", "b", "c"}));
  CHECK(at(t, "model", "empty") == Json::array());
  CHECK(at(t, "data", "blend") == Json({1.0, "only"}));
  CHECK(at(t, "experiment", "dir") == "");
}

TEST_CASE("override arithmetic") {
  ConfigTree t = sample();
  apply_override(t, "model.num_layers+=2");
  CHECK(at(t, "model", "num_layers") == 26);
  CHECK(at(t, "model", "num_layers").is_number_integer());
  apply_override(t, "model.num_layers-=6");
  CHECK(at(t, "model", "num_layers") == 20);
  apply_override(t, "model.hidden_size*=2");
  CHECK(at(t, "model", "hidden_size") == 2048);
  CHECK(at(t, "model", "hidden_size").is_number_integer());
  apply_override(t, "model.hidden_size/=4");
  CHECK(at(t, "model", "hidden_size") == 512);
  CHECK(at(t, "model", "hidden_size").is_number_integer());
  apply_override(t, "trainer.max_steps/=8");
  CHECK(at(t, "trainer", "max_steps").is_number_float());
  CHECK(at(t, "trainer", "max_steps").get<double>() == doctest::Approx(12.5));
  apply_override(t, "optimizer.lr*=2");
  CHECK(at(t, "optimizer", "lr").get<double>() == doctest::Approx(6e-4));
  apply_override(t, "model.num_layers+=0.5");
  CHECK(at(t, "model", "num_layers").get<double>() == doctest::Approx(20.5));

  CHECK(contains(recipe_error_of([&] { apply_override(t, "optimizer.lr/=0"); }), "division by zero"));
  CHECK(contains(recipe_error_of([&] { apply_override(t, "trainer.precision+=1"); }),
                 "+= needs a number or a list, but trainer.precision is a string"));
  CHECK(contains(recipe_error_of([&] { apply_override(t, "trainer.seed+=1"); }),
                 "trainer.seed is not set by the recipe"));
  CHECK(contains(recipe_error_of([&] { apply_override(t, "optimizer.lr+=abc"); }), "is not a number"));
  t.root["model"]["big"] = std::numeric_limits<std::int64_t>::max();
  CHECK(contains(recipe_error_of([&] { apply_override(t, "model.big+=1"); }), "overflows"));
}

TEST_CASE("override += and -= on lists") {
  ConfigTree t = sample();
  apply_override(t, "peft.target_modules+=fc1");
  CHECK(at(t, "peft", "target_modules") == Json({"qkv", "proj", "fc1"}));
  apply_override(t, "peft.target_modules+=[fc2, x]");
  CHECK(at(t, "peft", "target_modules") == Json({"qkv", "proj", "fc1", "fc2", "x"}));
  apply_override(t, "peft.target_modules-=x");
  CHECK(at(t, "peft", "target_modules") == Json({"qkv", "proj", "fc1", "fc2"}));
  CHECK(contains(recipe_error_of([&] { apply_override(t, "peft.target_modules-=nope"); }), "is not in"));
  CHECK(contains(recipe_error_of([&] { apply_override(t, "peft.target_modules*=2"); }), "is a list"));
}

TEST_CASE("override creates missing tables, keeps unknown keys and records its origin") {
  ConfigTree t = sample();
  apply_override(t, "executor.env.NCCL_DEBUG=INFO");
  CHECK(t.root["executor"]["env"]["NCCL_DEBUG"] == "INFO");
  apply_override(t, "model.hiden_size=5");  // a typo: the resolver reports it with a suggestion
  CHECK(at(t, "model", "hiden_size") == 5);
  apply_override(t, "model.num_layers=4");
  CHECK(t.origins.at("model.num_layers").file == "override");
  CHECK(t.origins.at("model.num_layers").str() == "override `model.num_layers=4`");
  CHECK(t.origins.at("executor.env.NCCL_DEBUG").str() == "override `executor.env.NCCL_DEBUG=INFO`");

  // Replacing a whole section drops the origins of what it held.
  apply_override(t, "model=small");
  CHECK(t.root["model"] == "small");
  CHECK(t.origins.count("model.num_layers") == 0);
  CHECK(t.origins.at("model").str() == "override `model=small`");
}

TEST_CASE("malformed overrides name the override and the expected form") {
  for (const std::string bad : {"=5", "a..b=1", "trainer.max_steps", "a b=1", ".a=1", "a.=1", "+=3"}) {
    CAPTURE(bad);
    ConfigTree t = sample();
    const std::string before = t.root.dump();
    std::string msg = recipe_error_of([&] { apply_override(t, bad); });
    CHECK(contains(msg, "override `" + bad + "`"));
    CHECK(contains(msg, "expected key.path=value"));
    CHECK(t.root.dump() == before);
  }
  ConfigTree t = sample();
  const std::string before = t.root.dump();
  CHECK(contains(recipe_error_of([&] { apply_override(t, "model.num_layers.x=1"); }),
                 "model.num_layers is a number (24), not a table"));
  CHECK(contains(recipe_error_of([&] { apply_override(t, "model.num_layers="); }), "no value after '='"));
  CHECK(contains(recipe_error_of([&] { apply_override(t, "newsection.key+=1"); }), "not set by the recipe"));
  CHECK(t.root.dump() == before);  // failed overrides change nothing
}

TEST_CASE("overrides apply in order on a loaded preset") {
  ConfigTree t = load_recipe("gpt_tiny");
  apply_overrides(t, {"trainer.max_steps=10", "trainer.max_steps*=3", "parallelism.tp=2"});
  CHECK(t.root["trainer"]["max_steps"] == 30);
  CHECK(t.root["parallelism"]["tp"] == 2);
  CHECK(t.origins.at("trainer.max_steps").str() == "override `trainer.max_steps*=3`");
  // New sections take their canonical place (parallelism before experiment).
  std::vector<std::string> keys;
  for (const auto& [k, v] : t.root.items()) keys.push_back(k);
  CHECK(keys ==
        std::vector<std::string>{"model", "data", "optimizer", "schedule", "trainer", "parallelism", "experiment"});
}

TEST_SUITE_END();
