#include "dsl/gpu_catalog.hpp"

#include <cctype>
#include <charconv>
#include <cmath>

namespace recipe::dsl {

namespace {

// One way a catalog entry is recognised: the normalized name contains `family` and, when set,
// `tag` (the memory size that tells two variants of one family apart).
struct Pattern {
  std::string family;
  std::string tag;
  std::size_t spec;  // index into gpu_catalog()
};

// Upper-case, alphanumerics only, without the vendor prefix: "NVIDIA H100 80GB HBM3" → "H10080GBHBM3".
std::string normalize(std::string_view s) {
  std::string out;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* prefix : {"NVIDIA", "GEFORCE", "TESLA"})
    if (out.rfind(prefix, 0) == 0) out.erase(0, std::string_view(prefix).size());
  return out;
}

}  // namespace

// Memory figures are the totals nvidia-smi reports (MiB / 1024), which sit a little below the
// marketing size; peak figures are NVIDIA's dense bf16 numbers (SXM parts unless named otherwise).
const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> catalog = {
      {"B200", 179.1, 2250.0},        // 0
      {"H200", 140.4, 989.4},         // 1
      {"GH200", 95.6, 989.4},         // 2
      {"H100-NVL", 93.6, 835.0},      // 3
      {"H100-PCIe", 79.6, 756.0},     // 4
      {"H100-80GB", 79.6, 989.4},     // 5
      {"H20", 95.6, 148.0},           // 6
      {"A100-80GB", 80.0, 312.0},     // 7
      {"A100-40GB", 40.0, 312.0},     // 8
      {"L40S", 45.0, 362.1},          // 9
      {"L40", 45.0, 181.0},           // 10
      {"L4", 22.5, 121.0},            // 11
      {"A10G", 22.5, 70.0},           // 12
      {"A10", 22.5, 125.0},           // 13
      {"RTX-A6000", 48.0, 154.8},     // 14
      {"RTX-6000-Ada", 48.0, 364.2},  // 15
      {"RTX-4090", 24.0, 165.2},      // 16
      {"RTX-3090", 24.0, 71.0},       // 17
      {"V100-32GB", 32.0, 125.0},     // 18
      {"V100-16GB", 16.0, 125.0},     // 19
  };
  return catalog;
}

std::optional<GpuSpec> find_gpu(std::string_view model_or_device_name) {
  // Most specific first, so a family that is a prefix of another (H20/H200, L4/L40/L40S, A10/A100)
  // is only tried after the longer names failed.
  static const std::vector<Pattern> patterns = {
      {"B200", "", 0},   {"GH200", "", 2}, {"H200", "", 1},   {"H100", "NVL", 3}, {"H100", "PCIE", 4},
      {"H100", "", 5},   {"H20", "", 6},   {"A100", "80", 7}, {"A100", "", 8},    {"L40S", "", 9},
      {"L40", "", 10},   {"L4", "", 11},   {"A10G", "", 12},  {"A10", "", 13},    {"6000ADA", "", 15},
      {"A6000", "", 14}, {"4090", "", 16}, {"3090", "", 17},  {"V100", "32", 18}, {"V100", "", 19},
  };
  const std::string name = normalize(model_or_device_name);
  if (name.empty()) return std::nullopt;
  for (const auto& p : patterns) {
    const auto at = name.find(p.family);
    if (at == std::string::npos) continue;
    const std::size_t end = at + p.family.size();
    if (!p.tag.empty() && name.find(p.tag, end) == std::string::npos) continue;
    return gpu_catalog()[p.spec];
  }
  return std::nullopt;
}

std::optional<double> parse_memory_gib(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  double value = 0;
  const auto res = std::from_chars(text.data() + i, text.data() + text.size(), value);
  if (res.ec != std::errc() || !std::isfinite(value) || value <= 0) return std::nullopt;
  std::string unit;
  for (const char* p = res.ptr; p != text.data() + text.size(); ++p)
    if (!std::isspace(static_cast<unsigned char>(*p)))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (unit.empty() || unit == "g" || unit == "gi" || unit == "gib") return value;
  if (unit == "gb") return value * 1e9 / kGiB;
  if (unit == "m" || unit == "mi" || unit == "mib") return value / 1024.0;
  if (unit == "mb") return value * 1e6 / kGiB;
  if (unit == "t" || unit == "ti" || unit == "tib") return value * 1024.0;
  if (unit == "tb") return value * 1e12 / kGiB;
  return std::nullopt;
}

}  // namespace recipe::dsl
