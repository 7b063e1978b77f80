// Trainer state ↔ sharded checkpoint (see checkpointing.hpp for who writes what).
#include "core/train/checkpointing.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "family/tensor_table.hpp"

namespace fs = std::filesystem;

namespace recipe::core {

namespace {

// Every rank learns whether any rank failed; the failing ranks rethrow their own error, the others
// a pointer to it. Doubles as a barrier.
void agree(Comm& world, const std::exception_ptr& error, const std::string& what) {
  const double failed = world.all_reduce_max(error ? double(world.rank() + 1) : 0.0);
  if (error) std::rethrow_exception(error);
  if (failed > 0)
    throw std::runtime_error(what + " failed on rank " + std::to_string(int(failed) - 1) + " (its log says why)");
}

// The box of the global tensor this rank's buffer holds (its TP shard, or all of it).
ckpt::Box held_box(const ParamSpec& p) {
  ckpt::Box b;
  b.offsets.assign(p.global_shape.size(), 0);
  b.sizes = p.local_shape;
  if (p.shard_dim >= 0) b.offsets[size_t(p.shard_dim)] = p.shard_begin;
  return b;
}

bool is_tied_copy(const ParamSpec& p, const ModelShape& shape, const ParallelState& par) {
  return shape.arch.tied && par.sizes().pp > 1 && !par.first_stage() && p.name == word_embedding_name();
}

std::vector<float> download(kernels::Backend& backend, kernels::Tensor t) {
  std::vector<float> host(size_t(t.numel()));
  if (!host.empty()) backend.to_host(host.data(), t);
  return host;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

// FP8 delayed scaling's amax histories (core/model/linear.hpp): per global layer l one tensor
// "fp8.layers.<l>.amax_history" [linears, 3 roles (x, W, dy), H], the layer's block linears in
// the flat list's order (family/linears.hpp; GPT and Llama: qkv, proj, fc_in, fc_out, so [4, 3, H]);
// equal on every rank holding the layer.
std::string fp8_history_name(int layer) { return "fp8.layers." + std::to_string(layer) + ".amax_history"; }

// This rank's pieces of the histories (TP, CP and DP rank 0 of each stage write them), into `host`.
void fp8_history_pieces(Trainer& t, std::vector<std::vector<float>>& host, std::vector<ckpt::SavePiece>& pieces) {
  const RankCoords& rc = t.parallel().coords();
  if (rc.tp != 0 || rc.cp != 0 || rc.dp != 0) return;
  for (int c = 0; c < t.num_chunks(); ++c) {
    const kernels::Tensor h = t.model(c).fp8_amax_history();
    if (!h.defined()) continue;
    host.push_back(download(t.params().backend(), h));
    const int64_t rows = t.model(c).fp8_history_rows_per_layer(), linears = t.model(c).linears_per_layer();
    const int64_t H = h.dim(1), layers = h.dim(0) / rows;
    for (int64_t i = 0; i < layers; ++i) {
      ckpt::SavePiece sp;
      sp.name = fp8_history_name(t.model(c).first_layer() + int(i));
      sp.global_shape = {linears, kFp8TensorsPerLinear, H};
      sp.held = ckpt::Box{{0, 0, 0}, {linears, kFp8TensorsPerLinear, H}};
      sp.flat_begin = 0;
      sp.flat_end = rows * H;
      sp.dtype = ckpt::DType::f32;
      sp.data = host.back().data() + i * rows * H;
      pieces.push_back(std::move(sp));
    }
  }
}

// Resume: the histories of this rank's layers, when the checkpoint has them (a checkpoint of a
// current-scaling or bf16 run has none: the first step seeds them). One of another length is
// refused: the steps it covers would change meaning.
void read_fp8_histories(Trainer& t, const ckpt::CheckpointReader& reader, const std::string& dir) {
  for (int c = 0; c < t.num_chunks(); ++c) {
    Model& model = t.model(c);
    const kernels::Tensor h = model.fp8_amax_history();
    if (!h.defined()) continue;
    const int64_t rows = model.fp8_history_rows_per_layer(), linears = model.linears_per_layer();
    const int64_t H = h.dim(1), layers = h.dim(0) / rows;
    const std::vector<int64_t> shape = {linears, kFp8TensorsPerLinear, H};
    std::vector<float> host(size_t(h.numel()), 0.f);
    int found = 0;
    for (int64_t i = 0; i < layers; ++i) {
      const std::string name = fp8_history_name(model.first_layer() + int(i));
      const ckpt::TensorInfo* info = reader.find(name);
      if (!info) continue;
      if (info->global_shape != shape)
        throw std::runtime_error("checkpoint " + dir + " holds " + name + " as " + shape_str(info->global_shape) +
                                 ", this run needs " + shape_str(shape) +
                                 ": resume with the fp8.amax_history_len it was saved with (its plan.toml), or "
                                 "start a new run with mode=\"finetune\" and checkpoint.load to take only the weights");
      reader.read(name, ckpt::Box{{0, 0, 0}, shape}, ckpt::DType::f32, host.data() + i * rows * H);
      ++found;
    }
    if (found == 0) continue;
    if (found != layers)
      throw std::runtime_error("checkpoint " + dir + " holds the FP8 amax histories of only some of layers " +
                               std::to_string(model.first_layer()) + ".." +
                               std::to_string(model.first_layer() + int(layers) - 1) + ": it is incomplete");
    t.params().backend().from_host(h, host.data());
    model.fp8_history_restored();
  }
}

// Vocabulary padding. The word embedding and an untied lm_head (Shard::vocab_rows) have
// padded_vocab rows, a multiple of model.make_vocab_size_divisible_by·tp, so the same model saved
// at one TP size may hold more or fewer rows than it has at another (gpt3_345m: 50304 at tp1,
// 50432 at tp2). Rows ≥ vocab_size are padding: no token id selects them, the loss masks their
// logits, so they never get a gradient and their Adam moments stay zero. A checkpoint whose
// vocab_size (common.json "model") is the model's therefore loads whatever its padding: the rows
// both have are read, rows it lacks start at zero (what an HF import writes there), and rows the
// model lacks are left out — padding on both sides, as the equal vocab_size guarantees. The
// moments of those tensors are read the same way.
struct VocabFit {
  int64_t vocab = 0;         // this model's model.vocab_size
  int64_t saved_vocab = -1;  // the checkpoint's (its common.json), -1 when it does not say
};

VocabFit vocab_fit(const ckpt::CheckpointReader& reader, int64_t vocab) {
  VocabFit f;
  f.vocab = vocab;
  const nlohmann::json& c = reader.common();
  if (c.contains("model") && c["model"].is_object() && c["model"].contains("vocab_size") &&
      c["model"]["vocab_size"].is_number_integer())
    f.saved_vocab = c["model"]["vocab_size"].get<int64_t>();
  return f;
}

// Whether `saved` differs from p's global shape only in its padded vocabulary rows.
bool other_vocab_padding(const ParamSpec& p, const std::vector<int64_t>& saved) {
  if (!p.decl || p.decl->shard != Shard::vocab_rows || saved.size() != p.global_shape.size() || saved.empty())
    return false;
  return saved[0] != p.global_shape[0] && std::equal(saved.begin() + 1, saved.end(), p.global_shape.begin() + 1);
}

// Tensor `name` of the checkpoint (p's weights or one of its optimizer state tensors) into this
// rank's box of p, as f32: the held box, or, for a tensor saved with another vocabulary padding
// (read_weights accepted it), the rows the checkpoint has and zeros below them.
void read_param(const ckpt::CheckpointReader& reader, const std::string& name, const ParamSpec& p, float* dst) {
  ckpt::Box box = held_box(p);
  const ckpt::TensorInfo* info = reader.find(name);
  if (!info || !other_vocab_padding(p, info->global_shape)) return reader.read(name, box, ckpt::DType::f32, dst);
  const int64_t rows = box.sizes[0], row_numel = rows > 0 ? p.numel / rows : 0;
  const int64_t have = std::clamp<int64_t>(info->global_shape[0] - box.offsets[0], 0, rows);
  std::fill(dst + have * row_numel, dst + p.numel, 0.0f);
  box.sizes[0] = have;
  if (have > 0) reader.read(name, box, ckpt::DType::f32, dst);
}

nlohmann::json common_json(const Trainer& t, ParallelState& par) {
  const plan::Plan& plan = t.plan();
  nlohmann::json c;
  c["step"] = t.steps_done();
  c["consumed_samples"] = t.consumed_samples();
  c["global_batch_size"] = t.global_batch();
  c["seed"] = plan.trainer.seed;
  c["data_seed"] = plan.data.seed;
  c["last_loss"] = std::isfinite(t.last_loss()) ? t.last_loss() : 0.0;
  c["model"] = {{"arch", std::string(plan::to_string(plan.model.arch))},
                {"layers", t.shape().arch.layers},
                {"hidden", t.shape().arch.hidden},
                {"vocab_size", t.shape().arch.vocab},
                {"padded_vocab", t.shape().arch.padded_vocab}};
  // What the adapters are (recipe ckpt info shows it; informational: loading checks the tensors).
  if (plan.peft.kind == plan::PeftKind::lora)
    c["peft"] = {{"kind", "lora"},
                 {"rank", plan.peft.rank},
                 {"alpha", plan.peft.alpha},
                 {"use_rslora", plan.peft.use_rslora},
                 {"dropout", plan.peft.dropout},
                 {"target_modules", plan.peft.target_modules}};
  c["saved_with"] = {{"tp", par.sizes().tp},
                     {"pp", par.sizes().pp},
                     {"dp", par.sizes().dp},
                     {"zero1", t.grad_sync().zero1()},
                     {"world", par.world_size()}};
  return c;
}

// The weights of the checkpoint into this rank's part of the store: trainable tensors into the f32
// master (then the compute copy), the frozen base into the compute copy. Refuses a checkpoint of
// another model shape, naming the tensors that differ. No collective.
// `model_names` (optional): every tensor of the whole model (all stages and TP ranks); a weight of
// the checkpoint outside it would be dropped without a word (a bias, a position table, a norm
// of another architecture), so it is refused like a missing one.
void read_weights(ParamStore& store, const ckpt::CheckpointReader& reader, const std::string& checkpoint_dir,
                  LoadMode mode, int64_t vocab, const std::set<std::string>* model_names = nullptr) {
  const ParamLayout& layout = store.layout();
  const VocabFit fit = vocab_fit(reader, vocab);
  // Shape check first, all mismatches at once.
  std::vector<std::string> problems;
  // Starting a LoRA fine-tune from its base checkpoint: the base has no adapters, which keep
  // their initialization (B = 0: the step-0 model is the base).
  auto keeps_init = [&](const ParamSpec& p) {
    return mode == LoadMode::weights_only && p.decl && is_adapter(*p.decl) && !reader.find(p.name);
  };
  // Weights the model does not have would be dropped silently; LoRA adapters (the model would be
  // the base) are checked even without the whole model's names.
  for (const ckpt::TensorInfo& t : reader.tensors()) {
    if (t.name.rfind("optimizer.", 0) == 0 || t.name.rfind("fp8.", 0) == 0) continue;
    const bool adapter = t.name.find(".lora_a.") != std::string::npos || t.name.find(".lora_b.") != std::string::npos;
    const bool known = model_names ? model_names->count(t.name) > 0 : layout.find(t.name) != nullptr;
    if (!known && (adapter || model_names))
      problems.push_back(t.name + (adapter ? " (a LoRA adapter)" : "") + " has no place in this model");
  }
  for (const ParamSpec& p : layout.params) {
    const ckpt::TensorInfo* info = reader.find(p.name);
    if (keeps_init(p)) continue;
    if (!info)
      problems.push_back(p.name + " is missing");
    else if (other_vocab_padding(p, info->global_shape) && fit.saved_vocab == fit.vocab &&
             info->global_shape[0] >= fit.vocab)
      continue;  // the same vocabulary padded for another TP size: read_param pads or trims
    else if (other_vocab_padding(p, info->global_shape))
      problems.push_back(p.name + " has " + std::to_string(info->global_shape[0]) + " rows there (" +
                         (fit.saved_vocab < 0 ? std::string("its vocab_size is not recorded")
                                              : "vocab_size " + std::to_string(fit.saved_vocab)) +
                         "), " + std::to_string(p.global_shape[0]) + " here (model.vocab_size " +
                         std::to_string(fit.vocab) + "): another vocabulary, not another padding");
    else if (info->global_shape != p.global_shape)
      problems.push_back(p.name + " is " + shape_str(info->global_shape) + " there, " + shape_str(p.global_shape) +
                         " here");
  }
  if (!problems.empty()) {
    std::ostringstream m;
    m << "checkpoint " << checkpoint_dir << " does not fit this model (" << problems.size() << " tensor"
      << (problems.size() == 1 ? "" : "s") << "): ";
    for (size_t i = 0; i < problems.size() && i < 6; ++i) m << (i ? "; " : "") << problems[i];
    if (problems.size() > 6) m << "; and " << problems.size() - 6 << " more";
    m << ". Its plan is in " << (fs::path(checkpoint_dir) / "plan.toml").string()
      << ": use the same model.* and peft.* settings (parallelism may differ); `recipe ckpt merge` turns a LoRA "
         "checkpoint into a full one";
    throw std::runtime_error(m.str());
  }

  kernels::Backend& be = store.backend();
  // Trainable tensors into the master (then the compute copy), the frozen base into the compute
  // copy alone (on a backend whose compute copy is the master, that is one buffer).
  std::vector<float> host(size_t(layout.total_numel), 0.0f);                // gaps stay zero
  if (layout.trainable_numel > 0) be.to_host(host.data(), store.master());  // adapters that keep their init
  // A tensor held only in FP8 is not read now: the checkpoint becomes its source, read again when
  // the Model quantizes it (Model::quantize_frozen_base) or a save writes the base.
  for (const ParamSpec& p : layout.params)
    if (!keeps_init(p) && !p.fp8) read_param(reader, p.name, p, host.data() + p.offset);
  if (store.compute_is_master()) {
    be.from_host(store.compute(), host.data());
  } else {
    be.from_host(store.master(), host.data());
    const int64_t frozen_end = layout.compute_numel();
    if (frozen_end > layout.frozen_begin)
      store.compute_from_host(layout.frozen_begin, frozen_end - layout.frozen_begin, host.data() + layout.frozen_begin);
  }
  if (layout.fp8_numel > 0) {
    auto source = std::make_shared<const ckpt::CheckpointReader>(checkpoint_dir);
    store.set_fp8_source([source](const ParamSpec& p, float* out) { read_param(*source, p.name, p, out); });
  }
  store.sync_compute();
}

}  // namespace

namespace {

// Which tensors a save writes.
enum class Contents {
  all,         // every parameter (frozen ones as f32 from the compute copy), trainable ones with moments
  trainable,   // adapter-only: the trainable tensors and their moments (the base is referred to)
  frozen_only  // the base of a LoRA fine-tune: the frozen tensors alone
};

// Collective: every rank writes its pieces of `contents`, then world rank 0 commits `final_dir`.
void write_checkpoint(Trainer& trainer, const std::string& final_dir, Contents contents, ckpt::CommitOptions co) {
  ParallelState& par = trainer.parallel();
  Comm& world = par.world();
  const std::string staging = ckpt::staging_dir_of(final_dir);

  std::exception_ptr err;
  if (world.rank() == 0) {
    try {
      std::error_code ec;
      fs::remove_all(staging, ec);  // a crashed earlier attempt at this step
      fs::create_directories(staging);
    } catch (...) {
      err = std::current_exception();
    }
  }
  agree(world, err, "creating the checkpoint directory " + staging);

  try {
    ParamStore& store = trainer.params();
    const ParamLayout& layout = store.layout();
    const RankCoords& rc = par.coords();
    const bool zero1 = trainer.grad_sync().zero1();
    const bool write_frozen = contents != Contents::trainable, write_trainable = contents != Contents::frozen_only;
    std::vector<ckpt::SavePiece> pieces;
    std::vector<float> master, frozen;
    std::vector<std::vector<float>> state;  // the optimizer's state tensors, in its order
    std::vector<std::vector<float>> fp8_histories;
    if (write_trainable) fp8_history_pieces(trainer, fp8_histories, pieces);
    // CP replicas hold the same parameters and moments as their CP rank 0, which writes them.
    if (rc.cp == 0 && (zero1 || rc.dp == 0)) {
      kernels::Backend& be = store.backend();
      if (write_trainable) {
        master = download(be, store.master());
        for (const OptimizerState& st : trainer.optimizer().state()) state.push_back(download(be, st.data));
      }
      // The frozen base (LoRA) has no master or moments: its weights come from the compute copy,
      // written once (DP rank 0), as f32.
      // (Weights held only in FP8 come from their source: the init or checkpoint they were cast from.)
      if (write_frozen && layout.frozen_numel > 0 && rc.dp == 0) frozen = store.frozen_to_host();
      const std::vector<OptimizerSegment>& segments = trainer.optimizer().segments();
      const std::vector<OptimizerState>& states = trainer.optimizer().state();
      for (const ParamSpec& p : layout.params) {
        if (p.tp_replicated() && rc.tp != 0) continue;
        if (is_tied_copy(p, trainer.shape(), par)) continue;
        const ckpt::Box box = held_box(p);
        if (!p.trainable) {
          if (!write_frozen || rc.dp != 0) continue;
          ckpt::SavePiece sp;
          sp.name = p.name;
          sp.global_shape = p.global_shape;
          sp.held = box;
          sp.flat_begin = 0;
          sp.flat_end = p.numel;
          sp.dtype = ckpt::DType::f32;
          sp.data = frozen.data() + (p.offset - layout.frozen_begin);
          pieces.push_back(std::move(sp));
          continue;
        }
        if (!write_trainable) continue;
        for (const OptimizerSegment& s : segments) {
          const int64_t b = std::max(s.offset, p.offset), e = std::min(s.offset + s.numel, p.offset + p.numel);
          if (b >= e) continue;
          const int64_t state_at = s.state_offset + (b - s.offset);
          auto piece = [&](const std::string& name, const float* data) {
            ckpt::SavePiece sp;
            sp.name = name;
            sp.global_shape = p.global_shape;
            sp.held = box;
            sp.flat_begin = b - p.offset;
            sp.flat_end = e - p.offset;
            sp.dtype = ckpt::DType::f32;
            sp.data = data;
            pieces.push_back(std::move(sp));
          };
          piece(p.name, master.data() + b);
          for (size_t i = 0; i < states.size(); ++i)
            piece(states[i].checkpoint_prefix + p.name, state[i].data() + state_at);
        }
      }
    }
    ckpt::write_shard(staging, par.world_rank(), pieces);
    err = nullptr;
  } catch (...) {
    err = std::current_exception();
  }
  agree(world, err, "writing the checkpoint shards");

  if (world.rank() == 0) {
    try {
      co.world_size = par.world_size();
      ckpt::commit(staging, final_dir, co);
    } catch (...) {
      err = std::current_exception();
    }
  }
  agree(world, err, "committing the checkpoint");
}

}  // namespace

std::string save_checkpoint(Trainer& trainer, const SaveOptions& options) {
  // The shards hold masters (and the frozen base), not the compute copy; still, the weights a
  // checkpoint stands for are whole on every rank when it is taken (ZeRO-1, overlapped gather).
  trainer.complete_weights();
  std::string final_dir = (fs::path(options.dir) / ckpt::step_dir_name(trainer.steps_done())).string();
  const bool adapter_only = options.base && trainer.params().layout().frozen_numel > 0;
  ckpt::CommitOptions co;
  co.common = common_json(trainer, trainer.parallel());
  co.plan_toml = options.plan_toml;
  co.keep_last = options.keep_last;
  if (adapter_only) co.base = *options.base;
  write_checkpoint(trainer, final_dir, adapter_only ? Contents::trainable : Contents::all, co);
  return final_dir;
}

ckpt::BaseRef save_base_checkpoint(Trainer& trainer, const std::string& checkpoints_dir, const std::string& plan_toml) {
  const fs::path final_dir = fs::absolute(fs::path(checkpoints_dir) / "base" / ckpt::step_dir_name(0));
  ckpt::CommitOptions co;
  co.common = common_json(trainer, trainer.parallel());
  co.common["step"] = 0;  // the frozen weights are the same at every step
  co.common["consumed_samples"] = 0;
  co.common["last_loss"] = 0.0;
  co.common["lora_base"] = true;
  co.plan_toml = plan_toml;
  write_checkpoint(trainer, final_dir.string(), Contents::frozen_only, co);
  return ckpt::BaseRef{final_dir.string(), ckpt::checkpoint_hash(final_dir.string())};
}

LoadResult load_checkpoint(Trainer& trainer, const std::string& checkpoint_dir, LoadMode mode) {
  ParallelState& par = trainer.parallel();
  LoadResult result;
  result.dir = checkpoint_dir;
  std::exception_ptr err;
  try {
    const ckpt::CheckpointReader reader(checkpoint_dir);
    const nlohmann::json& common = reader.common();
    result.step = common.value("step", int64_t(0));
    if (mode == LoadMode::resume) {
      const int64_t saved_batch = common.value("global_batch_size", int64_t(0));
      if (saved_batch != trainer.global_batch())
        throw std::runtime_error("checkpoint " + checkpoint_dir +
                                 " was saved with trainer.global_batch_size=" + std::to_string(saved_batch) +
                                 ", this plan has " + std::to_string(trainer.global_batch()) +
                                 ": resuming needs the same global batch (set it back, or start a new run "
                                 "with mode=\"finetune\" and checkpoint.load to take only the weights)");
      if (result.step > int64_t(trainer.plan().trainer.max_steps))
        throw std::runtime_error("checkpoint " + checkpoint_dir + " is at step " + std::to_string(result.step) +
                                 ", past trainer.max_steps=" + std::to_string(trainer.plan().trainer.max_steps) +
                                 ": raise trainer.max_steps to train further");
    }

    ParamStore& store = trainer.params();
    const ParamLayout& layout = store.layout();
    std::set<std::string> model_names;  // the whole model's tensors: one stage, no TP
    for (const ParamSpec& p : build_param_layout(trainer.shape(), trainer.plan().optimizer).params)
      model_names.insert(p.name);
    read_weights(store, reader, checkpoint_dir, mode, trainer.shape().arch.vocab, &model_names);

    kernels::Backend& be = store.backend();

    // The optimizer's state, by the names it gives (all of them, or it starts from zero).
    const std::vector<OptimizerState>& states = trainer.optimizer().state();
    bool have_moments = mode == LoadMode::resume;
    for (const ParamSpec& p : layout.params)
      for (const OptimizerState& st : states)
        if (p.trainable && !reader.find(st.checkpoint_prefix + p.name)) have_moments = false;
    if (have_moments) {
      const std::vector<OptimizerSegment>& segments = trainer.optimizer().segments();
      std::vector<float> host(size_t(layout.total_numel), 0.0f);
      std::vector<float> state(size_t(trainer.optimizer().state_numel()), 0.0f);
      for (const OptimizerState& st : states) {
        const std::string& prefix = st.checkpoint_prefix;
        // Whole local tensors into a layout-indexed buffer, then the segments' runs into the state.
        for (const ParamSpec& p : layout.params) {
          if (!p.trainable) continue;
          bool needed = false;
          for (const OptimizerSegment& s : segments)
            needed = needed || (s.offset < p.offset + p.numel && p.offset < s.offset + s.numel);
          if (needed) read_param(reader, prefix + p.name, p, host.data() + p.offset);
        }
        for (const OptimizerSegment& s : segments)
          std::copy_n(host.data() + s.offset, s.numel, state.data() + s.state_offset);
        be.from_host(st.data, state.data());
      }
      result.optimizer_restored = true;
    }
    if (mode == LoadMode::resume) {
      trainer.restore_steps_done(int(result.step));
      read_fp8_histories(trainer, reader, checkpoint_dir);
    }
    // Weights held only in FP8: their values read now (host only), cast after every rank read its own.
    for (int c = 0; c < trainer.num_chunks(); ++c) trainer.model(c).stage_frozen_base();
    if (layout.frozen_numel > 0) {
      if (const ckpt::BaseRef* b = reader.base_ref())
        result.base = *b;
      else
        result.base = ckpt::BaseRef{fs::absolute(checkpoint_dir).lexically_normal().string(),
                                    ckpt::checkpoint_hash(checkpoint_dir)};
    }
  } catch (...) {
    err = std::current_exception();
  }
  agree(par.world(), err, "loading checkpoint " + checkpoint_dir);
  for (int c = 0; c < trainer.num_chunks(); ++c) trainer.model(c).quantize_frozen_base();
  return result;
}

void load_weights(ParamStore& store, const std::string& checkpoint_dir, int64_t vocab) {
  const ckpt::CheckpointReader reader(checkpoint_dir);
  read_weights(store, reader, checkpoint_dir, LoadMode::resume, vocab);
}

}  // namespace recipe::core
