// The `recipe` verbs, driven in-process through run_cli (and a few through the built binary where
// the process exit status matters).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "plan/exit_codes.hpp"
#include "cli_test_util.hpp"
#include "core/data/indexed_dataset.hpp"
#include "dsl/dsl.hpp"
#include "kernels/ops.hpp"

TEST_SUITE_BEGIN("cli");

using namespace recipe;
using namespace recipe::cli::testing;
namespace fs = std::filesystem;

namespace {

bool dir_is_empty(const fs::path& p) { return fs::is_empty(p); }

// Rank-map rows of a --dry-run report: "  rank node local gpu tp cp dp pp" as integers (gpu -1 = "-").
std::vector<std::vector<int>> rank_rows(const std::string& report) {
  std::vector<std::vector<int>> rows;
  std::istringstream in(report);
  std::string line;
  bool in_map = false;
  static const std::regex row(R"(^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+|-)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$)");
  while (std::getline(in, line)) {
    if (line.rfind("Rank map", 0) == 0) {
      in_map = true;
      continue;
    }
    if (!in_map) continue;
    std::smatch m;
    if (std::regex_match(line, m, row)) {
      std::vector<int> v;
      for (size_t i = 1; i <= 8; ++i) v.push_back(m[i] == "-" ? -1 : std::stoi(m[i]));
      rows.push_back(v);
    } else if (line.find("rank") == std::string::npos) {
      in_map = false;
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("usage errors exit 2; --help exits 0 and documents exit codes") {
  CHECK(run({}).code == recipe::kExitUsage);
  CHECK(run({"frobnicate"}).code == recipe::kExitUsage);
  CHECK(run({"pretrain"}).code == recipe::kExitUsage);  // recipe missing
  CHECK(run({"pretrain", "gpt_tiny", "--max-steps", "zero"}).code == recipe::kExitUsage);
  CHECK(run({"pretrain", "gpt_tiny", "--device", "tpu"}).code == recipe::kExitUsage);
  auto stray = run({"pretrain", "gpt_tiny", "notanoverride"});
  CHECK(stray.code == recipe::kExitUsage);
  CHECK(stray.err.find("notanoverride") != std::string::npos);
  CHECK(run({"data", "prepare", "--output", "x"}).code == recipe::kExitUsage);  // --input missing

  auto help = run({"--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("Exit codes") != std::string::npos);
  CHECK(help.out.find("pretrain") != std::string::npos);
  CHECK(help.out.find("worker") == std::string::npos);  // hidden verb
  auto verb_help = run({"pretrain", "--help"});
  CHECK(verb_help.code == 0);
  CHECK(verb_help.out.find("--dry-run") != std::string::npos);
  CHECK(run({"worker", "--help"}).code == 0);
}

TEST_CASE("version reports build features") {
  auto v = run({"version"});
  CHECK(v.code == 0);
  CHECK(v.out.find("recipe ") == 0);
  CHECK(v.out.find("CUDA ") != std::string::npos);
  CHECK(v.out.find("GPU: ") != std::string::npos);
  CHECK(run({"--version"}).out == v.out);
}

TEST_CASE("an unknown preset exits 1 and suggests the close name") {
  auto r = run({"show", "gpt_tinny"});
  CHECK(r.code == recipe::kExitInvalidRecipe);
  CHECK(r.err.find("gpt_tiny") != std::string::npos);
  // A file of another kind is named as such, not searched among the presets.
  auto json = run({"validate", "plan.json"});
  CHECK(json.code == recipe::kExitInvalidRecipe);
  CHECK(json.err.find("recipe files end in .lua or .toml") != std::string::npos);
}

TEST_CASE("an invalid override exits 1 and names the field") {
  // gpt3_345m has 16 attention heads; tp=3 does not divide them.
  auto r = run({"validate", "gpt3_345m", "parallelism.tp=3", "--nodes", "1", "--gpus-per-node", "3"});
  CHECK(r.code == recipe::kExitInvalidRecipe);
  CHECK(r.err.find("parallelism.tp") != std::string::npos);
  auto shown = run({"show", "gpt3_345m", "parallelism.tp=3"});
  CHECK(shown.code == recipe::kExitInvalidRecipe);
  CHECK(shown.err.find("parallelism.tp") != std::string::npos);
}

TEST_CASE("validate llama3_70b at its 8 nodes x 8 GPUs passes with ZeRO-1 in effect; 6 GPUs per node fail") {
  auto ok = run({"validate", "llama3_70b"});
  CHECK_MESSAGE(ok.code == 0, ok.err);
  CHECK(ok.out.rfind("OK: ", 0) == 0);
  CHECK(ok.out.find("world 64") != std::string::npos);
  CHECK_MESSAGE(ok.err.find("zero1") == std::string::npos, ok.err);  // dp = 2: the preset is coherent
  auto bad = run({"validate", "llama3_70b", "--nodes", "4", "--gpus-per-node", "6"});
  CHECK(bad.code == recipe::kExitInvalidRecipe);
  CHECK(bad.err.find("world") != std::string::npos);
}

TEST_CASE("list shows every preset with a summary") {
  auto r = run({"list"});
  REQUIRE(r.code == 0);
  for (const char* name : {"gpt_tiny", "gpt3_345m", "llama3_70b"}) {
    CAPTURE(name);
    CHECK(r.out.find(name) != std::string::npos);
  }
  CHECK(r.out.find("does not load") == std::string::npos);
}

TEST_CASE("show --format json is JSON; show's TOML re-resolves to the same plan") {
  auto json = run({"show", "gpt_tiny", "--format", "json"});
  REQUIRE_MESSAGE(json.code == 0, json.err);
  auto j = nlohmann::json::parse(json.out);
  CHECK(j["model"]["num_layers"] == 2);

  auto lua = run({"show", "gpt_tiny", "--format", "lua"});
  CHECK(lua.code == 0);
  CHECK(lua.out.find("num_layers") != std::string::npos);

  auto toml = run({"show", "gpt_tiny", "trainer.max_steps=37"});
  REQUIRE_MESSAGE(toml.code == 0, toml.err);
  TempDir tmp;
  fs::path file = tmp.path() / "resolved.toml";
  { std::ofstream(file) << toml.out; }
  auto again = run({"show", file.string()});
  REQUIRE_MESSAGE(again.code == 0, again.err);
  // The plan's `source` names where it was loaded from; everything else must be identical.
  auto strip_source = [](const std::string& text) {
    std::istringstream in(text);
    std::string line, out;
    while (std::getline(in, line))
      if (line.rfind("source", 0) != 0) out += line + "\n";
    return out;
  };
  CHECK(strip_source(again.out) == strip_source(toml.out));
  auto j1 = nlohmann::json::parse(run({"show", "gpt_tiny", "trainer.max_steps=37", "--format", "json"}).out);
  auto j2 = nlohmann::json::parse(run({"show", file.string(), "--format", "json"}).out);
  j1.erase("source");
  j2.erase("source");
  CHECK(j1 == j2);
  CHECK(j2["trainer"]["max_steps"] == 37);
}

TEST_CASE("--dry-run says when the output head makes the last pipeline stage the slowest") {
  TempDir tmp;
  // gpt_tiny with a 4096-token vocabulary: the head costs 4.5 layers, on the last of two stages.
  auto r = run({"pretrain", "gpt_tiny", "model.num_layers=4", "model.vocab_size=4096", "parallelism.pp=2",
                "executor.cpu_ranks=2", "--dry-run", "--experiments-dir", tmp.str()});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("layers per stage [2,2] (even)") != std::string::npos);
  CHECK(r.out.find("parallelism.pipeline_split=\"balanced\" gives [3,1], heaviest stage 5.51 instead of 6.51") !=
        std::string::npos);
  auto balanced =
      run({"pretrain", "gpt_tiny", "model.num_layers=4", "model.vocab_size=4096", "parallelism.pp=2",
           "parallelism.pipeline_split=balanced", "executor.cpu_ranks=2", "--dry-run", "--experiments-dir", tmp.str()});
  REQUIRE_MESSAGE(balanced.code == 0, balanced.err);
  CHECK(balanced.out.find("layers per stage [3,1] (balanced); stage compute in layers 3.00 5.51") != std::string::npos);
  CHECK(balanced.out.find("gives [") == std::string::npos);
  // The exchanges block by default; the dry run names the overlap when it is on.
  CHECK(balanced.out.find("PP comm overlap") == std::string::npos);
  auto overlapped = run({"pretrain", "gpt_tiny", "model.num_layers=4", "parallelism.pp=2",
                         "parallelism.pp_comm_overlap=true", "executor.cpu_ranks=2", "--dry-run", "--experiments-dir",
                         tmp.str()});
  REQUIRE_MESSAGE(overlapped.code == 0, overlapped.err);
  CHECK(overlapped.out.find("%, PP comm overlap") != std::string::npos);
}

TEST_CASE("--dry-run says when interleaving shrinks an already small bubble") {
  TempDir tmp;
  // PP2 × virtual_pp 2: each micro-batch crosses 3 stage boundaries instead of 1. At 20
  // micro-batches plain 1F1B's bubble is 1/20 = 5%: no note; at 32 it is 3.1%: the note.
  auto plan = [&](const char* global) {
    return run({"pretrain", "gpt_tiny", "model.num_layers=4", "parallelism.pp=2", "parallelism.virtual_pp=2",
                "trainer.micro_batch_size=1", global, "executor.cpu_ranks=2", "--dry-run", "--experiments-dir",
                tmp.str()});
  };
  auto few = plan("trainer.global_batch_size=20");
  REQUIRE_MESSAGE(few.code == 0, few.err);
  CHECK(few.out.find("interleaving:") == std::string::npos);
  auto many = plan("trainer.global_batch_size=32");
  REQUIRE_MESSAGE(many.code == 0, many.err);
  CHECK(many.out.find("interleaving: each micro-batch crosses 3 stage boundaries instead of 1, to shrink a 1F1B "
                      "bubble of only 3.1%; where transfers do not run beside compute, parallelism.virtual_pp=1 "
                      "can be faster") != std::string::npos);
}

TEST_CASE("--dry-run prints the rank map, memory and launch command and creates nothing") {
  TempDir tmp;
  auto r = run(
      {"pretrain", "llama3_70b", "--nodes", "4", "--gpus-per-node", "8", "--dry-run", "--experiments-dir", tmp.str()});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(dir_is_empty(tmp.path()));
  auto rows = rank_rows(r.out);
  REQUIRE(rows.size() == 32);

  // The layout the resolver chose, computed independently of the CLI.
  auto tree = dsl::load_recipe("llama3_70b");
  dsl::ExecutorFacts facts;
  facts.nodes = 4;
  facts.gpus_per_node = 8;
  facts.has_gpu = true;
  facts.visible_gpus = 8;
  dsl::apply_overrides(tree, {"executor.nodes=4", "executor.gpus_per_node=8"});
  auto plan = dsl::resolve(tree, facts).plan;
  int TP = plan.parallelism.tp, CP = plan.parallelism.cp, DP = plan.parallelism.dp, PP = plan.parallelism.pp;
  REQUIRE(TP * CP * DP * PP == 32);
  int rank = 0;
  for (int pp = 0; pp < PP; ++pp)
    for (int dp = 0; dp < DP; ++dp)
      for (int cp = 0; cp < CP; ++cp)
        for (int tp = 0; tp < TP; ++tp, ++rank) {
          if (rank != 9) continue;
          const auto& row = rows[9];  // rank node local gpu tp cp dp pp
          CHECK(row[0] == 9);
          CHECK(row[1] == 1);  // 8 GPUs per node
          CHECK(row[2] == 1);
          CHECK(row[3] == 1);
          CHECK(row[4] == tp);
          CHECK(row[5] == cp);
          CHECK(row[6] == dp);
          CHECK(row[7] == pp);
        }
  CHECK(r.out.find("Memory per rank") != std::string::npos);
  CHECK(r.out.find("total") != std::string::npos);
  CHECK(r.out.find("FLOPs/token") != std::string::npos);
  CHECK(r.out.find("mpirun -np 32") != std::string::npos);
  CHECK(r.out.find("worker --run-dir") != std::string::npos);
  // The pipeline line: 80 layers evenly over 4 stages, the head (1.07 layers) on the last one;
  // too small an imbalance (21.07 against a balanced 21.00) for the hint.
  CHECK(r.out.find("layers per stage [20,20,20,20] (even); stage compute in layers 20.00 20.00 20.00 21.07") !=
        std::string::npos);
  CHECK(r.out.find("pipeline_split=\"balanced\" gives") == std::string::npos);

  auto slurm = run({"pretrain", "llama3_70b", "--nodes", "4", "--gpus-per-node", "8", "--executor", "slurm",
                    "--dry-run", "--experiments-dir", tmp.str()});
  REQUIRE_MESSAGE(slurm.code == 0, slurm.err);
  CHECK(slurm.out.find("sbatch ") != std::string::npos);
  CHECK(slurm.out.find("#SBATCH --nodes=4") != std::string::npos);
  CHECK(dir_is_empty(tmp.path()));
}

TEST_CASE("a multi-rank local plan needs mpirun: without it, exit 4 before anything is created; --dry-run shows it") {
  TempDir tmp;
  std::vector<std::string> args = {"pretrain",       "gpt_tiny", "--device",          "cpu",    "executor.cpu_ranks=2",
                                   "--global-batch", "16",       "--experiments-dir", tmp.str()};
  const std::string saved_path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", tmp.str().c_str(), 1);  // an empty folder: no mpirun
  auto r = run(args);
  ::setenv("PATH", saved_path.c_str(), 1);
  CHECK_MESSAGE(r.code == recipe::kExitEnvironment, r.err);
  CHECK((r.err.find("mpirun, which is not on PATH") != std::string::npos ||
         r.err.find("built without MPI") != std::string::npos));
  CHECK(dir_is_empty(tmp.path()));
  args.push_back("--dry-run");
  auto dry = run(args);
  CHECK_MESSAGE(dry.code == 0, dry.err);
  CHECK(rank_rows(dry.out).size() == 2);
  CHECK(dry.out.find("mpirun -np 2 --oversubscribe") != std::string::npos);
}

TEST_CASE("finetune sets mode=finetune") {
  auto r = run({"finetune", "gpt_tiny", "checkpoint.allow_random_init=true", "--dry-run"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.out.find("Plan: gpt_tiny (finetune)") != std::string::npos);
  auto p = run({"pretrain", "gpt_tiny", "--dry-run"});
  CHECK(p.out.find("Plan: gpt_tiny (pretrain)") != std::string::npos);
}

TEST_CASE("a mode the user set that contradicts the verb is refused, never replaced") {
  // The verb set mode after the overrides, so `finetune ... mode=bogus` ran as a fine-tune.
  auto bogus = run({"finetune", "llama_tiny_lora", "mode=bogus", "--dry-run"});
  CHECK(bogus.code != 0);
  CHECK_MESSAGE(
      bogus.err.find("mode: bogus (override `mode=bogus`) contradicts `recipe finetune`") != std::string::npos,
      bogus.err);
  CHECK(bogus.err.find("fix: drop the mode setting") != std::string::npos);
  auto other = run({"pretrain", "gpt_tiny", "mode=finetune", "--dry-run"});
  CHECK(other.code != 0);
  CHECK(other.err.find("contradicts `recipe pretrain`") != std::string::npos);
  // Agreeing with the verb, or a preset's own mode (llama_tiny_lora's finetune), is fine.
  auto same = run({"finetune", "gpt_tiny", "mode=finetune", "checkpoint.allow_random_init=true", "--dry-run"});
  CHECK_MESSAGE(same.code == 0, same.err);
}

TEST_CASE("a LoRA plan says what it trains: rank, alpha, targets and the trainable share") {
  auto r = run({"finetune", "llama_tiny_lora", "checkpoint.allow_random_init=true", "--dry-run"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const size_t line = r.out.find("  peft       LoRA rank ");
  REQUIRE_MESSAGE(line != std::string::npos, r.out);
  const std::string peft = r.out.substr(line, r.out.find('\n', line) - line);
  CHECK_MESSAGE(peft.find(", alpha ") != std::string::npos, peft);
  CHECK_MESSAGE(peft.find("; trains ") != std::string::npos, peft);
  CHECK_MESSAGE(peft.find(" params (") != std::string::npos, peft);
  CHECK_MESSAGE(peft.find("%), the base frozen") != std::string::npos, peft);
  // A plan without adapters has no such line.
  auto full = run({"pretrain", "llama_tiny", "--dry-run"});
  CHECK(full.out.find("  peft ") == std::string::npos);
}

TEST_CASE("device auto without a GPU says it runs on CPU") {
  if (kernels::built_with_cuda() && kernels::query_gpus().count > 0) return;  // a GPU host runs on the GPU
  auto r = run({"pretrain", "gpt3_125m", "--dry-run"});
  REQUIRE_MESSAGE(r.code == 0, r.err);
  CHECK(r.err.find("no CUDA GPU found: running on CPU") != std::string::npos);
  CHECK(r.out.find("device cpu") != std::string::npos);
}

TEST_CASE("data verb needs a sub-verb and existing inputs") {
  CHECK(run({"data"}).code == recipe::kExitUsage);
  CHECK(run({"data", "prepare", "--input", "/nonexistent/x.txt", "--output", "/tmp/x"}).code == recipe::kExitUsage);
}

TEST_CASE("data prepare refuses flags its format or tokenizer would not read, and a directory as --output") {
  TempDir tmp;
  const std::string in = tmp.str() + "/a.jsonl", out = tmp.str() + "/ds";
  {
    std::ofstream f(in);
    f << R"({"prompt": "q", "completion": "a"})"
      << "\n";
  }
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--format", "chat", "--json-key", "body"}, "--json-key is not read with --format chat"},
      {{"--format", "chat", "--split-paragraphs"}, "--split-paragraphs is not read with --format chat"},
      {{"--format", "chat", "--no-eod"}, "--no-eod is not read with --format chat"},
      {{"--chat-template", "llama3"},
       "--chat-template is not read with --format text --tokenizer byte; leave it "
       "out or add --format chat"},
      {{"--vocab-file", in}, "--vocab-file is not read with --format text --tokenizer byte"},
      {{"--tokenizer-model", in}, "--tokenizer-model is not read with --format text --tokenizer byte"},
  };
  for (const auto& c : refused) {
    std::vector<std::string> args = {"data", "prepare", "--input", in, "--output", out};
    args.insert(args.end(), c.first.begin(), c.first.end());
    auto r = run(args);
    CHECK_MESSAGE(r.code == recipe::kExitUsage, c.first[0]);
    CHECK_MESSAGE(r.err.find(c.second) != std::string::npos, r.err);
  }
  CHECK_FALSE(std::filesystem::exists(out + ".bin"));
  auto dir = run({"data", "prepare", "--input", in, "--format", "chat", "--output", tmp.str() + "/"});
  CHECK(dir.code == recipe::kExitUsage);
  CHECK(dir.err.find("names a directory; it takes a file prefix") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(tmp.str() + "/.bin"));
  // The same inputs with only the flags they read are prepared.
  auto ok = run({"data", "prepare", "--input", in, "--format", "chat", "--output", out});
  REQUIRE_MESSAGE(ok.code == 0, ok.err);
  CHECK(std::filesystem::exists(out + ".mask.bin"));
}

TEST_CASE("--dry-run and show plan a GPU recipe on a host without a GPU") {
  // examples/wiki.lua targets 8 GPUs (tp 2 × dp 4): planning it must not need a GPU here, while
  // actually running it on a GPU-less host is refused by the resolver (exit 1), naming the device.
  // Its data and tokenizer files (relative to the working directory) are checked, so they exist here.
  TempDir tmp, work;
  for (const char* name : {"data/wiki_text", "data/code_text"}) {
    const fs::path prefix = work.path() / name;
    fs::create_directories(prefix.parent_path());
    recipe::data::IndexedDatasetWriter w(prefix.string() + ".bin", prefix.string() + ".idx",
                                         recipe::data::TokenDType::uint16);
    const std::vector<int32_t> doc(600, 42);
    for (int d = 0; d < 100; ++d) w.add_document(doc);  // 2% validation: 1200 tokens ≥ seq_length + 1
    w.finish();
  }
  std::ofstream(work.path() / "data/gpt2-vocab.json") << R"({"a": 0, "b": 1})";
  std::ofstream(work.path() / "data/gpt2-merges.txt") << "#version: 0.2\n";
  const fs::path old_cwd = fs::current_path();
  fs::current_path(work.path());
  const std::string wiki = RECIPE_SOURCE_DIR "/examples/wiki.lua";
  auto dry = run({"pretrain", wiki, "--dry-run", "--experiments-dir", tmp.str()});
  CHECK_MESSAGE(dry.code == 0, dry.err);
  CHECK(rank_rows(dry.out).size() == 8);
  CHECK(dir_is_empty(tmp.path()));
  auto show = run({"show", wiki, "--format", "json"});
  CHECK_MESSAGE(show.code == 0, show.err);
  if (kernels::query_gpus().count == 0) {
    auto real = run({"pretrain", wiki, "--experiments-dir", tmp.str()});
    CHECK(real.code == recipe::kExitInvalidRecipe);
    CHECK(real.err.find("trainer.device") != std::string::npos);
    CHECK(dir_is_empty(tmp.path()));
  }
  fs::current_path(old_cwd);
}

TEST_SUITE_END();
