#include "plan/data_split.hpp"

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace recipe::data {

const char* split_name(Split s) {
  switch (s) {
    case Split::train:
      return "train";
    case Split::valid:
      return "valid";
    case Split::test:
      return "test";
  }
  return "?";
}

std::array<double, 3> parse_split(const std::string& split) {
  auto bad = [&](const std::string& why) {
    return std::runtime_error("data.split=\"" + split + "\": " + why +
                              "; expected up to three non-negative train,valid,test proportions such as \"98,2,0\"");
  };
  std::vector<double> parts;
  size_t pos = 0;
  while (true) {
    const size_t next = split.find_first_of(",/", pos);
    std::string item = split.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) throw bad("empty entry");
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end != '\0') throw bad("\"" + item + "\" is not a number");
    if (!std::isfinite(v) || v < 0) throw bad("\"" + item + "\" is not a non-negative number");
    parts.push_back(v);
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  if (parts.size() > 3) throw bad("more than three entries");
  parts.resize(3, 0.0);
  const double sum = parts[0] + parts[1] + parts[2];
  if (sum <= 0) throw bad("the proportions sum to zero");
  return {parts[0] / sum, parts[1] / sum, parts[2] / sum};
}

std::array<DocumentRange, 3> split_documents(int64_t n, const std::array<double, 3>& weights) {
  std::array<int64_t, 4> b{0, 0, 0, 0};
  const int saved = std::fegetround();
  std::fesetround(FE_TONEAREST);  // nearbyint then rounds half to even, like Python's round()
  for (int i = 0; i < 3; ++i)
    b[i + 1] = b[i] + static_cast<int64_t>(std::nearbyint(weights[i] * static_cast<double>(n)));
  std::fesetround(saved);
  const int64_t excess = b[3] - n;
  for (int i = 1; i < 4; ++i) b[i] = std::clamp<int64_t>(b[i] - excess, 0, n);
  std::array<DocumentRange, 3> out;
  for (int i = 0; i < 3; ++i) out[i] = {b[i], std::max(b[i], b[i + 1])};
  return out;
}

}  // namespace recipe::data
