// `recipe ckpt import DIR` of a downloaded model directory (config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json, generation_config.json) with no --recipe: the checkpoint,
// beside it model.lua (the model config.json describes, its tokenizer, checkpoint.load) and lora.lua
// (LoRA layered on it), and a `finetune` command that validates as printed. A recipe of another
// shape is refused before launch by the resolver's check of checkpoint.load (exit 1, naming the
// tensor, both shapes and the key), and so is a checkpoint of another padded vocabulary only when
// the vocabulary itself differs.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/train/checkpointing.hpp"
#include "core/train/trainer.hpp"
#include "hf/hf_convert.hpp"
#include "plan/exit_codes.hpp"
#include "cli_test_util.hpp"
#include "tests/core/core_test_util.hpp"

TEST_SUITE_BEGIN("cli");

using namespace recipe;
using namespace recipe::cli::testing;
namespace fs = std::filesystem;

namespace {

// A tiny downloaded Llama: llama_tiny's shape with a vocabulary of 4100 (the test tokenizer's 4097
// ids fit), random weights, exported as transformers writes it, plus the tokenizer files.
fs::path make_hf_dir(const fs::path& root) {
  plan::Plan p = test::llama_tiny_plan();
  p.model.vocab_size = 4100;
  p.model.make_vocab_size_divisible_by = 128;
  test::fill_derived(p);
  auto be = test::cpu_backend();
  core::Trainer t(p, *be);
  core::SaveOptions so;
  so.dir = (root / "src").string();
  const std::string ckpt = core::save_checkpoint(t, so);
  core::hf::ExportOptions eo;
  eo.out_dir = (root / "hf").string();
  core::hf::export_checkpoint(ckpt, core::model_shape(p), eo);
  fs::copy_file(std::string(RECIPE_SOURCE_DIR) + "/tests/data/hf_tokenizer/llama3_style.tokenizer.json",
                root / "hf/tokenizer.json");
  std::ofstream(root / "hf/tokenizer_config.json") << R"({"bos_token": "<|begin_of_text|>"})";
  std::ofstream(root / "hf/generation_config.json") << R"({"bos_token_id": 0, "eos_token_id": [1, 4]})";
  return root / "hf";
}

// The words of the command a line of `out` prints after `prefix` ("recipe " dropped).
std::vector<std::string> printed_command(const std::string& out, const std::string& prefix) {
  const auto at = out.find(prefix);
  REQUIRE_MESSAGE(at != std::string::npos, out);
  std::istringstream line(out.substr(at + prefix.size(), out.find('\n', at) - at - prefix.size()));
  std::vector<std::string> words;
  for (std::string w; line >> w;) words.push_back(w);
  REQUIRE(words.size() >= 2);
  CHECK(words.front() == "recipe");
  words.erase(words.begin());
  return words;
}

}  // namespace

