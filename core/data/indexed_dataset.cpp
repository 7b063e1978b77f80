#include "core/data/indexed_dataset.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace recipe::data {

namespace {

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

bool is_integer_dtype(uint8_t code) { return code >= 1 && code <= 8 && code != 6 && code != 7; }

// Maps a whole file read-only. An empty file maps to nullptr (mmap refuses zero length).
const unsigned char* map_file(const std::string& path, size_t& size, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error(path + ": cannot open " + what + " (" + std::strerror(errno) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(path + ": cannot stat (" + std::strerror(err) + ")");
  }
  size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return nullptr;
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (p == MAP_FAILED) throw std::runtime_error(path + ": mmap failed (" + std::strerror(err) + ")");
  return static_cast<const unsigned char*>(p);
}

void unmap(const unsigned char* p, size_t size) {
  if (p != nullptr) ::munmap(const_cast<unsigned char*>(p), size);
}

int64_t load_token(const unsigned char* p, TokenDType dtype) {
  switch (dtype) {
    case TokenDType::uint8:
      return load<uint8_t>(p);
    case TokenDType::int8:
      return load<int8_t>(p);
    case TokenDType::int16:
      return load<int16_t>(p);
    case TokenDType::int32:
      return load<int32_t>(p);
    case TokenDType::int64:
      return load<int64_t>(p);
    case TokenDType::uint16:
      return load<uint16_t>(p);
    default:
      return 0;  // float dtypes are refused when the dataset is opened
  }
}

}  // namespace

TokenDType token_dtype_for_vocab(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDType::uint16 : TokenDType::int32;
}

size_t dtype_size(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::uint8:
    case TokenDType::int8:
      return 1;
    case TokenDType::int16:
    case TokenDType::uint16:
      return 2;
    case TokenDType::int32:
    case TokenDType::float32:
      return 4;
    case TokenDType::int64:
    case TokenDType::float64:
      return 8;
  }
  return 0;
}

const char* dtype_name(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::uint8:
      return "uint8";
    case TokenDType::int8:
      return "int8";
    case TokenDType::int16:
      return "int16";
    case TokenDType::int32:
      return "int32";
    case TokenDType::int64:
      return "int64";
    case TokenDType::float64:
      return "float64";
    case TokenDType::float32:
      return "float32";
    case TokenDType::uint16:
      return "uint16";
  }
  return "unknown";
}

std::string idx_path_of(const std::string& prefix) { return prefix + ".idx"; }
std::string bin_path_of(const std::string& prefix) { return prefix + ".bin"; }

// ---------------------------------------------------------------------------------------------
// Reader

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const std::string ipath = idx_path_of(prefix);
  const std::string bpath = bin_path_of(prefix);
  idx_ = map_file(ipath, idx_size_, "index");
  try {
    auto bad = [&](const std::string& why) { return std::runtime_error(ipath + ": " + why); };
    if (idx_size_ < kMMIDIDXHeaderBytes) {
      if (idx_size_ >= 9 && std::memcmp(idx_, kMMIDIDXMagic, 9) != 0)
        throw bad("bad magic (not a Megatron MMIDIDX index)");
      throw bad("truncated header: " + std::to_string(idx_size_) + " bytes, an MMIDIDX header needs " +
                std::to_string(kMMIDIDXHeaderBytes));
    }
    if (std::memcmp(idx_, kMMIDIDXMagic, 9) != 0) throw bad("bad magic (not a Megatron MMIDIDX index)");
    const uint64_t version = load<uint64_t>(idx_ + 9);
    if (version != 1) throw bad("unsupported MMIDIDX version " + std::to_string(version) + " (expected 1)");
    const uint8_t code = idx_[17];
    if (code < 1 || code > 8) throw bad("unknown dtype code " + std::to_string(code));
    if (!is_integer_dtype(code))
      throw bad(std::string("token dtype ") + dtype_name(static_cast<TokenDType>(code)) +
                " is not an integer type; token files must hold integer ids");
    dtype_ = static_cast<TokenDType>(code);
    item_ = dtype_size(dtype_);
    const uint64_t s = load<uint64_t>(idx_ + 18);
    const uint64_t d = load<uint64_t>(idx_ + 26);
    // Bound the counts by the file size before multiplying, so garbage counts cannot overflow.
    const uint64_t room = idx_size_ - kMMIDIDXHeaderBytes;
    if (s > room / 12 || d > room / 8 || 12 * s + 8 * d > room) {
      throw bad("truncated: the header promises " + std::to_string(s) + " sequences and " + std::to_string(d) +
                " document entries but the file is only " + std::to_string(idx_size_) + " bytes");
    }
    if (d < 1) throw bad("empty document index (needs at least the leading 0 entry)");
    num_sequences_ = static_cast<int64_t>(s);
    num_doc_entries_ = static_cast<int64_t>(d);
    lengths_at_ = kMMIDIDXHeaderBytes;
    pointers_at_ = lengths_at_ + 4 * s;
    docs_at_ = pointers_at_ + 8 * s;

    if (document_begin(0) != 0)
      throw bad("document index must start at 0, starts at " + std::to_string(document_begin(0)));
    if (document_begin(num_doc_entries_ - 1) != num_sequences_)
      throw bad("document index ends at " + std::to_string(document_begin(num_doc_entries_ - 1)) + " but there are " +
                std::to_string(num_sequences_) + " sequences");
    for (int64_t i = 1; i < num_doc_entries_; ++i) {
      if (document_begin(i) < document_begin(i - 1))
        throw bad("document index decreases at entry " + std::to_string(i));
    }

    bin_ = map_file(bpath, bin_size_, "token data");
    uint64_t needed = 0;
    for (int64_t i = 0; i < num_sequences_; ++i) {
      const int32_t len = sequence_length(i);
      const int64_t ptr = sequence_pointer(i);
      if (len < 0) throw bad("sequence " + std::to_string(i) + " has negative length " + std::to_string(len));
      if (ptr < 0) throw bad("sequence " + std::to_string(i) + " has negative pointer " + std::to_string(ptr));
      if (ptr % static_cast<int64_t>(item_) != 0)
        throw bad("sequence " + std::to_string(i) + " pointer " + std::to_string(ptr) +
                  " is not a multiple of the token size " + std::to_string(item_));
      needed = std::max<uint64_t>(needed, static_cast<uint64_t>(ptr) + static_cast<uint64_t>(len) * item_);
    }
    if (needed > bin_size_) {
      throw std::runtime_error(bpath + " is " + std::to_string(bin_size_) + " bytes but the index needs " +
                               std::to_string(needed) + " (truncated or written with a different index)");
    }
  } catch (...) {
    unmap(idx_, idx_size_);
    unmap(bin_, bin_size_);
    throw;
  }
}

