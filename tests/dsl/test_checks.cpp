// Every validation rule: a tree that breaks it (path and values in the message) and its fix passing.
#include "helpers.hpp"
#include "scratch_files.hpp"

TEST_SUITE_BEGIN("dsl");

using namespace recipe::dsl;
using namespace recipe::dsl::test;

namespace {

struct RuleCase {
  const char* name;
  const char* bad;                    // patch onto tiny_gpt() that breaks the rule
  const char* path;                   // expected violation path
  std::vector<std::string> message;   // substrings of the message
  const char* good;                   // patch onto tiny_gpt() that follows the rule
  std::vector<std::string> fix = {};  // substrings of the fix
};

const std::vector<RuleCase>& rule_cases() {
  static const std::vector<RuleCase> cases = {
      {"hidden % heads",
       R"({"model": {"hidden_size": 66}})",
       "model.hidden_size",
       {"model.hidden_size=66", "num_attention_heads=4"},
       R"({"model": {"hidden_size": 68}})"},
      {"heads % kv_heads",
       R"({"model": {"num_kv_heads": 3}})",
       "model.num_kv_heads",
       {"num_kv_heads=3", "num_attention_heads=4"},
       R"({"model": {"num_kv_heads": 2}})"},
      {"heads % tp",
       R"({"model": {"num_attention_heads": 16, "hidden_size": 128}, "parallelism": {"tp": 3},
           "executor": {"cpu_ranks": 12}})",
       "parallelism.tp",
       {"parallelism.tp=3 does not divide model.num_attention_heads=16"},
       R"({"model": {"num_attention_heads": 16, "hidden_size": 128}, "parallelism": {"tp": 2},
           "executor": {"cpu_ranks": 12}})",
       {"tp=2", "tp=4"}},
      {"kv_heads vs tp",
       R"({"model": {"num_attention_heads": 12, "num_kv_heads": 4, "hidden_size": 96},
           "parallelism": {"tp": 6}, "executor": {"cpu_ranks": 6}})",
       "parallelism.tp",
       {"tp=6", "num_kv_heads=4"},
       R"({"model": {"num_attention_heads": 12, "num_kv_heads": 4, "hidden_size": 96},
           "parallelism": {"tp": 4}, "executor": {"cpu_ranks": 4}})"},
      {"ffn % tp",
       R"({"model": {"ffn_hidden_size": 101}, "parallelism": {"tp": 2}, "executor": {"cpu_ranks": 2}})",
       "parallelism.tp",
       {"tp=2", "ffn_hidden_size=101"},
       R"({"model": {"ffn_hidden_size": 102}, "parallelism": {"tp": 2}, "executor": {"cpu_ranks": 2}})"},
      {"layers % pp",
       R"({"parallelism": {"pp": 3}, "executor": {"cpu_ranks": 3}})",
       "parallelism.pp",
       {"parallelism.pp=3 does not divide model.num_layers=4"},
       R"({"parallelism": {"pp": 3, "layers_per_stage": [2, 1, 1]}, "executor": {"cpu_ranks": 3}})",
       {"pp=2", "layers_per_stage"}},
      {"layers_per_stage sum",
       R"({"parallelism": {"pp": 2, "layers_per_stage": [1, 2]}, "executor": {"cpu_ranks": 2}})",
       "parallelism.layers_per_stage",
       {"sums to 3", "num_layers=4"},
       R"({"parallelism": {"pp": 2, "layers_per_stage": [1, 3]}, "executor": {"cpu_ranks": 2}})"},
      {"layers_per_stage count",
       R"({"parallelism": {"pp": 2, "layers_per_stage": [4]}, "executor": {"cpu_ranks": 2}})",
       "parallelism.layers_per_stage",
       {"1 entries", "pp=2"},
       R"({"parallelism": {"pp": 2, "layers_per_stage": [2, 2]}, "executor": {"cpu_ranks": 2}})"},
      {"layers_per_stage empty stage",
       R"({"parallelism": {"pp": 2, "layers_per_stage": [4, 0]}, "executor": {"cpu_ranks": 2}})",
       "parallelism.layers_per_stage",
       {"no layers"},
       R"({"parallelism": {"pp": 2, "layers_per_stage": [3, 1]}, "executor": {"cpu_ranks": 2}})"},
      {"world % tp·pp·cp",
       R"({"parallelism": {"tp": 2}, "executor": {"cpu_ranks": 3}})",
       "parallelism.world_size",
       {"world size 3", "executor.cpu_ranks=3", "= 2"},
       R"({"parallelism": {"tp": 2}, "executor": {"cpu_ranks": 4}})"},
      {"explicit dp",
       R"({"parallelism": {"tp": 2, "dp": 3}, "executor": {"cpu_ranks": 4}})",
       "parallelism.dp",
       {"world size 4", "2·1·1·3 = 6"},
       R"({"parallelism": {"tp": 2, "dp": 2}, "executor": {"cpu_ranks": 4}})",
       {"dp=2"}},
      {"global % micro·dp",
       R"({"trainer": {"global_batch_size": 7}, "executor": {"cpu_ranks": 2}})",
       "trainer.global_batch_size",
       {"global_batch_size=7", "2 × 2 = 4"},
       R"({"trainer": {"global_batch_size": 8}, "executor": {"cpu_ranks": 2}})",
       {"4 or 8"}},
      {"sequence parallel needs tp",
       R"({"parallelism": {"sequence_parallel": true}})",
       "parallelism.sequence_parallel",
       {"tp=1"},
       R"({"parallelism": {"sequence_parallel": true, "tp": 2}, "executor": {"cpu_ranks": 2}})"},
      {"sequence parallel splits the rows over tp",
       R"({"model": {"seq_length": 33}, "trainer": {"micro_batch_size": 1},
           "parallelism": {"sequence_parallel": true, "tp": 2}, "executor": {"cpu_ranks": 2}})",
       "parallelism.sequence_parallel",
       {"1 × 33 = 33", "tp=2"},
       R"({"model": {"seq_length": 34}, "trainer": {"micro_batch_size": 1},
           "parallelism": {"sequence_parallel": true, "tp": 2}, "executor": {"cpu_ranks": 2}})",
       {"multiple of tp=2", "sequence_parallel=false"}},
      {"TP comm overlap needs tensor parallelism (with or without sequence parallelism)",
       R"({"parallelism": {"tp_comm_overlap": true}})",
       "parallelism.tp_comm_overlap",
       {"tp_comm_overlap=true", "tp > 1", "tp=1"},
       R"({"parallelism": {"tp": 2, "tp_comm_overlap": true}, "executor": {"cpu_ranks": 2}})",
       {"tp ≥ 2", "tp_comm_overlap=false"}},
      {"PP comm overlap needs pipeline stages",
       R"({"parallelism": {"pp_comm_overlap": true}})",
       "parallelism.pp_comm_overlap",
       {"pp_comm_overlap=true", "pp > 1", "pp=1"},
       R"({"parallelism": {"pp": 2, "pp_comm_overlap": true}, "executor": {"cpu_ranks": 2}})",
       {"pp ≥ 2", "pp_comm_overlap=false"}},
      {"TP overlap chunks are at least 1",
       R"({"parallelism": {"tp": 2, "tp_comm_overlap": true, "tp_overlap_chunks": 0}, "executor": {"cpu_ranks": 2}})",
       "parallelism.tp_overlap_chunks",
       {"tp_overlap_chunks=0", "at least 1"},
       R"({"parallelism": {"tp": 2, "tp_comm_overlap": true, "tp_overlap_chunks": 1}, "executor": {"cpu_ranks": 2}})"},
      {"TP overlap chunks need a token row each (micro_batch_size 2 × seq_length 32 = 64)",
       R"({"parallelism": {"tp": 2, "tp_comm_overlap": true, "tp_overlap_chunks": 65}, "executor": {"cpu_ranks": 2}})",
       "parallelism.tp_overlap_chunks",
       {"tp_overlap_chunks=65", "= 64 token rows"},
       R"({"parallelism": {"tp": 2, "tp_comm_overlap": true, "tp_overlap_chunks": 64}, "executor": {"cpu_ranks": 2}})",
       {"tp_overlap_chunks ≤ 64"}},
      {"TP overlap chunks do nothing without the overlap",
       R"({"parallelism": {"tp": 2, "tp_overlap_chunks": 4}, "executor": {"cpu_ranks": 2}})",
       "parallelism.tp_overlap_chunks",
       {"tp_overlap_chunks=4", "no effect", "tp_comm_overlap=false"},
       R"({"parallelism": {"tp": 2, "tp_comm_overlap": true, "tp_overlap_chunks": 4}, "executor": {"cpu_ranks": 2}})",
       {"remove parallelism.tp_overlap_chunks"}},
      {"TP overlap chunks do nothing with sequence parallelism (its rings take tp blocks)",
       R"({"parallelism": {"tp": 2, "sequence_parallel": true, "tp_comm_overlap": true, "tp_overlap_chunks": 4},
           "executor": {"cpu_ranks": 2}})",
       "parallelism.tp_overlap_chunks",
       {"tp_overlap_chunks=4", "sequence_parallel=true", "tp row blocks"},
       R"({"parallelism": {"tp": 2, "sequence_parallel": true, "tp_comm_overlap": true},
           "executor": {"cpu_ranks": 2}})",
       {"sequence_parallel=false"}},
      {"TP comm overlap without sequence parallelism is not implemented with LoRA",
       R"({"mode": "finetune", "peft": {"kind": "lora", "target_modules": ["qkv"]},
           "parallelism": {"tp": 2, "tp_comm_overlap": true}, "executor": {"cpu_ranks": 2}})",
       "parallelism.tp_comm_overlap",
       {"tp_comm_overlap=true", "lora"},
       R"({"mode": "finetune", "peft": {"kind": "lora", "target_modules": ["qkv"]},
           "parallelism": {"tp": 2}, "executor": {"cpu_ranks": 2}})",
       {"tp_comm_overlap=false"}},
      {"TP comm overlap without sequence parallelism is not implemented with FP8",
       R"({"trainer": {"precision": "fp8"}, "parallelism": {"tp": 2, "tp_comm_overlap": true},
           "executor": {"cpu_ranks": 2}})",
       "parallelism.tp_comm_overlap",
       {"tp_comm_overlap=true", "fp8"},
       R"({"trainer": {"precision": "fp8"}, "parallelism": {"tp": 2}, "executor": {"cpu_ranks": 2}})",
       {"tp_comm_overlap=false"}},
      {"TP comm overlap is not implemented with LoRA",
       R"({"mode": "finetune", "peft": {"kind": "lora", "target_modules": ["qkv"]},
           "parallelism": {"tp": 2, "sequence_parallel": true, "tp_comm_overlap": true},
           "executor": {"cpu_ranks": 2}})",
       "parallelism.tp_comm_overlap",
       {"tp_comm_overlap=true", "lora"},
       R"({"mode": "finetune", "peft": {"kind": "lora", "target_modules": ["qkv"]},
           "parallelism": {"tp": 2, "sequence_parallel": true}, "executor": {"cpu_ranks": 2}})",
       {"tp_comm_overlap=false"}},
      {"TP comm overlap is not implemented with FP8",
       R"({"trainer": {"precision": "fp8"},
           "parallelism": {"tp": 2, "sequence_parallel": true, "tp_comm_overlap": true},
           "executor": {"cpu_ranks": 2}})",
       "parallelism.tp_comm_overlap",
       {"tp_comm_overlap=true", "fp8"},
       R"({"trainer": {"precision": "fp8"}, "parallelism": {"tp": 2, "sequence_parallel": true},
           "executor": {"cpu_ranks": 2}})",
       {"tp_comm_overlap=false"}},
      {"seq % 2cp",
       R"({"parallelism": {"cp": 3}, "executor": {"cpu_ranks": 3}})",
       "parallelism.cp",
       {"cp=3", "2·cp=6", "seq_length=32"},
       R"({"parallelism": {"cp": 2}, "executor": {"cpu_ranks": 2}})"},
      {"max positions ≥ seq",
       R"({"model": {"max_position_embeddings": 16}})",
       "model.max_position_embeddings",
       {"=16", "seq_length=32"},
       R"({"model": {"max_position_embeddings": 16, "position_embedding": "rope"}})"},
      {"rope needs an even head_dim",
       R"({"model": {"hidden_size": 12, "position_embedding": "rope"}})",
       "model.position_embedding",
       {"head_dim=3"},
       R"({"model": {"hidden_size": 16, "position_embedding": "rope"}})"},
      {"min_lr ≤ lr",
       R"({"optimizer": {"lr": 0.01, "min_lr": 0.1}})",
       "optimizer.min_lr",
       {"min_lr=0.1", "lr=0.01"},
       R"({"optimizer": {"lr": 0.01, "min_lr": 0.001}})"},
      {"lr > 0",
       R"({"optimizer": {"lr": 0.0, "min_lr": 0.0}})",
       "optimizer.lr",
       {"lr=0"},
       R"({"optimizer": {"lr": 0.001, "min_lr": 0.0}})"},
      {"beta1 in [0,1)",
       R"({"optimizer": {"beta1": 1.5}})",
       "optimizer.beta1",
       {"beta1=1.5", "[0, 1)"},
       R"({"optimizer": {"beta1": 0.5}})"},
      {"beta2 in [0,1)",
       R"({"optimizer": {"beta2": 1.0}})",
       "optimizer.beta2",
       {"beta2=1"},
       R"({"optimizer": {"beta2": 0.999}})"},
      {"warmup ≤ explicit decay",
       R"({"schedule": {"warmup_steps": 20, "decay_steps": 10}})",
       "schedule.warmup_steps",
       {"warmup_steps=20", "decay_steps=10"},
       R"({"schedule": {"warmup_steps": 5, "decay_steps": 10}})"},
      {"max_steps ≥ 1",
       R"({"trainer": {"max_steps": 0}})",
       "trainer.max_steps",
       {"max_steps=0"},
       R"({"trainer": {"max_steps": 1}})"},
      {"micro ≥ 1",
       R"({"trainer": {"micro_batch_size": 0}})",
       "trainer.micro_batch_size",
       {"micro_batch_size=0"},
       R"({"trainer": {"micro_batch_size": 1}})"},
      {"seq ≥ 1",
       R"({"model": {"seq_length": -5}})",
       "model.seq_length",
       {"seq_length=-5"},
       R"({"model": {"seq_length": 8}})"},
      {"positive layers",
       R"({"model": {"num_layers": 0}})",
       "model.num_layers",
       {"num_layers=0"},
       R"({"model": {"num_layers": 2}})"},
      {"lora needs finetune",
       R"({"peft": {"kind": "lora", "target_modules": ["qkv"]}})",
       "mode",
       {"peft.kind=lora", "mode=pretrain"},
       R"({"mode": "finetune", "peft": {"kind": "lora", "target_modules": ["qkv"]}})"},
      {"lora targets non-empty",
       R"({"mode": "finetune", "peft": {"kind": "lora"}})",
       "peft.target_modules",
       {"empty"},
       R"({"mode": "finetune", "peft": {"kind": "lora", "target_modules": ["fc1", "fc2"]}})"},
      {"lora target typo",
       R"({"mode": "finetune", "peft": {"kind": "lora", "target_modules": ["qvk"]}})",
       "peft.target_modules",
       {"\"qvk\"", "did you mean qkv"},
       R"({"mode": "finetune", "peft": {"kind": "lora", "target_modules": ["qkv"]}})"},
      {"lora rank ≥ 1",
       R"({"mode": "finetune", "peft": {"kind": "lora", "rank": 0, "target_modules": ["qkv"]}})",
       "peft.rank",
       {"rank=0"},
       R"({"mode": "finetune", "peft": {"kind": "lora", "rank": 4, "target_modules": ["qkv"]}})"},
      {"lora alpha > 0",
       R"({"mode": "finetune", "peft": {"kind": "lora", "alpha": 0.0, "target_modules": ["qkv"]}})",
       "peft.alpha",
       {"alpha=0"},
       R"({"mode": "finetune", "peft": {"kind": "lora", "alpha": 8.0, "target_modules": ["qkv"]}})"},
      {"indexed data needs a path",
       R"({"data": {"kind": "indexed"}})",
       "data.path",
       {"data.kind=indexed"},
       R"({"data": {"kind": "indexed", "path": "data/wiki_text"}})"},
      {"gpt2_bpe needs vocab.json",
       R"({"data": {"tokenizer": "gpt2_bpe", "merges_file": "m.txt"}})",
       "data.vocab_file",
       {"gpt2_bpe"},
       R"({"data": {"tokenizer": "gpt2_bpe", "merges_file": "m.txt", "vocab_file": "v.json"}})"},
      {"gpt2_bpe needs merges.txt",
       R"({"data": {"tokenizer": "gpt2_bpe", "vocab_file": "v.json"}})",
       "data.merges_file",
       {"gpt2_bpe"},
       R"({"data": {"tokenizer": "gpt2_bpe", "merges_file": "m.txt", "vocab_file": "v.json"}})"},
      {"sentencepiece needs a model",
       R"({"data": {"tokenizer": "sentencepiece"}})",
       "data.tokenizer_model",
       {"sentencepiece"},
       R"({"data": {"tokenizer": "sentencepiece", "tokenizer_model": "t.model"}})"},
      {"hf needs a tokenizer.json",
       R"({"data": {"tokenizer": "hf"}})",
       "data.tokenizer_model",
       {"data.tokenizer=hf", "tokenizer.json"},
       R"({"data": {"tokenizer": "hf", "tokenizer_model": "tokenizer.json"}})"},
      {"eod_token is read by hf only",
       R"({"data": {"tokenizer": "byte", "eod_token": "</s>"}})",
       "data.eod_token",
       {"</s>", "data.tokenizer=hf"},
       R"({"data": {"tokenizer": "hf", "tokenizer_model": "t.json", "eod_token": "</s>"}})"},
      {"split format", R"({"data": {"split": "98,x"}})", "data.split", {"98,x"}, R"({"data": {"split": "90,10"}})"},
      {"cuda without a GPU",
       R"({"trainer": {"device": "cuda"}})",
       "trainer.device",
       {"trainer.device=cuda but no GPU is visible here; use --device cpu"},
       R"({"trainer": {"device": "cpu"}})"},
      {"device memory text",
       R"({"executor": {"device_memory": "lots"}})",
       "executor.device_memory",
       {"lots"},
       R"({"executor": {"device_memory": "80GiB"}})"},
      {"slurm time",
       R"({"executor": {"kind": "slurm", "time": "1h"}})",
       "executor.time",
       {"1h"},
       R"({"executor": {"kind": "slurm", "time": "1-02:00:00"}})"},
      {"nodes ≥ 1", R"({"executor": {"nodes": 0}})", "executor.nodes", {"nodes=0"}, R"({"executor": {"nodes": 1}})"},
      {"experiment name",
       R"({"experiment": {"name": "a/b"}})",
       "experiment.name",
       {"a/b"},
       R"({"experiment": {"name": "a_b"}})"},
  };
  return cases;
}

}  // namespace

