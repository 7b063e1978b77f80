// What a run ran on: host, OS, CPU, GPU/driver/runtime and library versions. Written to the run
// dir as host.json and printed by `recipe version`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "kernels/ops.hpp"
#include "plan/enums.hpp"

namespace recipe::exec {

struct HostInfo {
  std::string hostname;
  std::string os;         // "Linux 6.1.0-18-amd64 x86_64"
  std::string cpu_model;  // /proc/cpuinfo "model name"
  int cpu_cores = 0;      // logical CPUs usable by this process
  kernels::GpuInfo gpu;
  bool built_with_cuda = false;
  bool built_with_cudnn = false;
  std::string recipe_version;
  std::string lua_version;      // "Lua 5.4.4"
  std::string openblas_config;  // openblas_get_config()
  std::string json_version;     // nlohmann-json
};

HostInfo collect_host_info(const std::string& recipe_version);
nlohmann::ordered_json host_info_json(const HostInfo& info);

// What the run trains on, as resolved at launch (resolved.toml may keep trainer.device = "auto",
// which stays portable): {"kind": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "ranks": 8} or
// {"kind": "cpu", "gpu": null, "ranks": 2}. Stored in host.json as "device".
nlohmann::ordered_json resolved_device_json(plan::Device device, const kernels::GpuInfo& gpu, int ranks);

}  // namespace recipe::exec
