// The family fixtures of tests/data/hf_families/ (tests/reference/family_fixtures.py): tiny
// Hugging Face models with random weights and the logits transformers computes on a few token rows.
#pragma once

#include <string>

namespace recipe::testing {

// Imports tests/data/hf_families/<name> through the engine's HF import (the code
// `recipe ckpt import --format hf` runs) into a CPU f32 model of the recipe its config.json
// describes, runs it on expected.json's input_ids and CHECKs every logit against transformers'
// (the bound is in family_fixture.cpp).
void check_family_fixture(const std::string& name);

}  // namespace recipe::testing
