// The tiny Hugging Face models of tests/data/hf_families/<name>/ (written by
// tests/reference/family_fixtures.py, with transformers' float32 logits in expected.json), run
// through the engine: imported by the real HF import path (hf::import_checkpoint, what `recipe
// ckpt import --format hf` runs), loaded into a CPU f32 model, and compared logit by logit.
#pragma once

#include <functional>
#include <string>

#include "plan/plan.hpp"

namespace recipe::test {

// Imports the fixture, runs expected.json's input_ids through the engine and CHECKs every logit
// (and, through the training forward's per-token losses, every log-probability) against
// transformers' within the bound family_fixture.cpp states.
void check_family_fixture(const std::string& name);

// The largest differences from transformers, for negative controls.
struct FixtureDiff {
  double logits = 0;    // max |engine logit − transformers logit| (the decode path)
  double logprobs = 0;  // max |engine log p − transformers log p| (the training forward)
  double scale = 0;     // max |transformers logit|
};
// As check_family_fixture without CHECKs: `alter` edits the plan after the import and before the
// model is built (e.g. drops the RoPE scaling), so a test can show that a feature matters.
FixtureDiff family_fixture_diff(const std::string& name, const std::function<void(plan::Plan&)>& alter = {});

}  // namespace recipe::test
