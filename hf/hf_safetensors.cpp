// Reading and writing Hugging Face safetensors model files (see hf_safetensors.hpp).
#include "hf/hf_safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/box_math.hpp"
#include "checkpoint/file_io.hpp"
#include "checkpoint/safetensors.hpp"

namespace recipe::ckpt::hf {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t(1) << 30;

// Element sizes of the safetensors dtypes a model file may hold; 0 = unknown.
uint64_t element_size(const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"F64", 8}, {"F32", 4},  {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U8", 1},  {"BOOL", 1}, {"U16", 2}, {"U32", 4},  {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

class Fd {
 public:
  explicit Fd(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) io::throw_errno(path, "open");
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

uint64_t file_size_of(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) io::throw_errno(path, "stat");
  return uint64_t(st.st_size);
}

// Every tensor of one file, validated against the file's size.
std::vector<HfTensor> read_file_header(const std::string& path) {
  const Fd fd(path);
  const uint64_t size = file_size_of(fd.get(), path);
  auto corrupt = [&](const std::string& what) {
    return CheckpointError(path + ": not a valid safetensors file: " + what +
                           " (re-download it or save it again with save_pretrained(safe_serialization=True))");
  };
  if (size < 8) throw corrupt("only " + std::to_string(size) + " bytes");
  unsigned char prefix[8];
  io::read_exact(fd.get(), path, 0, prefix, 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | prefix[i];
  if (header_len > size - 8 || header_len > kMaxHeaderBytes)
    throw corrupt("header length " + std::to_string(header_len) + " does not fit in the " + std::to_string(size) +
                  "-byte file");
  std::string text(size_t(header_len), '\0');
  io::read_exact(fd.get(), path, 8, text.data(), text.size());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw corrupt(std::string("header JSON does not parse: ") + e.what());
  }
  if (!j.is_object()) throw corrupt("header is not a JSON object");
  const uint64_t data_start = 8 + header_len, data_size = size - data_start;
  std::vector<HfTensor> out;
  for (const auto& [key, v] : j.items()) {
    if (key == "__metadata__") continue;
    HfTensor t;
    t.name = key;
    t.file = path;
    try {
      t.dtype = v.at("dtype").get<std::string>();
      t.shape = v.at("shape").get<std::vector<int64_t>>();
      const auto off = v.at("data_offsets").get<std::vector<uint64_t>>();
      if (off.size() != 2) throw corrupt("tensor \"" + key + "\": data_offsets must be [begin, end]");
      if (off[0] > off[1] || off[1] > data_size)
        throw corrupt("tensor \"" + key + "\": data_offsets [" + std::to_string(off[0]) + ", " +
                      std::to_string(off[1]) + "] outside the " + std::to_string(data_size) + "-byte data buffer");
      t.offset = data_start + off[0];
      t.bytes = off[1] - off[0];
    } catch (const nlohmann::json::exception& e) {
      throw corrupt("tensor \"" + key + "\": " + e.what());
    }
    for (int64_t s : t.shape)
      if (s < 0) throw corrupt("tensor \"" + key + "\": negative size in shape " + shape_to_string(t.shape));
    const uint64_t esize = element_size(t.dtype);
    if (esize == 0) throw corrupt("tensor \"" + key + "\": unknown dtype \"" + t.dtype + "\"");
    if (uint64_t(t.numel()) * esize != t.bytes)
      throw corrupt("tensor \"" + key + "\": shape " + shape_to_string(t.shape) + " of " + t.dtype + " needs " +
                    std::to_string(uint64_t(t.numel()) * esize) + " bytes but data_offsets span " +
                    std::to_string(t.bytes));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

int64_t HfTensor::numel() const { return shape_numel(shape); }

float bf16_to_f32(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);  // inf / NaN
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 → 127
  } else if (mant == 0) {
    u = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    u = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// ---------------------------------------------------------------------------------------------
// Reading

HfTensorFiles::HfTensorFiles(const std::string& dir_in) {
  const fs::path dir = fs::absolute(dir_in);
  if (!fs::is_directory(dir))
    throw CheckpointError(dir.string() +
                          ": not a directory (give the Hugging Face model directory that holds "
                          "config.json and model.safetensors)");
  const fs::path single = dir / kSingleFile, index = dir / kIndexFile;
  std::map<std::string, std::string> expected_file;  // tensor → file, from the index
  if (fs::exists(index)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(io::read_file(index.string()));
    } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(index.string() + ": does not parse as JSON: " + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw CheckpointError(index.string() + ": has no \"weight_map\" object (tensor name → file)");
    std::set<std::string> names;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw CheckpointError(index.string() + ": weight_map[\"" + tensor + "\"] is not a file name");
      const std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f == ".." || f.empty())
        throw CheckpointError(index.string() + ": weight_map[\"" + tensor + "\"]=\"" + f +
                              "\" is not a file name in this directory");
      expected_file[tensor] = (dir / f).string();
      names.insert((dir / f).string());
    }
    files_.assign(names.begin(), names.end());
    for (const std::string& f : files_)
      if (!fs::exists(f))
        throw CheckpointError(f + ": missing (named by " + index.string() + "); download every shard of the model");
  } else if (fs::exists(single)) {
    files_.push_back(single.string());
  } else {
    std::string hint;
    if (fs::exists(dir / "pytorch_model.bin") || fs::exists(dir / "pytorch_model.bin.index.json"))
      hint =
          " (it holds pytorch_model.bin: convert it with transformers' save_pretrained(dir, safe_serialization=True))";
    throw CheckpointError(dir.string() + ": neither " + kSingleFile + " nor " + kIndexFile + hint);
  }
  for (const std::string& f : files_)
    for (HfTensor& t : read_file_header(f)) {
      auto it = expected_file.find(t.name);
      if (!expected_file.empty() && it == expected_file.end()) continue;  // not indexed: ignored as HF does
      if (tensors_.count(t.name))
        throw CheckpointError(f + ": tensor \"" + t.name + "\" is also in " + tensors_[t.name].file);
      tensors_.emplace(t.name, std::move(t));
    }
  for (const auto& [name, file] : expected_file)
    if (!tensors_.count(name))
      throw CheckpointError(file + ": has no tensor \"" + name + "\" although " + index.string() +
                            " says so; the download is incomplete or the index is stale");
}

HfTensorFiles::~HfTensorFiles() = default;

std::vector<std::string> HfTensorFiles::names() const {
  std::vector<std::string> r;
  for (const auto& [n, t] : tensors_) r.push_back(n);
  return r;
}

const HfTensor* HfTensorFiles::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<float> HfTensorFiles::read_f32(const std::string& name) const {
  const HfTensor* t = find(name);
  if (!t) throw CheckpointError("no tensor \"" + name + "\" in " + (files_.empty() ? "" : files_.front()));
  const int64_t n = t->numel();
  std::vector<float> out(static_cast<size_t>(n));
  if (t->dtype != "F32" && t->dtype != "BF16" && t->dtype != "F16")
    throw CheckpointError(t->file + ": tensor \"" + name + "\" is " + t->dtype +
                          "; only F32, BF16 and F16 weights can be imported");
  std::vector<char> raw(size_t(t->bytes));
  const Fd fd(t->file);
  io::read_exact(fd.get(), t->file, t->offset, raw.data(), raw.size());
  if (t->dtype == "F32") {
    std::memcpy(out.data(), raw.data(), raw.size());
  } else {
    const bool bf = t->dtype == "BF16";
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      out[size_t(i)] = bf ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing

struct SafetensorsFileWriter::Impl {
  std::vector<HfOutTensor> tensors;
  size_t next = 0;
  std::string path;
  io::AtomicFile file;
  std::vector<uint16_t> narrow;  // bf16 staging
  Impl(const std::string& p) : path(p), file(p) {}
};

SafetensorsFileWriter::SafetensorsFileWriter(const std::string& path, std::vector<HfOutTensor> tensors,
                                             const std::map<std::string, std::string>& metadata)
    : impl_(std::make_unique<Impl>(path)) {
  std::map<std::string, safetensors::Entry> entries;
  uint64_t at = 0;
  for (const HfOutTensor& t : tensors) {
    safetensors::Entry e;
    e.dtype = t.dtype;
    e.shape = t.shape;
    e.begin = at;
    at += uint64_t(shape_numel(t.shape)) * dtype_size(t.dtype);
    e.end = at;
    if (!entries.emplace(t.name, e).second) throw CheckpointError(path + ": tensor \"" + t.name + "\" declared twice");
  }
  const std::string header = safetensors::encode_header(entries, metadata);
  impl_->file.write(header.data(), header.size());
  impl_->tensors = std::move(tensors);
}

SafetensorsFileWriter::~SafetensorsFileWriter() = default;

void SafetensorsFileWriter::write(const std::string& name, const float* data, int64_t numel) {
  Impl& I = *impl_;
  if (I.next >= I.tensors.size() || I.tensors[I.next].name != name)
    throw CheckpointError(I.path + ": tensor \"" + name + "\" written out of the declared order");
  const HfOutTensor& t = I.tensors[I.next];
  if (numel != shape_numel(t.shape))
    throw CheckpointError(I.path + ": tensor \"" + name + "\" got " + std::to_string(numel) + " elements for shape " +
                          shape_to_string(t.shape));
  if (t.dtype == DType::f32) {
    I.file.write(data, size_t(numel) * 4);
  } else {
    I.narrow.resize(size_t(numel));
    for (int64_t i = 0; i < numel; ++i) I.narrow[size_t(i)] = f32_to_bf16(data[i]);
    I.file.write(I.narrow.data(), size_t(numel) * 2);
  }
  ++I.next;
}

void SafetensorsFileWriter::finish() {
  Impl& I = *impl_;
  if (I.next != I.tensors.size())
    throw CheckpointError(I.path + ": only " + std::to_string(I.next) + " of " + std::to_string(I.tensors.size()) +
                          " declared tensors were written");
  I.file.commit();
}

uint64_t SafetensorsFileWriter::bytes() const { return impl_->file.bytes_written(); }

}  // namespace recipe::ckpt::hf
