// Opening a committed checkpoint and reading any box of any tensor out of its chunks.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

#include "checkpoint/box_math.hpp"
#include "checkpoint/checkpoint.hpp"
#include "checkpoint/chunk_record.hpp"
#include "checkpoint/file_io.hpp"
#include "checkpoint/safetensors.hpp"

namespace recipe::ckpt {

namespace {

namespace fs = std::filesystem;

// bf16 is the upper half of an IEEE f32; narrowing rounds to nearest even, NaN stays a quiet NaN.
uint16_t f32_bits_to_bf16(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Copies n elements, converting between the stored and the requested dtype.
void copy_converted(const char* src, DType src_dtype, char* dst, DType dst_dtype, int64_t n) {
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(src_dtype));
  } else if (src_dtype == DType::f32) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, src + 4 * i, 4);
      uint16_t h = f32_bits_to_bf16(u);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      uint32_t u = uint32_t(h) << 16;
      std::memcpy(dst + 4 * i, &u, 4);
    }
  }
}

// checkpoint_hash of a metadata.json's bytes.
std::string hash_of_metadata(const std::string& bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "crc32:%08x:%zu", crc32_of(bytes.data(), bytes.size()), bytes.size());
  return buf;
}

// Row-major strides (in elements) of a box's sizes.
std::vector<int64_t> strides_of(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) s[d - 1] = s[d] * sizes[d];
  return s;
}

}  // namespace

struct CheckpointReader::Impl {
  struct ShardFile {
    std::string path;
    uint64_t size = 0;
    const char* map = nullptr;  // whole file, mapped read-only on first use
  };
  struct Chunk {
    size_t file;  // index into files
    ChunkRecord rec;
    bool verified = false;  // CRC checked
  };
  struct Tensor {
    TensorInfo info;
    std::vector<Chunk> chunks;
  };

  std::vector<ShardFile> files;
  std::map<std::string, Tensor> tensors;

  ~Impl() {
    for (ShardFile& f : files)
      if (f.map) ::munmap(const_cast<char*>(f.map), f.size);
  }

  const char* mapped(ShardFile& f) {
    if (f.map) return f.map;
    int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) io::throw_errno(f.path, "open");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      io::throw_errno(f.path, "stat");
    }
    // Re-checked here: mapping a file shorter than expected would turn reads into SIGBUS.
    if (static_cast<uint64_t>(st.st_size) != f.size) {
      ::close(fd);
      throw CheckpointError(f.path + ": changed since the checkpoint was opened: " + std::to_string(st.st_size) +
                            " bytes, metadata expects " + std::to_string(f.size));
    }
    void* p = ::mmap(nullptr, f.size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
      errno = err;
      io::throw_errno(f.path, "mmap");
    }
    f.map = static_cast<const char*>(p);
    return f.map;
  }

  const char* chunk_bytes(const std::string& tensor, Chunk& c) {
    ShardFile& f = files[c.file];
    const char* p = mapped(f) + c.rec.offset;
    if (!c.verified) {
      uint32_t crc = crc32_of(p, c.rec.length);
      if (crc != c.rec.crc32)
        throw CheckpointError(f.path + ": chunk \"" + c.rec.key + "\" of tensor \"" + tensor + "\" " +
                              box_to_string(c.rec.box) + " fails its CRC32 check (stored " +
                              std::to_string(c.rec.crc32) + ", computed " + std::to_string(crc) +
                              "): the file is corrupt");
      c.verified = true;
    }
    return p;
  }
};

