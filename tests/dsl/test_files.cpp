// The resolver's file checks (dsl/resolve_files.cpp): what a plan names on disk is checked before any
// run dir or process exists, every problem at once, and the plan's paths come back absolute.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/data/indexed_dataset.hpp"
#include "family/tensor_table.hpp"
#include "plan/model_size.hpp"
#include "helpers.hpp"
#include "temp_recipes.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;
namespace fs = std::filesystem;

namespace {

// `docs` documents of `len` byte tokens each, written by the core's writer (so the resolver's
// minimal header parsing is checked against the real format).
std::string write_dataset(const TempRecipes& dir, const std::string& name, int docs, int len) {
  std::string prefix = dir.dir() + "/" + name;
  recipe::data::IndexedDatasetWriter w(prefix + ".bin", prefix + ".idx", recipe::data::TokenDType::uint16);
  std::vector<int32_t> doc(static_cast<size_t>(len), 65);
  for (int d = 0; d < docs; ++d) w.add_document(doc);
  w.finish();
  return prefix;
}

json indexed(const std::string& prefix, int eval_interval = 0) {
  return with(tiny_gpt(),
              {{"data", {{"kind", "indexed"}, {"path", prefix}}}, {"trainer", {{"eval_interval", eval_interval}}}});
}

bool mentions(const Violation* v, const std::string& needle) {
  return v != nullptr && (v->message + " " + v->fix).find(needle) != std::string::npos;
}

// The metadata.json of a checkpoint of the model `tree` resolves to, as the core writes it (the
// tensor names and global shapes the resolver compares; chunks left out), with `changed` tensors'
// shapes replaced.
std::string checkpoint_metadata(const json& tree, const std::map<std::string, std::vector<int64_t>>& changed = {}) {
  const auto r = resolve_json(tree);
  const recipe::core::ArchShape s = recipe::plan::model_table_shape(r.plan.model);
  json tensors = json::object();
  for (const recipe::core::TensorDecl& d : recipe::core::tensor_table(s)) {
    if (!recipe::core::present(d, s)) continue;
    const std::vector<int64_t> shape = recipe::core::global_shape(d, s);
    for (int l = 0; l < (d.scope == recipe::core::Scope::layer ? s.layers : 1); ++l) {
      const std::string name = recipe::core::tensor_name(d, d.scope == recipe::core::Scope::layer ? l : -1);
      tensors[name] = {{"global_shape", changed.count(name) ? changed.at(name) : shape}, {"dtype", "F32"}};
    }
  }
  return json{{"format", "recipe-checkpoint"}, {"tensors", tensors}}.dump();
}

// Runs `f` with the working directory set to `dir`.
template <class F>
void in_dir(const std::string& dir, F f) {
  const fs::path old = fs::current_path();
  fs::current_path(dir);
  f();
  fs::current_path(old);
}

}  // namespace

TEST_CASE("files: a dataset prefix without .bin/.idx is refused before launch, with the prepare command") {
  TempRecipes dir;
  const auto r = resolve_json(indexed(dir.dir() + "/wiki_text"));
  const Violation* v = find_violation(r, "data.path");
  REQUIRE(v != nullptr);
  CHECK(mentions(v, dir.dir() + "/wiki_text.idx not found"));
  CHECK(mentions(v, "recipe data prepare"));
  CHECK(mentions(v, "--output " + dir.dir() + "/wiki_text"));

  const auto passwd = resolve_json(indexed("/etc/passwd"));
  CHECK(mentions(find_violation(passwd, "data.path"), "is a file"));
  const auto ext = resolve_json(indexed(write_dataset(dir, "d", 50, 40) + ".bin"));
  CHECK(mentions(find_violation(ext, "data.path"), "without the .bin/.idx extension"));

  // Both entries of a blend are checked, each reported.
  const auto blend = resolve_json(
      with(tiny_gpt(), {{"data", {{"kind", "indexed"}, {"blend", {0.5, dir.dir() + "/a", 0.5, dir.dir() + "/b"}}}}}));
  CHECK(blend.violations.size() == 2);
}

