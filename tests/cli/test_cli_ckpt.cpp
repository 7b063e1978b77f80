// `recipe ckpt info | export | import | merge` end to end: a CPU run's checkpoint is inspected,
// exported to a Hugging Face directory, imported back and fine-tuned from; a LoRA fine-tune's
// adapter-only checkpoints are inspected, exported as PEFT and merged; errors give the right exit
// codes.
#include <doctest/doctest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "plan/exit_codes.hpp"
#include "cli_test_util.hpp"

TEST_SUITE_BEGIN("cli");

using namespace recipe;
using namespace recipe::cli::testing;
namespace fs = std::filesystem;

namespace {

fs::path the_run_dir(const fs::path& experiments, const std::string& name) {
  std::vector<fs::path> runs;
  for (const auto& e : fs::directory_iterator(experiments / name)) runs.push_back(e.path());
  REQUIRE(runs.size() == 1);
  return runs[0];
}

}  // namespace

TEST_CASE("ckpt info, export --format hf and import round-trip a CPU run's checkpoint") {
  use_built_binary_for_launch();
  TempDir tmp;
  auto r = run({"pretrain", "llama_tiny", "--device", "cpu", "--max-steps", "2", "--experiments-dir", tmp.str(),
                "--name", "src"});
  REQUIRE_MESSAGE(r.code == 0, (r.err + r.out));
  const fs::path run_dir = the_run_dir(tmp.path(), "src");

  auto info = run({"ckpt", "info", run_dir.string()});
  REQUIRE_MESSAGE(info.code == recipe::kExitOk, info.err);
  CHECK(info.out.find("step         2") != std::string::npos);
  CHECK(info.out.find("saved with   tp=1 pp=1 dp=1") != std::string::npos);
  CHECK(info.out.find("model        llama, ") != std::string::npos);
  CHECK(info.out.find("optimizer moments") != std::string::npos);
  CHECK(info.out.find("shard-0.safetensors") != std::string::npos);

  const fs::path hf = tmp.path() / "hf";
  auto ex = run({"ckpt", "export", run_dir.string(), "-o", hf.string(), "--format", "hf", "--dtype", "bf16"});
  REQUIRE_MESSAGE(ex.code == recipe::kExitOk, (ex.err + ex.out));
  CHECK(ex.out.find("(llama, ") != std::string::npos);
  CHECK(fs::is_regular_file(hf / "model.safetensors"));
  const auto cfg = nlohmann::json::parse(read_text(hf / "config.json"));
  CHECK(cfg["model_type"] == "llama");
  CHECK(cfg["torch_dtype"] == "bfloat16");

  const fs::path imported = tmp.path() / "imported";
  auto im = run({"ckpt", "import", hf.string(), "-o", imported.string(), "--format", "hf", "--recipe", "llama_tiny"});
  REQUIRE_MESSAGE(im.code == recipe::kExitOk, (im.err + im.out));
  CHECK(fs::is_regular_file(imported / "step-0/metadata.json"));
  auto info2 = run({"ckpt", "info", imported.string()});
  REQUIRE(info2.code == recipe::kExitOk);
  CHECK(info2.out.find("step         0") != std::string::npos);
  CHECK(info2.out.find("imported     hf llama from " + fs::absolute(hf).string() + " (BF16)") != std::string::npos);
  CHECK(info2.out.find("no optimizer state") != std::string::npos);

  // The imported checkpoint starts a fine-tuning run.
  auto ft = run({"finetune", "llama_tiny", "checkpoint.load=" + imported.string(), "--device", "cpu", "--max-steps",
                 "1", "--experiments-dir", tmp.str(), "--name", "tuned"});
  CHECK_MESSAGE(ft.code == recipe::kExitOk, (ft.err + ft.out));
  const std::string log = read_text(the_run_dir(tmp.path(), "tuned") / "logs/rank-0.log") + ft.out;
  CHECK_MESSAGE(log.find("initialized the weights from " + imported.string()) != std::string::npos, log);

  {  // a recipe of another shape is refused with both values and exit 1
    auto bad = run({"ckpt", "import", hf.string(), "-o", (tmp.path() / "x").string(), "--recipe", "llama_tiny",
                    "model.hidden_size=128"});
    CHECK(bad.code == recipe::kExitInvalidRecipe);
    CHECK_MESSAGE(
        bad.err.find("hidden_size is 64 in config.json, the recipe has model.hidden_size=128") != std::string::npos,
        bad.err);
  }
  {  // a GPT recipe does not take a Llama model
    auto bad = run({"ckpt", "import", hf.string(), "-o", (tmp.path() / "x").string(), "--recipe", "gpt_tiny"});
    CHECK(bad.code == recipe::kExitInvalidRecipe);
    CHECK(bad.err.find("model_type is \"llama\" in config.json") != std::string::npos);
  }
  {  // exporting into a directory with other files is refused
    auto bad = run({"ckpt", "export", run_dir.string(), "-o", run_dir.string()});
    CHECK(bad.code == recipe::kExitRuntime);
    CHECK(bad.err.find("export into a new or empty directory") != std::string::npos);
  }
}

