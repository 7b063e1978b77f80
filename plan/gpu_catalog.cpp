#include "plan/gpu_catalog.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace recipe::plan {

namespace {

// One way a catalog entry is recognised: a word of the name is `family` (or two adjacent words
// spell it: "6000 Ada") and, when set, a later word contains `tag` (the memory size or form factor
// that tells two variants of one family apart).
struct Pattern {
  std::string family;
  std::string tag;
  std::size_t spec;  // index into gpu_catalog()
};

// Upper-case words split at anything but letters and digits: "NVIDIA H100 80GB HBM3" →
// NVIDIA, H100, 80GB, HBM3.
std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      out.back() += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    else if (!out.back().empty())
      out.emplace_back();
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

// `word` names `family`: equal, or a suffix that is no further model number ("H100SXM" is an
// H100; "H1000" and "H200" are not, nor is "L40" an "L4").
bool names_family(const std::string& word, const std::string& family) {
  if (word.compare(0, family.size(), family) != 0) return false;
  return word.size() == family.size() || !std::isdigit(static_cast<unsigned char>(word[family.size()]));
}

}  // namespace

// Memory figures are the totals nvidia-smi reports (MiB / 1024), which sit a little below the
// marketing size; peak figures are NVIDIA's dense bf16 numbers with fp32 accumulation (SXM parts
// unless named otherwise).
//
// GeForce and laptop parts (sources: NVIDIA's Ampere GA102, Ada and Blackwell GeForce whitepapers,
// "Peak BF16 Tensor TFLOPS with FP32 Accumulate", dense; GeForce runs fp32-accumulate tensor math
// at half the fp16-accumulate rate). Laptop GPUs have no whitepaper figure: NVIDIA publishes
// "AI TOPS" per laptop GPU (Ada: FP8 with sparsity; Blackwell: FP4 with sparsity), and the desktop
// parts fix the ratio to dense bf16 with fp32 accumulation (RTX 4090: 1321 AI TOPS / 165.2 = 8;
// RTX 5090: 3352 AI TOPS / 209.5 = 16), so laptop peaks are AI TOPS / 8 (Ada) or / 16 (Blackwell),
// at the part's highest power limit. 30-series laptop GPUs are left out: NVIDIA gives no per-part
// tensor figure and their memory differs by model (8 or 16 GB for a "3080 Laptop").
//
// Compute capabilities are NVIDIA's (the resolver refuses GPUs below 8.0: no bf16 tensor cores).
//
// GB10 (DGX Spark, compute capability 12.1): NVIDIA's DGX Spark page gives 128 GB of coherent
// unified LPDDR5x shared with the 20-core Grace CPU and "up to 1 PFLOP FP4 with sparsity"
// (1000 AI TOPS); the Blackwell GeForce ratio above gives 1000 / 16 = 62.5 TFLOPS dense bf16 with
// fp32 accumulation (the same as RTX 5070, which shares its 6,144 CUDA cores and 988 AI TOPS).
// 128 GB = 119.2 GiB, all of it shared with the operating system (unified_memory).
const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> catalog = {
      {"B200", 179.1, 2250.0, 100},           // 0
      {"H200", 140.4, 989.4, 90},             // 1
      {"GH200", 95.6, 989.4, 90},             // 2
      {"H100-NVL", 93.6, 835.0, 90},          // 3
      {"H100-PCIe", 79.6, 756.0, 90},         // 4
      {"H100-80GB", 79.6, 989.4, 90},         // 5
      {"H20", 95.6, 148.0, 90},               // 6
      {"A100-80GB", 80.0, 312.0, 80},         // 7
      {"A100-40GB", 40.0, 312.0, 80},         // 8
      {"L40S", 45.0, 362.1, 89},              // 9
      {"L40", 45.0, 181.0, 89},               // 10
      {"L4", 22.5, 121.0, 89},                // 11
      {"A10G", 22.5, 70.0, 86},               // 12
      {"A10", 22.5, 125.0, 86},               // 13
      {"RTX-A6000", 48.0, 154.8, 86},         // 14
      {"RTX-6000-Ada", 48.0, 364.2, 89},      // 15
      {"RTX-4090", 24.0, 165.2, 89},          // 16
      {"RTX-3090", 24.0, 35.6, 86},           // 17
      {"V100-32GB", 32.0, 125.0, 70},         // 18
      {"V100-16GB", 16.0, 125.0, 70},         // 19
      {"GB10", 119.2, 62.5, 121, true},       // 20
      {"RTX-5090", 31.8, 209.5, 120},         // 21
      {"RTX-5080", 16.0, 112.6, 120},         // 22
      {"RTX-4080", 16.0, 97.5, 89},           // 23
      {"RTX-4070", 12.0, 58.3, 89},           // 24
      {"RTX-3080", 10.0, 29.8, 86},           // 25
      {"RTX-5090-Laptop", 24.0, 114.0, 120},  // 26: 1824 AI TOPS / 16
      {"RTX-5080-Laptop", 16.0, 83.4, 120},   // 27: 1334 AI TOPS / 16
      {"RTX-4090-Laptop", 16.0, 85.8, 89},    // 28: 686 AI TOPS / 8
      {"RTX-4080-Laptop", 12.0, 67.8, 89},    // 29: 542 AI TOPS / 8
      {"RTX-4070-Laptop", 8.0, 40.1, 89},     // 30: 321 AI TOPS / 8
  };
  return catalog;
}

