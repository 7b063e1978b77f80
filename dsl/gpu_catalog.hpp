// Known accelerators: usable memory (for the resolver's memory check) and dense peak throughput
// (for MFU). Looked up by a recipe's `executor.gpu_model` ("H100-80GB") or a detected device name
// ("NVIDIA H100 80GB HBM3").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace recipe::dsl {

struct GpuSpec {
  std::string name;         // canonical model name, e.g. "H100-80GB"
  double memory_gib;        // total device memory as the driver reports it
  double peak_bf16_tflops;  // dense (no sparsity) tensor-core bf16/fp16 peak

  int compute_capability = 0;  // major·10 + minor (90 = 9.0); 0 = unknown. bf16 needs ≥ 80
};

const std::vector<GpuSpec>& gpu_catalog();

// Matches case- and punctuation-insensitively: "h100", "H100-80GB", "NVIDIA H100 80GB HBM3" all
// find H100-80GB; "A100-SXM4-40GB" finds A100-40GB.
std::optional<GpuSpec> find_gpu(std::string_view model_or_device_name);

// "80GiB", "80 GiB", "80G", "81920MiB", "80GB" (10^9 bytes), "80" (GiB) → GiB. nullopt if malformed
// or not positive.
std::optional<double> parse_memory_gib(std::string_view text);

}  // namespace recipe::dsl
