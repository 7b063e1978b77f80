#include "dsl/suggest.hpp"
#include "helpers.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;

TEST_CASE("dsl_resolve: edit distance and suggestions") {
  CHECK(edit_distance("num_layer", "num_layers") == 1);
  CHECK(edit_distance("rmsnrom", "rmsnorm") == 1);  // a transposition counts once
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("TP", "tp") == 0);
  const std::vector<std::string> keys = {"num_layers", "hidden_size", "num_attention_heads", "seq_length"};
  CHECK(suggest("num_layer", keys) == std::vector<std::string>{"num_layers"});
  CHECK(suggest("layers", keys) == std::vector<std::string>{"num_layers"});
  CHECK(suggest("qqqqqq", keys).empty());
  CHECK(join_or({"a"}) == "a");
  CHECK(join_or({"a", "b", "c"}) == "a, b or c");
  CHECK(did_you_mean("hiden_size", keys) == "; did you mean hidden_size?");
  CHECK(did_you_mean("zzz", keys).empty());
  // Short words: one edit, not two ("foo" is no typo of "qos"; "tpp" is one of "tp").
  CHECK(suggest("foo", {"qos", "tp"}).empty());
  CHECK(suggest("tpp", {"qos", "tp"}) == std::vector<std::string>{"tp"});
  CHECK(suggest("sed", {"seed"}) == std::vector<std::string>{"seed"});
}

TEST_SUITE_END();