TEST_CASE("a LoRA fine-tune saves adapter-only checkpoints; info follows the base; hf-peft, --merge and merge") {
  use_built_binary_for_launch();
  TempDir tmp;
  // From random weights: the run writes its frozen base once to checkpoints/base/step-0.
  auto r = run({"finetune", "gpt_tiny_lora", "checkpoint.allow_random_init=true", "--device", "cpu", "--max-steps", "2",
                "--experiments-dir", tmp.str(), "--name", "tuned", "checkpoint.save_interval=1"});
  REQUIRE_MESSAGE(r.code == 0, (r.err + r.out));
  const fs::path run_dir = the_run_dir(tmp.path(), "tuned");
  const fs::path base = run_dir / "checkpoints/base/step-0";
  CHECK(fs::is_regular_file(base / "metadata.json"));
  const std::string log = read_text(run_dir / "logs/rank-0.log") + r.out;
  CHECK_MESSAGE(log.find("wrote the frozen base weights to " + base.string()) != std::string::npos, log);
  const auto meta = nlohmann::json::parse(read_text(run_dir / "checkpoints/step-2/metadata.json"));
  CHECK(meta["base"]["path"] == base.string());
  for (const auto& t : meta["tensors"].items()) CHECK_MESSAGE(t.key().find("lora_") != std::string::npos, t.key());
  // Both steps refer to the same base (step 2 after step 1's save: the base is written once).
  CHECK(nlohmann::json::parse(read_text(run_dir / "checkpoints/step-1/metadata.json"))["base"] == meta["base"]);

  auto info = run({"ckpt", "info", run_dir.string()});
  REQUIRE_MESSAGE(info.code == recipe::kExitOk, info.err);
  CHECK_MESSAGE(info.out.find("base         " + base.string() + " (content hash crc32:") != std::string::npos,
                info.out);
  CHECK(info.out.find("adapter-only") != std::string::npos);
  // What the adapters are: rank, alpha and targets (common.json's peft record).
  CHECK_MESSAGE(info.out.find("peft         lora rank 8, alpha 16, targets ") != std::string::npos, info.out);

  const fs::path peft = tmp.path() / "peft";
  auto ex = run({"ckpt", "export", run_dir.string(), "-o", peft.string(), "--format", "hf-peft"});
  REQUIRE_MESSAGE(ex.code == recipe::kExitOk, (ex.err + ex.out));
  CHECK(ex.out.find("r=8, lora_alpha=16") != std::string::npos);
  CHECK(fs::is_regular_file(peft / "adapter_model.safetensors"));
  const auto cfg = nlohmann::json::parse(read_text(peft / "adapter_config.json"));
  CHECK(cfg["peft_type"] == "LORA");
  CHECK(cfg["fan_in_fan_out"] == true);

  auto base_hf = run({"ckpt", "export", run_dir.string(), "-o", (tmp.path() / "base_hf").string()});
  REQUIRE_MESSAGE(base_hf.code == recipe::kExitOk, base_hf.err);
  CHECK(base_hf.out.find("note: this is the base model of a LoRA fine-tune") != std::string::npos);
  auto merged_hf = run({"ckpt", "export", run_dir.string(), "-o", (tmp.path() / "merged_hf").string(), "--merge"});
  REQUIRE_MESSAGE(merged_hf.code == recipe::kExitOk, merged_hf.err);
  CHECK(merged_hf.out.find("LoRA adapters merged") != std::string::npos);
  auto peft_merge =
      run({"ckpt", "export", run_dir.string(), "-o", (tmp.path() / "x").string(), "--format", "hf-peft", "--merge"});
  CHECK(peft_merge.code == recipe::kExitUsage);

  // `ckpt merge`: a full checkpoint a plain (peft.kind=none) fine-tune starts from.
  const fs::path merged = tmp.path() / "merged";
  auto mg = run({"ckpt", "merge", run_dir.string(), "-o", merged.string()});
  REQUIRE_MESSAGE(mg.code == recipe::kExitOk, (mg.err + mg.out));
  CHECK(mg.out.find("merged the LoRA adapters of") != std::string::npos);
  CHECK(fs::is_regular_file(merged / "step-0/metadata.json"));
  auto info2 = run({"ckpt", "info", merged.string()});
  REQUIRE(info2.code == recipe::kExitOk);
  CHECK(info2.out.find("base ") == std::string::npos);
  CHECK(info2.out.find("no optimizer state") != std::string::npos);
  auto ft = run({"finetune", "gpt_tiny", "checkpoint.load=" + merged.string(), "--device", "cpu", "--max-steps", "1",
                 "--experiments-dir", tmp.str(), "--name", "from_merged"});
  CHECK_MESSAGE(ft.code == recipe::kExitOk, (ft.err + ft.out));
  auto again = run({"ckpt", "merge", merged.string(), "-o", (tmp.path() / "y").string()});
  CHECK(again.code == recipe::kExitUsage);
  CHECK(again.err.find("is not a LoRA checkpoint") != std::string::npos);

  // A LoRA fine-tune from the merged model's checkpoint refers to it as its base.
  auto ft2 = run({"finetune", "gpt_tiny_lora", "checkpoint.load=" + merged.string(), "--device", "cpu", "--max-steps",
                  "1", "--experiments-dir", tmp.str(), "--name", "second"});
  REQUIRE_MESSAGE(ft2.code == recipe::kExitOk, (ft2.err + ft2.out));
  const fs::path second = the_run_dir(tmp.path(), "second");
  CHECK_FALSE(fs::exists(second / "checkpoints/base"));
  const auto meta2 = nlohmann::json::parse(read_text(second / "checkpoints/step-1/metadata.json"));
  CHECK(meta2["base"]["path"] == (merged / "step-0").string());

  // The base gone: info and export refuse, naming both paths.
  fs::remove_all(run_dir / "checkpoints/base");
  auto gone = run({"ckpt", "info", run_dir.string()});
  CHECK(gone.code == recipe::kExitRuntime);
  CHECK_MESSAGE(gone.err.find("holds only adapters; its base weights are in " + base.string() +
                              ", which does not exist") != std::string::npos,
                gone.err);
}