IndexedDataset::~IndexedDataset() {
  unmap(idx_, idx_size_);
  unmap(bin_, bin_size_);
}

int32_t IndexedDataset::sequence_length(int64_t seq) const {
  return load<int32_t>(idx_ + lengths_at_ + 4 * static_cast<size_t>(seq));
}

int64_t IndexedDataset::sequence_pointer(int64_t seq) const {
  return load<int64_t>(idx_ + pointers_at_ + 8 * static_cast<size_t>(seq));
}

int64_t IndexedDataset::document_begin(int64_t d) const {
  return load<int64_t>(idx_ + docs_at_ + 8 * static_cast<size_t>(d));
}

int64_t IndexedDataset::document_length(int64_t d) const {
  int64_t n = 0;
  for (int64_t s = document_begin(d), e = document_begin(d + 1); s < e; ++s) n += sequence_length(s);
  return n;
}

void IndexedDataset::read_sequence(int64_t seq, int64_t offset, int64_t count, int32_t* out) const {
  if (seq < 0 || seq >= num_sequences_ || offset < 0 || count < 0 || offset + count > sequence_length(seq)) {
    throw std::out_of_range(bin_path() + ": read of tokens [" + std::to_string(offset) + ", " +
                            std::to_string(offset + count) + ") of sequence " + std::to_string(seq) +
                            " is out of range");
  }
  const unsigned char* p = bin_ + sequence_pointer(seq) + static_cast<size_t>(offset) * item_;
  switch (dtype_) {
    case TokenDType::uint16:
      for (int64_t i = 0; i < count; ++i) out[i] = load<uint16_t>(p + 2 * i);
      break;
    case TokenDType::int32:
      std::memcpy(out, p, static_cast<size_t>(count) * 4);
      break;
    default:
      for (int64_t i = 0; i < count; ++i) {
        const int64_t v = load_token(p + static_cast<size_t>(i) * item_, dtype_);
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
          throw std::runtime_error(bin_path() + ": token " + std::to_string(v) + " does not fit int32");
        out[i] = static_cast<int32_t>(v);
      }
  }
}

void IndexedDataset::read_document(int64_t d, int64_t offset, int64_t count, int32_t* out) const {
  for (int64_t s = document_begin(d), e = document_begin(d + 1); s < e && count > 0; ++s) {
    const int64_t len = sequence_length(s);
    if (offset >= len) {
      offset -= len;
      continue;
    }
    const int64_t n = std::min(count, len - offset);
    read_sequence(s, offset, n, out);
    out += n;
    count -= n;
    offset = 0;
  }
  if (count > 0) {
    throw std::out_of_range(bin_path() + ": read past the end of document " + std::to_string(d));
  }
}

std::vector<int32_t> IndexedDataset::sequence(int64_t seq) const {
  std::vector<int32_t> v(static_cast<size_t>(sequence_length(seq)));
  read_sequence(seq, 0, static_cast<int64_t>(v.size()), v.data());
  return v;
}

std::vector<int32_t> IndexedDataset::document(int64_t d) const {
  std::vector<int32_t> v(static_cast<size_t>(document_length(d)));
  read_document(d, 0, static_cast<int64_t>(v.size()), v.data());
  return v;
}