TEST_CASE("files: a good dataset resolves; a corrupt .idx and a truncated .bin are refused") {
  TempRecipes dir;
  const std::string prefix = write_dataset(dir, "corpus", 50, 40);
  const auto ok = resolve_json(indexed(prefix, 10));
  CHECK_MESSAGE(ok.ok(), report(ok));

  std::ofstream(prefix + ".idx", std::ios::binary) << "not an index at all, just text";
  CHECK(mentions(find_violation(resolve_json(indexed(prefix)), "data.path"), "not a Megatron MMIDIDX index"));

  const std::string cut = write_dataset(dir, "cut", 50, 40);
  fs::resize_file(cut + ".bin", 1000);
  const Violation* v = find_violation(resolve_json(indexed(cut)), "data.path");
  CHECK(mentions(v, "is 1000 bytes but"));
  CHECK(mentions(v, "needs 4000"));

  // Header counts beyond the file's size (a truncated index).
  const std::string small = write_dataset(dir, "small", 50, 40);
  fs::resize_file(small + ".idx", 100);
  CHECK(mentions(find_violation(resolve_json(indexed(small)), "data.path"), "truncated or corrupt"));
}

TEST_CASE("files: a validation split too small for one sequence is refused when validation runs") {
  TempRecipes dir;
  // 100 documents of 10 tokens: the 2% validation split holds 2 documents = 20 tokens < seq+1 = 33.
  const std::string prefix = write_dataset(dir, "tiny", 100, 10);
  const auto r = resolve_json(indexed(prefix, 5));
  const Violation* v = find_violation(r, "data.split");
  REQUIRE(v != nullptr);
  CHECK(mentions(v, "fewer than model.seq_length+1 = 33"));
  CHECK(mentions(v, "trainer.eval_interval=0"));
  CHECK(resolve_json(indexed(prefix, 0)).ok());  // no validation, no requirement
  CHECK(resolve_json(with(indexed(prefix, 5), {{"data", {{"split", "80,20,0"}}}})).ok());

  // Training needs a sample too.
  const std::string two = write_dataset(dir, "two", 2, 10);
  CHECK(mentions(find_violation(resolve_json(indexed(two)), "data.path"), "gives training 20 tokens"));
}

TEST_CASE("files: a one-document corpus says why it has no validation, and names --split-paragraphs") {
  TempRecipes dir;
  // One document of 500 tokens (one file prepared without --split-paragraphs): every split rounds
  // to whole documents, so validation gets nothing at any share.
  const std::string one = write_dataset(dir, "one", 1, 500);
  // Asked for: refused, with the cause and the fix that works (not the split the user already set).
  const Violation* v =
      find_violation(resolve_json(with(indexed(one, 5), {{"data", {{"split", "90,10,0"}}}})), "data.split");
  REQUIRE(v != nullptr);
  CHECK(mentions(v, "splits are by whole document, and no dataset holds more than 1 document"));
  CHECK(mentions(v, "--split-paragraphs"));
  CHECK(!mentions(v, "e.g. data.split=\"90,10,0\""));
  // Left to its default: validation off, and a warning says why instead of nothing.
  json def = indexed(one);
  def["trainer"].erase("eval_interval");
  const auto r = resolve_json(def);
  CHECK(r.ok());
  CHECK(r.plan.trainer.eval_interval == 0);
  const bool warned = std::any_of(r.warnings.begin(), r.warnings.end(), [](const std::string& w) {
    return w.find("no validation") != std::string::npos && w.find("--split-paragraphs") != std::string::npos;
  });
  CHECK_MESSAGE(warned, (r.warnings.empty() ? std::string("(no warnings)") : r.warnings.front()));
}

TEST_CASE("files: checkpoint.load must hold a checkpoint") {
  TempRecipes dir;
  auto load = [](const std::string& path) {
    return resolve_json(with(tiny_gpt(), {{"checkpoint", {{"load", path}}}}));
  };
  CHECK(mentions(find_violation(load(dir.dir() + "/nowhere"), "checkpoint.load"), "does not exist"));
  CHECK(mentions(find_violation(load(dir.write("file.txt", "x")), "checkpoint.load"), "is a file"));
  fs::create_directories(dir.dir() + "/empty");
  CHECK(mentions(find_violation(load(dir.dir() + "/empty"), "checkpoint.load"), "holds no checkpoint"));
  dir.write("run/checkpoints/step-5/metadata.json", checkpoint_metadata(tiny_gpt()));
  CHECK(load(dir.dir() + "/run").ok());
  CHECK(load(dir.dir() + "/run/checkpoints").ok());
  CHECK(load(dir.dir() + "/run/checkpoints/step-5").ok());
}

