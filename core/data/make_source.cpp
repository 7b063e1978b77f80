// plan.data → the trainer's sample sources.
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/data/blended_source.hpp"
#include "core/data/counter_rng.hpp"
#include "core/data/gpt_dataset.hpp"
#include "core/data/indexed_dataset.hpp"
#include "core/data/loss_mask.hpp"
#include "core/data/mock_source.hpp"
#include "core/data/sample_source.hpp"
#include "core/data/sft_dataset.hpp"
#include "plan/data_split.hpp"

namespace recipe::data {

namespace {

// Full scans of the token file at start-up are limited to files this size; larger datasets are
// checked sample by sample as they are read (GPTDataset does that for every sample).
constexpr size_t kMaxScannedBinBytes = size_t{8} << 30;

struct BlendEntry {
  double weight;
  std::string prefix;
};

// The resolver folds data.path into data.blend (a blend of one) and normalizes the weights.
std::vector<BlendEntry> blend_of(const plan::DataConfig& data) {
  std::vector<BlendEntry> entries;
  entries.reserve(data.blend.size());
  for (const auto& [w, prefix] : data.blend) entries.push_back({w, prefix});
  return entries;
}

std::shared_ptr<const IndexedDataset> open_dataset(const std::string& prefix, const std::string& field,
                                                   int vocab_size) {
  for (const std::string& path : {idx_path_of(prefix), bin_path_of(prefix)}) {
    if (!std::filesystem::exists(path)) {
      throw std::runtime_error(field + ": " + path + " not found (an indexed dataset is the pair " +
                               bin_path_of(prefix) + " + " + idx_path_of(prefix) +
                               "); create it with `recipe data prepare --input "
                               "<file.txt|file.jsonl> --output " +
                               prefix + "`");
    }
  }
  auto ds = std::make_shared<const IndexedDataset>(prefix);
  if (vocab_size > 0 && ds->bin_bytes() <= kMaxScannedBinBytes) {
    const int64_t max_id = ds->max_token_id();
    if (max_id >= vocab_size) {
      throw std::runtime_error(ds->bin_path() + " holds token ids up to " + std::to_string(max_id) +
                               " but model.vocab_size=" + std::to_string(vocab_size) +
                               ": the data was tokenized with a different tokenizer/vocabulary than the model "
                               "(re-run `recipe data prepare` with the model's tokenizer or set model.vocab_size ≥ " +
                               std::to_string(max_id + 1) + ")");
    }
  }
  return ds;
}

int64_t tokens_in(const IndexedDataset& ds, const DocumentRange& r) {
  int64_t n = 0;
  for (int64_t d = r.begin; d < r.end; ++d) n += ds.document_length(d);
  return n;
}

uint64_t dataset_seed(int seed, size_t index, Split split) {
  return hash_combine(hash_combine(static_cast<uint64_t>(static_cast<uint32_t>(seed)), index),
                      static_cast<uint64_t>(split));
}

// data.kind=sft: the dataset's loss mask, which must record the template the plan names.
std::shared_ptr<const LossMask> open_mask(const IndexedDataset& ds, const plan::DataConfig& data) {
  auto mask = std::make_shared<const LossMask>(ds);
  const std::string named(plan::to_string(data.chat_template));
  if (mask->chat_template() != named)
    throw std::runtime_error(mask_path_of(ds.prefix()) + " was prepared with chat template \"" + mask->chat_template() +
                             "\" but data.chat_template=\"" + named + "\"; set data.chat_template=" +
                             mask->chat_template() + " or prepare the data again with --chat-template " + named);
  return mask;
}

// One split of an SFT dataset, or nullptr for a validation split without conversations.
std::unique_ptr<SampleSource> make_sft_part(const plan::Plan& plan, const std::shared_ptr<const IndexedDataset>& ds,
                                            const DocumentRange& range, uint64_t seed, Split split) {
  if (split != Split::train && range.size() < 1) return nullptr;
  auto mask = open_mask(*ds, plan.data);
  auto sft = std::make_unique<SftDataset>(ds, std::move(mask), range, plan.model.seq_length, seed, plan.data.pack,
                                          /*pad_id=*/0, plan.model.vocab_size, split_name(split),
                                          plan.data.max_samples_per_pack);
  if (sft->stats().truncated > 0)
    std::cerr << "warning: " << ds->prefix() << " (" << split_name(split) << "): " << sft->stats().truncated << " of "
              << sft->stats().conversations
              << " conversations are longer than model.seq_length+1 = " << plan.model.seq_length + 1
              << " tokens and are truncated (their tail is not trained)\n";
  if (sft->stats().untrained > 0)
    std::cerr << "warning: " << ds->prefix() << " (" << split_name(split) << "): " << sft->stats().untrained << " of "
              << sft->stats().conversations
              << " conversations have no trained token within model.seq_length+1 = " << plan.model.seq_length + 1
              << " tokens (an answer cut off, or a mask of 0s) and add nothing to the "
              << (split == Split::train ? "training" : "validation") << " loss\n";
  return sft;
}

// The blend's GPT datasets for one split. Training needs every dataset to yield samples; validation
// keeps those that do, since a small dataset's 2% may hold no full sample. nullptr: no samples at all.
std::unique_ptr<SampleSource> make_indexed_source(const plan::Plan& plan, Split split) {
  const auto& data = plan.data;
  const auto entries = blend_of(data);
  const std::string field = data.path.empty() ? "data.blend" : "data.path";
  const auto weights = parse_split(data.split);
  const int seq = plan.model.seq_length;

  std::vector<std::pair<double, std::unique_ptr<SampleSource>>> parts;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto ds = open_dataset(entries[i].prefix, field, plan.model.vocab_size);
    const auto ranges = split_documents(ds->num_documents(), weights);
    const DocumentRange range = ranges[static_cast<size_t>(split)];
    if (data.kind == plan::DataKind::sft) {
      if (auto part = make_sft_part(plan, ds, range, dataset_seed(data.seed, i, split), split))
        parts.emplace_back(entries[i].weight, std::move(part));
      continue;
    }
    if (split != Split::train && tokens_in(*ds, range) < static_cast<int64_t>(seq) + 1) continue;
    parts.emplace_back(entries[i].weight,
                       std::make_unique<GPTDataset>(ds, range, seq, dataset_seed(data.seed, i, split),
                                                    plan.model.vocab_size, split_name(split)));
  }
  if (parts.empty()) return nullptr;
  if (parts.size() == 1) return std::move(parts.front().second);
  return std::make_unique<BlendedSource>(std::move(parts));
}

}  // namespace

