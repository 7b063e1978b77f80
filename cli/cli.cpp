// Command-line parsing (CLI11) and dispatch to the verbs.
#include "cli/cli.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>

#include "plan/exit_codes.hpp"
#include "cli/verb_runs.hpp"
#include "cli/verbs.hpp"
#include "dsl/key_reference.hpp"
#include "dsl/suggest.hpp"

namespace recipe::cli {

namespace {

constexpr const char* kDescription =
    "recipe: train GPT- and Llama-style language models from declarative recipes.\n\n"
    "  recipe pretrain gpt_tiny --device cpu --max-steps 20\n"
    "  recipe pretrain llama3_8b parallelism.tp=2 --nodes 4 --gpus-per-node 8 --dry-run\n"
    "  recipe validate llama3_70b --nodes 8 --gpus-per-node 8\n"
    "  recipe sweep gpt3_345m trainer.micro_batch_size=2,4,8,16 model.seq_length=1024,2048 --max-steps 30\n"
    "  recipe generate experiments/gpt_tiny/run-1 --prompt \"Once upon a time\"\n"
    "  recipe eval experiments/gpt_tiny/run-1          # validation loss of its newest checkpoint\n"
    "  recipe show gpt3_345m --format lua\n";

std::string footer() {
  return std::string(kExitCodeHelp) +
         "\nRun `recipe <verb> --help` for a verb's options. Overrides are key=value pairs of recipe\n"
         "keys (model.num_layers=4, trainer.max_steps=100, parallelism.tp=2); flags apply after them.";
}

CLI::App* add_train_verb(CLI::App& app, const char* name, const char* description, PlanFlags& flags, bool& dry_run) {
  CLI::App* cmd = app.add_subcommand(name, description);
  add_plan_flags(*cmd, flags);
  cmd->add_flag("--dry-run", dry_run,
                "Print the rank map, memory per rank, derived summary and launch command; create nothing");
  cmd->footer(kExitCodeHelp);
  return cmd;
}

int usage_error(const std::string& message, std::ostream& err) {
  err << "error: " << message << "\nRun with --help for more information.\n";
  return kExitUsage;
}

// The first word names no verb: say so and list the verbs (CLI11 alone reports "arguments were not
// expected"). Hidden verbs (worker, job-state) are accepted but not listed.
std::optional<int> unknown_verb(const CLI::App& app, int argc, char** argv, std::ostream& err) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  const std::string word = argv[1];
  std::vector<std::string> shown;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) return std::nullopt;
    if (!sub->get_group().empty()) shown.push_back(sub->get_name());
  }
  err << "error: unknown verb '" << word << "'" << dsl::did_you_mean(word, shown) << "\n  verbs: ";
  for (size_t i = 0; i < shown.size(); ++i) err << (i ? ", " : "") << shown[i];
  err << "\n  `recipe --help` describes them\n";
  return kExitUsage;
}

}  // namespace