// The checkpoint's tensors against the plan's model, before launch: another shape is refused
// naming the tensor, both shapes and the key (from the tensor's dims, or with the checkpoint's
// value from its plan.toml); another padding of the same vocabulary (TP) is not.
TEST_CASE("files: checkpoint.load's tensors must fit the plan's model") {
  TempRecipes dir;
  auto load = [&](const json& tree) {
    return resolve_json(with(tree, {{"checkpoint", {{"load", dir.dir() + "/ck/step-1"}}}}));
  };
  dir.write("ck/step-1/metadata.json", checkpoint_metadata(tiny_gpt(), {{"layers.2.mlp.fc1.weight", {512, 64}},
                                                                        {"layers.2.mlp.fc1.bias", {512}}}));
  const auto r = load(tiny_gpt());
  const Violation* v = find_violation(r, "checkpoint.load");
  REQUIRE_MESSAGE(v != nullptr, report(r));
  CHECK(mentions(v, "does not fit this plan's model (2 tensors)"));
  CHECK(mentions(v, "layers.2.mlp.fc1.weight is [512,64] there, [256,64] here"));
  CHECK(mentions(v, "set model.ffn_hidden_size"));

  // With the checkpoint's plan.toml: the key that differs, and its value there.
  dir.write("ck/step-1/metadata.json", checkpoint_metadata(with(tiny_gpt(), {{"model", {{"hidden_size", 32}}}})));
  dir.write("ck/step-1/plan.toml", "[model]\nhidden_size = 32\nnum_layers = 4\n");
  const auto wide = load(tiny_gpt());
  const Violation* h = find_violation(wide, "model.hidden_size");
  REQUIRE_MESSAGE(h != nullptr, report(wide));
  CHECK(mentions(h, "embedding.word.weight is [256,32] there, [256,64] here"));
  CHECK(mentions(h, "set model.hidden_size=32"));
  CHECK(find_violation(wide, "model.num_layers") == nullptr);

  // The vocabulary padded for another TP size: the load pads or trims it (common.json says 250).
  const json v250 = with(tiny_gpt(), {{"model", {{"vocab_size", 250}, {"make_vocab_size_divisible_by", 128}}}});
  dir.write("ck/step-1/metadata.json", checkpoint_metadata(v250));  // 256 rows
  dir.write("ck/step-1/plan.toml", "");
  dir.write("ck/step-1/common.json", R"({"model": {"vocab_size": 250}})");
  const auto tp_pad = load(with(v250, {{"model", {{"make_vocab_size_divisible_by", 100}}}}));  // 300 rows
  CHECK_MESSAGE(tp_pad.ok(), report(tp_pad));
  const auto other_vocab = load(with(v250, {{"model", {{"vocab_size", 300}}}}));
  CHECK(mentions(find_violation(other_vocab, "checkpoint.load"),
                 "embedding.word.weight is [256,64] there, [384,64] here"));
  CHECK(mentions(find_violation(other_vocab, "checkpoint.load"), "model.vocab_size"));
}

TEST_CASE("files: the mpi executor's hostfile must exist where the run launches") {
  TempRecipes dir;
  auto resolve_with = [](const std::string& path, bool planning) {
    ExecutorFacts facts;
    facts.planning = planning;
    return resolve_json(with(tiny_gpt(), {{"executor", {{"kind", "mpi"}, {"hostfile", path}}}}), facts);
  };
  CHECK(mentions(find_violation(resolve_with(dir.dir() + "/nowhere", false), "executor.hostfile"), "not found"));
  CHECK(mentions(find_violation(resolve_with(dir.dir(), false), "executor.hostfile"), "is not a file"));
  CHECK(resolve_with(dir.write("hosts", "localhost slots=2\n"), false).ok());
  // validate / show / --dry-run may plan for another machine: not checked there.
  CHECK(resolve_with(dir.dir() + "/nowhere", true).ok());
}

