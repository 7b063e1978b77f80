// Reading and writing <prefix>.mask.bin (layout in loss_mask.hpp).
#include "core/data/loss_mask.hpp"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace recipe::data {

namespace {

constexpr uint64_t kLossMaskVersion = 1;

uint64_t read_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

std::string mask_path_of(const std::string& prefix) { return prefix + ".mask.bin"; }

LossMask::LossMask(const IndexedDataset& data) : data_(data), path_(mask_path_of(data.prefix())) {
  const std::string fix = "; regenerate it with `recipe data prepare --format chat ... --output " + data.prefix() + "`";
  std::ifstream in(path_, std::ios::binary);
  if (!in)
    throw std::runtime_error(path_ + ": loss mask not found (data.kind=sft needs the mask beside .bin/.idx)" + fix);
  const std::vector<unsigned char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (bytes.size() < kLossMaskHeaderBytes || std::memcmp(bytes.data(), kLossMaskMagic, sizeof kLossMaskMagic) != 0)
    throw std::runtime_error(path_ + ": not a loss-mask file (bad magic or shorter than its header)" + fix);
  const uint64_t version = read_u64(bytes.data() + 8);
  if (version != kLossMaskVersion)
    throw std::runtime_error(path_ + ": version " + std::to_string(version) + ", this build reads version " +
                             std::to_string(kLossMaskVersion) + fix);
  const uint64_t n = read_u64(bytes.data() + 16);
  const uint64_t bin_tokens = data.bin_bytes() / dtype_size(data.dtype());
  if (n != bin_tokens)
    throw std::runtime_error(path_ + " covers " + std::to_string(n) + " tokens but " + data.bin_path() + " holds " +
                             std::to_string(bin_tokens) + ": the mask belongs to another version of the dataset" + fix);
  if (bytes.size() != kLossMaskHeaderBytes + n)
    throw std::runtime_error(path_ + ": " + std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(kLossMaskHeaderBytes + n) + " (header + one byte per token)" + fix);
  const char* name = reinterpret_cast<const char*>(bytes.data() + 24);
  template_.assign(name, strnlen(name, kLossMaskTemplateBytes));
  mask_.assign(bytes.begin() + kLossMaskHeaderBytes, bytes.end());
  for (size_t i = 0; i < mask_.size(); ++i)
    if (mask_[i] > 1)
      throw std::runtime_error(path_ + ": byte " + std::to_string(mask_[i]) + " at token " + std::to_string(i) +
                               " is neither 0 nor 1" + fix);
}

void LossMask::read_document(int64_t d, int64_t offset, int64_t count, uint8_t* out) const {
  const size_t item = dtype_size(data_.dtype());
  for (int64_t s = data_.document_begin(d); s < data_.document_begin(d + 1) && count > 0; ++s) {
    const int64_t len = data_.sequence_length(s);
    if (offset >= len) {
      offset -= len;
      continue;
    }
    const int64_t take = std::min(count, len - offset);
    const size_t first = static_cast<size_t>(data_.sequence_pointer(s)) / item + static_cast<size_t>(offset);
    std::memcpy(out, mask_.data() + first, static_cast<size_t>(take));
    out += take;
    count -= take;
    offset = 0;
  }
  if (count > 0) throw std::out_of_range(path_ + ": read past the end of document " + std::to_string(d));
}

LossMaskWriter::LossMaskWriter(std::string path, const std::string& chat_template) : path_(std::move(path)) {
  if (chat_template.size() >= kLossMaskTemplateBytes)
    throw std::invalid_argument("loss mask: chat template name \"" + chat_template + "\" is too long");
  f_ = std::fopen(path_.c_str(), "wb");
  if (!f_) throw std::runtime_error(path_ + ": cannot open for writing");
  unsigned char header[kLossMaskHeaderBytes] = {};
  std::memcpy(header, kLossMaskMagic, sizeof kLossMaskMagic);
  put_u64(header + 8, kLossMaskVersion);
  chat_template.copy(reinterpret_cast<char*>(header + 24), chat_template.size());
  if (std::fwrite(header, 1, sizeof header, f_) != sizeof header) throw std::runtime_error(path_ + ": write failed");
}

LossMaskWriter::~LossMaskWriter() {
  if (f_) std::fclose(f_);
}

void LossMaskWriter::add(const std::vector<uint8_t>& mask) {
  if (!f_) throw std::logic_error("LossMaskWriter: add after finish");
  if (!mask.empty() && std::fwrite(mask.data(), 1, mask.size(), f_) != mask.size())
    throw std::runtime_error(path_ + ": write failed");
  tokens_ += static_cast<int64_t>(mask.size());
}

void LossMaskWriter::finish() {
  if (!f_) throw std::logic_error("LossMaskWriter: finish twice");
  unsigned char n[8];
  put_u64(n, static_cast<uint64_t>(tokens_));
  const bool ok = std::fseek(f_, 16, SEEK_SET) == 0 && std::fwrite(n, 1, sizeof n, f_) == sizeof n;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok || !closed) throw std::runtime_error(path_ + ": write failed");
}

}  // namespace recipe::data