int64_t IndexedDataset::max_token_id() const {
  int64_t best = -1;
  for (int64_t s = 0; s < num_sequences_; ++s) {
    const unsigned char* p = bin_ + sequence_pointer(s);
    const int64_t len = sequence_length(s);
    if (dtype_ == TokenDType::uint16) {
      for (int64_t i = 0; i < len; ++i) best = std::max<int64_t>(best, load<uint16_t>(p + 2 * i));
    } else {
      for (int64_t i = 0; i < len; ++i) best = std::max(best, load_token(p + static_cast<size_t>(i) * item_, dtype_));
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

void write_all(std::FILE* f, const void* data, size_t n, const std::string& path) {
  if (n > 0 && std::fwrite(data, 1, n, f) != n)
    throw std::runtime_error(path + ": write failed (" + std::strerror(errno) + ")");
}

template <class T>
void append_le(std::vector<unsigned char>& buf, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // the format is little-endian, as is every host we build for
  buf.insert(buf.end(), b, b + sizeof(T));
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string bin_path, std::string idx_path, TokenDType dtype)
    : bin_path_(std::move(bin_path)), idx_path_(std::move(idx_path)), dtype_(dtype) {
  if (!is_integer_dtype(static_cast<uint8_t>(dtype)))
    throw std::runtime_error(std::string("indexed dataset writer: token dtype must be an integer type, got ") +
                             dtype_name(dtype));
  bin_ = std::fopen(bin_path_.c_str(), "wb");
  if (bin_ == nullptr) throw std::runtime_error(bin_path_ + ": cannot create (" + std::strerror(errno) + ")");
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (bin_ != nullptr) std::fclose(bin_);
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  if (bin_ == nullptr) throw std::logic_error("indexed dataset writer: add_document after finish");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw std::runtime_error(bin_path_ + ": a document of " + std::to_string(tokens.size()) +
                             " tokens exceeds the int32 sequence length of the MMIDIDX format");
  int64_t lo = 0, hi = 0;
  switch (dtype_) {
    case TokenDType::uint8:
      lo = 0;
      hi = UINT8_MAX;
      break;
    case TokenDType::int8:
      lo = INT8_MIN;
      hi = INT8_MAX;
      break;
    case TokenDType::int16:
      lo = INT16_MIN;
      hi = INT16_MAX;
      break;
    case TokenDType::uint16:
      lo = 0;
      hi = UINT16_MAX;
      break;
    default:
      lo = INT32_MIN;
      hi = INT32_MAX;
      break;
  }
  buffer_.clear();
  buffer_.reserve(tokens.size() * dtype_size(dtype_));
  for (int32_t t : tokens) {
    if (t < lo || t > hi)
      throw std::runtime_error(bin_path_ + ": token id " + std::to_string(t) + " does not fit the " +
                               dtype_name(dtype_) + " token dtype");
    switch (dtype_) {
      case TokenDType::uint8:
        append_le<uint8_t>(buffer_, static_cast<uint8_t>(t));
        break;
      case TokenDType::int8:
        append_le<int8_t>(buffer_, static_cast<int8_t>(t));
        break;
      case TokenDType::int16:
        append_le<int16_t>(buffer_, static_cast<int16_t>(t));
        break;
      case TokenDType::uint16:
        append_le<uint16_t>(buffer_, static_cast<uint16_t>(t));
        break;
      case TokenDType::int64:
        append_le<int64_t>(buffer_, t);
        break;
      default:
        append_le<int32_t>(buffer_, t);
        break;
    }
  }
  write_all(bin_, buffer_.data(), buffer_.size(), bin_path_);
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  tokens_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetWriter::finish() {
  if (bin_ == nullptr) throw std::logic_error("indexed dataset writer: finish called twice");
  const bool flushed = std::fflush(bin_) == 0;
  const bool closed = std::fclose(bin_) == 0;
  bin_ = nullptr;
  if (!flushed || !closed) throw std::runtime_error(bin_path_ + ": write failed (" + std::strerror(errno) + ")");

  const uint64_t s = lengths_.size();
  std::vector<unsigned char> idx;
  idx.reserve(kMMIDIDXHeaderBytes + 20 * s + 8);
  idx.insert(idx.end(), kMMIDIDXMagic, kMMIDIDXMagic + 9);
  append_le<uint64_t>(idx, 1);
  idx.push_back(static_cast<unsigned char>(dtype_));
  append_le<uint64_t>(idx, s);
  append_le<uint64_t>(idx, s + 1);  // one sequence per document: document index 0..s
  for (int32_t len : lengths_) append_le<int32_t>(idx, len);
  int64_t ptr = 0;
  for (int32_t len : lengths_) {
    append_le<int64_t>(idx, ptr);
    ptr += static_cast<int64_t>(len) * static_cast<int64_t>(dtype_size(dtype_));
  }
  for (uint64_t d = 0; d <= s; ++d) append_le<int64_t>(idx, static_cast<int64_t>(d));

  std::FILE* f = std::fopen(idx_path_.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error(idx_path_ + ": cannot create (" + std::strerror(errno) + ")");
  const bool ok = std::fwrite(idx.data(), 1, idx.size(), f) == idx.size();
  const bool closed_idx = std::fclose(f) == 0;
  if (!ok || !closed_idx) throw std::runtime_error(idx_path_ + ": write failed (" + std::strerror(errno) + ")");
}

}  // namespace recipe::data