TEST_CASE("ckpt import DIR writes the model's recipe and a finetune command that validates as printed") {
  TempDir tmp;
  const fs::path hf = make_hf_dir(tmp.path());
  const fs::path out = tmp.path() / "imported";
  auto im = run({"ckpt", "import", hf.string(), "-o", out.string(), "--format", "hf"});
  REQUIRE_MESSAGE(im.code == recipe::kExitOk, (im.err + im.out));
  CHECK(fs::is_regular_file(out / "step-0/metadata.json"));
  for (const char* f : {"model.lua", "lora.lua", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    CHECK_MESSAGE(fs::is_regular_file(out / f), f);

  // Every model key of config.json, the tokenizer and its EOS, the checkpoint; nothing invented.
  const std::string model = read_text(out / "model.lua");
  INFO(model);
  for (const std::string& line : std::vector<std::string>{
           "arch = \"llama\"", "vocab_size = 4100", "hidden_size = 64", "num_layers = 2", "num_attention_heads = 4",
           "num_kv_heads = 2", "ffn_hidden_size = 192", "max_position_embeddings = 64", "seq_length = 64",
           "tie_embeddings = false", "bias = false", "rope_theta = 10000.0", "tokenizer = \"hf\"",
           "tokenizer_model = \"" + (out / "tokenizer.json").string() + "\"", "eod_token = \"<|end_of_text|>\"",
           "load = \"" + out.string() + "\"", "mode = \"finetune\""})
    CHECK_MESSAGE(model.find(line) != std::string::npos, line);
  // model.head_dim is a recipe key (Qwen3 sets its own): config.json's value, or hidden / heads.
  CHECK(model.find("head_dim = 16") != std::string::npos);
  CHECK(read_text(out / "lora.lua").find("preset \"model\" (preset \"_lora\")") != std::string::npos);

  // `recipe generate` on the import stops at every EOS id of its generation_config.json (copied
  // beside its tokenizer.json: [1, 4]) besides the tokenizer's end of document (<|end_of_text|>, 1).
  auto gen = run({"generate", out.string(), "--prompt", "To be", "-n", "2", "--device", "cpu", "--tokenizer", "hf",
                  "--tokenizer-model", (out / "tokenizer.json").string()});
  CHECK_MESSAGE(gen.code == recipe::kExitOk, (gen.err + gen.out));
  CHECK_MESSAGE(gen.err.find("generate: stops at ids 1, 4\n") != std::string::npos, gen.err);
  std::ofstream(out / "generation_config.json") << R"({"eos_token_id": "x"})";
  auto bad_eos = run({"generate", out.string(), "--prompt", "To be", "-n", "2", "--device", "cpu", "--tokenizer", "hf",
                      "--tokenizer-model", (out / "tokenizer.json").string()});
  CHECK(bad_eos.code == recipe::kExitUsage);
  CHECK_MESSAGE(bad_eos.err.find("eos_token_id is \"x\", not a token id") != std::string::npos, bad_eos.err);
  std::ofstream(out / "generation_config.json") << R"({"bos_token_id": 0, "eos_token_id": [1, 4]})";

  // The printed command validates as printed (dry run: resolved, files and checkpoint shapes
  // checked, nothing launched), for the LoRA and the full fine-tune.
  std::vector<std::string> cmd = printed_command(im.out, "fine-tune from it with: ");
  CHECK(cmd[0] == "finetune");
  CHECK(cmd[1] == (out / "lora.lua").string());
  cmd.push_back("--dry-run");
  auto dry = run(cmd);
  CHECK_MESSAGE(dry.code == recipe::kExitOk, (dry.err + dry.out));
  CHECK_MESSAGE(dry.out.find("lora") != std::string::npos, dry.out);
  auto full = run({"finetune", (out / "model.lua").string(), "--dry-run"});
  CHECK_MESSAGE(full.code == recipe::kExitOk, (full.err + full.out));
  auto by_dir = run({"finetune", out.string(), "--dry-run"});  // the directory names its model.lua
  CHECK_MESSAGE(by_dir.code == recipe::kExitOk, (by_dir.err + by_dir.out));

  // A recipe of another shape is refused before launch, naming the tensor, both shapes and the
  // key with the checkpoint's value.
  cmd.insert(cmd.end() - 1, "model.ffn_hidden_size=256");
  auto bad = run(cmd);
  CHECK(bad.code == recipe::kExitInvalidRecipe);
  CHECK_MESSAGE(bad.err.find("layers.0.mlp.gate.weight is [192,64] there, [256,64] here") != std::string::npos,
                bad.err);
  CHECK_MESSAGE(bad.err.find("set model.ffn_hidden_size=192") != std::string::npos, bad.err);
  auto validate = run({"validate", (out / "model.lua").string(), "model.num_layers=3"});
  CHECK(validate.code == recipe::kExitInvalidRecipe);
  CHECK_MESSAGE(validate.err.find("layers.2.attention.q.weight is missing there") != std::string::npos, validate.err);
  CHECK_MESSAGE(validate.err.find("set model.num_layers=2") != std::string::npos, validate.err);

  // Another padding of the same vocabulary (TP) passes; another vocabulary does not.
  auto pad = run({"validate", (out / "lora.lua").string(), "model.make_vocab_size_divisible_by=64"});
  CHECK_MESSAGE(pad.code == recipe::kExitOk, (pad.err + pad.out));
  auto vocab = run({"validate", (out / "lora.lua").string(), "model.vocab_size=5000"});
  CHECK(vocab.code == recipe::kExitInvalidRecipe);
  CHECK_MESSAGE(vocab.err.find("set model.vocab_size=4100") != std::string::npos, vocab.err);
}

TEST_SUITE_END();
