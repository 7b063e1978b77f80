// Known accelerators: usable memory (for the resolver's memory check) and dense peak throughput
// (for MFU). Looked up by a recipe's `executor.gpu_model` ("H100-80GB") or a detected device name
// ("NVIDIA H100 80GB HBM3").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace recipe::plan {

struct GpuSpec {
  std::string name;            // canonical model name, e.g. "H100-80GB"
  double memory_gib;           // total device memory as the driver reports it (unified: the system's)
  double peak_bf16_tflops;     // dense (no sparsity) tensor-core bf16 peak with fp32 accumulation
  int compute_capability = 0;  // major·10 + minor (90 = 9.0); 0 = unknown. bf16 needs ≥ 80
  // The GPU shares one memory with the CPU (GB10, the DGX Spark): the operating system, the CPU
  // side of the process and every other program live in `memory_gib` too, so the memory check
  // uses what is available to the process (usable_memory_gib), not the total.
  bool unified_memory = false;
};

// Of a unified-memory device's total, the share the memory check assumes a training process can
// have when the device is not the one resolving the plan (planning for a DGX Spark elsewhere):
// 85%, leaving ~18 GiB of a 128 GB Spark to DGX OS, its desktop and the process's host side. On
// the device itself the check uses MemAvailable instead (ExecutorFacts::host_memory_gib).
inline constexpr double kUnifiedMemoryUsableFraction = 0.85;

// The memory the check compares a rank's estimate with: `spec.memory_gib` for a discrete GPU; for a
// unified one, `available_gib` (the host's MemAvailable where the plan runs here, > 0) or else
// kUnifiedMemoryUsableFraction of the total.
double usable_memory_gib(const GpuSpec& spec, double available_gib);

const std::vector<GpuSpec>& gpu_catalog();

// Matches case- and punctuation-insensitively: "h100", "H100-80GB", "NVIDIA H100 80GB HBM3" all
// find H100-80GB; "A100-SXM4-40GB" finds A100-40GB.
std::optional<GpuSpec> find_gpu(std::string_view model_or_device_name);

// "80GiB", "80 GiB", "80G", "81920MiB", "80GB" (10^9 bytes), "80" (GiB) → GiB. nullopt if malformed
// or not positive.
std::optional<double> parse_memory_gib(std::string_view text);

}  // namespace recipe::plan