std::unique_ptr<SampleSource> make_train_source(const plan::Plan& plan) {
  if (plan.data.kind == plan::DataKind::mock) {
    return std::make_unique<MockSource>(plan.model.seq_length, plan.model.vocab_size,
                                        static_cast<uint64_t>(static_cast<uint32_t>(plan.data.seed)),
                                        plan.data.fixed_batch ? plan.trainer.global_batch_size : 0);
  }
  auto source = make_indexed_source(plan, Split::train);
  if (!source) throw std::runtime_error("data.split=\"" + plan.data.split + "\" leaves no training data");
  return source;
}

std::unique_ptr<SampleSource> make_valid_source(const plan::Plan& plan) {
  if (plan.data.kind == plan::DataKind::mock) {
    if (plan.trainer.eval_interval <= 0) return nullptr;
    // seed + 1: a stream disjoint from training's, so validation measures something else than recall.
    return std::make_unique<MockSource>(plan.model.seq_length, plan.model.vocab_size,
                                        static_cast<uint64_t>(static_cast<uint32_t>(plan.data.seed)) + 1);
  }
  if (parse_split(plan.data.split)[static_cast<size_t>(Split::valid)] <= 0) return nullptr;
  auto source = make_indexed_source(plan, Split::valid);
  if (!source && plan.trainer.eval_interval > 0) {
    throw std::runtime_error("data.split=\"" + plan.data.split +
                             (plan.data.kind == plan::DataKind::sft
                                  ? "\" gives validation no conversation in any dataset"
                                  : "\" gives validation fewer than model.seq_length+1 = " +
                                        std::to_string(plan.model.seq_length + 1) + " tokens in every dataset") +
                             "; give validation a larger share, add data, or set "
                             "trainer.eval_interval=0");
  }
  return source;
}

}  // namespace recipe::data