TEST_CASE("files: resuming under a changed LR schedule warns, naming the keys and how to keep the horizon") {
  TempRecipes dir;
  dir.write("ck/step-100/metadata.json", checkpoint_metadata(tiny_gpt()));
  dir.write("ck/latest", "step-100\n");
  dir.write("ck/step-100/plan.toml", "[trainer]\nmax_steps = 100\n[schedule]\nwarmup_steps = 0\ndecay_steps = 100\n");
  auto resume = [&](const json& patch) {
    return resolve_json(with(with(tiny_gpt(), {{"checkpoint", {{"load", dir.dir() + "/ck"}}}}), patch));
  };
  const auto longer = resume({{"trainer", {{"max_steps", 200}}}});
  REQUIRE(longer.ok());
  CHECK(has_warning(longer, "schedule.decay_steps 100 → 200"));
  CHECK(has_warning(longer, "set schedule.decay_steps=100 to keep the old horizon"));
  // The horizon kept: more steps at the floor of the same schedule change nothing, so no warning.
  const auto kept = resume({{"trainer", {{"max_steps", 200}}}, {"schedule", {{"decay_steps", 100}}}});
  CHECK_FALSE(has_warning(kept, "learning-rate schedule"));
}

TEST_CASE("files: tokenizer files exist, are of their kind, and fit the model's vocabulary") {
  TempRecipes dir;
  const auto missing = resolve_json(with(tiny_gpt(), {{"data",
                                                       {{"tokenizer", "gpt2_bpe"},
                                                        {"vocab_file", dir.dir() + "/vocab.json"},
                                                        {"merges_file", dir.dir() + "/merges.txt"}}}}));
  CHECK(mentions(find_violation(missing, "data.vocab_file"), "not found"));
  CHECK(mentions(find_violation(missing, "data.merges_file"), "not found"));
  CHECK(mentions(find_violation(missing, "data.vocab_file"), "docs/user-guide.md"));

  json vocab = json::object();
  for (int i = 0; i < 300; ++i) vocab["t" + std::to_string(i)] = i;
  const auto big = resolve_json(with(tiny_gpt(), {{"data",
                                                   {{"tokenizer", "gpt2_bpe"},
                                                    {"vocab_file", dir.write("vocab.json", vocab.dump())},
                                                    {"merges_file", dir.write("merges.txt", "#version: 0.2\n")}}}}));
  const Violation* v = find_violation(big, "model.vocab_size");
  REQUIRE(v != nullptr);
  CHECK(mentions(v, "has 300 tokens but model.vocab_size=256"));
  CHECK(mentions(v, "model.vocab_size ≥ 300"));

  const auto sp = resolve_json(with(
      tiny_gpt(),
      {{"data", {{"tokenizer", "sentencepiece"}, {"tokenizer_model", dir.write("sp.model", "{\"model\": {}}")}}}}));
  CHECK(mentions(find_violation(sp, "data.tokenizer_model"), "is JSON"));
  CHECK(mentions(find_violation(sp, "data.tokenizer_model"), "data.tokenizer=\"hf\""));
}

TEST_CASE("files: every problem is reported at once, and the plan's paths come back absolute") {
  TempRecipes dir;
  const auto r = resolve_json(
      with(indexed(dir.dir() + "/absent"),
           {{"data",
             {{"tokenizer", "gpt2_bpe"}, {"vocab_file", dir.dir() + "/v.json"}, {"merges_file", dir.dir() + "/m.txt"}}},
            {"checkpoint", {{"load", dir.dir() + "/ck"}}}}));
  CHECK(find_violation(r, "data.path") != nullptr);
  CHECK(find_violation(r, "data.vocab_file") != nullptr);
  CHECK(find_violation(r, "data.merges_file") != nullptr);
  CHECK(find_violation(r, "checkpoint.load") != nullptr);

  write_dataset(dir, "rel", 50, 40);
  dir.write("run/checkpoints/step-1/metadata.json", "{}");
  in_dir(dir.dir(), [&] {
    const auto ok = resolve_json(with(indexed("rel"), {{"checkpoint", {{"load", "./run"}}}}));
    REQUIRE_MESSAGE(ok.ok(), report(ok));
    const std::string root = fs::canonical(dir.dir()).string();
    CHECK(ok.plan.data.path == root + "/rel");
    CHECK(ok.plan.data.blend.at(0).second == root + "/rel");
    CHECK(ok.plan.checkpoint.load == root + "/run");
  });
}

TEST_CASE("finetune without checkpoint.load is refused unless random weights are asked for") {
  const auto r = resolve_json(with(tiny_gpt(), {{"mode", "finetune"}}));
  const Violation* v = find_violation(r, "checkpoint.load");
  REQUIRE(v != nullptr);
  CHECK(mentions(v, "checkpoint.allow_random_init=true"));
  CHECK(resolve_json(with(tiny_gpt(), {{"mode", "finetune"}, {"checkpoint", {{"allow_random_init", true}}}})).ok());
}

TEST_SUITE_END();