namespace {

// Checks one shard file against metadata: its size, and that its safetensors header lists every
// chunk metadata places in it with the same dtype, shape and byte range.
void validate_shard(const std::string& path, uint64_t expected_size,
                    const std::vector<std::pair<const TensorInfo*, const ChunkRecord*>>& chunks) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) throw CheckpointError(path + ": missing shard file (the checkpoint is partial or corrupt)");
    io::throw_errno(path, "open");
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) io::throw_errno(path, "stat");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < expected_size)
    throw CheckpointError(path + ": truncated: " + std::to_string(size) + " bytes, metadata expects " +
                          std::to_string(expected_size) + " (the checkpoint is partial or corrupt)");
  if (size > expected_size)
    throw CheckpointError(path + ": " + std::to_string(size) + " bytes, metadata expects " +
                          std::to_string(expected_size) + " (the file was modified or belongs to another checkpoint)");
  safetensors::Header header = safetensors::read_header(fd, path, size);
  for (const auto& [info, rec] : chunks) {
    auto it = header.entries.find(rec->key);
    const std::string what = path + ": chunk \"" + rec->key + "\" of tensor \"" + info->name + "\"";
    if (it == header.entries.end())
      throw CheckpointError(what + " is listed in metadata.json but not in the file's header");
    const safetensors::Entry& e = it->second;
    if (e.dtype != info->dtype)
      throw CheckpointError(what + ": header dtype " + dtype_name(e.dtype) + ", metadata " + dtype_name(info->dtype));
    if (e.shape != rec->box.sizes)
      throw CheckpointError(what + ": header shape " + shape_to_string(e.shape) + ", metadata box sizes " +
                            shape_to_string(rec->box.sizes));
    if (header.data_start + e.begin != rec->offset || e.end - e.begin != rec->length)
      throw CheckpointError(what + ": header places it at bytes " + std::to_string(header.data_start + e.begin) +
                            " (+" + std::to_string(e.end - e.begin) + "), metadata at " + std::to_string(rec->offset) +
                            " (+" + std::to_string(rec->length) + ")");
  }
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string& checkpoint_dir)
    : dir_(checkpoint_dir), impl_(std::make_unique<Impl>()) {
  const fs::path dir(checkpoint_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw CheckpointError(checkpoint_dir + ": no such checkpoint directory");
  const std::string meta_path = (dir / "metadata.json").string();
  if (!fs::exists(meta_path, ec)) {
    bool has_shards = false;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      has_shards = has_shards || entry.path().filename().string().starts_with("shard-");
    throw CheckpointError(has_shards ? "partial checkpoint (no metadata.json): " + checkpoint_dir +
                                           " (its save did not finish; use an earlier checkpoint)"
                                     : checkpoint_dir + ": not a checkpoint (no metadata.json)");
  }
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(io::read_file(meta_path));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(meta_path + ": does not parse: " + e.what());
  }
  if (!meta.is_object() || meta.value("format", "") != std::string(kFormat))
    throw CheckpointError(meta_path + ": not a recipe checkpoint (\"format\" is not \"" + kFormat + "\")");
  const int version = json_field<int>(meta, "version", meta_path);
  if (version != kVersion)
    throw CheckpointError(meta_path + ": checkpoint format version " + std::to_string(version) +
                          ", this build reads version " + std::to_string(kVersion));

  const std::string common_path = (dir / "common.json").string();
  try {
    common_ = nlohmann::json::parse(io::read_file(common_path));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(common_path + ": does not parse: " + e.what());
  }

  // Shard files: every rank's (an empty one included) and any a chunk names.
  std::map<std::string, size_t> file_index;
  const auto& files = meta.contains("files") ? meta.at("files") : nlohmann::json();
  if (!files.is_object()) throw CheckpointError(meta_path + ": \"files\" is missing or not an object");
  for (const auto& [name, f] : files.items()) {
    if (name.find('/') != std::string::npos || name == "." || name == "..")
      throw CheckpointError(meta_path + ": shard file \"" + name + "\" is not a file name inside the checkpoint");
    file_index[name] = impl_->files.size();
    impl_->files.push_back({(dir / name).string(), json_field<uint64_t>(f, "size", meta_path + ": file " + name)});
  }
  const int world_size = json_field<int>(meta, "world_size", meta_path);
  for (int r = 0; r < world_size; ++r)
    if (!file_index.count(shard_file_name(r)))
      throw CheckpointError(meta_path + ": lists no " + shard_file_name(r) + " although world_size is " +
                            std::to_string(world_size));

  const auto& tensors = meta.contains("tensors") ? meta.at("tensors") : nlohmann::json();
  if (!tensors.is_object()) throw CheckpointError(meta_path + ": \"tensors\" is missing or not an object");
  for (const auto& [name, t] : tensors.items()) {
    const std::string where = meta_path + ": tensor \"" + name + "\"";
    Impl::Tensor tensor;
    tensor.info.name = name;
    tensor.info.global_shape = json_field<std::vector<int64_t>>(t, "global_shape", where);
    tensor.info.dtype = parse_dtype(json_field<std::string>(t, "dtype", where), where);
    const auto& chunks = t.contains("chunks") ? t.at("chunks") : nlohmann::json();
    if (!chunks.is_array()) throw CheckpointError(where + ": \"chunks\" is missing or not an array");
    for (const auto& cj : chunks) {
      ChunkRecord rec = chunk_from_json(cj, where);
      auto f = file_index.find(rec.file);
      if (f == file_index.end())
        throw CheckpointError(where + ": chunk \"" + rec.key + "\" names " + rec.file +
                              ", which \"files\" does not list");
      if (!box_within(rec.box, tensor.info.global_shape) ||
          rec.length != static_cast<uint64_t>(rec.box.numel()) * dtype_size(tensor.info.dtype))
        throw CheckpointError(where + ": chunk \"" + rec.key + "\" " + box_to_string(rec.box) + " (" +
                              std::to_string(rec.length) + " bytes) does not fit the tensor " +
                              shape_to_string(tensor.info.global_shape));
      tensor.chunks.push_back({f->second, std::move(rec), false});
    }
    impl_->tensors.emplace(name, std::move(tensor));
  }

  std::vector<std::vector<std::pair<const TensorInfo*, const ChunkRecord*>>> per_file(impl_->files.size());
  for (const auto& [name, t] : impl_->tensors)
    for (const auto& c : t.chunks) per_file[c.file].emplace_back(&t.info, &c.rec);
  for (size_t i = 0; i < impl_->files.size(); ++i)
    validate_shard(impl_->files[i].path, impl_->files[i].size, per_file[i]);

  if (meta.contains("base")) open_base(meta.at("base"), meta_path);
}

