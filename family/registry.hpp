// Every model family the engine builds, one line each in registry.cpp; model.arch names one.
#pragma once

#include <span>
#include <string_view>

#include "family/family.hpp"

namespace recipe::core {

const Family& gpt_family();    // family/gpt.cpp
const Family& llama_family();  // family/llama.cpp
const Family& qwen2_family();  // family/qwen2.cpp
const Family& qwen3_family();  // family/qwen3.cpp

// The registered families, in model.arch's order (plan::Arch).
std::span<const Family* const> families();
// The family whose arch is `arch`; nullptr when none is.
const Family* find_family(std::string_view arch);

}  // namespace recipe::core