double usable_memory_gib(const GpuSpec& spec, double available_gib) {
  if (!spec.unified_memory) return spec.memory_gib;
  if (available_gib > 0) return std::min(available_gib, spec.memory_gib);
  return spec.memory_gib * kUnifiedMemoryUsableFraction;
}

std::optional<GpuSpec> find_gpu(std::string_view model_or_device_name) {
  // Most specific first, so a family that is a prefix of another (H20/H200, L4/L40/L40S, A10/A100)
  // is only tried after the longer names failed, and a laptop part before its desktop namesake
  // ("NVIDIA GeForce RTX 4090 Laptop GPU").
  static const std::vector<Pattern> patterns = {
      {"GB10", "", 20},       {"B200", "", 0},        {"GH200", "", 2},       {"H200", "", 1},
      {"H100", "NVL", 3},     {"H100", "PCIE", 4},    {"H100", "", 5},        {"H20", "", 6},
      {"A100", "80", 7},      {"A100", "", 8},        {"L40S", "", 9},        {"L40", "", 10},
      {"L4", "", 11},         {"A10G", "", 12},       {"A10", "", 13},        {"6000ADA", "", 15},
      {"A6000", "", 14},      {"5090", "LAPTOP", 26}, {"5080", "LAPTOP", 27}, {"4090", "LAPTOP", 28},
      {"4080", "LAPTOP", 29}, {"4070", "LAPTOP", 30}, {"5090", "", 21},       {"5080", "", 22},
      {"4090", "", 16},       {"4080", "", 23},       {"4070", "", 24},       {"3090", "", 17},
      {"3080", "", 25},       {"V100", "32", 18},     {"V100", "", 19},
  };
  const std::vector<std::string> w = words(model_or_device_name);
  for (const auto& p : patterns) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      // The family in one word, or in this word and the next ("6000 ADA").
      std::size_t after = 0;
      if (names_family(w[i], p.family))
        after = i + 1;
      else if (i + 1 < w.size() && names_family(w[i] + w[i + 1], p.family))
        after = i + 2;
      else
        continue;
      bool tagged = p.tag.empty();
      // The tag may follow in the family's own word ("A100-80GB" is one word in "A10080GB" form too).
      if (!tagged && w[after - 1].find(p.tag, p.family.size()) != std::string::npos) tagged = true;
      for (std::size_t j = after; j < w.size() && !tagged; ++j) tagged = w[j].find(p.tag) != std::string::npos;
      if (tagged) return gpu_catalog()[p.spec];
    }
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

}  // namespace recipe::plan