TEST_CASE("dsl_resolve: each rule fails when broken and passes when fixed") {
  const ScratchFiles files;  // the data and tokenizer files the cases name
  for (const auto& c : rule_cases()) {
    CAPTURE(c.name);
    const auto bad = resolve_json(with(tiny_gpt(), json::parse(c.bad)));
    const Violation* v = find_violation(bad, c.path);
    REQUIRE_MESSAGE(v, report(bad));
    for (const auto& needle : c.message) CHECK_MESSAGE(v->message.find(needle) != std::string::npos, v->message);
    for (const auto& needle : c.fix) CHECK_MESSAGE(v->fix.find(needle) != std::string::npos, v->fix);
    json fixed = with(tiny_gpt(), json::parse(c.good));
    // The LoRA cases fine-tune a random base on purpose (the base checkpoint is not their subject).
    if (fixed.value("mode", "") == "finetune") fixed["checkpoint"]["allow_random_init"] = true;
    const auto good = resolve_json(fixed);
    CHECK_MESSAGE(ok_but_unexecutable(good), report(good));
  }
}

TEST_CASE("dsl_resolve: TP comm overlap without sequence parallelism resolves, with its chunks in the plan") {
  const auto dflt = resolve_json(with(tiny_gpt(), json::parse(R"({"parallelism": {"tp": 2, "tp_comm_overlap": true},
                                                                    "executor": {"cpu_ranks": 2}})")));
  CHECK_MESSAGE(ok_but_unexecutable(dflt), report(dflt));
  CHECK(dflt.plan.parallelism.tp_comm_overlap);
  CHECK_FALSE(dflt.plan.parallelism.sequence_parallel);
  CHECK(dflt.plan.parallelism.tp_overlap_chunks == 2);
  const auto four = resolve_json(with(tiny_gpt(), json::parse(R"({
      "parallelism": {"tp": 2, "tp_comm_overlap": true, "tp_overlap_chunks": 4}, "executor": {"cpu_ranks": 2}})")));
  CHECK_MESSAGE(ok_but_unexecutable(four), report(four));
  CHECK(four.plan.parallelism.tp_overlap_chunks == 4);
  // With context parallelism a rank holds seq_length / cp rows: 2 × 32 / 2 = 32.
  const auto cp = resolve_json(with(tiny_gpt(), json::parse(R"({
      "parallelism": {"tp": 2, "cp": 2, "tp_comm_overlap": true, "tp_overlap_chunks": 33},
      "executor": {"cpu_ranks": 4}})")));
  const Violation* v = find_violation(cp, "parallelism.tp_overlap_chunks");
  REQUIRE_MESSAGE(v, report(cp));
  CHECK_MESSAGE(v->message.find("/ parallelism.cp = 32 token rows") != std::string::npos, v->message);
}

TEST_CASE("dsl_resolve: every violation is reported at once") {
  const auto r = resolve_json(with(tiny_gpt(), json::parse(R"({
      "model": {"num_layer": 4, "hidden_size": 66},
      "optimizer": {"lr": -1.0},
      "trainer": {"max_steps": "ten"},
      "parallelism": {"tp": 3}, "executor": {"cpu_ranks": 3}})")));
  CHECK(find_violation(r, "model.num_layer"));
  CHECK(find_violation(r, "model.hidden_size"));
  CHECK(find_violation(r, "optimizer.lr"));
  CHECK(find_violation(r, "trainer.max_steps"));
  CHECK(find_violation(r, "parallelism.tp"));
  CHECK(r.violations.size() >= 5);
  const std::string text = format_violations(r.violations);
  CHECK(text.rfind(std::to_string(r.violations.size()) + " problems", 0) == 0);
}

TEST_CASE("dsl_resolve: extreme values are violations, never a crash, an overflow or a long wait") {
  // micro_batch_size 0 once divided the validation sample count (SIGFPE).
  auto zero = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"micro_batch_size": 0}})")));
  REQUIRE(find_violation(zero, "trainer.micro_batch_size"));
  CHECK(find_violation(zero, "trainer.micro_batch_size")->message.find("must be at least 1") != std::string::npos);
  // 4·hidden overflowed int32 and the memory estimate went negative, so this plan "fit".
  auto huge = resolve_json(with(tiny_gpt(), json::parse(R"({"model": {"hidden_size": 1000000000}})")));
  REQUIRE(find_violation(huge, "model.hidden_size"));
  CHECK(find_violation(huge, "model.hidden_size")->message.find("must be from 1 to 131072") != std::string::npos);
  for (const char* key : {"num_layers", "ffn_hidden_size", "vocab_size", "seq_length", "num_attention_heads"}) {
    auto r = resolve_json(with(tiny_gpt(), json{{"model", {{key, 2147483647}}}}));
    CHECK_MESSAGE(find_violation(r, std::string("model.") + key), key);
  }
  // pp far above the layers: one violation at once (the split and the estimate were O(pp²)).
  auto deep = resolve_json(with(tiny_gpt(), json::parse(R"({"parallelism": {"pp": 2147483647}})")));
  REQUIRE(find_violation(deep, "parallelism.pp"));
  CHECK(find_violation(deep, "parallelism.pp")->message.find("must be at most model.num_layers=4") !=
        std::string::npos);
  // More model chunks than layers: the fix offers no split that needs a layer per chunk.
  auto chunks = resolve_json(with(tiny_gpt(), json::parse(R"({"parallelism": {"pp": 4, "virtual_pp": 2},
      "executor": {"cpu_ranks": 4}, "trainer": {"global_batch_size": 8}})")));
  const Violation* v = find_violation(chunks, "parallelism.virtual_pp");
  REQUIRE(v);
  CHECK(v->fix.find("balanced") == std::string::npos);
  CHECK(v->fix.find("use virtual_pp=1") != std::string::npos);
}

TEST_CASE("dsl_resolve: eval_iters 0 under the default validation is refused, not a silent no-op") {
  auto none = resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"eval_iters": 0}})")));
  const Violation* v = find_violation(none, "trainer.eval_iters");
  REQUIRE(v);
  CHECK(v->fix.find("trainer.eval_interval=0") != std::string::npos);
  CHECK(resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"eval_iters": 0, "eval_interval": 0}})"))).ok());
  CHECK(resolve_json(with(tiny_gpt(), json::parse(R"({"trainer": {"eval_iters": 0, "eval_samples": 4}})"))).ok());
}