TEST_CASE(
    "ckpt verify checks every chunk's CRC32: exit 0 on a good checkpoint, an error naming the file on a flipped byte") {
  use_built_binary_for_launch();
  TempDir tmp;
  auto r = run(
      {"pretrain", "gpt_tiny", "--device", "cpu", "--max-steps", "2", "--experiments-dir", tmp.str(), "--name", "v"});
  REQUIRE_MESSAGE(r.code == 0, (r.err + r.out));
  const fs::path run_dir = the_run_dir(tmp.path(), "v");
  auto ok = run({"ckpt", "verify", run_dir.string()});
  REQUIRE_MESSAGE(ok.code == recipe::kExitOk, ok.err);
  CHECK(ok.out.find("every CRC32 matches") != std::string::npos);

  // Flip one byte in the last quarter of a shard (tensor data, past the safetensors header).
  fs::path shard;
  for (const auto& e : fs::recursive_directory_iterator(run_dir / "checkpoints"))
    if (e.path().extension() == ".safetensors") shard = e.path();
  REQUIRE(!shard.empty());
  const auto size = fs::file_size(shard);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(size - size / 4));
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x5a);
    f.seekp(std::streamoff(size - size / 4));
    f.write(&c, 1);
  }
  auto info = run({"ckpt", "info", run_dir.string()});  // info reads metadata only: still 0
  CHECK(info.code == recipe::kExitOk);
  auto bad = run({"ckpt", "verify", run_dir.string()});
  CHECK(bad.code == recipe::kExitRuntime);
  CHECK(bad.err.find("fails its CRC32 check") != std::string::npos);
  CHECK(bad.err.find(shard.filename().string()) != std::string::npos);
}

TEST_CASE("ckpt errors: missing paths, a directory without a checkpoint, no HF files") {
  TempDir tmp;
  auto missing = run({"ckpt", "info", (tmp.path() / "nope").string()});
  CHECK(missing.code == recipe::kExitUsage);
  CHECK(missing.err.find("does not exist") != std::string::npos);

  auto empty = run({"ckpt", "export", tmp.str(), "-o", (tmp.path() / "hf").string()});
  CHECK(empty.code == recipe::kExitUsage);
  CHECK(empty.err.find("holds no checkpoint yet") != std::string::npos);

  std::ofstream(tmp.path() / "config.json") << R"({"model_type": "gpt2"})";
  auto no_weights = run({"ckpt", "import", tmp.str(), "-o", (tmp.path() / "out").string(), "--recipe", "gpt_tiny",
                         "model.vocab_size=50257", "model.hidden_size=768", "model.num_layers=12",
                         "model.num_attention_heads=12", "model.seq_length=1024"});
  CHECK(no_weights.code == recipe::kExitRuntime);
  CHECK_MESSAGE(no_weights.err.find("neither model.safetensors nor model.safetensors.index.json") != std::string::npos,
                no_weights.err);

  auto no_recipe = run({"ckpt", "import", tmp.str(), "-o", (tmp.path() / "out").string()});
  CHECK(no_recipe.code == recipe::kExitRuntime);  // the model config.json describes, but no weights
  auto bad_format = run({"ckpt", "export", tmp.str(), "-o", (tmp.path() / "hf").string(), "--format", "gguf"});
  CHECK(bad_format.code == recipe::kExitUsage);
}

TEST_SUITE_END();
