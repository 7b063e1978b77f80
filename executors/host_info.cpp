// Host facts gathered cheaply: system calls, /proc, compile-time library versions.
#include "executors/host_info.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <cblas.h>
#include <lua.hpp>

namespace recipe::exec {

namespace {

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto value = line.substr(colon + 1);
        auto first = value.find_first_not_of(" \t");
        return first == std::string::npos ? "" : value.substr(first);
      }
    }
  }
  return "";
}

}  // namespace

HostInfo collect_host_info(const std::string& recipe_version) {
  HostInfo h;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) h.hostname = host;
  struct utsname u {};
  if (uname(&u) == 0) h.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
  h.cpu_model = read_cpu_model();
  h.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  h.gpu = kernels::query_gpus();
  h.built_with_cuda = kernels::built_with_cuda();
#ifdef RECIPE_WITH_CUDNN
  h.built_with_cudnn = true;
#endif
  h.recipe_version = recipe_version;
  h.lua_version = LUA_RELEASE;
  if (const char* cfg = openblas_get_config()) h.openblas_config = cfg;
  h.json_version = std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." + std::to_string(NLOHMANN_JSON_VERSION_MINOR) +
                   "." + std::to_string(NLOHMANN_JSON_VERSION_PATCH);
  return h;
}

nlohmann::ordered_json host_info_json(const HostInfo& h) {
  nlohmann::ordered_json gpu = nullptr;
  if (h.gpu.count > 0) {
    gpu = {{"count", h.gpu.count},
           {"name", h.gpu.name},
           {"memory_bytes", h.gpu.memory_bytes},
           {"compute_capability", std::to_string(h.gpu.sm_major) + "." + std::to_string(h.gpu.sm_minor)},
           {"driver_version", h.gpu.driver_version},
           {"cuda_runtime_version", h.gpu.runtime_version}};
  }
  return {{"hostname", h.hostname},
          {"os", h.os},
          {"cpu", {{"model", h.cpu_model}, {"cores", h.cpu_cores}}},
          {"gpu", gpu},
          {"recipe", {{"version", h.recipe_version}, {"cuda", h.built_with_cuda}, {"cudnn", h.built_with_cudnn}}},
          {"libraries", {{"lua", h.lua_version}, {"openblas", h.openblas_config}, {"nlohmann_json", h.json_version}}}};
}

nlohmann::ordered_json resolved_device_json(plan::Device device, const kernels::GpuInfo& gpu, int ranks) {
  const bool cuda = device == plan::Device::cuda || (device == plan::Device::auto_ && gpu.count > 0);
  nlohmann::ordered_json gpu_name = nullptr;
  if (cuda && !gpu.name.empty()) gpu_name = gpu.name;
  return {{"kind", cuda ? "cuda" : "cpu"}, {"gpu", gpu_name}, {"ranks", ranks}};
}

}  // namespace recipe::exec
