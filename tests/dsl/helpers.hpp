// Shared helpers of the resolver tests: hand-built config trees (no loader needed), facts, lookups.
#pragma once

#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <toml++/toml.h>

#include "dsl/dsl.hpp"

namespace recipe::dsl::test {

using json = nlohmann::ordered_json;

inline ConfigTree tree_of(const json& root, const std::string& source = "test_recipe") {
  ConfigTree t;
  t.root = root;
  t.source = source;
  return t;
}

// A small valid GPT that resolves on CPU with one rank.
inline json tiny_gpt() {
  return json::parse(R"({
    "model": {"arch": "gpt", "num_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
              "vocab_size": 256, "seq_length": 32},
    "trainer": {"max_steps": 10, "micro_batch_size": 2}
  })");
}

// tree with `patch` merged in (RFC 7386: objects merge, other values replace).
inline json with(json tree, const json& patch) {
  tree.merge_patch(patch);
  return tree;
}

inline ResolveResult resolve_json(const json& root, const ExecutorFacts& facts = {}) {
  return resolve(tree_of(root), facts);
}

inline const Violation* find_violation(const ResolveResult& r, const std::string& path) {
  for (const auto& v : r.violations)
    if (v.path == path) return &v;
  return nullptr;
}

inline std::string report(const ResolveResult& r) { return format_violations(r.violations); }

// True when the only violations are keys this version cannot execute (parallelism.cp > 1): the
// rules of such keys are still tested on plans that keep them.
inline bool ok_but_unexecutable(const ResolveResult& r) {
  for (const auto& v : r.violations)
    if (v.message.find("not implemented in this version") == std::string::npos) return false;
  return true;
}

inline bool has_warning(const ResolveResult& r, const std::string& needle) {
  for (const auto& w : r.warnings)
    if (w.find(needle) != std::string::npos) return true;
  return false;
}

inline ExecutorFacts gpu_facts(int nodes, int gpus_per_node, bool has_gpu = false, double memory_gib = 0,
                               const std::string& name = "") {
  ExecutorFacts f;
  f.nodes = nodes;
  f.gpus_per_node = gpus_per_node;
  f.has_gpu = has_gpu;
  f.visible_gpus = has_gpu ? gpus_per_node : 0;
  f.gpu_memory_gib = memory_gib;
  f.gpu_name = name;
  return f;
}

// The published model configurations (same values as the presets).
inline json gpt3_345m() {
  return json::parse(R"({
    "model": {"arch": "gpt", "num_layers": 24, "hidden_size": 1024, "num_attention_heads": 16,
              "ffn_hidden_size": 4096, "vocab_size": 50257, "seq_length": 1024, "tie_embeddings": true},
    "trainer": {"max_steps": 100, "micro_batch_size": 4, "global_batch_size": 4}
  })");
}

inline json llama3(int layers, int hidden, int heads, int kv, int ffn) {
  json t = json::parse(R"({
    "model": {"arch": "llama", "norm": "rmsnorm", "activation": "swiglu", "position_embedding": "rope",
              "rope_theta": 500000.0, "tie_embeddings": false, "bias": false, "vocab_size": 128256,
              "seq_length": 8192},
    "trainer": {"micro_batch_size": 1, "max_steps": 100}
  })");
  t["model"]["num_layers"] = layers;
  t["model"]["hidden_size"] = hidden;
  t["model"]["num_attention_heads"] = heads;
  t["model"]["num_kv_heads"] = kv;
  t["model"]["ffn_hidden_size"] = ffn;
  return t;
}
inline json llama3_8b() { return llama3(32, 4096, 32, 8, 14336); }
inline json llama3_70b() {
  return with(llama3(80, 8192, 64, 8, 28672),
              json::parse(R"({"trainer": {"global_batch_size": 512, "recompute": "full"},
                              "parallelism": {"tp": 8, "pp": 4, "zero1": true},
                              "executor": {"kind": "slurm", "nodes": 4, "gpus_per_node": 8}})"));
}

// toml++ document → config tree, the way a loader would build it (ints stay ints).
inline json toml_to_json(const toml::node& node) {
  if (auto t = node.as_table()) {
    json out = json::object();
    for (const auto& [k, v] : *t) out[std::string(k.str())] = toml_to_json(v);
    return out;
  }
  if (auto a = node.as_array()) {
    json out = json::array();
    for (const auto& v : *a) out.push_back(toml_to_json(v));
    return out;
  }
  if (auto v = node.as_integer()) return v->get();
  if (auto v = node.as_floating_point()) return v->get();
  if (auto v = node.as_boolean()) return v->get();
  if (auto v = node.as_string()) return v->get();
  return nullptr;
}

}  // namespace recipe::dsl::test