void CheckpointReader::open_base(const nlohmann::json& j, const std::string& meta_path) {
  const std::string where = meta_path + ": \"base\"";
  BaseRef ref{json_field<std::string>(j, "path", where), json_field<std::string>(j, "hash", where)};
  const std::string fix =
      ": restore that checkpoint (the one this fine-tune started from), or, if the base was "
      "deliberately replaced, start the fine-tune again from the new one; a merged checkpoint "
      "(recipe ckpt merge) needs no base";
  std::error_code ec;
  if (!fs::exists(fs::path(ref.path) / "metadata.json", ec))
    throw CheckpointError(
        dir_ + " holds only adapters; its base weights are in " + ref.path + ", which " +
        (fs::exists(ref.path, ec) ? "is not a complete checkpoint (no metadata.json)" : "does not exist") + fix);
  const std::string base_meta_path = (fs::path(ref.path) / "metadata.json").string();
  const std::string base_meta = io::read_file(base_meta_path);
  const std::string now = hash_of_metadata(base_meta);
  if (now != ref.hash)
    throw CheckpointError(dir_ + " holds only adapters; its base " + ref.path + " has changed since they were saved " +
                          "(content hash " + ref.hash + " then, " + now + " now: another checkpoint was saved there)" +
                          fix);
  // One level only: recipe always refers to the checkpoint that holds the base weights, so a chain
  // (or a cycle) is a hand-edited metadata.json.
  try {
    if (nlohmann::json::parse(base_meta).contains("base"))
      throw CheckpointError(base_meta_path + " refers to a base itself; " + dir_ +
                            " must refer to the checkpoint that holds its base weights");
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(base_meta_path + ": does not parse: " + e.what());
  }
  base_ = std::make_unique<CheckpointReader>(ref.path);
  base_ref_ = std::move(ref);
}

std::string checkpoint_hash(const std::string& checkpoint_dir) {
  return hash_of_metadata(io::read_file((fs::path(checkpoint_dir) / "metadata.json").string()));
}