TEST_CASE("dsl_resolve: the local executor cannot plan several nodes") {
  auto r = resolve_json(with(tiny_gpt(), json::parse(R"({"executor": {"nodes": 2, "cpu_ranks": 1},
      "trainer": {"micro_batch_size": 1}})")));
  const Violation* v = find_violation(r, "executor.nodes");
  REQUIRE(v);
  CHECK(v->message.find("starts ranks on this host only") != std::string::npos);
  CHECK(v->fix.find("--executor mpi") != std::string::npos);
}

TEST_CASE("dsl_resolve: kv_heads < tp is rejected, naming the KV heads and the tp that fit") {
  const auto r = resolve_json(with(tiny_gpt(), json::parse(R"({
      "model": {"num_attention_heads": 8, "num_kv_heads": 2, "hidden_size": 64},
      "parallelism": {"tp": 4}, "executor": {"cpu_ranks": 4}})")));
  REQUIRE_FALSE(r.ok());
  const std::string text = format_violations(r.violations);
  CHECK(text.find("model.num_kv_heads=2") != std::string::npos);
  CHECK(text.find("tp=2") != std::string::npos);
  CHECK(text.find("tp=4 does not divide") != std::string::npos);
}

TEST_CASE("dsl_resolve: the executor must supply the world size") {
  SUBCASE("llama3_70b on 4 × 8 GPUs with tp8 pp4 passes") {
    const auto r = resolve_json(llama3_70b(), gpu_facts(4, 8));
    CHECK_MESSAGE(r.ok(), report(r));
    CHECK(r.plan.parallelism.world_size == 32);
    CHECK(r.plan.parallelism.dp == 1);
    CHECK(r.plan.trainer.num_micro_batches == 512);
    CHECK(has_warning(r, "assumes H100-80GB"));
  }
  SUBCASE("llama3_70b on 4 × 6 GPUs fails naming the world size") {
    const auto r = resolve_json(llama3_70b(), gpu_facts(4, 6));
    const Violation* v = find_violation(r, "parallelism.world_size");
    REQUIRE_MESSAGE(v, report(r));
    CHECK(v->message.find("world size 24") != std::string::npos);
    CHECK(v->message.find("executor.nodes=4 × executor.gpus_per_node=6") != std::string::npos);
    CHECK(v->message.find("32") != std::string::npos);
    CHECK(v->fix.find("executor.gpus_per_node=8") != std::string::npos);
    CHECK(v->origin.file.find("executor facts") != std::string::npos);
  }
  SUBCASE("a non-local executor needs gpus_per_node on GPUs") {
    auto t = with(tiny_gpt(), json::parse(R"({"trainer": {"device": "cuda"}, "executor": {"kind": "mpi"}})"));
    const auto r = resolve_json(t);
    REQUIRE(find_violation(r, "executor.gpus_per_node"));
    t = with(t, json::parse(R"({"executor": {"gpus_per_node": 2}})"));
    CHECK_MESSAGE(resolve_json(t).ok(), report(resolve_json(t)));
  }
  SUBCASE("a local run cannot use more GPUs than are visible") {
    ExecutorFacts f = gpu_facts(1, 8, true, 79.6, "NVIDIA H100 80GB HBM3");
    f.visible_gpus = 2;
    const auto r = resolve_json(tiny_gpt(), f);
    REQUIRE(find_violation(r, "executor.gpus_per_node"));
    CHECK(find_violation(r, "executor.gpus_per_node")->message.find("only 2") != std::string::npos);
    f.gpus_per_node = 2;
    CHECK(resolve_json(tiny_gpt(), f).ok());
  }
}

TEST_SUITE_END();
