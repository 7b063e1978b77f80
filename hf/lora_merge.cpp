// W' = W + s·B·A for every adapted weight of a LoRA checkpoint (see lora_merge.hpp).
#include "hf/lora_merge.hpp"

#include <filesystem>
#include <stdexcept>

#include "core/model/param_layout.hpp"

namespace fs = std::filesystem;

namespace recipe::core::lora {

namespace {

int64_t numel_of(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<float> read_whole(const ckpt::CheckpointReader& reader, const std::string& name) {
  const ckpt::TensorInfo* t = reader.find(name);
  if (!t) throw ckpt::CheckpointError(reader.dir() + ": has no tensor \"" + name + "\"");
  ckpt::Box whole;
  whole.offsets.assign(t->global_shape.size(), 0);
  whole.sizes = t->global_shape;
  std::vector<float> v(size_t(numel_of(t->global_shape)));
  reader.read(name, whole, ckpt::DType::f32, v.data());
  return v;
}

constexpr size_t kShardBytes = size_t(1) << 30;  // bounds the host memory a merge holds

}  // namespace

std::vector<AdaptedWeight> adapted_weights(const ModelShape& s) {
  std::vector<AdaptedWeight> out;
  if (!s.lora()) return out;
  const ParamLayout L = build_param_layout(s, plan::OptimizerConfig{}, 1, 0);
  for (int l = 0; l < s.arch.layers; ++l)
    for (Role role : {Role::qkv, Role::attention_out, Role::mlp_in, Role::mlp_out}) {
      const auto as = L.bound(role, Part::lora_a, l);
      if (as.empty()) continue;  // not a target
      const auto ws = L.bound(role, Part::weight, l), bs = L.bound(role, Part::lora_b, l);
      if (as.size() != 1 || ws.size() != bs.size())
        throw std::logic_error("tensor table: the adapter of " + ws.front()->name + " does not pair with its weights");
      for (size_t i = 0; i < ws.size(); ++i) out.push_back({ws[i]->name, as[0]->name, bs[i]->name});
    }
  return out;
}

void add_adapter(std::span<float> w, std::span<const float> b, std::span<const float> a, int64_t r, double scale) {
  const int64_t in = r > 0 ? int64_t(a.size()) / r : 0, out = r > 0 ? int64_t(b.size()) / r : 0;
  if (r <= 0 || int64_t(a.size()) != r * in || int64_t(b.size()) != out * r || int64_t(w.size()) != out * in)
    throw std::invalid_argument("add_adapter: w, b, a are not [out, in], [out, r], [r, in]");
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      double acc = 0;
      for (int64_t k = 0; k < r; ++k) acc += double(b[size_t(o * r + k)]) * double(a[size_t(k * in + i)]);
      w[size_t(o * in + i)] += float(scale * acc);
    }
}

std::vector<float> read_merged(const ckpt::CheckpointReader& reader, const ModelShape& s, const std::string& name) {
  std::vector<float> w = read_whole(reader, name);
  for (const AdaptedWeight& aw : adapted_weights(s)) {
    if (aw.weight != name) continue;
    const std::vector<float> a = read_whole(reader, aw.a), b = read_whole(reader, aw.b);
    add_adapter(w, b, a, s.lora_rank, double(s.lora_scale));
  }
  return w;
}

ModelShape without_adapters(ModelShape s) {
  s.lora_rank = 0;
  s.lora_targets = 0;
  s.lora_scale = 0.f;
  return s;
}

MergeResult merge_checkpoint(const std::string& checkpoint_dir, const ModelShape& s, const MergeOptions& options) {
  if (!s.lora())
    throw std::invalid_argument("checkpoint " + checkpoint_dir +
                                " is of a model without LoRA adapters (peft.kind=\"none\"): there is nothing to merge");
  if (options.checkpoints_dir.empty()) throw std::invalid_argument("merge: no output directory given (-o DIR)");
  const ckpt::CheckpointReader reader(checkpoint_dir);
  for (const AdaptedWeight& aw : adapted_weights(s))
    for (const std::string* n : {&aw.weight, &aw.a, &aw.b})
      if (!reader.find(*n))
        throw std::runtime_error("checkpoint " + checkpoint_dir + " has no tensor " + *n +
                                 ", which its model has: give the recipe it was trained with (--recipe)");

  const fs::path ckpts = fs::absolute(options.checkpoints_dir);
  std::error_code ec;
  if (fs::exists(ckpts, ec) && !fs::is_empty(ckpts, ec))
    throw std::runtime_error(ckpts.string() +
                             " is not empty: merge into a new directory (the merged model is step 0 "
                             "and would become its `latest`)");
  const fs::path final_dir = ckpts / ckpt::step_dir_name(0);
  const std::string staging = ckpt::staging_dir_of(final_dir.string());
  fs::create_directories(staging);

  const ModelShape merged_shape = without_adapters(s);
  const ParamLayout L = build_param_layout(merged_shape, plan::OptimizerConfig{}, 1, 0);
  const std::vector<AdaptedWeight> adapted = adapted_weights(s);
  MergeResult result;
  std::vector<std::vector<float>> owned;
  std::vector<ckpt::SavePiece> pieces;
  size_t pending = 0;
  int shards = 0;
  auto flush = [&] {
    ckpt::write_shard(staging, shards++, pieces);
    pieces.clear();
    owned.clear();
    pending = 0;
  };
  for (const ParamSpec& p : L.params) {
    owned.push_back(read_merged(reader, s, p.name));
    // A base saved at another TP size has another vocabulary padding: the merged checkpoint has
    // this plan's padded rows (the rows past vocab_size are padding, zero when added).
    if (const int64_t want = numel_of(p.global_shape); int64_t(owned.back().size()) != want) {
      const int64_t saved_vocab =
          reader.common().contains("model") ? reader.common()["model"].value("vocab_size", -1) : -1;
      if (!p.decl || p.decl->shard != Shard::vocab_rows || saved_vocab != s.arch.vocab)
        throw std::runtime_error("checkpoint " + checkpoint_dir + ": tensor " + p.name + " has " +
                                 std::to_string(owned.back().size()) + " elements, the model " + std::to_string(want) +
                                 ": give the recipe it was trained with (--recipe)");
      owned.back().resize(size_t(want), 0.0f);
    }
    for (const AdaptedWeight& aw : adapted) result.merged += aw.weight == p.name;
    ckpt::SavePiece sp;
    sp.name = p.name;
    sp.global_shape = p.global_shape;
    sp.held.offsets.assign(p.global_shape.size(), 0);
    sp.held.sizes = p.global_shape;
    sp.flat_begin = 0;
    sp.flat_end = numel_of(p.global_shape);
    sp.dtype = ckpt::DType::f32;
    sp.data = owned.back().data();
    pending += owned.back().size() * sizeof(float);
    pieces.push_back(std::move(sp));
    ++result.tensors;
    if (pending >= kShardBytes) flush();
  }
  if (!pieces.empty() || shards == 0) flush();

  ckpt::CommitOptions co;
  co.world_size = shards;
  co.plan_toml = options.plan_toml;
  nlohmann::json c = reader.common();
  const int64_t step = c.value("step", int64_t(0));
  c["step"] = 0;
  c["consumed_samples"] = 0;
  c["saved_with"] = {{"tp", 1}, {"pp", 1}, {"dp", 1}, {"zero1", false}, {"world", 1}};
  nlohmann::json from = {{"path", fs::absolute(checkpoint_dir).lexically_normal().string()},
                         {"step", step},
                         {"lora_rank", s.lora_rank},
                         {"lora_scale", double(s.lora_scale)}};
  if (const ckpt::BaseRef* b = reader.base_ref()) from["base"] = b->path;
  c["merged_from"] = from;
  co.common = c;
  ckpt::commit(staging, final_dir.string(), co);
  result.checkpoint_dir = final_dir.string();
  return result;
}

}  // namespace recipe::core::lora
