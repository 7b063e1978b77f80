// The check every family fixture gets (tests/reference/family_fixtures.py writes them): a tiny
// Hugging Face model in tests/data/hf_families/<name>/ (config.json, model.safetensors) and
// transformers' logits on a few token rows (expected.json), imported through the engine's HF import
// (hf::import_checkpoint, what `recipe ckpt import --format hf` runs) and run on the CPU in f32.
#pragma once

#include <functional>
#include <string>

#include "plan/plan.hpp"

namespace recipe::test {

// How far the engine's outputs are from transformers' on a fixture, each the largest over every
// row, position and vocabulary id.
struct FamilyFixtureRun {
  double logit_error = 0;    // |logit − transformers'|, the logits of the decode path (every position)
  double logprob_error = 0;  // |log p − transformers'|, the training forward's per-token losses
  double logit_scale = 0;    // max |logit| of transformers'
};

// Imports the HF model directory `hf_dir` (its config.json names the family; the recipe is made
// from config.json's keys, with a padded vocabulary) and compares with `expected_json`. `alter`
// edits the plan after the import and before the model is built (a negative control: drop the
// RoPE scaling, change θ, ...), so a test can show that a feature matters.
FamilyFixtureRun run_family_fixture(const std::string& hf_dir, const std::string& expected_json,
                                    const std::function<void(plan::Plan&)>& alter = {});

// run_family_fixture on tests/data/hf_families/<name>, without CHECKs.
FamilyFixtureRun family_fixture_diff(const std::string& name, const std::function<void(plan::Plan&)>& alter = {});

// run_family_fixture on tests/data/hf_families/<name>, CHECKing both errors within the bound.
void check_family_fixture(const std::string& name);

// The bound check_family_fixture holds both errors to (see family_fixture.cpp for the measurement).
double family_fixture_bound();

}  // namespace recipe::test
