// data prepare: text/JSONL → Megatron indexed dataset; chat JSONL → dataset + loss mask.
#include "plan/exit_codes.hpp"
#include "cli/verbs.hpp"

namespace recipe::cli {

namespace {

// The data.* tokenizer keys the resolver demands for the tokenizer the data was prepared with, so
// the "use it with:" line validates as printed.
std::string tokenizer_keys(const data::PrepareOptions& opts) {
  std::string keys = " data.tokenizer=" + opts.tokenizer;
  if (opts.tokenizer == "gpt2_bpe")
    keys += " data.vocab_file=" + opts.vocab_file + " data.merges_file=" + opts.merges_file;
  if (opts.tokenizer == "sentencepiece" || opts.tokenizer == "hf")
    keys += " data.tokenizer_model=" + opts.tokenizer_model;
  if (!opts.eod_token.empty()) keys += " data.eod_token=" + opts.eod_token;
  return keys;
}

}  // namespace

int run_data_prepare(const data::PrepareOptions& opts, std::ostream& out, std::ostream& err) {
  if (opts.tokenizer == "gpt2_bpe" && (opts.vocab_file.empty() || opts.merges_file.empty())) {
    err << "error: --tokenizer gpt2_bpe needs --vocab-file (vocab.json) and --merges-file (merges.txt)\n";
    return kExitUsage;
  }
  if (opts.tokenizer == "sentencepiece" && opts.tokenizer_model.empty()) {
    err << "error: --tokenizer sentencepiece needs --tokenizer-model (a .model file)\n";
    return kExitUsage;
  }
  if (opts.tokenizer == "hf" && opts.tokenizer_model.empty()) {
    err << "error: --tokenizer hf needs --tokenizer-model (a Hugging Face tokenizer.json)\n";
    return kExitUsage;
  }
  if (opts.tokenizer != "hf" && !opts.eod_token.empty()) {
    err << "error: --eod-token is only read by --tokenizer hf\n";
    return kExitUsage;
  }
  data::PrepareStats stats;
  try {
    stats = data::prepare_dataset(opts);
  } catch (const std::exception& e) {
    err << "error: data prepare failed: " << e.what() << "\n";
    return kExitRuntime;
  }
  if (opts.format == "chat") {
    out << "wrote " << opts.output_prefix << ".bin, .idx and .mask.bin: " << stats.documents << " conversations, "
        << stats.tokens << " tokens, " << stats.trained_tokens << " trained (chat template " << opts.chat_template
        << ", tokenizer " << opts.tokenizer << ", vocab " << stats.vocab_size << ")\n";
    out << "use it with: data.kind=sft data.path=" << opts.output_prefix << " data.chat_template=" << opts.chat_template
        << " data.pack=false" << tokenizer_keys(opts) << "\n";
    // pack=false validates with every model; packing needs positions that restart per sample.
    out << "  (on a RoPE model, e.g. Llama, data.pack=true packs several conversations per sequence)\n";
    return kExitOk;
  }
  out << "wrote " << opts.output_prefix << ".bin and " << opts.output_prefix << ".idx: " << stats.documents
      << " documents, " << stats.tokens << " tokens (tokenizer " << opts.tokenizer << ", vocab " << stats.vocab_size
      << ")\n";
  out << "use it with: data.kind=indexed data.path=" << opts.output_prefix << tokenizer_keys(opts) << "\n";
  return kExitOk;
}

}  // namespace recipe::cli