int run_cli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app(kDescription, "recipe");
  app.footer(footer());
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "Print version, build features and GPU, then exit");

  PlanFlags pretrain_flags, finetune_flags, show_flags, validate_flags;
  bool pretrain_dry = false, finetune_dry = false;
  CLI::App* pretrain =
      add_train_verb(app, "pretrain", "Pretrain a model from a preset or recipe file", pretrain_flags, pretrain_dry);
  CLI::App* finetune = add_train_verb(app, "finetune",
                                      "Fine-tune (mode=finetune: PEFT/LoRA settings are checked) from a preset "
                                      "or recipe file",
                                      finetune_flags, finetune_dry);

  SweepCommand sweep_cmd;
  CLI::App* sweep = app.add_subcommand(
      "sweep",
      "Run a grid of recipe key values as one experiment (key=v1,v2 ...): one run dir per point, points "
      "predicted not to fit skipped, finished points skipped on a re-run, an envelope report at the end");
  add_plan_flags(*sweep, sweep_cmd.flags);
  sweep->add_option("--warmup", sweep_cmd.warmup, "Steps at the start of each point left out of the report (default 5)")
      ->check(CLI::NonNegativeNumber);
  sweep->add_flag("--dry-run", sweep_cmd.dry_run, "Resolve every point and say what would run; create nothing");
  sweep->footer(kExitCodeHelp);

  std::string run_dir;
  CLI::App* worker = app.add_subcommand("worker", "Run one rank of a prepared run directory");
  worker->add_option("--run-dir", run_dir, "Run directory holding resolved.toml")->required();
  worker->group("");  // started by executors, not by people

  std::string job_run_dir, job_id;
  bool job_begin = false, job_requeued = false;
  int job_end = 0;
  CLI::App* job_state = app.add_subcommand("job-state", "Record a Slurm job's start or end in its run directory");
  job_state->add_option("--run-dir", job_run_dir, "Run directory")->required();
  job_state->add_option("--job", job_id, "Slurm job id")->required();
  job_state->add_flag("--begin", job_begin, "The job starts its ranks");
  CLI::Option* job_end_opt = job_state->add_option("--end", job_end, "The job step ended with this exit status");
  job_state->add_flag("--requeued", job_requeued, "The job is being requeued (time-limit warning)");
  job_state->group("");  // written into launch.sh by the Slurm executor

  CLI::App* list = app.add_subcommand("list", "List the presets with a one-line summary each");

  std::string format = "toml";
  CLI::App* show = app.add_subcommand("show", "Print the fully resolved plan");
  add_plan_flags(*show, show_flags);
  show->add_option("--format", format, "Output format: toml, lua or json")
      ->check(CLI::IsMember({"toml", "lua", "json"}));
  show->footer(kExitCodeHelp);

  CLI::App* validate = app.add_subcommand(
      "validate", "Check a recipe against a target cluster (no GPU needed): --nodes N --gpus-per-node G");
  add_plan_flags(*validate, validate_flags);
  validate->footer(kExitCodeHelp);

  data::PrepareOptions prep;
  CLI::App* data_cmd = app.add_subcommand("data", "Dataset tools");
  data_cmd->require_subcommand(1);
  CLI::App* prepare = data_cmd->add_subcommand("prepare", "Tokenize text/JSONL into a Megatron .bin/.idx dataset");
  prepare->add_option("--input", prep.inputs, "Input file(s): .txt or .jsonl (repeatable)")
      ->required()
      ->check(CLI::ExistingFile);
  prepare->add_option("--tokenizer", prep.tokenizer, "byte, gpt2_bpe, sentencepiece or hf")
      ->check(CLI::IsMember({"byte", "gpt2_bpe", "sentencepiece", "hf"}));
  prepare->add_option("--vocab-file", prep.vocab_file, "gpt2_bpe: vocab.json")->check(CLI::ExistingFile);
  prepare->add_option("--merges-file", prep.merges_file, "gpt2_bpe: merges.txt")->check(CLI::ExistingFile);
  prepare
      ->add_option("--tokenizer-model", prep.tokenizer_model,
                   "sentencepiece: .model file; hf: Hugging Face tokenizer.json")
      ->check(CLI::ExistingFile);
  prepare->add_option("--eod-token", prep.eod_token,
                      "hf: the token ending each document (default: the first of <|end_of_text|>, <|endoftext|>, "
                      "</s>, <eos>)");
  prepare->add_option("--json-key", prep.json_key, "JSONL field holding the text (default text)");
  prepare
      ->add_option("--format", prep.format,
                   "text (documents) or chat (JSONL conversations: messages or prompt/completion; writes "
                   "PREFIX.mask.bin too)")
      ->check(CLI::IsMember({"text", "chat"}));
  prepare->add_option("--chat-template", prep.chat_template, "chat: llama3, chatml or plain (default plain)")
      ->check(CLI::IsMember({"llama3", "chatml", "plain"}));
  prepare->add_flag("--split-paragraphs", prep.split_paragraphs,
                    "Text files: one document per blank-line-separated paragraph");
  bool no_eod = false;
  prepare->add_flag("--no-eod", no_eod, "Do not append an end-of-document token to each document");
  prepare->add_option("--output", prep.output_prefix, "Output prefix: writes PREFIX.bin and PREFIX.idx")->required();

  RunsArgs runs_args;  // `recipe runs ...` (cli/verb_runs.cpp)
  add_runs_verb(app, runs_args);

  CkptArgs ckpt_args;  // `recipe ckpt ...` (cli/verb_ckpt.cpp)
  add_ckpt_verb(app, ckpt_args);

  GenerateArgs generate_args;  // `recipe generate ...` (cli/verb_generate.cpp)
  add_generate_verb(app, generate_args);

  EvalArgs eval_args;  // `recipe eval ...` (cli/verb_eval.cpp)
  add_eval_verb(app, eval_args);

  CLI::App* version = app.add_subcommand("version", "Print version, build features (CUDA, cuDNN) and GPU");

  std::string keys_format = "text";
  CLI::App* keys = app.add_subcommand("keys", "Print every recipe key with its type, default and meaning");
  keys->add_option("--format", keys_format, "text or markdown (the form of docs/recipes.md)")
      ->check(CLI::IsMember({"text", "markdown"}));

  if (auto code = unknown_verb(app, argc, argv, err)) return *code;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e, out, err);
    return code == 0 ? kExitOk : kExitUsage;
  }

  try {
    if (show_version || *version) return run_version(out);
    if (*pretrain || *finetune) {
      bool is_pretrain = static_cast<bool>(*pretrain);
      const PlanFlags& flags = is_pretrain ? pretrain_flags : finetune_flags;
      if (auto bad = bad_override(flags))
        return usage_error(
            "unexpected argument '" + *bad + "': after the recipe, only key=value overrides are accepted", err);
      return run_train(flags, is_pretrain ? "pretrain" : "finetune", is_pretrain ? pretrain_dry : finetune_dry, out,
                       err);
    }
    if (*sweep) {
      if (auto bad = bad_override(sweep_cmd.flags))
        return usage_error("unexpected argument '" + *bad +
                               "': after the recipe, only key=v1,v2 axes and key=value "
                               "overrides are accepted",
                           err);
      return run_sweep(sweep_cmd, out, err);
    }
    if (*worker) return run_worker(run_dir, out, err);
    if (*job_state)
      return run_job_state(job_run_dir, job_id, job_begin,
                           job_end_opt->count() ? std::optional<int>(job_end) : std::nullopt, job_requeued, out, err);
    if (*keys) {
      out << (keys_format == "markdown" ? dsl::key_reference_markdown() : dsl::key_reference_text());
      return kExitOk;
    }
    if (*runs_args.cmd) return run_runs(runs_args, out, err);
    if (*ckpt_args.cmd) {
      if (auto bad = std::find_if(ckpt_args.overrides.begin(), ckpt_args.overrides.end(),
                                  [](const std::string& o) { return o.find('=') == std::string::npos; });
          bad != ckpt_args.overrides.end())
        return usage_error("unexpected argument '" + *bad + "': after the path, only key=value overrides are accepted",
                           err);
      return run_ckpt(ckpt_args, out, err);
    }
    if (*generate_args.cmd) {
      generate_args.prompt_given = generate_args.prompt_opt->count() > 0;
      return run_generate(generate_args, out, err);
    }
    if (*eval_args.cmd) return run_eval(eval_args, out, err);
    if (*list) return run_list(out, err);
    if (*show) {
      if (auto bad = bad_override(show_flags))
        return usage_error("unexpected argument '" + *bad + "': overrides look like key=value", err);
      return run_show(show_flags, format, out, err);
    }
    if (*validate) {
      if (auto bad = bad_override(validate_flags))
        return usage_error("unexpected argument '" + *bad + "': overrides look like key=value", err);
      return run_validate(validate_flags, out, err);
    }
    if (*prepare) {
      prep.append_eod = !no_eod;
      // A flag the chosen format or tokenizer does not read is refused, not ignored.
      const bool chat = prep.format == "chat";
      const std::pair<const char*, bool> unread[] = {
          {"--json-key", chat},  // chat lines are conversations (messages or prompt/completion)
          {"--split-paragraphs", chat},
          {"--no-eod", chat},  // the template decides the end tokens
          {"--chat-template", !chat},
          {"--vocab-file", prep.tokenizer != "gpt2_bpe"},
          {"--merges-file", prep.tokenizer != "gpt2_bpe"},
          {"--tokenizer-model", prep.tokenizer != "sentencepiece" && prep.tokenizer != "hf"},
      };
      for (const auto& [flag, ignored] : unread)
        if (ignored && prepare->count(flag) > 0)
          return usage_error(std::string(flag) + " is not read with --format " + prep.format + " --tokenizer " +
                                 prep.tokenizer + "; leave it out" +
                                 (std::string(flag) == "--chat-template" ? " or add --format chat" : ""),
                             err);
      if (prep.output_prefix.empty() || prep.output_prefix.back() == '/' ||
          std::filesystem::is_directory(prep.output_prefix))
        return usage_error("--output " + prep.output_prefix +
                               " names a directory; it takes a file prefix (e.g. data/chat writes data/chat.bin and "
                               "data/chat.idx)",
                           err);
      return run_data_prepare(prep, out, err);
    }
  } catch (const std::exception& e) {
    // Anything a verb did not turn into its own message: report it, never crash.
    err << "error: " << e.what() << "\n";
    return kExitRuntime;
  }
  err << app.help();
  err << "error: a verb is required (pretrain, finetune, sweep, generate, eval, list, show, validate, keys, data "
         "prepare, "
         "runs, ckpt, version)\n";
  return kExitUsage;
}

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.push_back("recipe");
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(storage.size() + 1);
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  return run_cli(static_cast<int>(storage.size()), argv.data(), out, err);
}

}  // namespace recipe::cli