CheckpointReader::~CheckpointReader() = default;

std::string CheckpointReader::plan_toml() const {
  const std::string path = (fs::path(dir_) / "plan.toml").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  return io::read_file(path);
}

std::vector<TensorInfo> CheckpointReader::tensors() const {
  std::vector<TensorInfo> out;
  for (const auto& [name, t] : impl_->tensors) out.push_back(t.info);  // std::map: sorted by name
  return out;
}

const TensorInfo* CheckpointReader::find(const std::string& name) const {
  auto it = impl_->tensors.find(name);
  if (it != impl_->tensors.end()) return &it->second.info;
  return base_ ? base_->find(name) : nullptr;
}

bool CheckpointReader::holds(const std::string& name) const { return impl_->tensors.count(name) > 0; }

void CheckpointReader::read(const std::string& name, const Box& region, DType dst_dtype, void* dst) const {
  auto it = impl_->tensors.find(name);
  if (it == impl_->tensors.end() && base_ && base_->find(name)) return base_->read(name, region, dst_dtype, dst);
  if (it == impl_->tensors.end())
    throw CheckpointError(dir_ + ": has no tensor \"" + name + "\" (it holds " + std::to_string(impl_->tensors.size()) +
                          " tensors)");
  Impl::Tensor& t = it->second;
  if (!box_within(region, t.info.global_shape))
    throw CheckpointError(dir_ + ": tensor \"" + name + "\" " + shape_to_string(t.info.global_shape) + ": region " +
                          box_to_string(region) + " lies outside it");
  const size_t ndim = region.sizes.size();
  const size_t src_elem = dtype_size(t.info.dtype), dst_elem = dtype_size(dst_dtype);
  const std::vector<int64_t> dst_strides = strides_of(region.sizes);
  int64_t covered = 0;

  for (Impl::Chunk& chunk : t.chunks) {
    std::optional<Box> part = intersect(region, chunk.rec.box);  // a scalar's part is the empty box
    if (!part) continue;
    const char* src = impl_->chunk_bytes(name, chunk);
    const std::vector<int64_t> src_strides = strides_of(chunk.rec.box.sizes);
    // Innermost run: the last dim, extended outward while the part spans whole rows of both the
    // chunk and the region (then consecutive rows are contiguous on both sides).
    size_t outer = ndim;  // dims [0, outer) are iterated, dims [outer, ndim) form one contiguous run
    int64_t run = 1;
    while (outer > 0) {
      --outer;
      run *= part->sizes[outer];
      if (outer == 0 || part->sizes[outer] != chunk.rec.box.sizes[outer] || part->sizes[outer] != region.sizes[outer])
        break;
    }
    std::vector<int64_t> idx(outer, 0);  // position inside part over the iterated dims
    while (true) {
      int64_t src_off = 0, dst_off = 0;
      for (size_t d = 0; d < ndim; ++d) {
        const int64_t g = part->offsets[d] + (d < outer ? idx[d] : 0);
        src_off += (g - chunk.rec.box.offsets[d]) * src_strides[d];
        dst_off += (g - region.offsets[d]) * dst_strides[d];
      }
      copy_converted(src + src_off * src_elem, t.info.dtype, static_cast<char*>(dst) + dst_off * dst_elem, dst_dtype,
                     run);
      size_t d = outer;
      while (d > 0 && ++idx[d - 1] == part->sizes[d - 1]) idx[--d] = 0;
      if (d == 0) break;
    }
    covered += part->numel();
  }
  if (covered != region.numel())
    throw CheckpointError(dir_ + ": tensor \"" + name + "\" " + shape_to_string(t.info.global_shape) + ": region " +
                          box_to_string(region) + " is " +
                          (covered < region.numel() ? "not fully covered" : "covered more than once") +
                          " by the saved chunks (" + std::to_string(covered) + " of " + std::to_string(region.numel()) +
                          " elements): the checkpoint is incomplete or corrupt");
}

}  // namespace recipe::ckpt
